"""One contract for every card (parametrised over the four cards): the card declares itself as data
(``atlaslib.cards.Card``) and its module exposes the same functions with the same shapes."""
import importlib

import pytest

from atlaslib import runner
from atlaslib.cards import CARD_MODULES, CONTRACT, get_card
from atlaslib.sources import PinnedFile

CARDS = sorted(CARD_MODULES)


@pytest.mark.parametrize("name", CARDS)
def test_card_declares_itself_as_data(name):
    card = get_card(name)
    assert card.name == name and card.title and card.licence and card.resampling_unit
    assert set(card.test_sizes) == set(card.versions)
    assert all(isinstance(n, int) and n > 0 for n in card.test_sizes.values())
    assert card.primary_metric == card.metrics[0]
    assert card.caveats and all(isinstance(c, str) and c.endswith(".") for c in card.caveats)
    assert all(isinstance(pf, PinnedFile) for pf in card.pinned_files)
    assert len({pf.name for pf in card.pinned_files}) == len(card.pinned_files)
    # baselines and model capabilities only name the card's own protocols
    assert all(set(ps) <= set(card.protocols) for ps in card.baselines.values())
    assert set(card.capabilities) <= set(card.protocols)
    # every run of the default matrix is a declared version, protocol, and a baseline or a model protocol
    for version, model, protocol in card.default_matrix:
        assert version in card.versions and protocol in card.protocols
        assert protocol in card.baselines.get(model, ()) or protocol in card.capabilities or not card.capabilities


@pytest.mark.parametrize("name", CARDS)
def test_data_pins_come_from_the_declaration_not_reflection(name, monkeypatch):
    card = get_card(name)
    assert runner._card_data_pins(name) == sorted([pf.name, pf.sha256] for pf in card.pinned_files)
    # a pinned file the declaration leaves out is not found by looking through the module
    module = importlib.import_module(CARD_MODULES[name])
    monkeypatch.setattr(module, "_stray_pin", PinnedFile("stray.txt", "http://example.invalid", "0" * 64),
                        raising=False)
    assert ["stray.txt", "0" * 64] not in runner._card_data_pins(name)


def test_declared_test_sizes_match_the_real_splits():
    """The declared sizes against the cards' own split functions (tempeval: the pinned Dev documents)."""
    from atlaslib.cards import maccrobat, negex, nli_negation, tempeval

    assert get_card("nli_negation").test_sizes["builtin-v1"] == len(nli_negation.default_nli_negation_cases())
    assert get_card("maccrobat").test_sizes == {v: s["n_test"] for v, s in maccrobat.VERSIONS.items()}
    dev_docs = {f.name.split("/")[3] for f in tempeval.THYME_FILES if "/Dev/" in f.name}
    assert get_card("tempeval").test_sizes["thyme-dev-2015"] == len(dev_docs)
    items = negex.load_items()
    for version, n in get_card("negex").test_sizes.items():
        assert len(negex.split(items, version).test) == n


@pytest.mark.parametrize("name", CARDS)
def test_runner_reads_baselines_and_capabilities_from_the_card(name):
    """A baseline asked for a protocol it does not declare is refused naming its declared protocols."""
    card = get_card(name)
    cases = [(m, p, ps) for m, ps in card.baselines.items() for p in card.protocols if p not in ps]
    for model, protocol, declared in cases:
        with pytest.raises(ValueError, match=f"has no {protocol} run; its protocols: {', '.join(declared)}"):
            runner.preflight(runner.RunRequest(name, card.versions[0], model, protocol))


def test_contract_names():
    assert CONTRACT == ("load_items", "audit", "split", "predict", "score")
