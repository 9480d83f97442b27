"""The `atlas` command: bad input is one line naming the bad value and the valid ones, exit 2, no traceback;
a run that cannot happen is decided before any kernel; `atlas split` works on every card and version."""
from __future__ import annotations

import json
import socket

import pytest

from atlaslib import cli, runner
from atlaslib.cards import available_cards
from atlaslib.runner import RunRequest

N100 = "atlas-n100-v1"


def bad(capsys, *argv) -> str:
    """Run ``atlas argv`` in-process: it must exit 2 with exactly one line on stderr and no traceback."""
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


@pytest.fixture
def outdirs(tmp_path):
    return ["--results-dir", str(tmp_path / "results"), "--runs-dir", str(tmp_path / "runs"),
            "--build-dir", str(tmp_path / "_build")]


@pytest.fixture
def no_kernel(monkeypatch):
    """Any attempt to start a notebook kernel fails the test."""
    import papermill

    def refuse(*a, **kw):
        raise AssertionError("a kernel was started")

    monkeypatch.setattr(papermill, "execute_notebook", refuse)


@pytest.fixture
def no_model_and_no_network(monkeypatch):
    """Loading any model's weights or opening any network connection fails the test (what made a refusal or a
    not-run decision slow)."""
    import atlaslib.models
    import atlaslib.models.adapters

    def refuse(what):
        def fail(*a, **kw):
            raise AssertionError(f"{what} while deciding a run that cannot happen")
        return fail

    monkeypatch.setattr(atlaslib.models, "load_adapter", refuse("a model was loaded"))
    monkeypatch.setattr(atlaslib.models.adapters, "load_adapter", refuse("a model was loaded"))
    monkeypatch.setattr(socket.socket, "connect", refuse("a network connection was opened"))
    monkeypatch.setattr(socket, "create_connection", refuse("a network connection was opened"))


def test_unknown_card(capsys, outdirs, no_kernel):
    line = bad(capsys, "run", "--card", "bogus", "--model", "majority", "--protocol", "zero_shot",
               "--version", N100, *outdirs)
    assert "'bogus'" in line and "maccrobat, negex, nli_negation, tempeval" in line


def test_unknown_version(capsys, outdirs, no_kernel):
    line = bad(capsys, "run", "--card", "negex", "--model", "majority", "--protocol", "zero_shot",
               "--version", "v9", *outdirs)
    assert "'v9'" in line and "atlas-n100-v1" in line and "atlas-full-v1" in line


def test_unknown_protocol(capsys, outdirs, no_kernel):
    line = bad(capsys, "run", "--card", "negex", "--model", "majority", "--protocol", "few_shot",
               "--version", N100, *outdirs)
    assert "'few_shot'" in line and "zero_shot, probe" in line


def test_unknown_model(capsys, outdirs, no_kernel, no_model_and_no_network, tmp_path):
    line = bad(capsys, "run", "--card", "negex", "--model", "nonexistent-model", "--protocol", "zero_shot",
               "--version", N100, *outdirs)
    assert "'nonexistent-model'" in line and "majority" in line and "hub id" in line
    assert not (tmp_path / "results").exists() and not (tmp_path / "runs").exists()


def test_unknown_tempeval_model_and_a_baseline_outside_its_protocols(capsys, outdirs, no_kernel):
    line = bad(capsys, "run", "--card", "tempeval", "--model", "majority", "--protocol", "phase2",
               "--version", "synthetic-v1", *outdirs)
    assert "'majority'" in line and "closest, majority-doctimerel, memorize" in line
    line = bad(capsys, "run", "--card", "maccrobat", "--model", "memorize", "--protocol", "probe",
               "--version", N100, *outdirs)
    assert "'memorize'" in line and "train_lookup" in line
    line = bad(capsys, "run", "--card", "maccrobat", "--model", "all-minilm-l6-v2", "--protocol", "train_lookup",
               "--version", N100, *outdirs)
    assert "'train_lookup'" in line and "memorize" in line and "probe" in line


def test_bad_option_value_is_one_line(capsys):
    line = bad(capsys, "book", "--executor", "threads")
    assert "'threads'" in line and "dask" in line and "serial" in line
    line = bad(capsys, "run", "--card", "negex")
    assert "required" in line and "--model" in line


def test_split_unknown_card(capsys):
    line = bad(capsys, "split", "--card", "bogus", "--version", N100)
    assert "'bogus'" in line and "negex" in line


