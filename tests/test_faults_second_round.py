"""Faults and bad inputs, second round: nothing replaced, nothing leaked, nothing hung.

One test per case of the second fault list (the case number in the name), each reproducing the case as
reported: names that share a folder or leave it, user text published as HTML, YAML alias bombs, duplicate
keys and wrong types, scores outside [0, 1], a hand-edited cell served from the cache, a late Ctrl-C,
tracebacks for bad data, files, names and folders, an unknown model in a matrix, unclear messages (a CSV
byte-order mark, a matrix predictions entry, a tiny memory limit, a FIFO), and the minor ones (local paths in
the publish build, a TempEval span past its document, IOB2 order, a large predictions file); then a property
test over system names. Almost every test calls ``atlas`` in-process (``cli.main``) and starts no kernel;
the Ctrl-C tests run one real notebook each.
"""
from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest
import yaml

from atlaslib import book, cli, results, runner
from atlaslib.runner import RunRequest
from tests import tiny_models
from tests.external.test_score import atlas  # atlas(capsys, *args) -> (exit code, stdout, stderr), in-process
from tests.test_faults_user import one_line

N100 = "atlas-n100-v1"


def refused(capsys, *args, code: int = 2) -> str:
    """``atlas ARGS`` answers with one line on stderr (no traceback) and exit ``code``; returns the line."""
    got, _, err = atlas(capsys, *args)
    line = one_line(err)
    assert got == code, err
    return line


@pytest.fixture(scope="module")
def negex_ids(data_dir) -> list[str]:
    from atlaslib.external.tasks import load_split

    return load_split("negex", N100, "test", data_dir).ids


def predictions(path: Path, ids, label="affirmed", score=None, bom=False, csv=False) -> Path:
    if csv:
        text = "item_id,label" + (",score" if score is not None else "") + "\n" + "".join(
            f"{i},{label}" + (f",{score}" if score is not None else "") + "\n" for i in ids)
    else:
        text = "".join(json.dumps({"item_id": i, "label": label, **({} if score is None else {"score": score})})
                       + "\n" for i in ids)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return path


def score(capsys, preds, name, results_dir, *extra):
    return atlas(capsys, "score", "--card", "negex", "--version", N100, "--predictions", preds, "--name", name,
                 "--results-dir", results_dir, *extra)


# ------------------------------------------------------------------------------------------------ 1


def test_case01_names_that_slug_alike_keep_their_own_folders_and_clashes_are_refused(tmp_path, capsys,
                                                                                      negex_ids, data_dir):
    r = tmp_path / "results"
    f = predictions(tmp_path / "p.jsonl", negex_ids)
    cells = {}
    for name in ("my system", "my-system", "majority!", "all minilm l6 v2"):
        code, out, err = score(capsys, f, name, r)
        assert code == 0, err
        cells[name] = Path(json.loads(out)["result_cell"])
    assert len(set(cells.values())) == 4                                   # one folder each, nothing replaced
    assert {n: json.loads(p.read_text())["model"] for n, p in cells.items()} == {n: n for n in cells}
    version = r / "negex" / N100
    assert not (version / "majority").exists() and not (version / "all-minilm-l6-v2").exists()
    assert sorted(c["model"] for c in results.read_cells(r, "negex")) == sorted(cells)

    # a model run and external predictions of the same name: refused naming both, nothing replaced
    run = runner.run(RunRequest("negex", N100, "foo/bar", "zero_shot"), results_dir=r, runs_dir=tmp_path / "runs",
                     data_dir=data_dir)  # weights unavailable: a not-run cell, no kernel
    before = Path(run.result).read_bytes()
    line = refused(capsys, "score", "--card", "negex", "--version", N100, "--predictions", f, "--name", "foo/bar",
                   "--results-dir", r)
    assert "a model run named 'foo/bar'" in line and "--name 'foo/bar'" in line and "nothing was written" in line
    assert Path(run.result).read_bytes() == before
    code, out, err = score(capsys, f, "org/system", r)                      # the other way round
    assert code == 0, err
    ext = Path(json.loads(out)["result_cell"])
    before = ext.read_bytes()
    with pytest.raises(runner.OutputError, match="external predictions named 'org/system', not model 'org/system'"):
        runner.run(RunRequest("negex", N100, "org/system", "zero_shot"), results_dir=r, runs_dir=tmp_path / "runs",
                   data_dir=data_dir)
    assert ext.read_bytes() == before

    # the book gives each its own model page (a page used twice made "Jupyter Book build failed (0 warnings)")
    src = tmp_path / "src"
    from atlaslib.cards import available_cards
    from atlaslib.pages.site import render_models

    docs = render_models(src, available_cards(), results.read_cells(r, "negex"))
    assert len(docs) == len(set(docs))
    assert results.slug("majority!") != "majority"
    assert (src / "book" / "models" / f"{results.slug('majority!')}.md").read_text().startswith("# majority!\n")


