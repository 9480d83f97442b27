"""A row over training seeds whose seeds' models do not give the same groups (a card's own ``slice_counts``: mentions
found by each model): a group one seed's model lacks has no value and names that seed; the seeds' models scored on
different units of a group are one error; a group all have is their mean (NegEx counts, scikit-learn per seed)."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import f1_score

from atlaslib.analysis import slices as S
from atlaslib.cards import counted, scoring_of
from atlaslib.metrics.seeds import SeedError

from .cells import negex_cell

N = 40


def _cells():
    rng = np.random.default_rng(3)
    gold = ["negated" if v else "affirmed" for v in rng.integers(0, 2, N)]
    out = []
    for sd, p in ((1, 0.9), (2, 0.7)):
        pred = [g if rng.random() < p else ("affirmed" if g == "negated" else "negated") for g in gold]
        out.append((sd, negex_cell("m", gold, pred)))
    return gold, out


def _rows(by_seed, slice_counts):
    scoring = scoring_of("negex")
    return S.cell_rows(by_seed[0][1], by_seed, {"part": {"field": "none"}}, scoring, slice_counts, 7, 50, {})


def test_a_group_one_seeds_model_lacks_has_no_value_and_names_the_seed():
    gold, by_seed = _cells()
    first = np.arange(N) < 25

    def slice_counts(cell, spec, group_of, group_order):     # seed 2's model "finds" no second group
        uc = counted(cell)
        return [("a", uc.take(first))] + ([("b", uc.take(~first))] if cell is by_seed[0][1] else [])

    rows = _rows(by_seed, slice_counts)
    b = [r for r in rows if r["group"] == "b"]
    assert b and all(r["value"] is None and r["n"] == 0 and r["note"] == "no such group for seed 2's model"
                     for r in b)
    a = next(r for r in rows if r["group"] == "a" and r["metric"] == "macro_f1")
    y = np.array([g == "negated" for g in gold])[first]
    per = [f1_score(y, np.array([r["pred"] == "negated" for r in c["predictions"]])[first], average="macro")
           for _, c in by_seed]
    assert a["n"] == 25 and a["value"] == pytest.approx(np.mean(per)) and a["ci_low"] is not None
    assert a["per_seed"].startswith(f"1: {per[0]:.3f} [")


def test_seeds_models_scored_on_different_units_of_a_group_are_an_error():
    _, by_seed = _cells()

    def slice_counts(cell, spec, group_of, group_order):
        keep = np.arange(N) < (25 if cell is by_seed[0][1] else 24)
        return [("a", counted(cell).take(keep))]

    with pytest.raises(SeedError, match="not scored on the same units of part = a"):
        _rows(by_seed, slice_counts)
