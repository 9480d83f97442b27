"""atlaslib.analysis.robustness on hand-built cells: the paired numbers equal a direct computation (sklearn's
macro F1 on each of the card's stratified resamples, McNemar's exact p from the binomial sum, Holm by hand)."""
from __future__ import annotations

import copy
import json
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

    # the declared rule (perturbed.WORST_RULE): the largest loss among the rows Holm-adjusted exact McNemar shows
    # worse (b > c). Here alpha drops most (33 items, b 9 / c 2, Holm p 0.065: not shown worse), beta is the one
    # that rejects (60 items, b 9 / c 0, Holm p 0.0078), so beta is the worst, not the lowest point difference.
    p_alpha, p_beta = p_direct                         # the table's rows: alpha, beta
    assert holm[p_alpha] >= 0.05 > holm[p_beta]
    w = worst(table)
    shown = table[table["significant"] & (table["b"] > table["c"]) & (table["difference"] < 0)]
    assert list(shown["variant"]) == ["beta"] and table["difference"].idxmin() == 0
    assert len(w) == 1 and w["variant"].iloc[0] == "beta" and w["difference"].iloc[0] == shown["difference"].min()


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


def _seeded(cell, preds_by_seed):
    """``cell`` as a row over training seeds: each seed's predictions in ``extra.seed_runs``, its own records the
    first seed's."""
    c = copy.deepcopy(cell)
    for r, p in zip(c["predictions"], preds_by_seed[0]):
        r["pred"] = p
    c["protocol"] = c["spec"]["protocol"] = "finetune"
    c["extra"] = {"seed_runs": [{"seed": 100 + k, "predictions": [{"item_id": r["item_id"], "pred": p}
                                                                 for r, p in zip(c["predictions"], preds)]}
                                for k, preds in enumerate(preds_by_seed)]}
    return c


def _flipped(preds, every, offset=0):
    return [("affirmed" if p == "negated" else "negated") if (k + offset) % every == 0 else p
            for k, p in enumerate(preds)]


def test_a_seeded_row_is_compared_over_its_seeds_when_its_variant_ran_every_seed():
    """A fine-tuned row over three seeds whose variant ran every seed's model: the default and perturbed values are
    the means of the seeds' macro F1 on the items read (sklearn), McNemar's b and c count an item right when more
    than half of the seeds' models are (hand count), ``n_seeds`` says 3; a variant cell of the first seed's model
    alone (written before variants ran every seed) is compared with that seed's model, ``n_seeds`` 1."""
    seeds = [PRED, _flipped(PRED, 5), _flipped(PRED, 4, 1)]
    base = _seeded(base_cell(), seeds)
    ids = [f"i{i:02d}" for i in range(0, N, 2)]
    read = set(ids)
    pert = [_flipped([p for r, p in zip(base["predictions"], s) if r["item_id"] in read], 3, k)
            for k, s in enumerate(seeds)]
    recs = [dict(r, pred=p) for r, p in zip([r for r in base["predictions"] if r["item_id"] in read], pert[0])]
    spec = {"kind": "perturbation", "name": "gamma", "version": "v1", "key": "gamma-v1"}
    v = variant_cell(base, spec, metrics={}, predictions=recs, inputs_digest="x", n_items=N, n_applicable=len(ids))
    v["extra"] = {"seed_runs": [{"seed": 100 + k, "predictions": [{"item_id": i, "pred": p} for i, p in zip(ids, s)]}
                                for k, s in enumerate(pert)]}
    row = robustness([base, v], n_resamples=200).iloc[0]
    pos = [int(i[1:]) for i in ids]
    gold = np.array(GOLD)[pos]
    before = [np.array(s)[pos] for s in seeds]
    after = [np.array(s) for s in pert]
    assert row["n_seeds"] == 3 and row["n_read"] == len(ids)
    assert np.isclose(row["default"], np.mean([macro_f1(gold, s) for s in before]))
    assert np.isclose(row["variant_value"], np.mean([macro_f1(gold, s) for s in after]))
    right_before = np.sum([s == gold for s in before], axis=0) >= 2          # more than half of three
    right_after = np.sum([s == gold for s in after], axis=0) >= 2
    b, c = int(np.sum(right_before & ~right_after)), int(np.sum(~right_before & right_after))
    assert (row["b"], row["c"]) == (b, c) and b + c > 0
    first = (before[0] == gold), (after[0] == gold)
    assert (b, c) != (int(np.sum(first[0] & ~first[1])), int(np.sum(~first[0] & first[1])))  # not seed 1's counts
    assert np.isclose(row["p_mcnemar"], mcnemar_p(b, c))

    old = copy.deepcopy(v)
    old["extra"] = {}
    row1 = robustness([base, old], n_resamples=200).iloc[0]
    assert row1["n_seeds"] == 1 and np.isclose(row1["default"], macro_f1(gold, before[0]))
    assert (row1["b"], row1["c"]) == (int(np.sum(first[0] & ~first[1])), int(np.sum(~first[0] & first[1])))


