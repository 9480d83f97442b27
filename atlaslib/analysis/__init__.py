"""Where and why models fail, computed from result cells alone (no model is run again).

Each module has one entry point that takes result cells (the JSON dicts of ``results/<card>/<version>/...``),
so a reader's own notebook can produce the tables of the card pages for their own runs:

- :func:`atlaslib.analysis.disagreement.disagreement`: items the ``ok`` runs disagree on, items every run gets
  wrong; for span and relation cards, gold mentions / relations found by all, some or none of the runs.
- :func:`atlaslib.analysis.slices.slice_table`: the card's metric per slice (slices declared as data in each
  card's ``CARD.analysis.slices``), with bootstrap intervals, or a note when a slice is too small for one.

A row trained with several seeds (``extra.seed_runs``) is read over every seed (:func:`seed_cells`): the slices and
calibration are the mean over its seeds' models with the leaderboard's two-level interval
(:func:`atlaslib.metrics.seeds.seed_mean`), the disagreement and the explorer its seeds' majority answer.

What each module does with a card follows from the card's declaration, :class:`atlaslib.cards.Analysis`
(``kind``: binary, labels, spans or temporal; its slices; the positive label; rule evidence), so a new card
needs no change here.
- :func:`atlaslib.analysis.calibration.calibration_table`: Brier score and expected calibration error of the
  runs that give scores, with intervals; :func:`~atlaslib.analysis.calibration.reliability` for the diagram.
- :func:`atlaslib.analysis.triggers.trigger_tables`: the rule systems' triggers behind false positives and
  false negatives on the NegEx card.
- :func:`robustness` (:mod:`atlaslib.analysis.perturbed`): each variant run (a declared perturbation of the
  input, a prompt variant) against its default run: paired difference of the primary metric with its interval,
  McNemar's b and c with the exact p, Holm over the table, the items it applied to.
"""
from __future__ import annotations

from collections import Counter


def analysis_of(card: str):
    """The card's :class:`atlaslib.cards.Analysis` declaration (a default one for a card not registered)."""
    from ..cards import Analysis, get_card

    try:
        return get_card(card).analysis
    except KeyError:
        return Analysis()


def ok_cells(cells) -> list[dict]:
    """The cells with ``status == "ok"`` and predictions, in a stable order (by model, then protocol)."""
    out = [c for c in cells if c.get("status") == "ok" and c.get("predictions")]
    return sorted(out, key=lambda c: (c["spec"]["model"], c["spec"]["protocol"]))


def run_label(cell: dict) -> str:
    """``model (protocol)``: how a run is named in the analysis tables."""
    return f"{cell['spec']['model']} ({cell['spec']['protocol']})"


#: a seeded run's answer when no answer is given by more than half of its seeds' models (counted wrong)
NO_MAJORITY = "no majority"


def seed_runs_of(cell: dict) -> list[dict]:
    """The ``extra.seed_runs`` of a row trained with several seeds (two or more, each with its ``predictions``),
    else ``[]`` (a run of one model, or seeds that do not give their answers)."""
    runs = (cell.get("extra") or {}).get("seed_runs") or []
    if len(runs) < 2 or not all(isinstance(r.get("predictions"), list) for r in runs):
        return []
    return runs


def majority(answers, n: int):
    """The answer given by more than half of ``n`` models (``answers``: theirs, None for a model without one),
    else :data:`NO_MAJORITY`."""
    counts = Counter(a for a in answers if a is not None)
    if counts:
        a, k = counts.most_common(1)[0]
        if 2 * k > n:
            return a
    return NO_MAJORITY


def one_model_label(cell: dict) -> str:
    """:func:`run_label` of a table that reads the cell's own predictions: a row over several training seeds
    (``extra.seed_runs``) names the one seed whose model those predictions are (the cell keeps its first seed's),
    so the figure is never read as the row's mean over seeds."""
    runs = (cell.get("extra") or {}).get("seed_runs") or []
    if len(runs) < 2:
        return run_label(cell)
    return f"{run_label(cell)[:-1]}, seed {runs[0]['seed']}'s model of {len(runs)})"


def seeds_label(cell: dict) -> str:
    """How a row is named in a table that reads every seed's model (slices, calibration): a row over training
    seeds (:func:`seed_runs_of`) is ``model (protocol, mean over S seeds)``; any other row is
    :func:`one_model_label` (its own predictions)."""
    runs = seed_runs_of(cell)
    if not runs:
        return one_model_label(cell)
    return f"{run_label(cell)[:-1]}, mean over {len(runs)} seeds)"


def seed_cells(cell: dict) -> list[tuple]:
    """``[(seed, cell of that seed's model)]`` of a row over training seeds (:func:`seed_runs_of`), in the
    recipe's order; ``[]`` for a row of one model. Each seed's cell is the row's cell with the seed's answers
    (its records' ``pred``, ``score``, …) laid over the row's own records (which keep gold and the slice fields),
    in the row's record order, and the seed's kept ``unit_counts`` when its records come in that order (else its
    card's counts are computed from the records). A seed record of an item the row's records lack is an error."""
    runs = seed_runs_of(cell)
    if not runs:
        return []
    own = cell["predictions"]
    ids = [r["item_id"] for r in own]
    keep = {k: v for k, v in cell.items() if k not in ("predictions", "unit_counts", "extra")
            and not k.startswith("_")}
    extra = {k: v for k, v in (cell.get("extra") or {}).items() if k != "seed_runs"}
    out = []
    for r in runs:
        mine = {x["item_id"]: x for x in r["predictions"]}
        if set(mine) != set(ids):
            odd = sorted(set(mine) ^ set(ids), key=str)[:3]
            raise ValueError(f"{cell.get('card')} {cell.get('version')} {run_label(cell)}: seed {r.get('seed')}'s "
                             f"records are not of the row's items (e.g. {', '.join(map(str, odd))}); expected "
                             f"one record per item of the row")
        c = {**keep, "extra": extra, "predictions": [{**rec, **mine[i]} for rec, i in zip(own, ids)]}
        if r.get("unit_counts") is not None and [x["item_id"] for x in r["predictions"]] == ids:
            c["unit_counts"] = r["unit_counts"]
        out.append((r["seed"], c))
    return out


def addresses(cell: dict, metrics) -> bool:
    """True when one of ``metrics`` (a base name or several) has a value in the cell (for the cell's
    protocol): the run addresses that sub-task."""
    names = (metrics,) if isinstance(metrics, str) else tuple(metrics)
    return any((cell["metrics"].get(f"{m}_{cell['protocol']}") or {}).get("value") is not None for m in names)


def n_resamples_of(cell: dict, default: int | None = None) -> int:
    """The number of bootstrap resamples the run's own intervals used (``spec.parameters.n_resamples`` or
    ``seeds.bootstrap_resamples``), else ``default`` (the atlas default)."""
    from ..metrics.bootstrap import DEFAULT_RESAMPLES

    params = (cell.get("spec") or {}).get("parameters") or {}
    n = params.get("n_resamples") or (cell.get("seeds") or {}).get("bootstrap_resamples")
    return int(n or default or DEFAULT_RESAMPLES)


def robustness(cells, n_resamples: int | None = None):
    """The robustness table of result cells (default and variant cells, as :func:`atlaslib.results.read_cells`
    and :func:`atlaslib.variants.of_cell` give them): see :func:`atlaslib.analysis.perturbed.robustness`."""
    from .perturbed import robustness as table

    return table(cells, n_resamples)
