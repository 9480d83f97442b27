"""atlaslib.analysis.robustness on hand-built cells: the paired numbers equal a direct computation (sklearn's
macro F1 on each of the card's stratified resamples, McNemar's exact p from the binomial sum, Holm by hand)."""
from __future__ import annotations

import copy
from math import comb

import numpy as np
from sklearn.metrics import f1_score

from atlaslib.analysis import robustness
from atlaslib.analysis.perturbed import worst
from atlaslib.metrics import bootstrap
from atlaslib.variants import variant_cell

from .cells import negex_cell

RNG = np.random.default_rng(3)
N = 60
GOLD = ["negated" if g else "affirmed" for g in RNG.random(N) < 0.35]
PRED = [g if keep else ("affirmed" if g == "negated" else "negated") for g, keep in zip(GOLD, RNG.random(N) < 0.8)]


def base_cell():
    c = negex_cell("m", GOLD, PRED)
    c["run_key"] = "k1"
    return c


def perturbed(base, name, ids, flip_every):
    """A variant cell over ``ids``: the default run's predictions with every ``flip_every``-th one flipped."""
    recs = []
    for k, r in enumerate(r for r in base["predictions"] if r["item_id"] in ids):
        r = dict(r)
        if k % flip_every == 0:
            r["pred"] = "affirmed" if r["pred"] == "negated" else "negated"
        recs.append(r)
    spec = {"kind": "perturbation", "name": name, "version": "v1", "key": f"{name}-v1"}
    return variant_cell(base, spec, metrics={}, predictions=recs, inputs_digest="x", n_items=N,
                        n_applicable=len(ids))


def macro_f1(gold, pred):
    return f1_score(gold, pred, average="macro", labels=["affirmed", "negated"], zero_division=0)


def mcnemar_p(b, c):
    n, k = b + c, min(b, c)
    return 1.0 if n == 0 else min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2 ** n)


def test_paired_numbers_equal_a_direct_computation():
    base = base_cell()
    ids = {f"i{i:02d}" for i in range(0, N, 3)} | {f"i{i:02d}" for i in range(1, 20)}
    v1, v2 = perturbed(base, "alpha", ids, 3), perturbed(base, "beta", {f"i{i:02d}" for i in range(N)}, 7)
    stale = copy.deepcopy(v2)
    stale["parent_run_key"] = "an older run"
    table = robustness([base, v1, v2, stale], n_resamples=200)
    assert list(table["variant"]) == ["alpha", "beta"]  # the stale variant is left out

    p_direct = []
    for _, row in table.iterrows():
        v = v1 if row["variant"] == "alpha" else v2
        order = [r["item_id"] for r in v["predictions"]]
        by_id = {r["item_id"]: r for r in base["predictions"]}
        gold = np.array([by_id[i]["gold"] for i in order])
        pa = np.array([by_id[i]["pred"] for i in order])
        pb = np.array([r["pred"] for r in v["predictions"]])
        assert row["n_read"] == len(order) and row["n_items"] == N
        assert np.isclose(row["default"], macro_f1(gold, pa)) and np.isclose(row["variant_value"], macro_f1(gold, pb))
        assert np.isclose(row["difference"], macro_f1(gold, pb) - macro_f1(gold, pa))
        idx = bootstrap.stratified_indices((gold == "negated").astype(int), 200, 7)  # the card's resamples
        d = [macro_f1(gold[i], pb[i]) - macro_f1(gold[i], pa[i]) for i in idx]
        assert np.allclose([row["ci_low"], row["ci_high"]], np.quantile(d, [0.025, 0.975]))
        b = int(np.sum((pa == gold) & (pb != gold)))
        c = int(np.sum((pa != gold) & (pb == gold)))
        assert (row["b"], row["c"]) == (b, c) and b + c > 0
        assert np.isclose(row["p_mcnemar"], mcnemar_p(b, c))
        p_direct.append(mcnemar_p(b, c))
    lo, hi = sorted(p_direct)
    holm = {lo: min(1, 2 * lo), hi: min(1, max(2 * lo, hi))}
    assert np.allclose(table["p_holm"], [holm[p] for p in p_direct])

    w = worst(table)
    assert len(w) == 1 and w["difference"].iloc[0] == table["difference"].min()


def test_a_runs_model_calls_add_its_variant_runs_and_leave_out_an_older_runs(tmp_path):
    """The timing table's calls of a run: its cell's, plus each variant cell it wrote (timed blocks count the
    store's calls); a variant left from an older run (another parent run key) and a damaged file add nothing."""
    from atlaslib import results, runner
    from atlaslib.models import calls
    from atlaslib.variants import write_variant_cells

    base = base_cell()
    with results.Timer() as t:
        calls.TALLY.made += 2
        calls.TALLY.served += 5
    base["timing"] = t.timing
    assert base["timing"]["model_calls"] == {"made": 2, "served": 5, "corrupt": [], "write_errors": 0}
    ids = [r["item_id"] for r in base["predictions"]][:10]
    mine, older = perturbed(base, "a", ids, 3), perturbed(base, "b", ids, 4)
    with results.Timer() as t:
        calls.TALLY.made += 3
        calls.TALLY.served += 1
    mine["timing"] = t.timing
    older["parent_run_key"], older["timing"] = "k0", {"model_calls": {"made": 100, "served": 0}}
    res_out = tmp_path / "m" / "zero_shot.json"
    write_variant_cells([mine, older], res_out, "zero_shot")
    (tmp_path / "m" / "variants" / "zero_shot" / "c-v1.json").write_text("{not json")
    assert runner.run_model_calls(base, res_out, "zero_shot") == {"made": 5, "served": 6, "corrupt": [],
                                                                  "write_errors": 0}
