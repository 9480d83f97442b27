"""The run → result cell → page → HTML path, on real notebooks and the session's small book (``tests/books.py``)."""
import json
import re

import pytest

from atlaslib import book, cards, notebook, runner
from atlaslib.cards import Card
from atlaslib.pages.site import render_build_report
from tests.myst import myst_header

PARAMS_CELL = "```{code-cell} python\n:tags: [parameters]\nmodel = 'm'\nprotocol = 'p'\nversion = 'v'\n" \
              "data_dir = None\nresult_path = None\nrun_key = None\n```\n"
HEADER = myst_header() + "\n# Test\n\n"


def _fake_card(monkeypatch, tmp_path, body: str, with_params: bool = True, **fields) -> Card:
    nb = tmp_path / "fake.md"
    nb.write_text(HEADER + (PARAMS_CELL if with_params else "") + body)
    card = Card(name="fake", title="Fake card", notebook=str(nb), versions=("v",), protocols=("p",),
                metrics=("acc",), default_matrix=(("v", "m", "p"),), **fields)
    monkeypatch.setattr(runner, "get_card", lambda name: card)
    monkeypatch.setattr(cards, "get_card", lambda name: card)  # data stories look cards up in the registry
    return card


def _paths(tmp_path) -> book.BuildPaths:
    return book.BuildPaths(results=tmp_path / "results", runs=tmp_path / "runs", build=tmp_path / "_build")


def test_notebook_without_parameters_cell_is_refused(monkeypatch, tmp_path):
    _fake_card(monkeypatch, tmp_path, "```{code-cell} python\nx = 1\n```\n", with_params=False)
    with pytest.raises(runner.NotebookError, match="no code cell is tagged 'parameters'"):
        runner.run(runner.RunRequest("fake", "v", "m", "p"), results_dir=tmp_path / "r", runs_dir=tmp_path / "n")


def test_failing_notebook_names_cell_and_leaves_no_result(monkeypatch, tmp_path):
    _fake_card(monkeypatch, tmp_path, "```{code-cell} python\nx = 1\n```\n\n```{code-cell} python\n"
                                      "raise RuntimeError('boom')\n```\n")
    p = _paths(tmp_path)
    with pytest.raises(runner.RunFailed) as e:
        runner.run(runner.RunRequest("fake", "v", "m", "p"), results_dir=p.results, runs_dir=p.runs,
                   failed_dir=p.build / "failed")
    assert "fake.md failed in cell" in str(e.value) and "RuntimeError: boom" in str(e.value)
    assert not list(p.results.rglob("*.json")) and not list(p.runs.rglob("*.ipynb"))
    assert list((p.build / "failed").rglob("*.ipynb"))  # the execution report is kept for reading


def test_failing_run_fails_the_build_and_never_renders(monkeypatch, tmp_path):
    card = _fake_card(monkeypatch, tmp_path, "```{code-cell} python\nraise ValueError('nope')\n```\n")
    p = _paths(tmp_path)
    (tmp_path / "log.txt").write_text("")
    logs = []
    code = book.build(paths=p, cards=[], requests=[runner.RunRequest("fake", "v", "m", "p")],
                      log=lambda *a, **k: logs.append(" ".join(map(str, a))))
    assert code == 1
    assert any("fake.md failed in cell" in line and "ValueError: nope" in line for line in logs)


