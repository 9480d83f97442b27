"""Training-seed variation: a row that is the mean over training seeds, with an interval over seeds and items.

A fine-tuned row is ``S`` trained models (one per declared training seed) scored on the same test units. For
each seed ``s`` the card gives per-unit counts ``C[s]`` (units × k integers: confusion counts, span counts, …)
and a metric is a vectorised formula ``f`` of summed counts. The card's own item resampling (its unit, its
stratification, its seed) gives multiplicities ``M[b, u]`` (how often unit ``u`` is drawn in resample ``b``).

- per-seed value ``v_s = f(Σ_u C[s, u])``; the row's value is their mean ``v̄ = (1/S) Σ_s v_s``;
- per-seed item resamples ``V[b, s] = f(M[b] @ C[s])`` (the single-seed item interval of seed ``s`` is the
  percentile interval of ``V[:, s]``);
- **two-level bootstrap**: resample ``b`` draws ``S`` seeds with replacement (``W[b, s]`` = how often seed
  ``s`` is drawn, ``Σ_s W[b, s] = S``) *and* the items by the card's rule (``M[b]``, the same draw for every
  seed: the seeds are scored on the same test set), and takes ``T_b = (1/S) Σ_s W[b, s]·V[b, s]``; the
  interval is the 2.5th–97.5th percentile of ``T_b`` (NaN resamples left out);
- **variance split**: the seed-only variance ``Var_b((1/S) Σ_s W[b, s]·v_s)`` (items fixed) and the
  item-only variance ``Var_b((1/S) Σ_s V[b, s])`` (all seeds, items resampled); the share due to seeds is
  ``σ²_seed / (σ²_seed + σ²_item)`` and the share due to items its complement.

With every seed giving the same counts the two-level interval is the item interval (``V[b, s]`` does not
depend on ``s``); with counts that no item resample changes (``V[b, s] = v_s``) it is the percentile
interval of the seed bootstrap of the mean. Both are tested on hand-built cases.

A **paired difference** of two rows A and B on the same units uses the same ``M[b]`` for both and
independent seed draws for each (a row with one model is ``S = 1``): ``D_b = T^A_b − T^B_b``. One row's seeds
under two conditions (a perturbed run against its default run, every seed's model read both ways) are **seed
paired**: one seed draw ``W[b]`` for both, each seed against itself, ``D_b = (1/S) Σ_s W[b, s]·(V^A[b, s] −
V^B[b, s])`` (:func:`paired_difference` with ``same_seeds``).

:func:`almost_stochastic_order` wraps ``deepsig.aso`` (Dror et al. 2019; Ulmer et al. 2022, *deep-significance*)
on the per-seed values of two seeded rows: ``ε_min`` below the stated threshold (0.2, deepsig's
recommendation) means A is almost stochastically better than B.

Nothing here knows a card: the counts, the formula and the item multiplicities come from the card.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED, percentile_ci

#: ε_min below this: "A is almost stochastically better than B" (deepsig's README / Ulmer et al. 2022 recommend
#: 0.2 as a stricter threshold than 0.5)
ASO_THRESHOLD = 0.2


class SeedError(ValueError):
    """Per-seed data that do not fit together (shapes, seed counts)."""


def seed_multiplicities(n_seeds: int, n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> np.ndarray:
    """``(B, S)`` integers: ``W[b, s]`` = how often seed ``s`` is drawn in resample ``b`` (``S`` draws with
    replacement from ``numpy.random.default_rng(seed)``; each row sums to ``S``)."""
    if n_seeds < 1:
        raise SeedError(f"seed_multiplicities: expected at least one seed, got {n_seeds}")
    draws = np.random.default_rng(seed).integers(0, n_seeds, size=(n_resamples, n_seeds))
    out = np.zeros((n_resamples, n_seeds), dtype=np.int64)
    np.add.at(out, (np.repeat(np.arange(n_resamples), n_seeds), draws.ravel()), 1)
    return out


def _weighted_mean(w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Row-wise ``Σ_s w·v / Σ_s w`` (NaN where a drawn seed's value is NaN)."""
    w = np.asarray(w, dtype=float)
    return (w * v).sum(1) / w.sum(1)


