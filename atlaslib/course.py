"""What the course's lessons compute, one small tested function each (the lessons in ``book/course/`` hold the
narrative, short calls and figures; :mod:`atlaslib.pages.course` executes them when the book is built).

Intervals, comparisons and clusters come from :mod:`atlaslib.metrics` (``bootstrap``, ``intervals``,
``compare``); this module adds what a lesson shows on the way there: the bootstrap written as a loop, the
"ideal" percentile bootstrap of a proportion and its exact coverage, nested subsets of a test set, the
leakage measurement (cross-validation with folds per item and per group), calibration of per-item
probabilities, and the gate tables of the NLI challenge.

Why one module of this size: it is a shelf of small functions, one section per lesson (the ``# -- lesson:``
headers), which the lessons call and show with :func:`show_source`; no section calls another's, so a reader
opens the lesson's section and nothing else. The graded exercises (their questions, items and answer check,
about 200 lines) are the one part with a job of its own, the candidate to move out when it grows.
"""
from __future__ import annotations

import hashlib
import inspect
import math
import re
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy.stats import binom

from .metrics import bootstrap
from .metrics.engine import ratio
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


def show_source(fn: Callable, open: bool = False):
    """A function's source, highlighted, in a collapsed block (``<details>``; ``open=True`` shows it unfolded),
    so a lesson shows the code it calls where that code is the point of the step."""
    import html

    from IPython.display import HTML
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    code = highlight(inspect.getsource(fn).rstrip() + "\n", PythonLexer(), HtmlFormatter())
    name = html.escape(f"{fn.__module__}.{fn.__qualname__}")
    return HTML(f'<details class="atlas-source"{" open" if open else ""}><summary>Source of <code>{name}</code>'
                f"</summary>{code}</details>")


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
    """Two learners on an item's text, both on its words and word pairs counted (L2-normalised, no inverse
    document frequency: in a templated corpus idf would weigh the rare filler words, a finding's name, above the
    template's words that carry the label): a 1-nearest-neighbour by cosine (it recalls the training text most
    like the item, e.g. the same template with another finding) and a regularised (multinomial) logistic
    regression."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline

    def words():
        return TfidfVectorizer(ngram_range=(1, 2), use_idf=False)

    return {
        "1-nearest neighbour": lambda: make_pipeline(words(), KNeighborsClassifier(n_neighbors=1, metric="cosine")),
        "logistic regression": lambda: make_pipeline(words(), LogisticRegression(max_iter=1000)),
    }


def cross_validated_predictions(items: pd.DataFrame, folds: Sequence[int], make_model: Callable,
                                text: str = "text", label: str = "label") -> np.ndarray:
    """Out-of-fold predictions: every item is predicted by a model fitted on the other folds' items (column
    ``text`` in, column ``label`` out; the array has the labels' dtype)."""
    folds = np.asarray(folds)
    x, y = items[text].to_numpy(), items[label].to_numpy()
    pred = np.empty(len(items), dtype=y.dtype)
    for f in np.unique(folds):
        test = folds == f
        model = make_model().fit(x[~test], y[~test])
        pred[test] = model.predict(x[test])
    return pred


def leaked(items: pd.DataFrame, folds: Sequence[int], group: str) -> np.ndarray:
    """For each item: does another item of its ``group`` sit in a training fold (a different fold)?"""
    folds = np.asarray(folds)
    frame = pd.DataFrame({"g": items[group].to_numpy(), "f": folds})
    n_folds = frame.groupby("g")["f"].transform("nunique").to_numpy()
    return n_folds > 1


def accuracy(y_true, y_pred) -> np.ndarray | float:
    """Share of items right, vectorised over the rows of ``(B, n)`` arrays."""
    return np.mean(np.asarray(y_true) == np.asarray(y_pred), axis=-1)


def leakage_schemes(group_name: str) -> tuple[str, str]:
    """The names of the two fold schemes of :func:`leakage_experiment`: per item (the groups leak) and per group
    (group-disjoint)."""
    return f"items ({group_name} leak)", f"{group_name} (group-disjoint)"


