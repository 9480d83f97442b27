"""book/guide/own_model.md, followed as written: every fenced block of the page, in order, in a fresh folder.

Files the page shows (a block whose first line is ``# <file name>``) are written verbatim; every line of a
``bash`` block is run as written, with the folder as working directory and ``.venv`` linked into it. The
page's model folder ``my-encoder`` is a tiny random encoder built here. One exception: ``atlas book`` runs
the whole default matrix (many minutes), so its line is executed in-process as written up to the build
itself, which is recorded; the test then checks the recorded runs and renders the card page from the cells
the earlier steps wrote.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

from atlaslib import cli, runner
from atlaslib.models import load_profiles
from atlaslib.results import read_cell
from tests.tiny_models import tiny_encoder

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "book" / "guide" / "own_model.md"


def blocks() -> list[tuple[str, str]]:
    return re.findall(r"^```(\w+)\n(.*?)^```", GUIDE.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_the_guide_as_written(tmp_path, monkeypatch, data_dir):
    from atlaslib import book
    from atlaslib.cards import get_card

    work = tmp_path / "checkout"
    work.mkdir()
    (work / ".venv").symlink_to(REPO / ".venv")
    tiny_encoder(work, name="my-encoder")
    monkeypatch.setenv("ATLAS_PROFILES", "")  # the page's flags set it; restored after the test
    monkeypatch.chdir(work)
    env = {**os.environ, "ATLAS_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    recorded, printed = {}, []
    monkeypatch.setattr(book, "build", lambda **kw: recorded.update(kw) or 0)
    kinds = [k for k, _ in blocks()]
    assert kinds.count("bash") >= 4 and "yaml" in kinds and "python" in kinds
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
            if args[:2] == [".venv/bin/atlas", "book"]:
                assert cli.main(args[1:] + ["--data-dir", str(data_dir)]) == 0
                continue
            proc = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=900)
            assert proc.returncode == 0, f"{line}\n{proc.stderr[-3000:]}"
            printed.append((line, proc.stdout))

    # 1. the export and the scored predictions file
    assert len((work / "negex-items" / "items.jsonl").read_text().splitlines()) == 100
    kit = read_cell(work / "results/negex/atlas-n100-v1/negex-kit-python/zero_shot.json")
    assert kit["spec"]["capability"] == "external predictions" and len(kit["predictions"]) == 100
    assert kit["metrics"]["macro_f1_zero_shot"]["ci_low"] is not None
    # 2. the profiles file: validated like the registry; the run used it inside the notebook's kernel
    assert set(load_profiles(work / "my-profiles.yml")) == {"my-encoder", "my-llm"}
    ran = json.loads(next(out for line, out in printed if " run " in line))
    assert ran["notebook"].endswith("book/runs/negex/atlas-n100-v1/my-encoder/probe.ipynb")
    cell = read_cell(ran["result_cell"])
    assert cell["status"] == "ok" and len(cell["predictions"]) == 100
    assert cell["spec"]["profile"]["location"] == str(work / "my-encoder") and cell["spec"]["revision"] == "v1"
    # 3. the book: the default matrix plus the listed run; the listed file scored (unchanged: cached)
    added = runner.RunRequest("negex", "atlas-n100-v1", "my-encoder", "probe")
    assert added in recorded["requests"] and len(recorded["requests"]) == len(book.default_requests()) + 1
    paths = book.BuildPaths(results=work / "results", runs=work / "book" / "runs", build=work / "_build")
    src, _ = book.render_site(paths, cards=[get_card("negex")])
    page = (src / "book" / "cards" / "negex.md").read_text()
    rows = {ln.split("|")[1].replace("<wbr>", "").strip(): ln for ln in page.splitlines() if ln.startswith("| ")}
    assert "notebook" in rows["my-encoder"] and "JSON" in rows["negex-kit-python"]
    assert (src / "book" / "models" / "my-encoder.md").is_file()
    # 4. the function from Python printed its macro F1
    value = float(next(out for line, out in printed if "my_function.py" in line).strip())
    assert 0.0 <= value <= 1.0


def test_the_guide_profiles_are_valid_as_written(tmp_path):
    body = next(b for k, b in blocks() if k == "yaml" and b.startswith("# my-profiles.yml"))
    (tmp_path / "my-profiles.yml").write_text(body)
    profiles = load_profiles(tmp_path / "my-profiles.yml")
    assert profiles["my-llm"].options == {"model": "my-instruct-model", "api_key_env": "MY_LLM_API_KEY"}
    assert profiles["my-encoder"].capabilities == ["embed.text.pooled", "embed.text.tokens"]
