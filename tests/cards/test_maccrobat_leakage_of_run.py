"""The gold cuts' leakage of a run (maccrobat.leakage_of_run): measured on ok probe runs only, with the run's own
adapter and test tags, the run's model named; None for every other run."""
from types import SimpleNamespace

import pytest

from atlaslib.cards.maccrobat import gold_cuts


def _run(protocol, model="enc"):
    return SimpleNamespace(spec=SimpleNamespace(protocol=protocol, model=model),
                           loaded=SimpleNamespace(adapter="ADAPTER"))


@pytest.fixture
def calls(monkeypatch):
    seen = []

    def fake(items, manifest, adapter, pred):
        seen.append((items, manifest, adapter, pred))
        return {"with_gold_cuts": {"f1": 0.5}, "without_gold_cuts": {"f1": 0.25}, "f1_difference": 0.25}
    monkeypatch.setattr(gold_cuts, "probe_without_gold_cuts", fake)
    return seen


def test_an_ok_probe_run_is_measured_with_its_own_adapter_and_tags(calls):
    out = SimpleNamespace(status="ok", pred=[["O"]])
    got = gold_cuts.leakage_of_run(_run("probe"), out, "ITEMS", "MANIFEST")
    assert calls == [("ITEMS", "MANIFEST", "ADAPTER", [["O"]])]
    assert list(got) == ["with_gold_cuts", "without_gold_cuts", "f1_difference", "model"] and got["model"] == "enc"


@pytest.mark.parametrize("protocol,status", [("zero_shot", "ok"), ("finetune", "ok"), ("probe", "not_run")])
def test_any_other_run_has_none(calls, protocol, status):
    out = SimpleNamespace(status=status, pred=None)
    assert gold_cuts.leakage_of_run(_run(protocol), out, "ITEMS", "MANIFEST") is None and calls == []