def two_level(points: Sequence[float], values: np.ndarray, *, seeds: Sequence | None = None,
              seed_mult: np.ndarray | None = None, seed: int = DEFAULT_SEED, level: float = 0.95) -> dict:
    """The seeded row of one metric (see the module docstring) from per-seed points ``(S,)`` and per-seed
    item resamples ``V (B, S)``; ``seed_mult`` (``(B, S)``) defaults to :func:`seed_multiplicities` with
    ``seed``.

    Returns ``{value, ci_low, ci_high, n_seeds, seed_min, seed_max, per_seed: [{seed, value, ci_low,
    ci_high}], var_seeds, var_items, share_seeds, share_items, resampled}``."""
    p = np.asarray(points, dtype=float).reshape(-1)
    v = np.asarray(values, dtype=float)
    if v.ndim == 1:
        v = v[:, None]
    s = len(p)
    if v.shape[1] != s:
        raise SeedError(f"two_level: {s} per-seed values but resamples for {v.shape[1]} seeds")
    w = seed_multiplicities(s, v.shape[0], seed) if seed_mult is None else np.asarray(seed_mult)
    if w.shape != v.shape:
        raise SeedError(f"two_level: seed multiplicities {w.shape}, resamples {v.shape}; expected equal shapes")
    both = _weighted_mean(w, v)
    lo, hi = percentile_ci(both, level)
    seed_only = _weighted_mean(w, np.broadcast_to(p, v.shape))
    item_only = v.mean(1)
    vs, vi = _var(seed_only), _var(item_only)
    tot = vs + vi
    names = list(seeds) if seeds is not None else list(range(s))
    per_seed = []
    for k in range(s):
        a, b = percentile_ci(v[:, k], level)
        per_seed.append({"seed": names[k], "value": _num(p[k]), "ci_low": _num(a), "ci_high": _num(b)})
    finite = p[np.isfinite(p)]
    return {"value": _num(np.mean(p)) if finite.size == s else None, "ci_low": _num(lo), "ci_high": _num(hi),
            "n_seeds": s, "seed_min": _num(finite.min()) if finite.size else None,
            "seed_max": _num(finite.max()) if finite.size else None, "per_seed": per_seed,
            "var_seeds": _num(vs), "var_items": _num(vi),
            "share_seeds": _num(vs / tot) if tot > 0 else None, "share_items": _num(vi / tot) if tot > 0 else None,
            "resampled": both}


INTERVAL = ("two-level bootstrap: seeds drawn with replacement and test units by the card's declared "
            "resampling, mean over the drawn seeds")


def seeded_metrics(seed_list: Sequence[int], per_seed_metrics: Sequence[dict], per_seed_resampled: Sequence[dict],
                   *, seed: int = DEFAULT_SEED, level: float = 0.95) -> dict:
    """A seeded row's metrics from each seed's own: ``per_seed_metrics[s]`` is seed ``s``'s cell metrics
    (``{name: {value, ci_low, ci_high[, reason]}}``, the card's declared item intervals) and
    ``per_seed_resampled[s]`` its resampled values per metric name (the card's item resamples, the same draw for
    every seed). Each metric becomes ``{value: mean over seeds, ci_low, ci_high: two-level interval, seeds:
    {n_seeds, seed_min, seed_max, share_seeds, share_items, var_seeds, var_items, interval, single_seed:
    the first seed's declared entry, per_seed: [{seed, value, ci_low, ci_high}]}}``. A metric undefined (null)
    for some seed is null for the row, with that seed's reason."""
    if not (len(seed_list) == len(per_seed_metrics) == len(per_seed_resampled)) or not seed_list:
        raise SeedError(f"seeded_metrics: {len(seed_list)} seeds, {len(per_seed_metrics)} metric sets and "
                        f"{len(per_seed_resampled)} resample sets; expected as many, at least one")
    out = {}
    for name, first in per_seed_metrics[0].items():
        entries = [m[name] for m in per_seed_metrics]
        missing = [(sd, e) for sd, e in zip(seed_list, entries) if e.get("value") is None]
        if missing:
            sd, e = missing[0]
            reason = e.get("reason") or "undefined"
            out[name] = {"value": None, "ci_low": None, "ci_high": None,
                         "reason": reason if len(missing) == len(entries) else f"{reason} (seed {sd})"}
            continue
        if any(name not in r for r in per_seed_resampled):
            raise SeedError(f"seeded_metrics: no resampled values of {name!r} for every seed")
        values = np.stack([np.asarray(r[name], dtype=float) for r in per_seed_resampled], axis=1)
        tl = two_level([e["value"] for e in entries], values, seeds=seed_list, seed=seed, level=level)
        out[name] = {"value": tl["value"], "ci_low": tl["ci_low"], "ci_high": tl["ci_high"],
                     "seeds": {k: tl[k] for k in ("n_seeds", "seed_min", "seed_max", "share_seeds", "share_items",
                                                  "var_seeds", "var_items")}
                     | {"interval": INTERVAL, "single_seed": {"seed": seed_list[0], **dict(first)},
                        "per_seed": [{"seed": sd, **{k: e.get(k) for k in ("value", "ci_low", "ci_high")}}
                                     for sd, e in zip(seed_list, entries)]}}
    return out