def leakage_experiment(items: pd.DataFrame, group: str, text: str = "text", label: str = "label",
                       group_name: str | None = None, k: int = 5, seed: int = SEED) -> dict:
    """Score each learner of :func:`learners` by ``k``-fold cross-validation twice on the same items: folds drawn
    per item (items of one ``group`` scatter over the folds, so a model is trained on members of the group it is
    tested on) and per ``group`` value (group-disjoint: a group is on one side only). Every item is predicted once
    in each scheme, so the two scores are on the same items. ``group_name`` (plural, default the column's name)
    names the schemes (:func:`leakage_schemes`). Returns ``{"scores": frame (accuracy and macro F1 over the gold
    labels), "leaked": bool array (item folds), "predictions": {(learner, scheme): array}, "folds": {scheme:
    folds}, "schemes": (item scheme, group scheme)}``."""
    per_item, per_group = leakage_schemes(group_name or group)
    schemes = {per_item: [fold_of(str(i), k, seed) for i in items["item_id"]],
               per_group: [fold_of(str(g), k, seed) for g in items[group]]}
    y = items[label].to_numpy()
    labels = sorted(set(y))
    rows, preds = [], {}
    for name, make in learners().items():
        for scheme, folds in schemes.items():
            p = cross_validated_predictions(items, folds, make, text, label)
            preds[(name, scheme)] = p
            rows.append({"learner": name, "folds drawn per": scheme, "accuracy": float(accuracy(y, p)),
                         "macro_f1": float(macro_f1_labels(y, p, labels))})
    return {"scores": pd.DataFrame(rows), "leaked": leaked(items, schemes[per_item], group),
            "predictions": preds, "folds": schemes, "schemes": (per_item, per_group)}


def paired_gain_ci(y_true, pred_a, pred_b, metric: Callable | None = None, strata=None, n_resamples: int = 1000,
                   seed: int = SEED, level: float = LEVEL) -> dict:
    """``metric(y, a) − metric(y, b)`` (default macro F1 over the gold labels; ``metric`` is vectorised over the
    rows of ``(B, n)`` arrays) with a paired percentile interval: both predictions scored on the same resamples
    of the items, drawn within each value of ``strata`` when given (e.g. the gold label), else from all items."""
    y, a, b = (np.asarray(v) for v in (y_true, pred_a, pred_b))
    if metric is None:
        labels = sorted(set(y.tolist()))
        metric = lambda t, p: macro_f1_labels(t, p, labels)  # noqa: E731
    groups = np.zeros(len(y), dtype=int) if strata is None else np.asarray(strata)
    idx = bootstrap.stratified_indices(groups, n_resamples, seed)
    diffs = metric(y[idx], a[idx]) - metric(y[idx], b[idx])
    lo, hi = bootstrap.percentile_ci(np.asarray(diffs, dtype=float), level)
    return {"value": float(metric(y, a) - metric(y, b)), "ci_low": lo, "ci_high": hi}


def leakage_pivot(experiment: dict, metric: str = "accuracy") -> pd.DataFrame:
    """Learners × the fold schemes of a :func:`leakage_experiment` (the item scheme first), with the gain from
    leakage (item folds − group folds)."""
    per_item, per_group = experiment["schemes"]
    t = experiment["scores"].pivot(index="learner", columns="folds drawn per", values=metric)[[per_item, per_group]]
    t["gain from leakage"] = t[per_item] - t[per_group]
    return t


def leakage_by(experiment: dict, y_true, learner: str, by) -> pd.DataFrame:
    """Per value of ``by`` (one per item, e.g. the pattern), in order of first appearance: the share of items
    ``learner`` gets right under each fold scheme of a :func:`leakage_experiment`, and the gain from leakage."""
    per_item, per_group = experiment["schemes"]
    y = np.asarray(y_true)
    preds = experiment["predictions"]
    t = pd.DataFrame({"by": np.asarray(by), per_item: preds[(learner, per_item)] == y,
                      per_group: preds[(learner, per_group)] == y}).groupby("by", sort=False).mean()
    t.index.name = getattr(by, "name", None)   # a column passed in names the rows
    t["gain from leakage"] = t[per_item] - t[per_group]
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
    one-sided 95 % upper bound of that rate (:func:`false_entailment_bound`) and the gate decisions: the card's
    report of the cell's unit counts, made by the one engine (``nli_negation.counting.report_of_cell``)."""
    from .cards.nli_negation.counting import report_of_cell

    rows = []
    for c in cells:
        r = report_of_cell(c)
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


# -- graded exercises: items no lesson shows, drawn by the instructor's seed ------------------------------------