def test_the_run_is_decided_once_and_its_kernel_receives_the_decision(monkeypatch, tmp_path):
    """The runner decides before the kernel (profile resolved, capability chosen) and injects the decision;
    the cell the notebook writes, carrying its run key, is moved into place as written, never rewritten."""
    from atlaslib.models import get_profile

    body = ("```{code-cell} python\nimport json\nfrom atlaslib import results\n"
            "spec = results.RunSpec(card='fake', version=version, model=model, protocol=protocol)\n"
            "cell = results.make_cell(spec, metrics={'acc_p': results.metric(0.5, 0.1, 0.9)}, predictions=[],\n"
            "                         extra={'decision': decision}, env={})\n"
            "cell['run_key'] = run_key\n"
            "open(result_path, 'w').write(json.dumps(cell, indent=3))  # indent 3: no writer of the atlas's\n"
            "```\n")
    _fake_card(monkeypatch, tmp_path, body, capabilities={"p": ("predict.assertion", "embed.text.pooled")})
    request = runner.RunRequest("fake", "v", "all-minilm-l6-v2", "p")
    decision = runner.decide(request)
    assert decision == {"run": True, "reason": None, "profile": get_profile("all-minilm-l6-v2").to_dict(),
                        "capability": "embed.text.pooled", "baseline": False}
    p = _paths(tmp_path)
    calls = []
    decide = runner.decide
    monkeypatch.setattr(runner, "decide", lambda r: calls.append(r) or decide(r))
    out = runner.run(request, results_dir=p.results, runs_dir=p.runs, failed_dir=p.build / "failed")
    assert out.status == "ran" and calls == [request]  # decided once for the run
    written = (p.results / "fake/v/all-minilm-l6-v2/p.json").read_text()
    cell = json.loads(written)
    assert cell["extra"]["decision"] == decision
    assert written == json.dumps(cell, indent=3)  # the notebook's own bytes
    assert runner.is_current(request, cell["run_key"], p.results, p.runs)
    # a model without the capability is decided not run, with the reason, before any kernel
    blocked = runner.decide(runner.RunRequest("fake", "v", "gpt2", "p"))
    assert blocked == {"run": False, "profile": get_profile("gpt2").to_dict(), "capability": None, "baseline": False,
                       "reason": "capability missing: p needs one of predict.assertion, embed.text.pooled; gpt2 has "
                                 "score.options"}