def score_seeds(module, records_by_seed: Sequence[list], seed_list: Sequence[int], protocol: str, *,
                cell: dict | None = None, reasons: dict | None = None, seed: int | None = None,
                n_resamples: int | None = None) -> tuple[dict, list[dict]]:
    """A seeded row through the one scoring engine: each seed's prediction records become per-unit counts by
    the card's own ``module.counts`` and are scored under its declared ``module.SCORING`` (the same item
    resamples for every seed); returns ``(row metrics, per seed {seed, metrics, unit_counts})`` with the row's
    metrics from :func:`seeded_metrics`. ``module`` is a card's package (its ``CARD``, ``SCORING`` and
    ``counts``); nothing here knows which card."""
    from . import engine

    ucs = [module.counts({**(cell or {}), "predictions": list(recs), "card": module.CARD.name, "protocol": protocol})
           for recs in records_by_seed]
    per_m = [engine.evaluate(module.SCORING, uc, protocol, seed=seed, n_resamples=n_resamples, reasons=reasons)
             for uc in ucs]
    per_r = [engine.samples(module.SCORING, uc, protocol, seed=seed, n_resamples=n_resamples) for uc in ucs]
    metrics = seeded_metrics(list(seed_list), per_m, per_r)
    return metrics, [{"seed": s, "metrics": m, "unit_counts": uc.to_cell()} for s, m, uc in zip(seed_list, per_m, ucs)]


def seed_mean(seed_list: Sequence, points: Sequence[float], values, *, level: float = 0.95) -> dict:
    """A figure beside the leaderboard (a slice, a calibration statistic) of a seeded row, by the leaderboard's
    own rule (:func:`seeded_metrics`): the mean of the per-seed ``points`` with the two-level interval of
    :func:`two_level` over the per-seed item resamples ``values`` (``(B, S)``: the same item draw for every seed,
    by the card's resampling) and the seeds drawn as :func:`seeded_metrics` draws them (seed
    :data:`~atlaslib.metrics.bootstrap.DEFAULT_SEED`). Returns ``{value, ci_low, ci_high, n_seeds, per_seed:
    [{seed, value, ci_low, ci_high}]}`` (``value`` None when a seed's point is undefined)."""
    tl = two_level(points, values, seeds=list(seed_list), seed=DEFAULT_SEED, level=level)
    return {k: tl[k] for k in ("value", "ci_low", "ci_high", "n_seeds", "per_seed")}


def per_seed_text(per_seed: Sequence[dict]) -> str:
    """``seed: value [lo, hi]; …`` of :func:`seed_mean`'s ``per_seed`` (three decimals; "n/a" for an undefined
    value, the interval left out where it has none): each seed's figure, for a download beside the mean."""
    def one(p):
        v = p.get("value")
        if v is None:
            return f"{p['seed']}: n/a"
        lo, hi = p.get("ci_low"), p.get("ci_high")
        return f"{p['seed']}: {v:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else "")
    return "; ".join(one(p) for p in per_seed)


def extra_interval(scoring, counts: Sequence, rs, name: str, *, seed: int = DEFAULT_SEED, level: float = 0.95) -> dict:
    """A seeded row's interval under a resampling beside the declared one (``rs``, e.g. whole sentences): each
    seed's per-unit counts (``counts``: ``[(seed, UnitCounts)]``, the same units for every seed) resampled by
    ``rs`` with the same draws, the two-level interval over seeds and those draws (:func:`two_level`, seeds drawn
    with ``seed``) around the mean over seeds. Returns ``{value, ci_low, ci_high, n_seeds[, n_clusters]}`` (the
    units ``rs.among`` keeps, when it names a sub-population), as
    :func:`atlaslib.metrics.engine.extra_interval` does for one model."""
    from . import engine

    subs = [(s, uc.take(rs.among(uc.cols())) if rs.among is not None else uc) for s, uc in counts]
    if not subs:
        raise SeedError("extra_interval: no seed's counts")
    first = subs[0][1]
    if any(list(map(str, u.ids)) != list(map(str, first.ids)) for _, u in subs):
        raise SeedError(f"extra_interval: the seeds of {name!r} were not scored on the same units")
    w = engine.weights(first, rs, seed=seed)
    points = [engine.point(scoring, u, name) for _, u in subs]
    values = np.stack([engine.resampled(scoring, u, name, w) for _, u in subs], axis=1)
    tl = two_level(points, values, seeds=[s for s, _ in subs], seed=seed, level=level)
    out = {"value": tl["value"], "ci_low": tl["ci_low"], "ci_high": tl["ci_high"], "n_seeds": tl["n_seeds"]}
    if rs.rule == "clusters":
        out["n_clusters"] = int(len(set(map(str, first.groups[rs.by]))))
    return out


