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