def test_case01_a_failed_jupyter_book_names_its_cause(tmp_path, monkeypatch):
    import subprocess

    log = ("Running Sphinx v7.4.7\n\nException occurred:\n  File \"sphinx_external_toc/parsing.py\"\n"
           "sphinx_external_toc.parsing.MalformedError: document file used multiple times: 'book/models/x'\n")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 2, log, ""))
    (tmp_path / "out").mkdir()
    code, warnings = book.jupyter_book_build(tmp_path / "src", tmp_path / "out")
    assert code == 2 and warnings and "document file used multiple times" in warnings[0]


# ------------------------------------------------------------------------------------------------ 2


def test_case02_dot_names_stay_inside_their_own_folder(tmp_path, capsys, negex_ids):
    r = tmp_path / "results"
    f = predictions(tmp_path / "p.jsonl", negex_ids)
    for name in (".", ".."):
        code, out, err = score(capsys, f, name, r)
        assert code == 0, err
        cell = Path(json.loads(out)["result_cell"])
        assert cell.parent.parent == r / "negex" / N100 and cell.parent.name not in (".", "..")
    assert not (r / "negex" / "zero_shot.json").exists() and not (r / "negex" / N100 / "zero_shot.json").exists()
    assert sorted(c["model"] for c in results.read_cells(r, "negex")) == [".", ".."]   # what the book reads


# ------------------------------------------------------------------------------------------------ 4

XSS = "<script>alert(1)</script>"
LINK = "[click](javascript:alert(2))"
IMG = "<img src=x onerror=alert(3)>"


def _html_of(markdown: str) -> str:
    """The HTML MyST makes of ``markdown`` (the book's parser and extensions)."""
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    cfg = yaml.safe_load((runner.REPO / "_config.yml").read_text())
    parser = create_md_parser(MdParserConfig(enable_extensions=set(cfg["parse"]["myst_enable_extensions"])),
                              RendererHTML)
    return parser.render(markdown)


def _assert_text_only(html: str, where) -> None:
    low = html.lower()
    assert "<script" not in low and 'href="javascript' not in low and "<img src=x" not in low, where
    assert "\\(x\\)" not in html, where                                  # no math made of "$x$"


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory, data_dir):
    """A publish build of the NLI card (its licence allows publishing) with user text that is HTML, a link,
    math and a fact placeholder in names, descriptions and a profile file's fields, a run of a local folder
    whose name is HTML, and a run notebook carrying this machine's folders as papermill leaves them. The
    course's lessons are left out (they read the default matrix's cells only)."""
    import nbformat

    from atlaslib.cards import get_card
    from atlaslib.external import score as score_file
    from atlaslib.external.tasks import load_split

    with pytest.MonkeyPatch.context() as mp:  # undone once the site is rendered: the tests only read it
        mp.setattr(book, "start_course", lambda *a, **k: None)
        mp.setattr(book, "finish_course", lambda *a, **k: None)
        mp.setenv("ATLAS_DATA_DIR", str(data_dir))
        tmp = tmp_path_factory.mktemp("hostile")
        paths = book.BuildPaths(results=tmp / "results", runs=tmp / "runs", build=tmp / "_build")
        ids = load_split("nli_negation", "builtin-v1").ids
        for name, label in ((XSS, "neutral"), (LINK + " $x$", "contradiction")):
            score_file("nli_negation", "builtin-v1", predictions(tmp / f"{label}.jsonl", ids, label=label), name,
                       description=f"{XSS} {LINK} {{{{fact:nli.n_cases}}}}", trained_on=[XSS],
                       results_dir=paths.results)
        prof = tmp / "mine.yml"
        prof.write_text(yaml.safe_dump({"mine": {
            "source": "path", "location": f"/models/{XSS}", "revision": XSS, "capabilities": ["embed.text.pooled"],
            "label_map": {XSS: "PRESENT"}, "trained_on": [XSS, LINK], "description": f"{XSS} {LINK}"}}))
        mp.setenv("ATLAS_PROFILES", str(prof))
        model = tiny_models.tiny_encoder(tmp / "models", name=IMG)  # no NLI head: a not-run stub page
        kw = dict(results_dir=paths.results, runs_dir=paths.runs, data_dir=data_dir)
        stub = runner.run(RunRequest("nli_negation", "builtin-v1", str(model), "zero_shot"), **kw)
        assert stub.cell_status == "not_run"
        # what papermill leaves in an executed notebook: its paths and parameters, and outputs naming folders
        out = runner.run(RunRequest("nli_negation", "builtin-v1", "foo/bar", "zero_shot"), **kw)  # no weights: a stub
        nb = nbformat.read(out.notebook, as_version=4)
        work = Path(out.notebook).parent / "atlas-run-zero_shot-x"
        nb.metadata["papermill"] = {"input_path": str(work / "in.ipynb"), "output_path": str(work / "out.ipynb"),
                                    "parameters": {"data_dir": str(data_dir), "result_path": str(work / "cell.json")}}
        printed = f"{data_dir}/negex\n{sys.prefix}/lib/x.py:1: Warning\n{runner.REPO}/book\n"
        nb.cells.append(nbformat.v4.new_code_cell("print(data_dir)", outputs=[
            nbformat.v4.new_output("stream", name="stdout", text=printed)]))
        nbformat.write(nb, out.notebook)
        src, _ = book.render_site(paths, publish=True, cards=[get_card("nli_negation")])
    return {"src": src, "paths": paths, "model": model, "tmp": tmp}


