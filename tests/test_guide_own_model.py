"""book/guide/own_model.md, followed as written: every fenced block of the page, in order, in a fresh folder.

Files the page shows (a block whose first line is ``# <file name>``) are written verbatim; every line of a
``bash`` block is run as written, as its own process, with the folder as working directory, and must exit 0.
The page's ``.venv/bin/<program>`` is the program of the environment running the tests (``sys.executable`` and
its scripts folder), wherever that environment lives (a venv, conda). The page's model folder ``my-encoder`` is a tiny random encoder built here.
The book of section 3 is really built (``--no-default``: the page's own runs only), and the test reads the
built site: the card's leaderboard, the run page, the build report.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from html.parser import HTMLParser
from pathlib import Path

from atlaslib import runner
from atlaslib.models import load_profiles
from atlaslib.pages.card_pages import fmt_metric
from atlaslib.results import read_cell
from tests.tiny_models import tiny_encoder

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "book" / "guide" / "own_model.md"
N100 = "atlas-n100-v1"


def blocks() -> list[tuple[str, str]]:
    return re.findall(r"^```(\w+)\n(.*?)^```", GUIDE.read_text(encoding="utf-8"), flags=re.S | re.M)


class _Tables(HTMLParser):
    """The body rows of every table of an HTML page, in page order, with the id of the innermost
    ``<section>`` around the table: ``[(section id, [[(cell text, [hrefs in the cell]), ...] per row])]``."""

    def __init__(self, html: str):
        super().__init__()
        self.sections, self.tables, self.row, self.cell = [], [], None, None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self.sections.append(attrs.get("id"))
        elif tag == "table":
            self.tables.append((self.sections[-1] if self.sections else None, []))
        elif tag == "tr":
            self.row = []
        elif tag == "td" and self.row is not None:
            self.cell = ["", []]
        elif tag == "a" and self.cell is not None and attrs.get("href"):
            self.cell[1].append(attrs["href"])

    def handle_endtag(self, tag):
        if tag == "section" and self.sections:
            self.sections.pop()
        elif tag == "td" and self.cell is not None:
            self.row.append((" ".join(self.cell[0].split()), self.cell[1]))
            self.cell = None
        elif tag == "tr" and self.row:
            self.tables[-1][1].append(self.row)
            self.row = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[0] += data


def _rows(page: Path, section: str | None = None) -> dict[str, list[tuple[str, list[str]]]]:
    """{first column's text: the row's cells} of the first table of an HTML page (in ``section`` if given)."""
    tables = _Tables(page.read_text(encoding="utf-8")).tables
    rows = next(rows for where, rows in tables if section in (None, where))
    return {row[0][0]: row for row in rows}


def this_environment(args: list[str]) -> list[str]:
    """``.venv/bin/<program> ...`` as the running environment's program: ``sys.executable`` for python, else the
    program in its scripts folder."""
    if not args or not args[0].startswith(".venv/bin/"):
        return args
    name = args[0].rsplit("/", 1)[1]
    if name.startswith("python"):
        return [sys.executable, *args[1:]]
    scripts = Path(sysconfig.get_path("scripts"))
    exe = scripts / name if (scripts / name).is_file() else shutil.which(name, path=str(Path(sys.executable).parent))
    assert exe, f"{name} is not installed beside {sys.executable}"
    return [str(exe), *args[1:]]


def test_this_environment_replaces_the_pages_venv():
    assert this_environment([".venv/bin/python", "x.py"]) == [sys.executable, "x.py"]
    atlas = this_environment([".venv/bin/atlas", "list"])
    assert Path(atlas[0]).name == "atlas" and Path(atlas[0]).is_file() and atlas[1:] == ["list"]
    assert this_environment(["echo", "hi"]) == ["echo", "hi"]


def test_the_guide_as_written(tmp_path, data_dir):
    work = tmp_path / "checkout"
    work.mkdir()
    tiny_encoder(work, name="my-encoder")
    env = {**os.environ, "ATLAS_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "ATLAS_PROFILES": ""}  # only the page's --profiles flags name profile files
    kinds = [k for k, _ in blocks()]
    assert kinds.count("bash") >= 4 and "yaml" in kinds and "python" in kinds
    run_nb = work / "book/runs/negex" / N100 / "my-encoder/probe.ipynb"
    run_cell = work / "results/negex" / N100 / "my-encoder/probe.json"
    kit_cell = work / "results/negex" / N100 / "negex-kit-python/zero_shot.json"
    printed, before_book, digest = [], None, runner.source_digest()
    for kind, body in blocks():
        first = body.splitlines()[0]
        if kind in ("yaml", "python") and first.startswith("# "):
            (work / first[2:].strip()).write_text(body, encoding="utf-8")
            continue
        assert kind == "bash", f"a {kind} block without a file name"
        for line in body.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            args = shlex.split(line)
            if args[:2] == [".venv/bin/atlas", "book"]:  # what the book must take from earlier steps as is
                before_book = {p: p.read_bytes() for p in (run_nb, run_cell, kit_cell)}
            proc = subprocess.run(this_environment(args), cwd=work, env=env, capture_output=True, text=True,
                                  timeout=900)
            assert proc.returncode == 0, f"{line}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
            printed.append((line, proc.stdout))

    # 1. the export and the scored predictions file
    assert len((work / "negex-items" / "items.jsonl").read_text().splitlines()) == 100
    kit = read_cell(kit_cell)
    assert kit["spec"]["capability"] == "external predictions" and len(kit["predictions"]) == 100
    assert kit["metrics"]["macro_f1_zero_shot"]["ci_low"] is not None
    assert kit["spec"]["profile"]["description"] == "The NegEx kit's own Python NegEx"  # the matrix kept it
    # 2. the profiles file: validated like the registry; the run used it inside the notebook's kernel
    assert set(load_profiles(work / "my-profiles.yml")) == {"my-encoder", "my-llm"}
    ran = json.loads(next(out for line, out in printed if " run " in line))
    assert ran["status"] == "ran" and Path(ran["notebook"]) == run_nb and Path(ran["result_cell"]) == run_cell
    cell = read_cell(run_cell)
    assert cell["status"] == "ok" and len(cell["predictions"]) == 100
    assert cell["spec"]["profile"]["location"] == str(work / "my-encoder") and cell["spec"]["revision"] == "v1"

    # 3. the book: the section-2 run served from the run cache, the unchanged predictions file not scored again
    assert before_book is not None, "the page has no atlas book command"
    changed = runner.source_digest() != digest
    cache_note = " (atlaslib's source changed while the test ran: the run cache was re-keyed)" if changed else ""
    assert all(p.read_bytes() == b for p, b in before_book.items()), "the book rewrote a current output" + cache_note
    site = work / "_build/site/_build/html"
    book_out = next(out for line, out in printed if " book " in line)
    assert f"book built: {site / 'index.html'}" in book_out
    runs = _rows(site / "book/build_report.html")
    assert list(runs) == [f"negex/{N100}/my-encoder/probe"], "--no-default: the page's run and nothing else"
    assert [text for text, _ in runs[f"negex/{N100}/my-encoder/probe"][1:3]] == ["cached", "ok"], cache_note
    # only the card the matrix file names is built; its leaderboard lists both of the page's systems
    assert sorted(p.name for p in (site / "book/cards").glob("*.html")) == ["negex.html"]
    board = _rows(site / "book/cards/negex.html", f"leaderboard-{N100}")
    assert set(board) == {"my-encoder", "negex-kit-python"}
    for name, c in (("my-encoder", cell), ("negex-kit-python", kit)):
        assert board[name][1][0].split(" ")[0] == c["protocol"]   # "protocol, regime": the protocol first
        assert board[name][2][0] == fmt_metric(c["metrics"][f"macro_f1_{c['protocol']}"])  # macro F1 [95 % CI]
    links = {name: [h for _, hrefs in row for h in hrefs] for name, row in board.items()}
    assert f"../runs/negex/{N100}/my-encoder/probe.html" in links["my-encoder"]
    assert [h for h in links["negex-kit-python"] if h.endswith(".html")] == []  # its JSON, no notebook
    run_page = site / f"book/runs/negex/{N100}/my-encoder/probe.html"
    assert run_page.is_file() and "Traceback" not in run_page.read_text()
    assert (site / "book/models/my-encoder.html").is_file() and (site / "book/models/negex-kit-python.html").is_file()

    # 4. the function from Python printed its macro F1
    value = float(next(out for line, out in printed if "my_function.py" in line).strip())
    assert 0.0 <= value <= 1.0


def test_the_guide_profiles_are_valid_as_written(tmp_path):
    body = next(b for k, b in blocks() if k == "yaml" and b.startswith("# my-profiles.yml"))
    (tmp_path / "my-profiles.yml").write_text(body)
    profiles = load_profiles(tmp_path / "my-profiles.yml")
    assert profiles["my-llm"].options == {"model": "my-instruct-model", "api_key_env": "MY_LLM_API_KEY"}
    assert profiles["my-encoder"].capabilities == ["embed.text.pooled", "embed.text.tokens"]