def test_split_unknown_version(capsys):
    line = bad(capsys, "split", "--card", "tempeval", "--version", N100)
    assert f"'{N100}'" in line and "thyme-dev-2015, synthetic-v1" in line


@pytest.mark.parametrize("card,version", [(c.name, v) for c in available_cards() for v in c.versions])
def test_split_on_every_card_and_version(card, version, capsys, data_dir):
    assert cli.main(["split", "--card", card, "--version", version, "--data-dir", str(data_dir)]) == 0
    m = json.loads(capsys.readouterr().out)
    assert set(m) == {"card", "version", "seed", "hash", "train", "test", "excluded"}
    assert (m["card"], m["version"]) == (card, version)
    assert m["test"] and len(m["hash"]) == 64 and not set(m["train"]) & set(m["test"])
    assert m["test"] == sorted(m["test"]) and m["train"] == sorted(m["train"])
    if card == "nli_negation":  # the challenge's case ids, all of them test cases
        from atlaslib.cards import nli_negation

        assert m["test"] == sorted(c.case_id for c in nli_negation.version_cases(version))
        assert m["train"] == []
    if card == "tempeval":  # the documents of each side: Train trains, Dev tests
        from atlaslib.cards.tempeval import THYME_FILES, synthetic

        if version == "thyme-dev-2015":
            docs = {s: sorted({pf.name.split("/")[3] for pf in THYME_FILES if pf.name.split("/")[2] == s})
                    for s in ("Train", "Dev")}
            assert (len(m["train"]), len(m["test"])) == (293, 147)
        else:
            corpus = synthetic.build_corpus()
            docs = {s: sorted(d.doc_id for d in corpus[s]) for s in ("Train", "Dev")}
        assert (m["train"], m["test"]) == (docs["Train"], docs["Dev"])


def test_a_run_that_cannot_happen_is_decided_without_a_kernel_or_a_model(tmp_path, no_kernel,
                                                                          no_model_and_no_network):
    """Weights not in the local cache (offline): the not-run cell and a stub page; no kernel is started, no model
    loaded, no connection opened."""
    import nbformat

    from atlaslib import results
    from atlaslib.cards import maccrobat, negex

    kw = dict(results_dir=tmp_path / "results", runs_dir=tmp_path / "runs")
    cases = [
        (RunRequest("negex", N100, "bvanaken/clinical-assertion-negation-bert", "zero_shot"),
         negex.CARD.metric_names("zero_shot"), "weights unavailable: bvanaken/clinical-assertion-negation-bert@f381df19"),
        (RunRequest("negex", N100, "medspacy-context", "probe"), negex.CARD.metric_names("probe"),
         "capability missing: probe needs one of embed.text.pooled; medspacy-context has predict.assertion"),
        (RunRequest("maccrobat", N100, "d4data/biomedical-ner-all", "zero_shot"),
         [f"{b}_zero_shot" for b in maccrobat.METRIC_BASES], "weights unavailable: d4data/biomedical-ner-all@"),
        (RunRequest("nli_negation", "builtin-v1", "majority", "zero_shot"),
         ["aggregate_accuracy_zero_shot", "false_entailment_rate_zero_shot", "false_entailment_gate_zero_shot",
          "combined_gate_zero_shot"], "capability missing: zero_shot needs one of predict.nli; majority has "),
    ]
    for req, names, reason in cases:
        out = runner.run(req, **kw)
        assert (out.status, out.cell_status) == ("ran", "not_run")
        cell = results.read_cell(out.result)
        assert cell["reason"].startswith(reason)
        assert list(cell["metrics"]) == names
        assert {m["reason"] for m in cell["metrics"].values()} == {f"not run: {cell['reason']}"}
        nb = nbformat.read(out.notebook, as_version=4)
        nbformat.validate(nb)
        text = "\n".join(c.source for c in nb.cells)
        assert f"**Not run:** {cell['reason']}" in text and f"cards/{req.card}.md" in text
        assert all(c.cell_type == "markdown" for c in nb.cells)
    assert results.read_cell(tmp_path / "results/maccrobat" / N100 / "d4data--biomedical-ner-all/zero_shot.json"
                             )["overlap"] == ["maccrobat"]
    # the same request again is served from the cache
    assert runner.run(cases[0][0], **kw).status == "cached"