def test_case04_user_text_is_escaped_on_every_page(hostile_site):
    import nbformat

    src = hostile_site["src"]
    for page in sorted((src / "book").rglob("*.md")):
        _assert_text_only(_html_of(page.read_text(encoding="utf-8")), page)
    notebooks = sorted((src / "book" / "runs").rglob("*.ipynb"))
    for nb_path in notebooks:
        for cell in nbformat.read(nb_path, as_version=4).cells:
            if cell.cell_type == "markdown":
                _assert_text_only(_html_of(cell.source), nb_path)
    stub = next(p for p in notebooks if results.slug(str(hostile_site["model"])) in str(p))  # the local folder's
    heading = _html_of(nbformat.read(stub, as_version=4).cells[0].source)
    # a publish build names a local model's folder LOCAL_MODEL in every form a page wrote it (here HTML-escaped)
    assert "LOCAL_MODEL" in heading and "img" not in heading and str(hostile_site["tmp"]) not in heading
    model_page = _html_of((src / "book" / "models" / f"{results.slug(XSS)}.md").read_text())
    assert model_page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 2     # name and description, as text
    card_page = _html_of((src / "book" / "cards" / "nli_negation.md").read_text())
    assert "[click](javascript:alert(2)) $x$" in card_page                     # the name, as text
    assert "{{fact:nli.n_cases}}" in model_page                               # a description: not a placeholder
    profile_page = _html_of((src / "book" / "models" / "mine.md").read_text())
    assert profile_page.count("&lt;script&gt;") >= 4                          # description, location, revision, ...


def test_a_not_run_reason_on_a_model_page_is_text(tmp_path):
    """A not-run cell's reason can hold user text (a model's name, a profile's field): its model page shows it
    as text (it was written with only table pipes escaped, HTML passed through)."""
    from atlaslib.cards import available_cards, get_card
    from atlaslib.pages.site import render_models

    card = get_card("negex")
    spec = results.RunSpec(card="negex", version=N100, model="kit-rules", protocol="zero_shot")
    cell = results.not_run_cell(spec, f"weights of {XSS} {IMG} not found", card.metric_names("zero_shot"))
    render_models(tmp_path, available_cards(), [cell])
    page = _html_of((tmp_path / "book" / "models" / f"{results.slug('kit-rules')}.md").read_text())
    _assert_text_only(page, "model page")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


# ------------------------------------------------------------------------------------------------ 5

BOMB = "".join(f"{a}: &{a} [{', '.join(['*' + p] * 9) if p else ', '.join(['lol'] * 9)}]\n"
               for a, p in zip("abcdefgh", [None, *"abcdefg"]))