def test_prompt_spread_reads_variants_beside_their_run_and_compares_one_protocol_family(tmp_path):
    """The spread across models is over the version's ok runs of the prompt variants' protocol (two zero-shot runs
    here, not the probe), on the items the variants read, with the variant cells read from beside their run (as the
    page passes only default runs); a variant answering one label for every item is collapsed."""
    from atlaslib import results
    from atlaslib.analysis.perturbed import collapsed, prompt_spread
    from atlaslib.variants import write_variant_cells

    a = base_cell()
    b = negex_cell("other", GOLD, _flipped(PRED, 6))
    c = negex_cell("probe-run", GOLD, _flipped(PRED, 2), score=[0.5] * N)
    ids = [f"i{i:02d}" for i in range(0, 30)]
    spec = {"kind": "prompt", "name": "plain", "version": "v1", "key": "plain-v1"}
    recs = [dict(r, pred="affirmed") for r in a["predictions"] if r["item_id"] in ids]
    v = variant_cell(a, spec, metrics={}, predictions=recs, inputs_digest="x", n_items=N)
    out = tmp_path / "m" / "zero_shot.json"
    out.parent.mkdir(parents=True)
    out.write_text(json.dumps(a))
    write_variant_cells([v], out, "zero_shot")
    a = results.read_cell(out)
    sp = prompt_spread([a, b, c]).iloc[0]
    gold = np.array(GOLD[:30])
    assert sp["models_protocol"] == "zero_shot" and sp["n_models"] == 2 and sp["n_items"] == 30
    by_hand = sorted([macro_f1(gold, np.array(PRED[:30])), macro_f1(gold, np.array(_flipped(PRED, 6)[:30]))])
    assert np.isclose(sp["models_range"], by_hand[1] - by_hand[0])
    assert collapsed(v) == "affirmed" and collapsed(a) is None


def test_a_seeded_rows_perturbation_interval_pairs_each_seed_with_itself():
    """A row over three seeds read two ways: the difference's interval draws the seeds once for both runs and
    compares each seed's perturbed run with the same seed's default run on the same resampled items. By hand (an
    index loop: the card's stratified resamples, three seeds drawn with replacement per resample from the default
    run's seed stream, sklearn's macro F1 per seed): ``D_b`` = mean over the drawn seeds of (perturbed − default).
    A perturbation under which no seed's model changes an answer gives [0, 0]; drawing the two runs' seeds apart
    gave it an interval around a difference no seed shows."""
    seeds = [PRED, _flipped(PRED, 5), _flipped(PRED, 4, 1)]
    base = _seeded(base_cell(), seeds)
    ids = [f"i{i:02d}" for i in range(0, N, 2)]
    pos = [int(i[1:]) for i in ids]
    gold = np.array(GOLD)[pos]
    before = [np.array(s)[pos] for s in seeds]

    def variant(after, name):
        spec = {"kind": "perturbation", "name": name, "version": "v1", "key": f"{name}-v1"}
        recs = [dict(r, pred=p) for r, p in zip([r for r in base["predictions"] if r["item_id"] in set(ids)],
                                                after[0])]
        v = variant_cell(base, spec, metrics={}, predictions=recs, inputs_digest="x", n_items=N,
                         n_applicable=len(ids))
        v["extra"] = {"seed_runs": [{"seed": 100 + k, "predictions": [{"item_id": i, "pred": p}
                                                                      for i, p in zip(ids, s)]}
                                    for k, s in enumerate(after)]}
        return v

    same = [list(s) for s in before]                                  # no seed's model changes an answer
    moved = [_flipped(list(s), 3, k) for k, s in enumerate(before)]   # each seed's model changes some
    table = robustness([base, variant(same, "same"), variant(moved, "moved")], n_resamples=200)
    rows = {r["variant"]: r for _, r in table.iterrows()}
    assert rows["same"]["n_seeds"] == 3
    assert (rows["same"]["difference"], rows["same"]["ci_low"], rows["same"]["ci_high"]) == (0.0, 0.0, 0.0)

    idx = bootstrap.stratified_indices((gold == "negated").astype(int), 200, 7)      # the card's resamples
    drawn = np.random.default_rng(bootstrap.DEFAULT_SEED + 1).integers(0, 3, size=(200, 3))   # seeds, per resample
    after = [np.array(s) for s in moved]
    d = [np.mean([macro_f1(gold[i], after[s][i]) - macro_f1(gold[i], before[s][i]) for s in drawn[b]])
         for b, i in enumerate(idx)]
    r = rows["moved"]
    assert np.isclose(r["difference"], np.mean([macro_f1(gold, a) - macro_f1(gold, b)
                                                for a, b in zip(after, before)]))
    assert np.allclose([r["ci_low"], r["ci_high"]], np.quantile(d, [0.025, 0.975]))
    assert set(table["interval"]) == {"seed-paired"}        # the table says which interval it is
    from atlaslib.pages.robustness import run_frame            # and a run page's column names it
    frame = run_frame([base, variant(same, "same")])
    assert frame.loc["same (perturbation)", "difference [95 %, seed-paired]"].startswith("+0.000")
    # a row of one model keeps the plain paired interval
    assert set(robustness([base_cell(), perturbed(base_cell(), "one", set(ids), 3)], 200)["interval"]) == {"paired"}