#: the questions of each kind of graded exercise: (id, question, tolerance). A lesson's front matter names its
#: kind and the card version whose train pool the items come from (``atlas.graded``).
GRADED_QUESTIONS = {
    "interval": (
        ("q1", "the share of the drawn sentences that hold at least one entity mention", 0.005),
        ("q2", "the lower end of its 95 % percentile bootstrap interval (1,000 resamples of the sentences)", 0.03),
        ("q3", "the upper end of that interval", 0.03)),
    "edge": (
        ("q1", "how many of the drawn sentences hold at least one entity mention", 0),
        ("q2", "the lower end of the exact (Clopper–Pearson) two-sided 95 % interval of that share", 0.002),
        ("q3", "the upper end of that interval", 0.002)),
    "cluster": (
        ("q1", "how many case reports (documents) the drawn sentences come from", 0),
        ("q2", "the share of the drawn sentences whose report's drawn sentences all hold a mention or all hold none",
         0.005),
        ("q3", "the share of the drawn sentences that share their report with another drawn sentence", 0.005)),
    "paired": (
        ("q1", "b: sentences where rule A (‘12 words or more’ predicts a mention) is right and rule B (‘holds a "
               "digit’ predicts a mention) is wrong, against the gold ‘holds at least one mention’", 0),
        ("q2", "c: sentences where rule B is right and rule A wrong", 0),
        ("q3", "the exact (binomial) two-sided McNemar p-value of b against c", 0.002)),
    "leakage": (
        ("q1", "with each drawn sentence in fold sha256('<seed>:<item id>') mod 5 (course.fold_of), the share of "
               "sentences that have a sentence of the same report in another fold", 0.005),
        ("q2", "how many reports have their drawn sentences in two folds or more", 0)),
    "gate": (
        ("q1", "the rule ‘holds a digit’ claims a test mention: how many drawn sentences without a test mention "
               "does it claim one for (false positives)?", 0),
        ("q2", "how many drawn sentences hold no test mention (the rate's denominator)?", 0),
        ("q3", "the one-sided 95 % exact (Clopper–Pearson) upper bound of the false-positive rate", 0.002)),
    "spans": (
        ("q1", "how many gold mentions the drawn sentences hold", 0),
        ("q2", "a tagger that finds every mention's first word only (B- kept, its I- tags set to O): its strict "
               "micro F1", 0.002),
        ("q3", "its strict macro F1 (the mean of the per-type F1s over the types in gold)", 0.002)),
    "holm": (
        ("q1", "against the gold ‘holds at least one mention’, rules A (‘12 words or more’), B (‘holds a digit’) "
               "and C (‘20 words or more’) each predict a mention: the Holm-adjusted exact McNemar p-value of A "
               "against B", 0.002),
        ("q2", "the Holm-adjusted p-value of A against C (the family: the three pairs)", 0.002),
        ("q3", "the Holm-adjusted p-value of B against C", 0.002)),
}
GRADED_N = 60


def graded_spec(lesson: str, root=None) -> dict:
    """A lesson's graded exercise as its front matter declares it: ``{kind, card, version, n}``."""
    import jupytext

    from .notebook import REPO

    folder = Path(root or REPO) / "book" / "course"
    path = folder / f"{lesson}.md"
    named = re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", str(lesson)) is not None  # a name, never a path
    if not named or not path.is_file():
        known = sorted(p.stem for p in folder.glob("*.md") if "graded" in
                       (jupytext.read(p).metadata.get("atlas") or {}))
        what = f"no lesson {lesson!r} with a graded exercise" if named else \
            f"lesson {lesson!r} is not a lesson name (a name, not a path)"
        raise ValueError(f"{what}; expected one of {', '.join(known)}")
    spec = dict((jupytext.read(path).metadata.get("atlas") or {}).get("graded") or {})
    if spec.get("kind") not in GRADED_QUESTIONS or not spec.get("card") or not spec.get("version"):
        raise ValueError(f"{path}: front matter atlas.graded must give kind (one of {', '.join(GRADED_QUESTIONS)}), "
                         f"card and version; got {spec}")
    spec.setdefault("n", GRADED_N)
    return spec


def graded_items(card: str, version: str, seed: int, n: int = GRADED_N, data_dir=None) -> pd.DataFrame:
    """``n`` sentences of ``card``/``version``'s train pool, the first by seed-hash rank under ``seed``
    (:func:`atlaslib.splits.rank`): item_id, document, words, tags, and per sentence the entity types it
    holds (``types``) and whether it holds any mention (``mention``). The pool must carry IOB2 tags."""
    from .external.tasks import load_split
    from .splits import rank

    pool = load_split(card, version, "train", data_dir)
    records = {r["item_id"]: r for r in pool.records}
    if not records or "tags" not in next(iter(records.values())):
        raise ValueError(f"graded items: the train pool of {card}/{version} carries no IOB2 tags")
    ids = rank(list(records), int(seed))
    if n > len(ids):
        raise ValueError(f"graded items: cannot draw {n} sentences from a train pool of {len(ids)}")
    rows = []
    for iid in ids[:n]:
        r = records[iid]
        types = sorted({t[2:] for t in r["tags"] if t.startswith("B-")})
        rows.append({"item_id": iid, "document": r["document"], "words": list(r["words"]), "tags": list(r["tags"]),
                     "types": types, "mention": bool(types)})
    return pd.DataFrame(rows)