def test_case05_alias_bombs_are_refused_quickly(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ATLAS_PROFILES", "")
    matrix = tmp_path / "m.yml"
    matrix.write_text(BOMB + "runs:\n- card: negex\n  version: atlas-n100-v1\n  predictions: p.jsonl\n  name: bomb\n"
                      "  description: *h\n")
    prof = tmp_path / "p.yml"
    prof.write_text(BOMB + "mine:\n  source: path\n  location: /m\n  revision: null\n  capabilities: "
                    "[embed.text.pooled]\n  label_map: {}\n  trained_on: []\n  description: *h\n")
    for args in (["book", "--no-run", "--matrix", matrix, "--results-dir", tmp_path / "r"],
                 ["list", "--profiles", prof]):
        line, peak = _traced_peak(lambda: refused(capsys, *args))
        assert peak < 50 * 2 ** 20           # never expanded (9**8 = 43 million nodes if it were)
        assert "aliases" in line and "expand" in line and str(args[-1] if args[0] == "list" else matrix) in line


# ------------------------------------------------------------------------------------------------ 6


def test_case06_scores_must_be_probabilities(tmp_path, capsys, negex_ids):
    f = predictions(tmp_path / "p.jsonl", negex_ids, score=30)           # scores × 100
    line = refused(capsys, "score", "--card", "negex", "--version", N100, "--predictions", f, "--name", "pct",
                   "--results-dir", tmp_path / "r")
    assert f"row 1 (id {negex_ids[0]!r}): score 30 is not in [0, 1]" in line and "P(negated)" in line
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").rglob("*.json"))


# ------------------------------------------------------------------------------------------------ 9


def test_case09_duplicate_keys_and_wrong_types_are_refused_naming_file_key_and_line(tmp_path, capsys,
                                                                                    monkeypatch):
    monkeypatch.setenv("ATLAS_PROFILES", "")
    entry = ("  source: path\n  location: /m\n  revision: null\n  capabilities: [embed.text.pooled]\n"
             "  label_map: {}\n  trained_on: []\n  description: mine\n")
    twice = tmp_path / "twice.yml"
    twice.write_text("mine:\n" + entry + "mine:\n" + entry)
    line = refused(capsys, "list", "--profiles", twice)
    assert f"{twice}, line 9: key 'mine' is given twice" in line and "first at line 1" in line
    for key, value, got in (("location", "{a: 1}", "a mapping"), ("description", "[a, b]", "a list"),
                            ("trained_on", "[[negex]]", "a list holding a list")):
        bad = tmp_path / f"{key}.yml"
        bad.write_text("mine:\n" + entry.replace(f"  {key}: ", f"  {key}: {value}  # ", 1))
        line = refused(capsys, "list", "--profiles", bad)
        n = 2 + [ln.split(":")[0].strip() for ln in entry.splitlines()].index(key)
        assert f"{bad}, line {n}: profile 'mine' key '{key}'" in line and got in line, line
    monkeypatch.setenv("ATLAS_PROFILES", "")                                  # --profiles put them there
    matrix = tmp_path / "m.yml"
    matrix.write_text("- card: negex\n  version: atlas-n100-v1\n  model: majority\n  protocol: zero_shot\n"
                      "  model: medspacy-context\n")
    line = refused(capsys, "book", "--no-run", "--matrix", matrix, "--results-dir", tmp_path / "r")
    assert f"{matrix}, line 5: key 'model' is given twice" in line and "first at line 3" in line
    matrix.write_text("- card: negex\n  version: atlas-n100-v1\n  predictions: p.jsonl\n  name: x\n"
                      "  description: {a: 1}\n")
    line = refused(capsys, "book", "--no-run", "--matrix", matrix, "--results-dir", tmp_path / "r")
    assert f"{matrix}, line 5: entry 1: key 'description' must be text, got a mapping" in line


# ------------------------------------------------------------------------------------------------ 10


def test_case10_a_hand_edited_cell_is_not_served_from_the_cache(tmp_path, capsys, negex_ids, data_dir):
    req = RunRequest("negex", N100, "foo/bar", "zero_shot")                  # a not-run cell: no kernel
    kw = dict(results_dir=tmp_path / "results", runs_dir=tmp_path / "runs", data_dir=data_dir)
    first = runner.run(req, **kw)
    assert runner.run(req, **kw).status == "cached"
    cell = Path(first.result)
    data = json.loads(cell.read_text())
    data["metrics"]["macro_f1_zero_shot"]["reason"] = "not run: edited by hand"
    cell.write_text(json.dumps(data))
    again = runner.run(req, **kw)
    assert again.status == "ran" and "was changed after the run wrote it" in again.extra["note"]
    assert json.loads(cell.read_text())["metrics"]["macro_f1_zero_shot"]["reason"] != "not run: edited by hand"

    # atlas score's cache too: a value moved outside its interval is scored again, and said
    f = predictions(tmp_path / "p.jsonl", negex_ids, score=0.3)
    r = tmp_path / "scored"
    code, out, _ = score(capsys, f, "mine", r)
    path = Path(json.loads(out)["result_cell"])
    data = json.loads(path.read_text())
    data["metrics"]["macro_f1_zero_shot"]["value"] = data["metrics"]["macro_f1_zero_shot"]["ci_high"] + 0.2
    path.write_text(json.dumps(data))
    code, out, err = score(capsys, f, "mine", r)
    assert code == 0 and json.loads(out)["status"] == "scored" and "was changed after it was written" in err
    fixed = json.loads(path.read_text())["metrics"]["macro_f1_zero_shot"]
    assert fixed["ci_low"] <= fixed["value"] <= fixed["ci_high"]
    code, out, _ = score(capsys, f, "mine", r)
    assert json.loads(out)["status"] == "cached"


# ------------------------------------------------------------------------------------------------ 12


class _SigintInFinaliser:
    """SIGINT while Python runs a finaliser, as happens while a kernel's sockets are collected: the
    KeyboardInterrupt raised there is printed as "Exception ignored in ..." and dropped by Python."""

    def __del__(self):
        signal.raise_signal(signal.SIGINT)


def _run_args(out: Path) -> list[str]:
    return ["run", "--card", "negex", "--model", "majority", "--protocol", "zero_shot", "--version", N100,
            "--results-dir", str(out / "results"), "--runs-dir", str(out / "runs"), "--build-dir",
            str(out / "_build")]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the swallowed interrupt
@pytest.mark.parametrize("moment", ["kernel shutdown, interrupt swallowed", "mid-notebook"])
def test_case12_ctrl_c_at_any_moment_exits_130_with_one_line_and_no_partial_output(tmp_path, capfd, monkeypatch,
                                                                                   data_dir, moment):
    """Deterministic: the interrupt is raised from inside the run at a fixed moment (replacing a test that sent
    SIGINT a second after the notebook started, which passed or failed with the machine's load). Late, while
    the kernel's channels close, Python drops the KeyboardInterrupt in a finaliser, as it did in the field
    (exit 0 and a ZMQError traceback); the run must still end interrupted."""
    from jupyter_client.asynchronous.client import AsyncKernelClient

    fired = []
    if moment.startswith("kernel shutdown"):  # every cell has run; the kernel's channels are being closed
        real = AsyncKernelClient.stop_channels

        def stop_channels(self):
            if not fired:
                fired.append(moment)
                obj = _SigintInFinaliser()
                del obj
                gc.collect()
            return real(self)

        monkeypatch.setattr(AsyncKernelClient, "stop_channels", stop_channels)
    else:  # the first cell is sent to the kernel
        real = AsyncKernelClient.execute

        def execute(self, *a, **kw):
            if not fired:
                fired.append(moment)
                signal.raise_signal(signal.SIGINT)
            return real(self, *a, **kw)

        monkeypatch.setattr(AsyncKernelClient, "execute", execute)
    monkeypatch.setenv("ATLAS_DATA_DIR", str(data_dir))
    out = tmp_path / "out"
    code = cli.main(_run_args(out))
    captured = capfd.readouterr()
    assert fired
    assert code == 130, captured.err
    assert one_line(captured.err) == "atlas run: interrupted; no partial output was kept"
    assert captured.out == ""
    assert [p for p in out.rglob("*") if p.is_file()] == []      # no cell, no notebook, no work folder
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # atlas's handler is gone again
    from atlaslib import interrupts

    assert not interrupts.interrupted()                                   # and so is its record


# ------------------------------------------------------------------------------------------------ 13


@pytest.fixture
def bad_data(tmp_path, data_dir, monkeypatch) -> dict:
    """A data folder whose NegEx annotations differ by one byte, and one without them (downloads fail)."""
    import urllib.request

    wrong, missing = tmp_path / "wrong", tmp_path / "missing"
    for d in (wrong, missing):
        shutil.copytree(data_dir / "negex", d / "negex")
    (wrong / "negex" / "Annotations-1-120-random.txt").write_bytes(
        (data_dir / "negex" / "Annotations-1-120-random.txt").read_bytes() + b"x")
    (missing / "negex" / "Annotations-1-120-random.txt").unlink()
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))

    def offline(*a, **k):
        raise OSError("no network in this test")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    return {"has sha256": wrong, "was not found in the data folder": missing}


