"""The real NegEx notebook's runs are re-scored without a kernel (``benchmarks/check_negex_rescore.py``): executed
into a temporary results/runs folder, their stored scoring key made stale, run again with the kernel forbidden,
they report "re-scored", and the cell, its variant cells and the ``from-cell`` outputs equal the executed ones."""
import importlib.util

import pytest

from tests.conftest import REPO


def _check():
    spec = importlib.util.spec_from_file_location("check_negex_rescore", REPO / "benchmarks" / "check_negex_rescore.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.check


@pytest.mark.parametrize("model", ["majority", "negspacy-negex-kit"])   # without and with variant cells
def test_a_negex_run_is_rescored_as_it_executed(model, data_dir, tmp_path, capsys):
    assert _check()(model, "atlas-n100-v1", tmp_path, None) == []
    assert "5 variant cells" in capsys.readouterr().out or model == "majority"


def test_extra_a_card_declares_its_model_made_is_kept_and_the_run_rescored(toy_registered, tmp_path, monkeypatch):
    """A cell's extra key its card declares its model's (``Card.prediction_extra``, as NegEx declares a language
    model's probes) keeps the run re-scorable, kept as stored; an undeclared key sends it to execute
    (tests/test_run_key_split.py)."""
    import dataclasses
    import json

    from atlaslib import rescore, runner
    from tests import test_run_key_split as split

    req, dirs = split._toy_book(tmp_path, monkeypatch, rescore.FROM_CELL_TAG)
    card = dataclasses.replace(runner.get_card("toy"), prediction_extra=("report",))
    monkeypatch.setattr(runner, "get_card", lambda name: card)
    executed = runner.run(req, **dirs)
    split._with_extra(executed)
    split._stale(executed)
    split._no_kernel(monkeypatch)
    out = runner.run(req, **dirs)
    assert out.status == "re-scored"
    assert json.loads(open(out.result).read())["extra"]["report"] == {"accuracy": 0.5}