def paired_difference(values_a: np.ndarray, values_b: np.ndarray, *, seed: int = DEFAULT_SEED,
                      level: float = 0.95, same_seeds: bool = False) -> dict:
    """Two-level paired difference A − B on the same item resamples: ``V_a (B, S_a)``, ``V_b (B, S_b)`` (``S = 1``
    for a row with one model). Two different rows: the seeds of A and of B drawn independently (seeds ``seed`` and
    ``seed + 1``). ``same_seeds``: one row's seeds under two conditions (a variant run and its default run: seed
    ``s`` of A is seed ``s``'s model of B, read differently), **one** seed draw ``W`` (``seed``) for both, so
    ``D_b = (1/S) Σ_s W[b, s]·(V_a[b, s] − V_b[b, s])``: each seed is compared with itself, and a variant under
    which no seed's model changes an answer gives ``D_b = 0`` on every resample (drawing that row's seeds apart
    would add the spread between seeds to a difference none of them shows). Returns ``{ci_low, ci_high, sd,
    resampled}``."""
    va, vb = np.asarray(values_a, dtype=float), np.asarray(values_b, dtype=float)
    va, vb = (va[:, None] if va.ndim == 1 else va), (vb[:, None] if vb.ndim == 1 else vb)
    if va.shape[0] != vb.shape[0]:
        raise SeedError(f"paired_difference: {va.shape[0]} and {vb.shape[0]} resamples; expected the same")
    if same_seeds and va.shape != vb.shape:
        raise SeedError(f"paired_difference: {va.shape[1]} and {vb.shape[1]} seeds; same_seeds compares each seed "
                        "with itself")
    if same_seeds:
        d = _weighted_mean(seed_multiplicities(va.shape[1], va.shape[0], seed), va - vb)
    else:
        d = (_weighted_mean(seed_multiplicities(va.shape[1], va.shape[0], seed), va)
             - _weighted_mean(seed_multiplicities(vb.shape[1], vb.shape[0], seed + 1), vb))
    lo, hi = percentile_ci(d, level)
    return {"ci_low": _num(lo), "ci_high": _num(hi), "sd": _num(np.nanstd(d)), "resampled": d}


def almost_stochastic_order(scores_a: Sequence[float], scores_b: Sequence[float], *, seed: int = DEFAULT_SEED,
                            confidence_level: float = 0.95, num_comparisons: int = 1,
                            num_bootstrap_iterations: int = 1000) -> dict:
    """``deepsig.aso`` on the per-seed scores of rows A and B (higher is better): ``{eps_min, threshold,
    a_better}``; ``a_better`` is ``eps_min < ASO_THRESHOLD``."""
    from deepsig import aso

    a, b = [float(x) for x in scores_a], [float(x) for x in scores_b]
    if len(a) < 2 or len(b) < 2:
        raise SeedError(f"almost_stochastic_order: needs at least two scores per row, got {len(a)} and {len(b)}")
    eps = float(aso(a, b, confidence_level=confidence_level, num_comparisons=num_comparisons, seed=seed,
                    num_bootstrap_iterations=num_bootstrap_iterations, show_progress=False))
    return {"eps_min": eps, "threshold": ASO_THRESHOLD, "a_better": bool(eps < ASO_THRESHOLD),
            "confidence_level": confidence_level, "n_a": len(a), "n_b": len(b),
            "num_bootstrap_iterations": num_bootstrap_iterations}


def _var(x) -> float:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(np.var(x, ddof=1)) if x.size > 1 else 0.0


def _num(x):
    x = float(x)
    return x if np.isfinite(x) else None
