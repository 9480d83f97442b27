"""What the course's lessons compute, one small tested function each (the lessons in ``book/course/`` hold the
narrative, short calls and figures; :mod:`atlaslib.pages.course` executes them when the book is built).

Intervals, comparisons and clusters come from :mod:`atlaslib.metrics` (``bootstrap``, ``intervals``,
``compare``); this module adds what a lesson shows on the way there: the bootstrap written as a loop, the
"ideal" percentile bootstrap of a proportion and its exact coverage, nested subsets of a test set, the
leakage measurement on the NegEx kit, and the gate tables of the NLI challenge.
"""
from __future__ import annotations

import hashlib
import inspect
import math
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy.stats import binom

from .metrics import bootstrap
from .metrics.intervals import clopper_pearson

SEED = bootstrap.DEFAULT_SEED
LEVEL = 0.95


# -- reading result cells -------------------------------------------------------------------------------------

def load_cell(results_dir, card: str, version: str, model: str, protocol: str) -> dict:
    """The result cell of one run; a clear error naming the file and the command that makes it."""
    from .results import cell_path, read_cell

    path = cell_path(results_dir, card, version, model, protocol)
    if not Path(path).is_file():
        raise FileNotFoundError(f"no result cell {path}; make it with `atlas run --card {card} --model {model} "
                                f"--protocol {protocol} --version {version}`")
    cell = read_cell(path)
    if cell["status"] != "ok":
        raise ValueError(f"{path}: the run did not happen ({cell.get('reason')}); a lesson needs an ok cell")
    return cell


def predictions(cell: dict) -> pd.DataFrame:
    """The cell's per-item predictions as a frame, with ``correct`` = (pred == gold)."""
    frame = pd.DataFrame(cell["predictions"])
    frame["correct"] = frame["pred"] == frame["gold"]
    return frame


def show_source(fn: Callable):
    """A function's source as Markdown code, so a lesson shows the code it calls."""
    from IPython.display import Markdown

    return Markdown(f"```python\n{inspect.getsource(fn).rstrip()}\n```")


# -- lesson: why a test set needs an interval -----------------------------------------------------------------

def bootstrap_by_hand(values: Sequence[float], n_resamples: int = 1000, seed: int = SEED,
                      level: float = LEVEL) -> dict:
    """The percentile bootstrap of a mean, written as a loop: draw ``n`` items with replacement,
    ``n_resamples`` times, take the mean of each resample; the interval is the (1−level)/2 and (1+level)/2
    quantiles of those means. Returns ``{value, ci_low, ci_high, resamples}``."""
    x = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = []
    for _ in range(n_resamples):
        drawn = rng.integers(0, len(x), size=len(x))   # n item positions, with replacement
        means.append(x[drawn].mean())
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return {"value": float(x.mean()), "ci_low": float(lo), "ci_high": float(hi), "resamples": np.array(means)}


def library_bootstrap(values: Sequence[float], n_resamples: int = 1000, seed: int = SEED,
                      level: float = LEVEL) -> dict:
    """The same interval with the atlas's vectorised calls: one ``(n_resamples, n)`` index array
    (:func:`atlaslib.metrics.bootstrap.stratified_indices` with a single stratum, i.e. plain resampling),
    :func:`~atlaslib.metrics.bootstrap.resampled` and :func:`~atlaslib.metrics.bootstrap.percentile_ci`."""
    x = np.asarray(values, dtype=float)
    idx = bootstrap.stratified_indices(np.zeros(len(x), dtype=int), n_resamples, seed)
    means = bootstrap.resampled(lambda v: v.mean(-1), idx, x)
    lo, hi = bootstrap.percentile_ci(means, level)
    return {"value": float(x.mean()), "ci_low": lo, "ci_high": hi, "resamples": means}


def nested_subsets(ids: Sequence[str], sizes: Sequence[int], seed: int = SEED) -> dict[int, list[str]]:
    """Nested test sets: the first ``n`` ids in seed-hash rank order (:func:`atlaslib.splits.rank`), for each
    ``n`` in ``sizes`` — a smaller set is always part of a larger one, as atlas-n100-v1 is part of
    atlas-full-v1."""
    from .splits import rank

    ranked = rank(list(ids), seed)
    if max(sizes) > len(ranked):
        raise ValueError(f"nested_subsets: size {max(sizes)} exceeds the {len(ranked)} items")
    return {int(n): ranked[:n] for n in sizes}