def _has_digit(words) -> bool:
    return any(ch.isdigit() for w in words for ch in w)


def graded_answers(kind: str, items: pd.DataFrame, seed: int) -> dict[str, float]:
    """The answers to :data:`GRADED_QUESTIONS` ``[kind]`` on ``items`` (from :func:`graded_items`)."""
    from .metrics.intervals import clopper_pearson_upper

    y = items["mention"].to_numpy(bool)
    if kind == "interval":
        r = library_bootstrap(y.astype(float), 1000, seed)
        return {"q1": float(y.mean()), "q2": r["ci_low"], "q3": r["ci_high"]}
    if kind == "edge":
        lo, hi = clopper_pearson(int(y.sum()), len(y))
        return {"q1": int(y.sum()), "q2": float(lo), "q3": float(hi)}
    if kind == "cluster":
        share = items.groupby("document")["mention"].transform("mean")
        size = items.groupby("document")["mention"].transform("size")
        return {"q1": int(items["document"].nunique()), "q2": float(((share == 0) | (share == 1)).mean()),
                "q3": float((size > 1).mean())}
    if kind == "paired":
        a = items["words"].map(len).to_numpy() >= 12
        b_ = items["words"].map(_has_digit).to_numpy(bool)
        b = int(np.sum((a == y) & (b_ != y)))
        c = int(np.sum((a != y) & (b_ == y)))
        p = 1.0 if b + c == 0 else float(min(1.0, 2 * binom.cdf(min(b, c), b + c, 0.5)))
        return {"q1": b, "q2": c, "q3": p}
    if kind == "leakage":
        folds = np.array([fold_of(i, 5, seed) for i in items["item_id"]])
        frame = pd.DataFrame({"g": items["document"].to_numpy(), "f": folds})
        n_folds = frame.groupby("g")["f"].transform("nunique")
        return {"q1": float((n_folds > 1).mean()), "q2": int((frame.groupby("g")["f"].nunique() > 1).sum())}
    if kind == "gate":
        has_test = items["types"].map(lambda t: "test" in t).to_numpy(bool)
        claim = items["words"].map(_has_digit).to_numpy(bool)
        k, n = int(np.sum(claim & ~has_test)), int(np.sum(~has_test))
        return {"q1": k, "q2": n, "q3": float(clopper_pearson_upper(k, n)) if n else float("nan")}
    if kind == "spans":
        from .metrics.spans import scores_from_totals, span_counts

        gold = [list(t) for t in items["tags"]]
        first = [["O" if t.startswith("I-") else t for t in tags] for tags in gold]
        counts, _ = span_counts(gold, first)
        s = scores_from_totals(counts.sum(0))
        return {"q1": int(counts[..., [0, 2]].sum()), "q2": float(s["f1"]), "q3": float(s["macro_f1"])}
    if kind == "holm":
        from .metrics.compare import holm, mcnemar_exact

        n_words = items["words"].map(len).to_numpy()
        rules = {"A": n_words >= 12, "B": items["words"].map(_has_digit).to_numpy(bool), "C": n_words >= 20}
        right = {k: v == y for k, v in rules.items()}
        ps = [mcnemar_exact(int(np.sum(right[i] & ~right[j])), int(np.sum(~right[i] & right[j])))
              for i, j in (("A", "B"), ("A", "C"), ("B", "C"))]
        return dict(zip(("q1", "q2", "q3"), map(float, holm(ps))))
    raise ValueError(f"graded exercise kind {kind!r}: expected one of {', '.join(GRADED_QUESTIONS)}")


def graded_brief(lesson: str) -> str:
    """The graded exercise as a lesson shows it (Markdown): where the items come from, the questions, and how
    to check the answers."""
    spec = graded_spec(lesson)
    qs = "\n".join(f"- `{q}`: {text} ({'exactly' if tol == 0 else f'accepted within ±{tol:g}'})"
                   for q, text, tol in GRADED_QUESTIONS[spec["kind"]])
    return (f"Your instructor gives you a seed. Draw {spec['n']} sentences the lessons never show, from the train "
            f"pool of the `{spec['card']}` card's `{spec['version']}` split, with "
            f"`course.graded_items(\"{spec['card']}\", \"{spec['version']}\", seed, {spec['n']})` "
            f"(the first {spec['n']} by seed-hash rank; a sentence 'holds a mention' when any of its words is tagged "
            f"`B-…`; use the seed as the bootstrap seed too). Answer:\n\n{qs}\n\n"
            f"Write the answers as JSON, `{{\"seed\": SEED, \"answers\": {{\"q1\": …}}}}`, and check them "
            f"(right or wrong per question, no solutions shown):\n\n"
            f"```bash\n.venv/bin/atlas course check {lesson} answers.json\n```\n")


