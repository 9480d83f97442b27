"""A new card through the contract, end to end: declared, registered, split, two runs executed by the
runner (papermill), their result cells, and its page with both numbers in a built book."""
import json
import re
import shutil

import yaml

from atlaslib import book
from atlaslib.cards import CARD_MODULES, get_card
from atlaslib.runner import REPO


def test_toy_card_runs_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setitem(CARD_MODULES, "toy", "tests.toy_card")
    # nothing else to register: the analysis section reads the toy card's declaration (an item card with
    # labels, no slices)
    toy = get_card("toy")
    from tests import toy_card

    # split: the manifest `atlas split` would print
    items = toy_card.load_items()
    manifest = toy_card.split(items, "toy-v1")
    assert json.loads(manifest.to_json())["test"] == [f"toy-{n}" for n in range(12, 20)]
    assert len(manifest.test) == toy.test_sizes["toy-v1"]

    # the book's sources with the toy card's page in the table of contents
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copyfile(REPO / "_config.yml", repo / "_config.yml")
    shutil.copytree(REPO / "book", repo / "book", ignore=shutil.ignore_patterns("runs", "_generated"))
    (repo / "book/cards/toy.md").write_text("# Toy card: is the number even?\n\n<!-- leaderboard -->\n")
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    cards_part = next(p for p in toc["parts"] if any(c.get("file", "").startswith("book/cards/")
                                                     for c in p["chapters"]))
    cards_part["chapters"].append({"file": "book/cards/toy"})
    (repo / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    paths = book.BuildPaths(repo=repo, results=tmp_path / "results", runs=tmp_path / "runs",
                            build=tmp_path / "_build")

    logs = []
    code = book.build(paths=paths, cards=[toy], requests=book.default_requests([toy]),
                      log=lambda *a, **k: logs.append(" ".join(map(str, a))))
    assert code == 0, "\n".join(logs)

    # two result cells with the hand-computed accuracies: 4 of the 8 test numbers are even
    acc = {}
    for model in ("always-even", "parity-rule"):
        cell = json.loads((paths.results / "toy/toy-v1" / model / "zero_shot.json").read_text())
        assert cell["status"] == "ok" and cell["split"]["hash"] == manifest.hash
        assert [p["item_id"] for p in cell["predictions"]] == manifest.test
        acc[model] = cell["metrics"]["accuracy_zero_shot"]
        assert (paths.runs / "toy/toy-v1" / model / "zero_shot.ipynb").is_file()
    assert acc["always-even"]["value"] == 0.5 and acc["parity-rule"]["value"] == 1.0

    # its page in the built book shows both numbers with their intervals
    html = (paths.html_out(False) / "_build/html/book/cards/toy.html").read_text()
    text = re.sub(r"<[^>]+>", "", html)
    for e in acc.values():
        assert f"{e['value']:.3f}" in text and f"{e['ci_low']:.3f}" in text
