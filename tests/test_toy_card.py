"""A new card is one folder: the toy card (``tests/toy_card/``: a card of the labelled-items family, its
declaration in ``card.py``, its facts in ``pages.py`` and its notebook ``toy_card.md``) becomes a package of a
temporary distribution outside the atlas, declared by an entry point, and nothing else is edited: no registry entry, no page, no table of contents. It is found by discovery,
split, its two runs executed by the runner (papermill, whose kernel finds it the same way), their result cells
written, and its page (the folder's ``page.md``, quoting a fact its ``pages.py`` provides) shows both numbers in
a built book. It passes the contract tests every card of the atlas passes (``tests/cards/test_contract.py``)."""
import copy
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from atlaslib import book, cards
from atlaslib.pages import facts

HERE = Path(__file__).resolve().parent


@pytest.fixture
def toy_distribution(tmp_path, monkeypatch):
    """``<tmp>/site``: the package ``toycards.toy`` (a copy of the toy card's folder, its notebook in it) and the
    distribution ``toycards`` declaring it in the entry-point group ``atlaslib.cards``, on this process's path
    and the kernels' (PYTHONPATH). The registry is as it was after the test."""
    site = tmp_path / "site"
    package = site / "toycards" / "toy"
    shutil.copytree(HERE / "toy_card", package, ignore=shutil.ignore_patterns("__pycache__"))
    (site / "toycards" / "__init__.py").write_text("")
    dist = site / "toycards-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toycards\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{cards.ENTRY_POINT_GROUP}]\ntoy = toycards.toy\n")
    monkeypatch.syspath_prepend(str(site))
    for name in ("PROVIDERS", "_CARD_FACTS", "_CARDS_SEEN"):  # the facts it registers go with it
        monkeypatch.setattr(facts, name, copy.copy(getattr(facts, name)))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))
    before = set(cards.CARD_MODULES)
    yield package
    for name in [n for n in cards.CARD_MODULES if n not in before]:  # the cards it found go with it
        cards.CARD_MODULES.pop(name)
    for name in [m for m in sys.modules if m.split(".")[0] == "toycards"]:
        del sys.modules[name]


def test_a_card_outside_the_atlas_is_found_and_runs_end_to_end(toy_distribution, tmp_path):
    assert "toy" not in cards.CARD_MODULES  # nothing registered it
    toy = cards.get_card("toy")  # discovered through its entry point
    assert cards.CARD_MODULES["toy"] == "toycards.toy" and toy in cards.available_cards()
    assert Path(toy.notebook) == toy_distribution / "toy_card.md"
    module = cards.card_module("toy")

    # split: the manifest `atlas split` would print
    items = module.load_items()
    manifest = module.split(items, "toy-v1")
    assert json.loads(manifest.to_json())["test"] == [f"toy-{n}" for n in range(12, 20)]
    assert len(manifest.test) == toy.test_sizes["toy-v1"]

    # the atlas's own book sources, unedited: the toy card's page (its folder's page.md) and its place in the
    # contents are made; a fact its page quotes is registered from its folder's pages.py
    (toy_distribution / "page.md").write_text("# Toy card\n\n{{fact:toy.test_numbers}} test numbers, half of "
                                              "them even.\n\n<!-- leaderboard -->\n")
    paths = book.BuildPaths(results=tmp_path / "results", runs=tmp_path / "runs", build=tmp_path / "_build")
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
        assert cell["run_key"] == cell["spec"]["parameters"]["run_key"]  # written once, by the notebook
        acc[model] = cell["metrics"]["accuracy_zero_shot"]
        assert (paths.runs / "toy/toy-v1" / model / "zero_shot.ipynb").is_file()
    assert acc["always-even"]["value"] == 0.5 and acc["parity-rule"]["value"] == 1.0

    # its page in the built book shows both numbers with their intervals, and the contents list it
    html = (paths.html_out(False) / "_build/html/book/cards/toy.html").read_text()
    text = re.sub(r"<[^>]+>", "", html)
    assert "8 test numbers, half of them even." in text
    for e in acc.values():
        assert f"{e['value']:.3f}" in text and f"{e['ci_low']:.3f}" in text
    assert "book/cards/toy" in (paths.src(False) / "_toc.yml").read_text()


def test_a_card_claimed_twice_is_refused(toy_distribution, monkeypatch):
    """An entry point may not take the name of a card of the atlas."""
    ep = toy_distribution.parent.parent / "toycards-0.1.dist-info" / "entry_points.txt"
    ep.write_text(ep.read_text() + "negex = toycards.toy\n")
    with pytest.raises(cards.CardRegistryError, match=r"card 'negex' is declared twice: atlaslib\.cards\.negex "
                                                      r"and toycards\.toy \(entry point of toycards"):
        cards.discover()


def test_a_card_whose_declaration_has_another_name_is_refused(toy_distribution):
    ep = toy_distribution.parent.parent / "toycards-0.1.dist-info" / "entry_points.txt"
    ep.write_text(ep.read_text().replace("toy = ", "game = "))
    with pytest.raises(cards.CardRegistryError, match="found as card 'game' but its CARD is named 'toy'"):
        cards.get_card("game")


def test_the_toy_card_passes_every_cards_contract_tests(monkeypatch, data_dir, toy_registered):
    """The contract tests of the atlas's cards (``tests/cards/test_contract.py``), run on the toy card; its
    layout is a card of the labelled-items family: ``card.py`` declares ``CARD``, ``SCORING`` and ``FAMILY`` and
    writes only ``load_items``, ``audit_items`` and ``split``; ``predict`` and ``counts`` are its family's;
    ``__init__.py`` only re-exports. The folder, notebook included, is under 120 lines. (It takes no outside
    predictions, so the outside-systems test is not one of them.)"""
    import ast

    from atlaslib.cards.families import LabelledItems
    from atlaslib.cards.run import CardRun
    from tests.cards import test_contract as contract

    contract.test_card_declares_itself_as_data("toy")
    contract.test_data_pins_come_from_the_declaration_not_reflection("toy", monkeypatch)
    contract.test_runner_reads_baselines_and_capabilities_from_the_card("toy")
    run = ("toy-v1", "parity-rule", "zero_shot")
    monkeypatch.setitem(contract.RUNS, "toy", run)
    mod = cards.card_module("toy")
    items = mod.load_items(data_dir)
    manifest = mod.split(items, run[0])
    records = mod.predict(items, manifest, run[1], run[2], data_dir=data_dir)
    contract.test_every_card_implements_the_contract(
        "toy", {"toy": (mod, items, manifest, records, CardRun(mod, *run).score(records))}, data_dir)
    assert contract.layout_problems(mod) == []

    root = HERE / "toy_card"
    files = sorted(p for p in root.iterdir() if p.suffix in (".py", ".md"))
    assert [p.name for p in files] == ["__init__.py", "card.py", "pages.py", "toy_card.md"]
    assert sum(len(p.read_text(encoding="utf-8").splitlines()) for p in files) < 120
    defined = contract._top_level_names(root / "card.py")[0]
    assert {"CARD", "SCORING", "FAMILY", "load_items", "audit_items", "split"} <= defined
    assert isinstance(mod.FAMILY, LabelledItems) and mod.predict == mod.FAMILY.predict
    assert mod.counts == mod.FAMILY.counts
    init = ast.parse((root / "__init__.py").read_text(encoding="utf-8")).body
    assert isinstance(init[0], ast.Expr) and all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in init[1:])
    pages = ast.parse((root / "pages.py").read_text(encoding="utf-8")).body   # its facts: no atlaslib.pages import
    assert not [n for n in pages if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("atlaslib.pages")]