#: an answers file larger than this is refused (it holds a seed and a few numbers)
ANSWERS_MAX_BYTES = 1024 * 1024


def check_answers(lesson: str, answers_path, seed: int | None = None, data_dir=None) -> list[dict]:
    """Right or wrong per question of ``lesson``'s graded exercise for the answers in ``answers_path``
    (JSON ``{"seed": S, "answers": {"q1": number, ...}}``; ``seed`` overrides the file's). One row per
    question: ``{question, given, right}`` (``given`` None: not answered). Bad input raises ValueError naming
    the file and what was expected."""
    from . import jsonio

    path = Path(answers_path)
    spec = graded_spec(lesson)
    data = jsonio.load(path, what="the answers file (JSON)", error=ValueError, max_bytes=ANSWERS_MAX_BYTES,
                       expected='{"seed": SEED, "answers": {"q1": number, ...}}')
    if not isinstance(data, dict) or not isinstance(data.get("answers"), dict):
        raise ValueError(f'{path}: expected an object {{"seed": SEED, "answers": {{"q1": number, ...}}}}')
    seed = data.get("seed") if seed is None else seed
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"{path}: \"seed\" must be the integer your instructor gave (or pass --seed), got {seed!r}")
    questions = GRADED_QUESTIONS[spec["kind"]]
    known = {q for q, _, _ in questions}
    unknown = sorted(set(data["answers"]) - known)
    if unknown:
        raise ValueError(f"{path}: unknown question(s) {', '.join(unknown)}; lesson {lesson} asks "
                         f"{', '.join(sorted(known))}")
    for q, v in data["answers"].items():
        if jsonio.as_float(v) is None:  # text, NaN, infinity, an integer too large for a float
            raise ValueError(f"{path}: answer {q} must be a finite number, got {jsonio.describe(v)}")
    truth = graded_answers(spec["kind"], graded_items(spec["card"], spec["version"], seed, spec["n"], data_dir), seed)
    rows = []
    for q, text, tol in questions:
        given = data["answers"].get(q)
        rows.append({"question": q, "text": text, "given": given, "tolerance": tol,
                     "right": given is not None and abs(float(given) - float(truth[q])) <= tol + 1e-12})
    return rows


# -- lesson: many comparisons at once ----------------------------------------------------------------------

def group_mcnemar(pairs: pd.DataFrame, groups: Sequence) -> pd.DataFrame:
    """One exact McNemar test per group of items (e.g. the NLI challenge's negation patterns), on a
    :func:`paired_frame`: items, b (A right, B wrong), c (the reverse), the difference in accuracy and the
    unadjusted p-value (:func:`atlaslib.metrics.compare.mcnemar_exact`)."""
    from .metrics.compare import mcnemar_exact

    frame = pairs.assign(group=list(groups))
    rows = []
    for g, sub in frame.groupby("group", sort=False):
        b, c = int((sub["a"] & ~sub["b"]).sum()), int((~sub["a"] & sub["b"]).sum())
        rows.append({"group": g, "items": len(sub), "b": b, "c": c,
                     "difference": float(sub["a"].mean() - sub["b"].mean()), "p": mcnemar_exact(b, c)})
    return pd.DataFrame(rows)


def macro_f1_labels(y_true, y_pred, labels: Sequence) -> np.ndarray | float:
    """Macro F1 over ``labels`` (the gold classes), vectorised over rows of ``(B, n)`` arrays: the mean over the
    classes of ``2·TP / (2·TP + FP + FN)``; a prediction outside ``labels`` (an abstention) is a false negative
    of its gold class and nobody's false positive. A class absent from a row's gold and predictions has no F1
    (:func:`atlaslib.metrics.engine.ratio`), and the row's macro F1 is then NaN (undefined)."""
    y, p = np.asarray(y_true), np.asarray(y_pred)
    f1 = []
    for lab in labels:
        tp = np.sum((y == lab) & (p == lab), axis=-1)
        fp = np.sum((y != lab) & (p == lab), axis=-1)
        fn = np.sum((y == lab) & (p != lab), axis=-1)
        f1.append(ratio(2 * tp, 2 * tp + fp + fn))
    return np.mean(f1, axis=0)


