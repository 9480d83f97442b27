"""`--profiles` and `--matrix`: your own registry entries and runs, outside the package."""
from __future__ import annotations

import json

import pytest
import yaml

from atlaslib import cli, runner
from atlaslib.models import get_profile

PROFILE = {"source": "path", "location": "/models/my-encoder", "revision": None,
           "capabilities": ["embed.text.pooled"], "label_map": {}, "trained_on": [], "description": "Mine."}


def test_book_matrix_adds_runs_and_scores_listed_predictions(tmp_path, monkeypatch, data_dir):
    from atlaslib import book
    from atlaslib.cards import get_card

    monkeypatch.setenv("ATLAS_PROFILES", "")  # restored after the test (the command sets it)
    prof = tmp_path / "mine.yml"
    prof.write_text(yaml.safe_dump({"my-encoder": PROFILE}))
    preds = tmp_path / "preds.jsonl"
    from atlaslib.external.tasks import load_split
    ids = load_split("nli_negation", "builtin-v1").ids
    preds.write_text("".join(json.dumps({"item_id": i, "label": "neutral"}) + "\n" for i in ids))
    matrix = tmp_path / "matrix.yml"
    matrix.write_text(yaml.safe_dump({"runs": [
        {"card": "negex", "version": "atlas-n100-v1", "model": "my-encoder", "protocol": "probe"},
        {"card": "nli_negation", "version": "builtin-v1", "predictions": "preds.jsonl", "name": "all-neutral"}]}))
    seen = {}
    monkeypatch.setattr(book, "build", lambda **kw: seen.update(kw) or 0)
    code = cli.main(["book", "--no-run", "--profiles", str(prof), "--matrix", str(matrix), "--results-dir",
                     str(tmp_path / "results"), "--data-dir", str(data_dir)])
    assert code == 0
    requests = seen["requests"]
    added = runner.RunRequest("negex", "atlas-n100-v1", "my-encoder", "probe")
    assert added in requests and requests[:-1] == book.default_requests()
    assert get_profile("my-encoder").description == "Mine."  # this process, and kernels, via the environment
    cell = json.loads((tmp_path / "results/nli_negation/builtin-v1/all-neutral/zero_shot.json").read_text())
    assert cell["spec"]["capability"] == "external predictions"
    # the run cache key covers the merged profile: an edited profile re-keys the run
    nb = (runner.REPO / get_card("negex").notebook).read_text()
    before = runner.run_key(added, nb)
    prof.write_text(yaml.safe_dump({"my-encoder": {**PROFILE, "description": "Mine, retrained."}}))
    assert runner.run_key(added, nb) != before


@pytest.mark.parametrize("entry, message", [
    ({"card": "negex", "version": "atlas-n100-v1", "model": "m", "protocol": "probe", "seed": 1},
     "entry 1: unknown key(s) ['seed']"),
    ({"card": "negex", "version": "atlas-n100-v2", "model": "m", "protocol": "probe"},
     "entry 1: card negex has no split version 'atlas-n100-v2'"),
])
def test_bad_matrix_entry_is_one_error(tmp_path, capsys, monkeypatch, entry, message):
    from atlaslib import book

    monkeypatch.setattr(book, "build", lambda **kw: pytest.fail("built despite a bad matrix"))
    matrix = tmp_path / "m.yml"
    matrix.write_text(yaml.safe_dump([entry]))
    assert cli.main(["book", "--no-run", "--matrix", str(matrix), "--results-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_no_default_builds_only_the_matrix_runs_and_the_cards_it_names(tmp_path, monkeypatch, capsys, data_dir):
    from atlaslib import book
    from atlaslib.external.tasks import load_split

    monkeypatch.setenv("ATLAS_PROFILES", "")
    prof = tmp_path / "mine.yml"
    prof.write_text(yaml.safe_dump({"my-encoder": PROFILE}))
    ids = load_split("nli_negation", "builtin-v1").ids
    (tmp_path / "preds.jsonl").write_text("".join(json.dumps({"item_id": i, "label": "neutral"}) + "\n" for i in ids))
    matrix = tmp_path / "matrix.yml"
    matrix.write_text(yaml.safe_dump([
        {"card": "negex", "version": "atlas-n100-v1", "model": "my-encoder", "protocol": "probe"},
        {"card": "nli_negation", "version": "builtin-v1", "predictions": "preds.jsonl", "name": "all-neutral"}]))
    seen = []
    monkeypatch.setattr(book, "build", lambda **kw: seen.append(kw) or 0)
    argv = ["book", "--no-default", "--profiles", str(prof), "--matrix", str(matrix),
            "--results-dir", str(tmp_path / "results"), "--data-dir", str(data_dir)]
    assert cli.main(argv) == 0
    # no default run at all; the cards are the ones the file names (a predictions-only card too)
    assert seen[0]["requests"] == [runner.RunRequest("negex", "atlas-n100-v1", "my-encoder", "probe")]
    assert [c.name for c in seen[0]["cards"]] == ["negex", "nli_negation"] and seen[0]["run_runs"]
    assert (tmp_path / "results/nli_negation/builtin-v1/all-neutral/zero_shot.json").is_file()
    # --card narrows it further; a card the file does not name is one error, and nothing is built
    assert cli.main(argv + ["--card", "nli_negation"]) == 0
    assert seen[1]["requests"] == [] and [c.name for c in seen[1]["cards"]] == ["nli_negation"]
    capsys.readouterr()
    assert cli.main(argv + ["--card", "tempeval"]) == 2 and len(seen) == 2
    err = capsys.readouterr().err
    assert err.strip() == "atlas book: --no-default: the matrix file(s) list nothing for --card tempeval"


def test_no_default_without_a_matrix_is_one_error(capsys, monkeypatch):
    from atlaslib import book

    monkeypatch.setattr(book, "build", lambda **kw: pytest.fail("built without a matrix"))
    assert cli.main(["book", "--no-default"]) == 2
    err = capsys.readouterr().err
    assert err == "atlas book: --no-default needs --matrix FILE (the runs to build instead of the default matrix)\n"