def test_case13_a_wrong_or_missing_data_file_is_one_line_in_score_export_and_book(tmp_path, capsys, bad_data,
                                                                                   negex_ids, monkeypatch):
    monkeypatch.setattr(book, "build", lambda **kw: pytest.fail("built without its data"))
    f = predictions(tmp_path / "p.jsonl", negex_ids)
    for said, folder in bad_data.items():
        for args in (["score", "--card", "negex", "--version", N100, "--predictions", f, "--name", "x",
                      "--results-dir", tmp_path / "r"],
                     ["export", "--card", "negex", "--version", N100, "-o", tmp_path / "e"],
                     ["book", "--card", "negex", "--results-dir", tmp_path / "r", "--runs-dir", tmp_path / "n"],
                     ["book", "--no-run", "--card", "negex", "--results-dir", tmp_path / "r"]):
            line = refused(capsys, *args, "--data-dir", folder)
            assert "Annotations-1-120-random.txt" in line and said in line, line


# ------------------------------------------------------------------------------------------------ 14


def test_case14_a_profiles_file_that_cannot_be_read_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ATLAS_PROFILES", "")
    files = {"not YAML": ("x: [\n", "not valid YAML"),
             "a Python tag": ("x: !!python/object/apply:os.system ['echo hi']\n", "tag '!!python/object"),
             "not UTF-8": (b"x: \xff\xfe\n", "is not UTF-8 text (byte 3")}
    for what, (content, said) in files.items():
        f = tmp_path / f"{what}.yml"
        f.write_bytes(content if isinstance(content, bytes) else content.encode())
        line = refused(capsys, "list", "--profiles", f)
        assert str(f) in line and said in line, (what, line)
    folder = tmp_path / "folder.yml"
    folder.mkdir()
    assert "is a folder" in refused(capsys, "list", "--profiles", folder)