def paired_macro_f1(cell_a: dict, cell_b: dict, n_resamples: int = 1000, seed: int = SEED) -> dict:
    """Macro F1 of two runs on the same items (abstentions as their own answer), their difference, its
    paired-bootstrap SD and interval (cases resampled with replacement, both runs on the same draws)."""
    a, b = predictions(cell_a).set_index("item_id"), predictions(cell_b).set_index("item_id")
    b = b.loc[a.index]
    y = a["gold"].astype(str).to_numpy()
    pa, pb = a["pred"].astype(str).to_numpy(), b["pred"].astype(str).to_numpy()
    labels = sorted(set(y))
    idx = bootstrap.stratified_indices(np.zeros(len(y), dtype=int), n_resamples, seed)
    d = macro_f1_labels(y[idx], pa[idx], labels) - macro_f1_labels(y[idx], pb[idx], labels)
    lo, hi = bootstrap.percentile_ci(d)
    fa, fb = float(macro_f1_labels(y, pa, labels)), float(macro_f1_labels(y, pb, labels))
    return {"macro_f1_a": fa, "macro_f1_b": fb, "difference": fa - fb, "sd": float(np.std(d)),
            "ci_low": lo, "ci_high": hi, "n": len(y)}


def items_for_difference(delta: float, discordance: float, alpha: float = 0.05, power: float = 0.80) -> int:
    """Paired items McNemar's test needs to detect an accuracy difference ``delta`` with ``power`` at two-sided
    ``alpha`` when a share ``discordance`` of the items is decided differently (Connor 1987):
    ``n = ⌈(z_{1−α/2}·√ψ + z_{power}·√(ψ − δ²))² / δ²⌉``; the inverse of
    :func:`atlaslib.metrics.compare.mcnemar_mdd`."""
    from scipy.stats import norm

    if not 0 < delta <= discordance <= 1:
        raise ValueError(f"items_for_difference: need 0 < delta ≤ discordance ≤ 1, got delta={delta}, "
                         f"discordance={discordance}")
    za, zb = norm.ppf(1 - alpha / 2), norm.ppf(power)
    return int(math.ceil((za * math.sqrt(discordance) + zb * math.sqrt(discordance - delta ** 2)) ** 2 / delta ** 2))


def mcnemar_power(n: int, discordance: float, delta: float, alpha: float = 0.05) -> float:
    """Exact power of the two-sided exact McNemar test on ``n`` paired items with discordance ``ψ`` and true
    accuracy difference ``δ``: the number of discordant items is Binomial(n, ψ); given ``m`` of them, A wins
    each with probability ``(ψ + δ)/(2ψ)``; the test rejects the counts whose binomial p-value is ≤ ``alpha``."""
    from scipy.stats import binomtest

    q = (discordance + delta) / (2 * discordance)
    total = 0.0
    for m in range(n + 1):
        pm = float(binom.pmf(m, n, discordance))
        if pm < 1e-12 or m == 0:
            continue
        # the rejection region at m: the smallest and largest b (symmetric under H0)
        k = int(binom.ppf(alpha / 2, m, 0.5))
        while k >= 0 and binomtest(k, m, 0.5).pvalue > alpha:
            k -= 1
        while k + 1 <= m // 2 and binomtest(k + 1, m, 0.5).pvalue <= alpha:
            k += 1
        if k < 0:
            continue
        total += pm * float(binom.cdf(k, m, q) + binom.sf(m - k - 1, m, q))
    return total


# -- lesson: scoring spans -----------------------------------------------------------------------------------