def normal_width(p: float, n: int, level: float = LEVEL) -> float:
    """Width of the normal-approximation interval of a proportion: ``2·z·√(p(1−p)/n)``."""
    from scipy.stats import norm

    return float(2 * norm.ppf(1 - (1 - level) / 2) * math.sqrt(p * (1 - p) / n))


def width_by_n(frame: pd.DataFrame, sizes: Sequence[int], value: str = "correct", seed: int = SEED,
               n_resamples: int = 1000) -> pd.DataFrame:
    """Accuracy and its bootstrap interval on nested subsets of ``frame`` (rows keyed by ``item_id``), one row
    per size, with the normal-approximation width at the full set's accuracy beside it."""
    subsets = nested_subsets(frame["item_id"], sizes, seed)
    by_id = frame.set_index("item_id")[value].astype(float)
    p_all = float(by_id.mean())
    rows = []
    for n, ids in subsets.items():
        r = library_bootstrap(by_id.loc[ids].to_numpy(), n_resamples, seed)
        rows.append({"n": n, "accuracy": r["value"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
                     "width": r["ci_high"] - r["ci_low"], "normal_width": normal_width(p_all, n)})
    return pd.DataFrame(rows)


def cell_interval_widths(cells: Sequence[dict], metric: str) -> pd.DataFrame:
    """Test size and interval width of ``metric`` as each result cell records them."""
    rows = []
    for c in cells:
        e = c["metrics"][metric]
        rows.append({"version": c["version"], "model": c["model"], "n": c["split"]["n_test"],
                     "value": e["value"], "ci_low": e["ci_low"], "ci_high": e["ci_high"],
                     "width": e["ci_high"] - e["ci_low"]})
    return pd.DataFrame(rows)


def plot_width_by_n(table: pd.DataFrame, cells: pd.DataFrame | None = None, title: str = ""):
    """Interval width against test size (log x): the bootstrap widths, the normal curve, and optional
    points from result cells."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    ns = np.linspace(table["n"].min(), table["n"].max(), 100)
    p = float(table["accuracy"].iloc[-1])
    ax.plot(ns, [normal_width(p, int(n)) for n in ns], color="0.6", label="2·1.96·√(p(1−p)/n)")
    ax.plot(table["n"], table["width"], "o-", label="bootstrap, nested subsets")
    if cells is not None and len(cells):
        ax.plot(cells["n"], cells["width"], "s", color="C3", label="result cells (n100, full-v1)")
    ax.set_xscale("log")
    ax.set_xlabel("test items (log scale)")
    ax.set_ylabel("width of the 95 % interval")
    ax.set_title(title)
    ax.legend(frameon=False)
    fig.tight_layout()
    return fig


def plot_cell_widths(table: pd.DataFrame, title: str = ""):
    """Interval width against test size from result cells (one line per model, one point per split version),
    with the 1/√n curve through each model's smallest version."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for k, (model, sub) in enumerate(table.sort_values("n").groupby("model", sort=False)):
        ax.plot(sub["n"], sub["width"], "o-", color=f"C{k}", label=model)
        n0, w0 = float(sub["n"].iloc[0]), float(sub["width"].iloc[0])
        ns = np.linspace(n0, float(sub["n"].max()), 50)
        ax.plot(ns, w0 * np.sqrt(n0 / ns), ":", color=f"C{k}", label=f"{model}: width × √(n₀/n)")
        for _, r in sub.iterrows():
            ax.annotate(r["version"], (r["n"], r["width"]), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("test items (log scale)")
    ax.set_ylabel("width of the 95 % interval")
    ax.set_title(title)
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


# -- lesson: proportions at the edge ---------------------------------------------------------------------------

def ideal_bootstrap_interval(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """The percentile bootstrap interval of a proportion ``k/n`` with infinitely many resamples: a resample's
    count of successes is Binomial(n, k/n), so the interval is that distribution's quantiles over ``n``.
    At ``k = 0`` or ``k = n`` every resample equals the data and the interval has zero width."""
    alpha = (1 - level) / 2
    p = k / n
    return float(binom.ppf(alpha, n, p) / n), float(binom.ppf(1 - alpha, n, p) / n)


def coverage(method: str, p: float, n: int, level: float = LEVEL) -> float:
    """Exact coverage of an interval method for a true proportion ``p`` and ``n`` items:
    ``Σ_k P(K = k) · [lo(k) ≤ p ≤ hi(k)]``, ``K ~ Binomial(n, p)``. ``method``: ``"clopper-pearson"`` or
    ``"bootstrap"`` (:func:`ideal_bootstrap_interval`)."""
    fn = {"clopper-pearson": lambda k: clopper_pearson(k, n, level),
          "bootstrap": lambda k: ideal_bootstrap_interval(k, n, level)}
    if method not in fn:
        raise ValueError(f"coverage: method must be 'clopper-pearson' or 'bootstrap', got {method!r}")
    total = 0.0
    for k in range(n + 1):
        lo, hi = fn[method](k)
        if lo - 1e-12 <= p <= hi + 1e-12:
            total += float(binom.pmf(k, n, p))
    return total


def coverage_curve(n: int, ps: Sequence[float], level: float = LEVEL) -> pd.DataFrame:
    """Coverage of both methods for every true proportion in ``ps`` (one row per p)."""
    return pd.DataFrame([{"p": p, "clopper-pearson": coverage("clopper-pearson", p, n, level),
                          "bootstrap": coverage("bootstrap", p, n, level)} for p in ps])


def smallest_n_all_correct(lower: float, level: float = LEVEL) -> int:
    """Smallest ``n`` for which ``n`` out of ``n`` right gives a Clopper–Pearson lower bound ≥ ``lower``:
    the bound is ``((1−level)/2)^(1/n)``, so ``n = ⌈ln((1−level)/2) / ln(lower)⌉``."""
    if not 0 < lower < 1:
        raise ValueError(f"smallest_n_all_correct: lower must be strictly between 0 and 1, got {lower}")
    return int(math.ceil(math.log((1 - level) / 2) / math.log(lower)))


def edge_rows(cell: dict, group: str = "pattern") -> pd.DataFrame:
    """Per ``group`` (e.g. NLI pattern): right/total, accuracy, the ideal percentile bootstrap interval and
    the Clopper–Pearson interval — the rows where they part are the ones at 0 or 1."""
    f = predictions(cell)
    rows = []
    for g, sub in f.groupby(group, sort=False):
        k, n = int(sub["correct"].sum()), len(sub)
        b, cp = ideal_bootstrap_interval(k, n), clopper_pearson(k, n)
        rows.append({group: g, "right": k, "cases": n, "accuracy": k / n, "bootstrap_low": b[0],
                     "bootstrap_high": b[1], "cp_low": cp[0], "cp_high": cp[1]})
    return pd.DataFrame(rows)


# -- lesson: dependent items --------------------------------------------------------------------------------

def cluster_draws_by_hand(values: Sequence[float], groups: Sequence, n_resamples: int = 1000,
                          seed: int = SEED, level: float = LEVEL) -> tuple[float, float]:
    """The cluster bootstrap as a loop: per resample, draw as many clusters as there are, with replacement
    (the draws of :func:`atlaslib.metrics.bootstrap.cluster_draws`), pool all their items, take the mean."""
    x = np.asarray(values, dtype=float)
    draws, inverse = bootstrap.cluster_draws(groups, n_resamples, seed)
    members = [np.flatnonzero(inverse == g) for g in range(draws.shape[1])]
    means = [x[np.concatenate([members[g] for g in row])].mean() for row in draws]
    return bootstrap.percentile_ci(means, level)


def cluster_summary(frame: pd.DataFrame, group: str, value: str = "correct") -> pd.DataFrame:
    """Per cluster: items and share right, sorted by share."""
    return (frame.groupby(group)[value].agg(items="size", share_right="mean")
            .sort_values(["share_right", "items"]).reset_index())


def pure_cluster_share(frame: pd.DataFrame, group: str, value: str = "correct") -> float:
    """Share of items in clusters whose items are all right or all wrong."""
    share = frame.groupby(group)[value].transform("mean")
    return float(((share == 0) | (share == 1)).mean())


# -- lesson: comparing two models ----------------------------------------------------------------------------

def paired_frame(cell_a: dict, cell_b: dict) -> pd.DataFrame:
    """Both models' correctness per item, aligned on ``item_id`` (the items must be the same)."""
    a = predictions(cell_a).set_index("item_id")["correct"]
    b = predictions(cell_b).set_index("item_id")["correct"]
    if set(a.index) != set(b.index):
        raise ValueError(f"paired_frame: {cell_a['model']} and {cell_b['model']} were not scored on the same "
                         f"items ({len(set(a.index) ^ set(b.index))} differ)")
    return pd.DataFrame({"a": a, "b": b.loc[a.index]})


def agreement_table(pairs: pd.DataFrame, names: tuple[str, str]) -> pd.DataFrame:
    """The 2×2 table of right/wrong for models A (rows) and B (columns)."""
    t = pd.crosstab(pairs["a"].map({True: "right", False: "wrong"}),
                    pairs["b"].map({True: "right", False: "wrong"}))
    t = t.reindex(index=["right", "wrong"], columns=["right", "wrong"], fill_value=0)
    t.index.name, t.columns.name = names[0], names[1]
    return t


def unpaired_difference_ci(pairs: pd.DataFrame, n_resamples: int = 1000, seed: int = SEED,
                           level: float = LEVEL) -> tuple[float, float]:
    """Interval of the accuracy difference A − B if the two models had been scored on *independent* draws
    of items (each model resampled on its own): what ignoring the pairing assumes."""
    a, b = pairs["a"].to_numpy(float), pairs["b"].to_numpy(float)
    rng = np.random.default_rng(seed)
    ia = rng.integers(0, len(a), size=(n_resamples, len(a)))
    ib = rng.integers(0, len(b), size=(n_resamples, len(b)))
    return bootstrap.percentile_ci(a[ia].mean(1) - b[ib].mean(1), level)


def paired_difference_ci(pairs: pd.DataFrame, n_resamples: int = 1000, seed: int = SEED,
                         level: float = LEVEL) -> tuple[float, float]:
    """Interval of the accuracy difference A − B with both models on the *same* resampled items."""
    a, b = pairs["a"].to_numpy(float), pairs["b"].to_numpy(float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(n_resamples, len(a)))
    return bootstrap.percentile_ci(a[idx].mean(1) - b[idx].mean(1), level)


# -- lesson: leakage and splits ------------------------------------------------------------------------------

def fold_of(key: str, k: int = 5, seed: int = SEED) -> int:
    """Fold of a key: ``int(sha256("<seed>:<key>"), 16) mod k`` (the seed-hash idea, applied to folds)."""
    return int(hashlib.sha256(f"{seed}:{key}".encode("utf-8")).hexdigest(), 16) % k


def learners() -> dict:
    """Two learners on the marked sentence: a 1-nearest-neighbour on word TF-IDF (it can recall a sentence it
    has seen) and a regularised logistic regression on the same features."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline

    return {
        "1-nearest neighbour": lambda: make_pipeline(TfidfVectorizer(ngram_range=(1, 2)),
                                                     KNeighborsClassifier(n_neighbors=1, metric="cosine")),
        "logistic regression": lambda: make_pipeline(TfidfVectorizer(ngram_range=(1, 2)),
                                                     LogisticRegression(solver="liblinear")),
    }


def cross_validated_predictions(items: pd.DataFrame, folds: Sequence[int], make_model: Callable) -> np.ndarray:
    """Out-of-fold predictions: every item is predicted by a model fitted on the other folds' items."""
    folds = np.asarray(folds)
    pred = np.zeros(len(items), dtype=int)
    text, y = items["text"].to_numpy(), items["label"].to_numpy()
    for f in np.unique(folds):
        test = folds == f
        model = make_model().fit(text[~test], y[~test])
        pred[test] = model.predict(text[test])
    return pred


def leaked(items: pd.DataFrame, folds: Sequence[int], group: str = "sentence_key") -> np.ndarray:
    """For each item: does another item of its ``group`` sit in a training fold (a different fold)?"""
    folds = np.asarray(folds)
    frame = pd.DataFrame({"g": items[group].to_numpy(), "f": folds})
    n_folds = frame.groupby("g")["f"].transform("nunique").to_numpy()
    return n_folds > 1


def leakage_experiment(items: pd.DataFrame, k: int = 5, seed: int = SEED) -> dict:
    """Score each learner of :func:`learners` by ``k``-fold cross-validation twice on the same NegEx items:
    folds drawn per item (sentences shared by several items leak across folds) and per ``sentence_key``
    (group-disjoint, as the card's splits). Every item is predicted once in each scheme, so the two macro
    F1 values are on the same items. Returns ``{"scores": frame, "leaked": bool array (item folds),
    "predictions": {(learner, scheme): array}}``."""
    from .metrics.classification import macro_f1

    schemes = {"items (sentences leak)": [fold_of(i, k, seed) for i in items["item_id"]],
               "sentences (group-disjoint)": [fold_of(s, k, seed) for s in items["sentence_key"]]}
    y = items["label"].to_numpy()
    rows, preds = [], {}
    for name, make in learners().items():
        for scheme, folds in schemes.items():
            p = cross_validated_predictions(items, folds, make)
            preds[(name, scheme)] = p
            rows.append({"learner": name, "folds drawn per": scheme, "macro_f1": float(macro_f1(y, p)),
                         "accuracy": float((p == y).mean())})
    return {"scores": pd.DataFrame(rows), "leaked": leaked(items, schemes["items (sentences leak)"]),
            "predictions": preds, "folds": schemes}


def paired_gain_ci(y_true, pred_a, pred_b, metric: Callable | None = None, n_resamples: int = 1000,
                   seed: int = SEED, level: float = LEVEL) -> dict:
    """``metric(y, a) − metric(y, b)`` (default macro F1) with a paired percentile interval: both predictions
    scored on the same resamples, stratified by gold (the NegEx card's resampling)."""
    from .metrics.classification import macro_f1

    metric = metric or macro_f1
    y, a, b = (np.asarray(v, dtype=int) for v in (y_true, pred_a, pred_b))
    idx = bootstrap.stratified_indices(y, n_resamples, seed)
    diffs = bootstrap.resampled(metric, idx, y, a) - bootstrap.resampled(metric, idx, y, b)
    lo, hi = bootstrap.percentile_ci(diffs, level)
    return {"value": float(metric(y, a) - metric(y, b)), "ci_low": lo, "ci_high": hi}


def leakage_pivot(scores: pd.DataFrame, metric: str = "macro_f1") -> pd.DataFrame:
    """Learners × fold schemes, with the gain from leakage (item folds − sentence folds)."""
    t = scores.pivot(index="learner", columns="folds drawn per", values=metric)
    t["gain from leakage"] = t["items (sentences leak)"] - t["sentences (group-disjoint)"]
    return t


# -- lesson: safety gates ------------------------------------------------------------------------------------

def false_entailment_bound(report: dict) -> float | None:
    """The card's bound on the false-entailment rate, the one its gate certifies with: the exact one-sided
    95 % (Clopper–Pearson) upper bound ``Beta⁻¹(0.95; k+1, n−k)``, as the report records it (computed from
    the counts for a report that predates the field)."""
    from .metrics.intervals import clopper_pearson_upper

    bound = (report.get("gate") or {}).get("false_entailment_upper_bound")
    if bound is None:
        fer = report["false_entailment_rate"]
        bound = None if not fer["trials"] else clopper_pearson_upper(fer["successes"], fer["trials"])
    return bound


def gate_rows(cells: Sequence[dict]) -> pd.DataFrame:
    """One row per NLI challenge cell: accuracy and false-entailment rate (with their counts), the card's
    one-sided 95 % upper bound of that rate (:func:`false_entailment_bound`) and the gate decisions, from the
    cell's report."""
    rows = []
    for c in cells:
        r = c["extra"]["report"]
        acc, fer, g = r["aggregate_accuracy"], r["false_entailment_rate"], r["gate"]
        rows.append({"model": c["model"], "accuracy": acc["value"], "right": f"{acc['successes']}/{acc['trials']}",
                     "false entailment rate": fer["value"],
                     "false entailments": f"{fer['successes']}/{fer['trials']}",
                     "FER upper bound (one-sided 95 %)": false_entailment_bound(r),
                     "ceiling": "pass" if g["false_entailment_gate_passed"] else "FAIL",
                     "floor": "pass" if g["accuracy_gate_passed"] else "FAIL",
                     "combined": "pass" if g["passed"] else "FAIL"})
    return pd.DataFrame(rows).set_index("model")


def constant_predictor_accuracy(cases) -> dict:
    """Accuracy of answering one label to every case (and of always abstaining), on ``cases``."""
    gold = [c.gold_label for c in cases]
    out = {f"always {lab}": sum(g == lab for g in gold) / len(gold) for lab in sorted(set(gold))}
    out["always abstain"] = 0.0
    return out


def cases_for_zero_upper_bound(upper: float, level: float = LEVEL) -> int:
    """How many non-entailment cases without a single false entailment it takes before the card's bound, the
    one-sided ``level`` Clopper–Pearson upper bound of the false-entailment rate
    (:func:`atlaslib.metrics.intervals.clopper_pearson_upper`), falls to ``upper`` or below:
    ``1 − (1−level)^(1/n) ≤ upper`` ⇔ ``n ≥ ln(1−level) / ln(1 − upper)``."""
    if not 0 < upper < 1:
        raise ValueError(f"cases_for_zero_upper_bound: upper must be strictly between 0 and 1, got {upper}")
    return int(math.ceil(math.log(1 - level) / math.log(1 - upper) - 1e-12))