# ------------------------------------------------------------------------------------------------ 15


def test_case15_long_names_and_bad_output_folders_are_one_line(tmp_path, capsys, negex_ids, monkeypatch):
    monkeypatch.setattr(book, "build", lambda **kw: pytest.fail("built into a bad folder"))
    f = predictions(tmp_path / "p.jsonl", negex_ids)
    line = refused(capsys, "score", "--card", "negex", "--version", N100, "--predictions", f, "--name", "x" * 300,
                   "--results-dir", tmp_path / "r")
    assert "--name is 300 characters long" in line
    for name, said in (("a\nb", "control character U+000A at position 2"), ("{{fact:x}}", "placeholder")):
        line = refused(capsys, "score", "--card", "negex", "--version", N100, "--predictions", f, "--name", name,
                       "--results-dir", tmp_path / "r")
        assert said in line
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    for flag, value, said in (("--results-dir", a_file, "is a file"), ("--results-dir", loop, "symlink loop")):
        line = refused(capsys, "score", "--card", "negex", "--version", N100, "--predictions", f, "--name", "x",
                       flag, value)
        assert f"{flag} {value}" in line and said in line
    for flag, value, said in (("--build-dir", a_file, "is a file"), ("--results-dir", loop, "symlink loop"),
                              ("--build-dir", a_file / "sub", f"inside {a_file}")):
        line = refused(capsys, "book", "--no-run", "--card", "negex", flag, value)
        assert f"{flag} {value}" in line and said in line


# ------------------------------------------------------------------------------------------------ 16


