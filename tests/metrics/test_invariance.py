"""Invariances of the one scoring engine, over every metric it knows (every card's declared ``Scoring``: its
metrics, its declared resampling and every extra one), as scikit-learn's common metric tests check theirs:

- **unit order**: a metric's value does not depend on the order of the units; its resampled values follow
  their units (the same draws, moved with them, give the same values); where the draws themselves do not depend
  on the order (whole clusters, drawn by cluster name; exact intervals) the interval under the same seed is
  the same;
- **renaming groups**: renaming the strata or clusters a resampling draws by, keeping their order, changes no
  interval under the same seed; any renaming keeps each stratum's size in every resample;
- **a duplicated unit is a unit weighted twice**: the counts of a run with a unit repeated, under any
  multiplicities, are the counts of the run under the multiplicities that give the unit both weights.

The counts are random (the engine computes formulas of summed counts and knows nothing of what they mean), with
0/1 in a ``positive`` column and tied scores for the rank metric."""
from __future__ import annotations

import numpy as np
import pytest

from atlaslib.cards import card_names, scoring_of
from atlaslib.metrics import engine
from atlaslib.metrics.engine import UnitCounts

N = 60
CASES = [(card, m.name) for card in card_names() for m in scoring_of(card).metrics]


def _resamplings(scoring):
    return [scoring.resampling, *scoring.extra]


def _draws_by_name(card: str, metric: str) -> bool:
    """Whether some interval of ``metric`` is drawn by cluster name (a cluster resampling that shows it) or is
    exact; a stratified or row resampling draws units by position, so its interval moves with the order."""
    scoring = scoring_of(card)
    return scoring.interval == "exact" or any(rs.rule == "clusters" and (not rs.metrics or metric in rs.metrics)
                                              for rs in _resamplings(scoring))


def counts_for(scoring, seed: int = 0) -> UnitCounts:
    """Random per-unit counts for ``scoring``'s columns, a grouping for each of its resamplings (a few strata
    or clusters, unevenly sized) and tied scores."""
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 4, size=(N, len(scoring.columns)))
    for j, col in enumerate(scoring.columns):
        if col == "positive":
            c[:, j] = rng.random(N) < 0.4
    groups = {rs.by: [f"g{int(x)}" for x in rng.integers(0, 7 if rs.rule == "clusters" else 2, N)]
              for rs in _resamplings(scoring) if rs.by}
    scores = np.round(rng.random(N), 1)
    return UnitCounts([f"u{k}" for k in range(N)], scoring.columns, c, groups, scores)


def reordered(uc: UnitCounts, order) -> UnitCounts:
    order = list(order)
    return UnitCounts([uc.ids[i] for i in order], uc.columns, uc.counts[order],
                      {k: [v[i] for i in order] for k, v in uc.groups.items()},
                      None if uc.scores is None else uc.scores[order], dict(uc.undefined))


def renamed(uc: UnitCounts, rename, only: str | None = None) -> UnitCounts:
    """``uc`` with its groupings' values renamed (``only``: that grouping alone)."""
    return UnitCounts(list(uc.ids), uc.columns, uc.counts,
                      {k: [rename(x) for x in v] if only in (None, k) else list(v) for k, v in uc.groups.items()},
                      uc.scores, dict(uc.undefined))


def same(a, b):
    np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), rtol=1e-12, atol=1e-12, equal_nan=True)


def test_every_card_is_covered():
    assert {c for c, _ in CASES} == set(card_names()) and len(CASES) >= 15


@pytest.mark.parametrize("card,metric", CASES)
def test_unit_order_changes_no_value_and_resampled_values_follow_their_units(card, metric):
    scoring = scoring_of(card)
    uc = counts_for(scoring)
    perm = np.random.default_rng(1).permutation(N)
    moved = reordered(uc, perm)
    assert np.isfinite(engine.point(scoring, uc, metric))
    same(engine.point(scoring, moved, metric), engine.point(scoring, uc, metric))
    for rs in _resamplings(scoring):
        w = engine.weights(uc, rs, n_resamples=50)
        same(engine.resampled(scoring, moved, metric, w[:, perm]), engine.resampled(scoring, uc, metric, w))


@pytest.mark.parametrize("card,metric", [c for c in CASES if _draws_by_name(*c)])
def test_intervals_whose_draws_are_by_cluster_name_or_exact_do_not_depend_on_unit_order(card, metric):
    scoring = scoring_of(card)
    uc = counts_for(scoring)
    moved = reordered(uc, np.random.default_rng(2).permutation(N))
    checked = 0
    for rs in _resamplings(scoring):
        if rs.rule != "clusters" or (rs.metrics and metric not in rs.metrics):
            continue
        if rs is scoring.resampling:
            got, want = engine.interval(scoring, moved, metric, n_resamples=200), engine.interval(
                scoring, uc, metric, n_resamples=200)
        else:
            got, want = engine.extra_interval(scoring, moved, rs, metric), engine.extra_interval(scoring, uc, rs, metric)
        same([got["value"], got["ci_low"], got["ci_high"]], [want["value"], want["ci_low"], want["ci_high"]])
        checked += 1
    if scoring.interval == "exact":
        key = f"{metric}_zero_shot"
        got, want = (engine.evaluate(scoring, x, "zero_shot")[key] for x in (moved, uc))
        assert got == want
        checked += 1
    assert checked


@pytest.mark.parametrize("card,metric", CASES)
def test_renaming_the_groups_a_resampling_draws_by(card, metric):
    scoring = scoring_of(card)
    uc = counts_for(scoring)
    in_order = renamed(uc, lambda g: "stratum " + g)          # "g0" < "g1" ... keeps its order
    for rs in _resamplings(scoring):
        if not rs.by:
            continue
        w = engine.weights(uc, rs, n_resamples=200)
        np.testing.assert_array_equal(engine.weights(in_order, rs, n_resamples=200), w)
        lo, hi = engine.bootstrap.percentile_ci(engine.resampled(scoring, in_order, metric, w))
        same([lo, hi], engine.bootstrap.percentile_ci(engine.resampled(scoring, uc, metric, w)))
        if rs.rule == "stratified":    # any renaming, order reversed: each stratum keeps its size in every resample
            flipped = renamed(uc, lambda g: {"g0": "z", "g1": "a"}[g], only=rs.by)
            wf = engine.weights(flipped, rs, n_resamples=200)
            for g in set(uc.groups[rs.by]):
                members = np.array(uc.groups[rs.by]) == g
                assert (wf[:, members].sum(1) == members.sum()).all()


@pytest.mark.parametrize("card,metric", CASES)
def test_a_duplicated_unit_is_the_unit_weighted_twice(card, metric):
    scoring = scoring_of(card)
    uc = counts_for(scoring)
    u = 5
    dup = UnitCounts([*uc.ids, "u5-again"], uc.columns, np.vstack([uc.counts, uc.counts[u:u + 1]]),
                     {k: [*v, v[u]] for k, v in uc.groups.items()},
                     None if uc.scores is None else np.r_[uc.scores, uc.scores[u]], dict(uc.undefined))
    w_dup = np.random.default_rng(3).integers(0, 4, size=(40, N + 1))
    w_dup[0] = 1                                        # the first: every unit once, the duplicate too
    merged = w_dup[:, :N].copy()
    merged[:, u] += w_dup[:, N]
    same(engine.resampled(scoring, dup, metric, w_dup), engine.resampled(scoring, uc, metric, merged))
    same(engine.point(scoring, dup, metric), engine.resampled(scoring, uc, metric, merged[:1])[0])