@pytest.mark.xdist_group("books")
def test_small_book_shows_the_numbers_of_its_cells(small_book):
    html_dir, results_dir = small_book
    runs_dir = results_dir.parent / "runs"
    cell = json.loads((results_dir / "negex/atlas-n100-v1/majority/zero_shot.json").read_text())
    assert cell["status"] == "ok" and cell["split"]["test_label_counts"] == {"negated": 21, "affirmed": 79}
    assert len(cell["predictions"]) == 100 and cell["data_sha256"]
    f1 = cell["metrics"]["macro_f1_zero_shot"]
    html = (html_dir / "book/cards/negex.html").read_text()
    text = re.sub(r"<[^>]+>", "", html)  # the page's text, as a reader sees it
    assert f"{f1['value']:.3f} [{f1['ci_low']:.3f}, {f1['ci_high']:.3f}]" in text
    assert "not run: weights unavailable" in html
    assert "Local evaluation only" in html
    run_page = html_dir / "book/runs/negex/atlas-n100-v1/majority/zero_shot.html"
    assert run_page.is_file() and "Traceback" not in run_page.read_text()
    executed = json.loads((runs_dir / "negex/atlas-n100-v1/majority/zero_shot.ipynb").read_text())
    images = [o for c in executed["cells"] for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= 2  # bootstrap distributions and confusion matrix are really shown


@pytest.mark.xdist_group("books")
def test_the_runs_of_a_second_build_come_from_the_run_cache(small_book, tmp_path, data_dir, monkeypatch):
    """The same requests again (on a copy of the small book's results and runs): every run and the data story
    are served from the cache, no kernel is started, and the build report says so."""
    import papermill

    from tests.books import SMALL_BOOK_REQUESTS, copy_build

    def no_kernel(*a, **k):
        raise AssertionError("a kernel was started for a run the cache holds")

    monkeypatch.setattr(papermill, "execute_notebook", no_kernel)
    p = copy_build(small_book[1], tmp_path)
    before = {f: f.read_bytes() for f in p.results.rglob("*.json")}
    report = book._with_stories(SMALL_BOOK_REQUESTS, p, data_dir, False, lambda *a, **k: None,
                                lambda: book.run_matrix(SMALL_BOOK_REQUESTS, p, data_dir=data_dir,
                                                        log=lambda *a, **k: None))
    assert [o.status for o in report.outcomes] == ["cached", "cached"] and not report.failures
    assert [o.status for o in report.stories] == ["cached"]
    assert {f: f.read_bytes() for f in p.results.rglob("*.json")} == before   # nothing rewritten
    (tmp_path / "src" / "book").mkdir(parents=True)
    render_build_report(tmp_path / "src", report)
    text = (tmp_path / "src/book/build_report.md").read_text()
    assert "| cached |" in text and "| ran |" not in text and "0 executed, 2 from the cache" in text


@pytest.mark.xdist_group("books")
def test_publish_build_withholds_unlicensed_card(small_book, small_book_publish, data_dir):
    local, results_dir = small_book
    site, _ = small_book_publish
    f1 = json.loads((results_dir / "negex/atlas-n100-v1/majority/zero_shot.json").read_text())["metrics"]["macro_f1_zero_shot"]
    pages = {f: f.read_text(errors="ignore") for f in site.rglob("*.html")}
    assert not any("runs/negex" in str(f) or f.name == "negex.html" for f in pages)
    assert not any(f"{f1['value']:.3f} [" in t for t in pages.values())
    withheld = (site / "book/withheld.html").read_text()
    assert "negex" in withheld and "licence unconfirmed" in withheld
    # the text scan: no sentence of the kit anywhere in the published site (pages, item explorers, downloads)
    from atlaslib.cards import negex as negex_card

    items = negex_card.load_items(data_dir)
    explorer = local / "book/runs/negex/atlas-n100-v1/explorer.html"
    assert explorer.is_file() and any(s in explorer.read_text() for s in items["concept"].str.upper())  # the local one has text
    texts = [f.read_text(errors="ignore") for f in site.rglob("*")
             if f.is_file() and f.suffix in (".html", ".csv", ".js", ".json") and "_static" not in f.parts]
    sentences = [s for s in items["sentence"] if len(s) > 40]
    assert not [s for s in sentences if any(s in t for t in texts)]
    assert not any("explorer-negex" in str(f) for f in site.rglob("*"))


def test_gated_cells_are_recognised():
    assert book.is_gated({"extra": {"gated_text": True}})
    assert book.is_gated({"spec": {"parameters": {"gated": True}}})
    assert not book.is_gated({"extra": {"gated_text": False}, "spec": {"parameters": {}}})


def test_force_retrains_only_notebooks_that_declare_retrain(monkeypatch, tmp_path):
    """`--force` reaches fine-tuned weights: a notebook with a `retrain` parameter gets retrain=True, one
    without it gets no unknown parameter."""
    import papermill

    negex_nb = runner.read_text_notebook(runner.REPO / "notebooks" / "negex.md")
    nli_nb = runner.read_text_notebook(runner.REPO / "notebooks" / "nli_negation.md")
    assert runner.declares_parameter(negex_nb, "retrain") and not runner.declares_parameter(nli_nb, "retrain")
    seen = []

    def capture(src, out, parameters, **kw):
        seen.append(parameters)
        raise RuntimeError("stop here")

    monkeypatch.setattr(papermill, "execute_notebook", capture)
    for force in (False, True):
        with pytest.raises(runner.RunFailed):
            runner.run(runner.RunRequest("negex", "atlas-n100-v1", "majority", "zero_shot"), force=force,
                       results_dir=tmp_path / "results", runs_dir=tmp_path / "runs", failed_dir=tmp_path / "failed")
    assert "retrain" not in seen[0] and seen[1]["retrain"] is True


def test_kernels_are_not_interrupted_when_papermill_shuts_them_down(monkeypatch):
    """jupyter_client interrupts a kernel before every shutdown; a kernel handling the shutdown request when
    the signal lands logs "KeyboardInterrupt caught in kernel" as an ERROR after a run that went well. The
    runner's kernel manager sends the interrupt only when no shutdown is under way."""
    import asyncio

    from jupyter_client.manager import AsyncKernelManager

    sent = []

    async def interrupt(self):
        sent.append(self.shutting_down)

    monkeypatch.setattr(AsyncKernelManager, "_async_interrupt_kernel", interrupt)
    km = notebook.quiet_shutdown_manager()()
    assert isinstance(km, AsyncKernelManager)
    for shutting_down in (True, False):
        km.shutting_down = shutting_down
        asyncio.run(km._async_interrupt_kernel())
    assert sent == [False]  # an interrupt outside a shutdown (Ctrl-C of a running cell) still goes through