def test_case16_an_unknown_model_in_a_matrix_is_refused_before_the_build(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(book, "build", lambda **kw: pytest.fail("built despite an unknown model"))
    matrix = tmp_path / "m.yml"
    matrix.write_text(yaml.safe_dump([{"card": "negex", "version": N100, "model": "no-such-model",
                                       "protocol": "zero_shot"}]))
    line = refused(capsys, "book", "--matrix", matrix, "--results-dir", tmp_path / "r")
    assert f"{matrix}, line 1: entry 1: unknown model 'no-such-model'" in line


# ------------------------------------------------------------------------------------------------ 18


def test_case18_a_csv_with_a_byte_order_mark_scores_as_without(tmp_path, capsys, negex_ids):
    plain = predictions(tmp_path / "plain.csv", negex_ids, score=0.2, csv=True)
    bom = predictions(tmp_path / "bom.csv", negex_ids, score=0.2, csv=True, bom=True)
    metrics = []
    for f in (plain, bom):
        code, out, err = score(capsys, f, f.stem, tmp_path / "r")
        assert code == 0, err
        metrics.append(json.loads(out)["metrics"])
    assert metrics[0] == metrics[1]


# ------------------------------------------------------------------------------------------------ 19


def test_case19_errors_in_a_matrix_predictions_entry_name_the_file_and_the_entry(tmp_path, capsys, negex_ids,
                                                                                  monkeypatch):
    monkeypatch.setattr(book, "build", lambda **kw: pytest.fail("built despite a bad predictions file"))
    predictions(tmp_path / "p.jsonl", negex_ids, label="maybe")
    matrix = tmp_path / "m.yml"
    matrix.write_text(yaml.safe_dump({"runs": [
        {"card": "negex", "version": N100, "model": "majority", "protocol": "zero_shot"},
        {"card": "negex", "version": N100, "predictions": "p.jsonl", "name": "maybe"}]}))
    line = refused(capsys, "book", "--no-run", "--matrix", matrix, "--results-dir", tmp_path / "r")
    assert f"{matrix}, line 6: entry 2: {tmp_path / 'p.jsonl'}: " in line and "label 'maybe'" in line


# ------------------------------------------------------------------------------------------------ 20


def test_case20_a_memory_limit_below_a_worker_is_refused_at_once(tmp_path, capsys, monkeypatch):
    """At once: before the build, a cluster or a run starts (each would fail the test)."""
    import distributed

    from atlaslib import executor

    monkeypatch.setattr(book, "build", lambda **kw: pytest.fail("started despite a tiny memory limit"))
    monkeypatch.setattr(distributed, "LocalCluster", lambda *a, **kw: pytest.fail("a Dask cluster was started"))
    monkeypatch.setattr(executor, "run_requests", lambda *a, **kw: pytest.fail("the matrix was started"))
    line = refused(capsys, "book", "--card", "negex", "--memory-limit", "1KiB", "--results-dir", tmp_path / "r")
    assert "memory_limit '1KiB'" in line and "below what a Dask worker needs" in line


# ------------------------------------------------------------------------------------------------ 21


def test_case21_a_fifo_or_dev_null_is_named_for_what_it_is_and_never_read(tmp_path, capsys):
    fifo = tmp_path / "preds.jsonl"
    os.mkfifo(fifo)   # nobody writes: reading it would wait forever
    for path, what in ((fifo, "a named pipe (FIFO)"), (Path("/dev/null"), "a character device (like /dev/null)")):
        line = refused(capsys, "score", "--card", "negex", "--version", N100, "--predictions", path, "--name", "x",
                       "--results-dir", tmp_path / "r")
        assert f"{path}: {what}, not a file" in line and "no such file" not in line


# ------------------------------------------------------------------------------------------------ minor


def test_minor_the_publish_build_carries_no_local_paths(hostile_site, data_dir):
    import nbformat

    src, paths = hostile_site["src"], hostile_site["paths"]
    roots = [str(data_dir), str(paths.results), str(paths.runs), sys.prefix, str(runner.REPO),
             str(hostile_site["tmp"])]
    leaks = {str(p.relative_to(src)): r for p in src.rglob("*") if p.suffix in (".ipynb", ".json", ".md", ".csv")
             for r in roots if r in p.read_text(encoding="utf-8", errors="replace")}
    assert leaks == {}
    page = next(p for p in (src / "book" / "runs").rglob("zero_shot.ipynb") if "foo--bar" in str(p))
    text = page.read_text()
    assert "DATA_DIR/negex" in text and "RUNS_DIR/nli_negation" in text and "PYTHON_ENV/lib/x.py" in text
    nbformat.validate(nbformat.read(page, as_version=4))
    kept = next(paths.runs.rglob("foo--bar/zero_shot.ipynb")).read_text()      # the local copy keeps them
    assert str(data_dir) in kept


def test_minor_a_tempeval_span_past_its_document_is_refused(tmp_path, capsys):
    from atlaslib.cards.tempeval import anafora_io, baselines

    out = tmp_path / "export"
    assert cli.main(["export", "--card", "tempeval", "--version", "synthetic-v1", "-o", str(out)]) == 0
    capsys.readouterr()
    docs = anafora_io.read_corpus(out / "anafora", xml_name_regex=r"[.]xml$")
    system = [baselines.with_closest(d) for d in docs]
    for d in system:
        d.annotator = "system"
    doc = system[0]
    text = (out / "anafora" / doc.doc_id / doc.doc_id).read_text(encoding="utf-8")
    e = doc.entities[0]
    e.spans = ((len(text) + 5, len(text) + 9),)
    anafora_io.write_corpus(system, tmp_path / "pred")
    line = refused(capsys, "score", "--card", "tempeval", "--version", "synthetic-v1", "--protocol", "phase2",
                   "--predictions", tmp_path / "pred", "--name", "past-the-end", "--results-dir", tmp_path / "r")
    assert f"{e.id!r} has span {len(text) + 5},{len(text) + 9}, outside document {doc.doc_id!r}" in line
    assert f"({len(text):,} characters)" in line


def test_minor_iob2_order_is_accepted_and_said_with_what_the_scorer_does(tmp_path, capsys, data_dir):
    from seqeval.metrics import f1_score

    from atlaslib.external.tasks import load_split

    s = load_split("maccrobat", N100, "test", data_dir)
    gold = {r["item_id"]: list(t) for r, t in zip(s.records, s.context["items"].set_index("item_id")
                                                             .loc[s.ids, "tags"])}
    pred = {i: [("I-" + t[2:]) if t.startswith("B-") else t for t in g] for i, g in gold.items()}  # I-X after O
    f = tmp_path / "tags.jsonl"
    f.write_text("".join(json.dumps({"item_id": i, "tags": pred[i]}) + "\n" for i in s.ids))
    code, out, err = atlas(capsys, "score", "--card", "maccrobat", "--version", N100, "--predictions", f, "--name",
                           "all-inside", "--results-dir", tmp_path / "r")
    assert code == 0, err
    note = one_line(err)
    assert note.startswith(f"atlas score: note: {f}: ") and "I- tag that continues no mention" in note
    assert "start of a new X mention" in note
    value = json.loads(out)["metrics"]["entity_f1_zero_shot"]
    assert value == pytest.approx(f1_score([gold[i] for i in s.ids], [pred[i] for i in s.ids]))


def test_minor_a_large_predictions_file_is_streamed(tmp_path, negex_ids):
    from atlaslib.external.score import read_predictions

    f = tmp_path / "big.jsonl"
    pad = "x" * 600_000                                     # ~60 MB: extra fields the scorer never reads
    with open(f, "w") as fh:
        for i in negex_ids:
            fh.write(json.dumps({"item_id": i, "label": "affirmed", "score": 0.1, "note": pad}) + "\n")
    size = f.stat().st_size
    assert size > 50 * 2 ** 20
    preds, peak = _traced_peak(lambda: read_predictions(f, "negex"))
    assert [p.item_id for p in preds] == negex_ids
    assert peak < size / 10, f"peak {peak:,} bytes for a {size:,}-byte file"


# ------------------------------------------------------------------------------------------------ property

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

NAMES = st.lists(st.one_of(st.text(max_size=40), st.text(alphabet="ab -_./!~", max_size=8),
                           st.sampled_from([".", "..", "majority", "majority!", " majority", "all minilm l6 v2",
                                            "a/b", "a--b", "a---b", "x" * 101, "local-m-0123abcd", "my system",
                                            "my-system", "gpt2", "bvanaken/clinical-assertion-negation-bert"])),
                 min_size=1, max_size=12)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(names=NAMES)
def test_property_a_name_is_refused_in_one_line_or_owns_one_folder(tmp_path_factory, names):
    from atlaslib.cards import available_cards
    from atlaslib.external.score import _check_name
    from atlaslib.models import load_profiles

    root = tmp_path_factory.mktemp("names")
    own = set(load_profiles()) | {m for c in available_cards() for m in [*c.baselines, *(
        m for _, m, _ in c.default_matrix)]}
    own_folders = {results.slug(m) for m in own}
    owner: dict[str, str] = {}
    for raw in names:
        try:
            name = _check_name(raw)
        except ValueError as exc:
            assert "\n" not in str(exc) and str(exc).startswith("--name")
            continue
        path = results.cell_path(root, "negex", N100, name, "zero_shot")
        folder = path.parent
        assert folder.parent == root / "negex" / N100                       # inside its card version
        assert folder.name not in (".", "..") and os.sep not in folder.name
        assert folder.name not in own_folders                                # no model of the atlas's
        assert owner.setdefault(folder.name, name) == name                  # no other name
        folder.mkdir(parents=True, exist_ok=True)                           # a folder this file system takes


def _traced_peak(call):
    """``(call(), the peak of memory traced while it ran, above what was traced before)``; tracing is stopped
    afterwards only when it was started here (a run with ``PYTHONTRACEMALLOC`` traces from its start)."""
    import tracemalloc

    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    try:
        out = call()
        return out, tracemalloc.get_traced_memory()[1] - before
    finally:
        if started:
            tracemalloc.stop()