def span_sets(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """The mentions of one IOB2 tag sequence as ``(type, first word, last word)``
    (:func:`atlaslib.metrics.spans.mentions`)."""
    from .metrics.spans import mentions

    return set(mentions(list(tags)))


def _prf(tp: int, fp: int, fn: int) -> dict:
    """Precision, recall and F1 from counts, by the atlas's zero-division rule: NaN (undefined), never 0, where
    the denominator is 0 (no mention predicted; no gold mention; neither)."""
    return {"tp": tp, "fp": fp, "fn": fn, "precision": ratio(tp, tp + fp), "recall": ratio(tp, tp + fn),
            "f1": ratio(2 * tp, 2 * tp + fp + fn)}


def strict_prf(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> dict:
    """Micro precision, recall and F1 with strict matching: a predicted mention counts only if a gold mention of
    the same type has exactly its first and last word; counts pooled over all sentences."""
    tp = fp = fn = 0
    for g, p in zip(gold, pred):
        gs, ps = span_sets(g), span_sets(p)
        tp, fp, fn = tp + len(gs & ps), fp + len(ps - gs), fn + len(gs - ps)
    return _prf(tp, fp, fn)


def lenient_prf(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> dict:
    """Micro precision, recall and F1 with lenient (overlap) matching: a predicted mention is right when it shares
    at least one word with a gold mention of the same type (precision over predicted mentions); a gold mention is
    found when a predicted one of its type overlaps it (recall over gold mentions). Undefined is NaN, never 0:
    precision without a predicted mention, recall without a gold one, F1 without either; F1 is 0 when one side is
    empty and the other not (nothing found)."""
    def overlaps(m, others):
        return any(o[0] == m[0] and o[1] <= m[2] and m[1] <= o[2] for o in others)

    right_pred = n_pred = found = n_gold = 0
    for g, p in zip(gold, pred):
        gs, ps = span_sets(g), span_sets(p)
        right_pred += sum(overlaps(m, gs) for m in ps)
        found += sum(overlaps(m, ps) for m in gs)
        n_pred, n_gold = n_pred + len(ps), n_gold + len(gs)
    prec, rec = ratio(right_pred, n_pred), ratio(found, n_gold)
    f1 = ratio(2 * prec * rec, prec + rec) if right_pred and found else ratio(0, n_pred + n_gold)
    return {"precision": prec, "recall": rec, "f1": f1, "predicted": n_pred, "gold": n_gold}


def boundary_errors(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> pd.DataFrame:
    """Each predicted mention that is not exactly right, by kind: ``boundary`` (it overlaps a gold mention of
    its type, with other first or last words), ``type`` (it has a gold mention's exact words but another
    type), ``spurious`` (neither)."""
    rows = []
    for i, (g, p) in enumerate(zip(gold, pred)):
        gs = span_sets(g)
        for m in sorted(span_sets(p) - gs):
            if any(o[0] == m[0] and o[1] <= m[2] and m[1] <= o[2] for o in gs):
                kind = "boundary"
            elif any(o[1:] == m[1:] for o in gs):
                kind = "type"
            else:
                kind = "spurious"
            rows.append({"item": i, "type": m[0], "first": m[1], "last": m[2], "kind": kind})
    return pd.DataFrame(rows, columns=["item", "type", "first", "last", "kind"])


def ill_formed(tags: Sequence[str]) -> int:
    """How many ``I-X`` tags of a sequence do not continue a ``B-X`` or ``I-X`` (IOB2 violations, which
    seqeval's default mode reads as the start of a mention and its strict IOB2 mode does not)."""
    bad, prev = 0, "O"
    for t in tags:
        if t.startswith("I-") and prev[2:] != t[2:]:
            bad += 1
        prev = t
    return bad


def item_level_ci(gold, pred, n_resamples: int = 1000, seed: int = SEED, level: float = LEVEL) -> tuple[float, float]:
    """Percentile interval of micro span F1 when sentences are resampled one by one, as if independent (the
    card resamples whole case reports instead)."""
    from .metrics.spans import scores_from_totals, span_counts

    counts, _ = span_counts(gold, pred)
    per_item = counts.sum(1)                                         # (n, 3): TP, FP, FN per sentence
    idx = np.random.default_rng(seed).integers(0, len(per_item), size=(n_resamples, len(per_item)))
    totals = per_item[idx].sum(1)                                    # (B, 3)
    f1 = scores_from_totals(totals[:, None, :])["f1"]
    return bootstrap.percentile_ci(np.asarray(f1, dtype=float), level)


# -- lesson: calibration ----------------------------------------------------------------------------------

def confidence_frame(cell: dict) -> pd.DataFrame:
    """Top-label (confidence) calibration of a run that records its label probabilities per item (the cell's
    ``scores``, ``{label: probability}``): ``p`` the probability of the label it answered, ``y`` 1 when that
    answer is the gold label, beside ``item_id``, ``gold``, ``pred`` and (where the cell has them) ``pattern``."""
    frame = pd.DataFrame(cell["predictions"])
    if "scores" not in frame or frame["scores"].isna().any():
        raise ValueError(f"{cell['model']} ({cell['protocol']}): the cell holds no label probabilities per item")
    bad = [r["item_id"] for r in cell["predictions"] if r["pred"] not in r["scores"]]
    if bad:
        raise ValueError(f"{cell['model']} ({cell['protocol']}): {len(bad)} answer(s) without a probability "
                         f"(first: item {bad[0]})")
    from .analysis.calibration import top_label

    y, p = top_label(cell["predictions"])     # the pairs the atlas's calibration tables read
    out = pd.DataFrame({"item_id": frame["item_id"], "gold": frame["gold"], "pred": frame["pred"], "p": p,
                        "y": y.astype(int)})
    if "pattern" in frame:
        out["pattern"] = frame["pattern"]
    return out


def confidence_by_group(frame: pd.DataFrame, group: str) -> pd.DataFrame:
    """Per value of ``group`` in a :func:`confidence_frame`: items, accuracy, mean confidence and their gap
    (mean confidence − accuracy: above 0 over-confident), in order of first appearance."""
    t = frame.groupby(group, sort=False).agg(items=("y", "size"), accuracy=("y", "mean"),
                                             mean_confidence=("p", "mean"))
    t["gap"] = t["mean_confidence"] - t["accuracy"]
    return t


#: the calibration lesson's bins: ten equal-width bins of the confidence over [0, 1], the textbook reliability
#: diagram (:mod:`atlaslib.analysis.calibration` computes every ECE, diagram and decomposition; the atlas's own
#: calibration pages use its equal-mass bins, which the lesson shows beside)
BINNING = "width"


def ece_of_a_calibrated_model(p, n: int, draws: int = 200, bins: int = 10, seed: int = SEED,
                              binning: str = BINNING) -> np.ndarray:
    """ECE (:func:`atlaslib.analysis.calibration.ece`) of a *perfectly calibrated* forecaster on ``n`` items,
    ``draws`` times: forecasts drawn from ``p`` (with replacement), outcomes y ~ Bernoulli(forecast). Its true
    calibration error is 0; what the ECE shows is its bias at that ``n``."""
    from .analysis.calibration import ece

    rng = np.random.default_rng(seed)
    p = np.asarray(p, dtype=float)
    out = np.empty(draws)
    for d in range(draws):
        q = p[rng.integers(0, len(p), size=n)]
        out[d] = ece((rng.random(n) < q).astype(int), q, bins, binning)
    return out


def plot_reliability(tables: dict, title: str = "", ylabel: str = "observed share of positives"):
    """Reliability diagram of :func:`atlaslib.analysis.calibration.reliability` tables, one series per run: the
    atlas's own drawing (:func:`atlaslib.analysis.calibration.draw_reliability`) with the lesson's axis names."""
    from .analysis import calibration

    return calibration.draw_reliability(tables, title, xlabel="mean forecast in the bin", ylabel=ylabel)


# -- lesson: evaluating a language model ----------------------------------------------------------------------

def language_model(model: str, capability: str = "score.options", **options):
    """The adapter of a registered model for one capability, from its local weights (offline); a
    :class:`~atlaslib.models.WeightsUnavailable` says when they are absent."""
    from .models import get_profile, load_adapter, with_capabilities

    return load_adapter(with_capabilities(get_profile(model)), capability, progress=False, **options)


def option_answers(adapter, prompts: Sequence[str], options: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """Option scoring: the log-likelihood of each option string (exact, with its leading space) after each
    prompt, the options' probabilities (softmax over the options) and the answer, the label of the most likely
    option (the first listed wins a tie). One row per prompt, one column per label."""
    strings, labels = [o for o, _ in options], [lab for _, lab in options]
    ll = np.asarray(adapter.score_options(list(prompts), strings)["loglik"], dtype=float)
    frame = pd.DataFrame(ll, columns=labels)
    prob = np.exp(ll - ll.max(1, keepdims=True))
    prob /= prob.sum(1, keepdims=True)
    for k, lab in enumerate(labels):
        frame[f"p({lab})"] = prob[:, k]
    frame["answer"] = [labels[k] for k in ll.argmax(1)]
    return frame


def generated_answers(adapter, prompts: Sequence[str], options: Sequence[tuple[str, str]], n_new: int = 4) -> pd.DataFrame:
    """Generation: the model continues each prompt greedily by ``n_new`` tokens; the answer is the label whose
    option string (stripped, case-folded) the continuation's first word is, else None (off the list)."""
    import re

    prefixes = [adapter.token_ids(p) for p in prompts]
    conts = adapter.greedy_continuations(prefixes, [n_new] * len(prefixes))
    texts = [adapter.tokenizer.decode(c) for c in conts]
    by_word = {o.strip().casefold(): lab for o, lab in options}
    answers = []
    for t in texts:
        m = re.match(r"\s*([A-Za-z]+)", t)
        answers.append(by_word.get(m.group(1).casefold()) if m else None)
    return pd.DataFrame({"continuation": texts, "answer": answers})


def few_shot_prompt(template: str, examples: Sequence[dict], answer_of: dict, case: dict) -> str:
    """``template`` filled for ``case``, after the solved ``examples`` (each its filled template and the option
    string of its gold label, ``answer_of[label]``), one blank line apart."""
    shots = [template.format(**{k: e[k] for k in ("premise", "hypothesis")}) + answer_of[e["gold"]] for e in examples]
    return "\n\n".join(shots + [template.format(premise=case["premise"], hypothesis=case["hypothesis"])])
