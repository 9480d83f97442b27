"""Leaderboards of one (card, split version), rendered from result cells.

Two tables, so each fits a 1,200 px page:

1. the card's metrics, one row per (model, protocol), each with the interval the card declares (on its own
   line); where a proportion sits at 0 or 1, or a percentile interval has zero width for a predictor that
   is not constant, the exact Clopper–Pearson interval stands beside it ("exact [...]"). A metric without
   a value shows one short mark (``n/a`` or ``not run``) and a footnote number; each reason is written
   once under the table.
2. the ranks on the primary metric within each band (:mod:`atlaslib.metrics.framing`: rows of one training
   regime are ranked together; overlap-flagged rows sit in a "not ranked" band with their reason): against
   the band's best, "not distinguishable from the best (Holm, 5 %)" or below (and the test that decided),
   the rank interval over the resamples, P(rank 1), the intervals that assume something different from the
   declared one (NegEx: sentence-cluster; NLI: template-cluster and the one-sided upper bound of the
   false-entailment rate) and the prediction phase's items per second on the build machine;
3. for language-model rows: the contamination mark and the memorisation probe.

The same rows are written as CSV and JSON downloads.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..cards import card_pages
from ..escape import md
from ..metrics import bootstrap, framing as F, intervals
from ..results.schema import is_external
from . import rowinfo

MISSING = "—"


def fmt_value(v) -> str:
    """Three decimals, or the missing mark."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return MISSING
    return f"{float(v):.3f}"


def fmt_interval(lo, hi) -> str:
    if lo is None or hi is None or any(isinstance(x, float) and math.isnan(x) for x in (lo, hi)):
        return ""
    return f"[{lo:.3f}, {hi:.3f}]"


class Footnotes:
    """Numbered reasons, each written once."""

    def __init__(self):
        self.reasons: list[str] = []

    def mark(self, reason: str) -> str:
        if reason not in self.reasons:
            self.reasons.append(reason)
        return f"<sup>{self.reasons.index(reason) + 1}</sup>"

    def markdown(self) -> str:
        return "".join(f"\n<sup>{k}</sup> {r}<br>" for k, r in enumerate(self.reasons, 1)).strip()


# -- exact intervals beside degenerate ones ---------------------------------------------------------------

def _counted(cell: dict):
    """``(scoring, unit counts)`` of an ok cell with predictions, else None (the leaderboard shows what the
    cell holds without them)."""
    from ..cards import counted, scoring_of

    if cell.get("status") != "ok" or not cell.get("predictions"):
        return None
    try:
        return scoring_of(cell["card"]), counted(cell)
    except (KeyError, ValueError):
        return None


def proportion_counts(cell: dict, base: str) -> tuple[int, int] | None:
    """``(k, n)`` of a leaderboard metric that is a proportion (its card's scoring declares it so), from the
    cell's per-unit counts; None otherwise."""
    from ..metrics import engine

    found = _counted(cell)
    if found is None:
        return None
    scoring, uc = found
    try:
        return engine.proportion_counts(scoring, uc, base)
    except KeyError:            # a metric the scoring does not count (a pass/fail gate)
        return None


def constant_predictor(cell: dict) -> bool:
    preds = cell.get("predictions") or []
    if not preds or "pred" not in preds[0]:
        return False
    first = preds[0]["pred"]
    return all(r["pred"] == first for r in preds)


def exact_beside(cell: dict, base: str, entry: dict) -> tuple[float, float] | None:
    """The exact Clopper–Pearson interval to show beside a degenerate declared interval, else None (never
    beside an interval the card declares exact)."""
    from ..cards import scoring_of

    v = entry.get("value")
    if v is None:
        return None
    lo, hi = entry.get("ci_low"), entry.get("ci_high")
    try:
        declared_exact = scoring_of(cell["card"]).interval == "exact"
    except KeyError:
        declared_exact = False
    zero_width = lo is not None and hi is not None and lo == hi
    if declared_exact or not (v in (0.0, 1.0) or (zero_width and not constant_predictor(cell))):
        return None
    kn = proportion_counts(cell, base)
    if kn is None or kn[1] == 0:
        return None
    return intervals.clopper_pearson(*kn)


def metric_cell(cell: dict, base: str, notes: Footnotes) -> str:
    entry = cell["metrics"].get(f"{base}_{cell['protocol']}")
    if entry is None:
        return "n/a" + notes.mark("not reported by this run")
    if entry.get("value") is None:
        reason = entry.get("reason") or "not applicable"
        return "n/a" + notes.mark(reason)
    if base.endswith("_gate") and entry.get("ci_low") is None:      # pass/fail gates are stored as 1/0
        return "pass" if entry["value"] == 1 else "FAIL"
    kn = proportion_counts(cell, base)
    if kn is not None and kn[1] == 0:            # a cell written before the zero-division rule stored 0
        from ..metrics.classification import UNDEFINED_REASONS
        return "n/a" + notes.mark(UNDEFINED_REASONS.get(base, "undefined: empty denominator"))
    text = fmt_value(entry["value"])
    ci = fmt_interval(entry.get("ci_low"), entry.get("ci_high"))
    if ci:
        text += f' <span class="atlas-ci">{ci}</span>'
    runs = (cell.get("extra") or {}).get("seed_runs") or []
    exact = None if len(runs) > 1 else exact_beside(cell, base, entry)   # one seed's counts: not the row's
    if len(runs) > 1 and ci and entry.get("ci_low") == entry.get("ci_high"):
        text += notes.mark(f"each of the {len(runs)} seeds' models gives this value on every resample: the "
                           "interval has no width to show")
    if exact:
        text += (' <span class="atlas-ci atlas-exact">exact</span> '
                 f'<span class="atlas-ci atlas-exact">{fmt_interval(*exact)}</span>')
    return text


# -- intervals that assume something else -------------------------------------------------------------------

def cluster_intervals(cell: dict) -> dict:
    """The card's additional intervals of one ok run (its scoring's ``extra`` resamplings): ``{label: {value,
    ci_low, ci_high, n_clusters, few_clusters}}`` or ``{label: {"reason": ...}}`` when the cell's records lack
    the grouping. A row over several training seeds is shown as its headline is: the mean over its seeds with
    the two-level interval (:func:`atlaslib.metrics.seeds.extra_interval`), never its first seed alone."""
    from ..cards import seed_counted
    from ..metrics import engine, seeds as S

    found = _counted(cell)
    if found is None:
        return {}
    scoring, uc = found
    seed = int((cell.get("seeds") or {}).get("bootstrap") or bootstrap.DEFAULT_SEED)
    per_seed = seed_counted(cell)
    out = {}
    for rs in scoring.extra:
        if rs.by and any(rs.by not in u.groups for u in [uc] + [u for _, u in per_seed]):
            out[rs.label] = {"reason": f"this cell's predictions carry no {rs.by}"}
            continue
        for name in rs.metrics:
            d = (S.extra_interval(scoring, per_seed, rs, name, seed=seed) if per_seed
                 else engine.extra_interval(scoring, uc, rs, name, seed=seed))
            if "n_clusters" in d:
                d["few_clusters"] = bool(d["n_clusters"] < intervals.FEW_CLUSTERS)
            out[rs.label] = d
    return out


def upper_bounds(cell: dict) -> dict:
    """``{label: (k, n, exact one-sided 95 % upper bound)}`` of the metrics whose card reports that bound
    (e.g. a false-entailment rate); None for a metric without a denominator."""
    from ..metrics import engine

    found = _counted(cell)
    if found is None:
        return {}
    scoring, uc = found
    return {m.label or m.name.replace("_", " "): engine.upper_bound(scoring, uc, m.name)
            for m in scoring.metrics if m.upper_bound}


def _interval_text(d: dict, notes: Footnotes) -> str:
    if "reason" in d:
        return "n/a" + notes.mark(d["reason"])
    text = f"{fmt_value(d['value'])} {fmt_interval(d['ci_low'], d['ci_high'])}"
    if d.get("few_clusters"):
        text += " ⚠" + notes.mark(f"fewer than {intervals.FEW_CLUSTERS} clusters: a cluster bootstrap interval "
                                  "is then too narrow; read it as optimistic")
    return text


# -- the tables ---------------------------------------------------------------------------------------------

def _rows(card, version, cells):
    rows = [c for c in cells if c["card"] == card.name and c["version"] == version]

    def primary(c):
        e = c["metrics"].get(f"{card.metrics[0]}_{c['protocol']}") or {}
        v = e.get("value")
        return -math.inf if v is None else (v if card.higher_is_better.get(card.metrics[0], True) else -v)

    conds = list(dict.fromkeys((getattr(card, "ranking_conditions", None) or {}).values()))
    rows.sort(key=lambda c: (F.BANDS.index(F.band_of(card, c)), _condition_rank(conds, F.condition_of(card, c)),
                             c["status"] != "ok", -primary(c), c["model"], c["protocol"]))
    return rows


def _condition_rank(declared: list, condition: str) -> int:
    """A row's condition in the card's declared order (undeclared last), so each band's rows sit together."""
    return declared.index(condition) if condition in declared else len(declared)


def _row_marks(cell, notes) -> str:
    """Footnotes on a row's name: the card's marks on it (``extra.row_marks``, card data, e.g. a recipe's
    history) and, for a row over several training seeds, what its value is."""
    extra = cell.get("extra") or {}
    out = "".join(notes.mark(_md(m)) for m in extra.get("row_marks") or [])
    n = len(extra.get("seed_runs") or [])
    if n > 1 and cell.get("status") == "ok":
        out += notes.mark(f"the mean over {n} trained models (one per training seed); its interval resamples "
                          "seeds and test units (the training seeds page)")
    return out


def _md(text) -> str:
    return md(text)  # user text (names, reasons) as text: never HTML, a link or a table break


def _name(text) -> str:
    """A model name that may break after '/' and '-' (long hub ids would otherwise widen the table)."""
    return _md(text).replace("/", "/<wbr>").replace("-", "-<wbr>")


def leaderboard_tables(card, version: str, cells: list[dict], page_dir: Path, src: Path, failed=(),
                       comparison=None, short_reason=lambda r: r, rule: bool = True) -> str:
    """The leaderboard tables of one (card, version); ``rule`` False: the ranks' decision rule is not written
    here but once on the card page (:func:`ranks_rule`), and the ranks refer to it."""
    from ..metrics.compare import run_label

    rows = _rows(card, version, cells)
    failed = [r for r in failed if r.card == card.name and r.version == version]
    if not rows and not failed:
        return f"*No result cells for `{version}` yet.*\n"
    notes = Footnotes()
    overlap_seen = any(c.get("overlap") for c in rows)
    tables = []
    for group in metric_groups(card.metrics):
        head = ["model", "protocol, regime"] + [m.replace("_", " ") for m in group] + ["run"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for c in rows:
            name = _name(c["model"]) + (" †" if c.get("overlap") else "") + _row_marks(c, notes)
            mark = rowinfo.contamination_mark(c)
            if mark:
                name += " ◊" + notes.mark("◊ " + _md(mark))
            if c["status"] != "ok":
                vals = ["not run" + notes.mark("not run: " + _md(short_reason(c.get("reason"))))] + \
                       [MISSING] * (len(group) - 1)
            else:
                vals = [metric_cell(c, b, notes) for b in group]
            links = []
            if is_external(c):
                links.append("external predictions")
            if c.get("_notebook_rel"):
                links.append(f"[notebook]({os.path.relpath(src / c['_notebook_rel'], page_dir)})")
            if c.get("_json_rel"):
                links.append(f"{{download}}`JSON <{os.path.relpath(src / c['_json_rel'], page_dir)}>`")
            regime = f'{c["protocol"].replace("_", "_<wbr>")} <span class="atlas-regime">{F.SHORT[F.band_of(card, c)]}</span>'
            lines.append("| " + " | ".join([name, regime] + vals + [" · ".join(links)]) + " |")
        for req in failed:
            lines.append("| " + " | ".join([_name(req.model), req.protocol, "**failed**" + notes.mark(
                "failed: see the build log")] + [MISSING] * (len(group) - 1) + [""]) + " |")
        tables.append(":::{container} atlas-leaderboard\n" + "\n".join(lines) + "\n:::\n")
    out = tables
    if overlap_seen:
        out.append("† trained on data that overlap this card's test data: shown, but not ranked (no rank, tie group, "
                   "P(rank 1), Holm family or minimum detectable difference).\n")
    n_units = _few_cluster_units(card, rows)
    if n_units:
        out.append(f"⚠ The declared intervals of `{version}` resample {n_units[0]} {n_units[1]}: a bootstrap over "
                   f"fewer than {intervals.FEW_CLUSTERS} clusters is too narrow; read these intervals as "
                   "optimistic.\n")
    second = _ranks_table(card, version, rows, comparison, notes, run_label, rule=rule)
    if notes.reasons:
        out.append(notes.markdown() + "\n")
    if second:
        out.append(second)
    llm = rowinfo.llm_table(rows)
    if llm:
        out.append(llm)
    notes_fn = getattr(card_pages(card), "leaderboard_notes", None)
    if notes_fn is not None:    # the card's own notes under its board (e.g. the denominators per pattern)
        out.append(notes_fn(rows))
    return "\n".join(out)


MAX_METRICS_PER_TABLE = 5


def metric_groups(metrics) -> list[tuple]:
    """The card's metrics in tables of at most :data:`MAX_METRICS_PER_TABLE` columns (as even as possible,
    the primary metric in the first), so each table fits a 1,200 px page."""
    metrics = tuple(metrics)
    k = -(-len(metrics) // MAX_METRICS_PER_TABLE)
    size = -(-len(metrics) // max(k, 1))
    return [metrics[i:i + size] for i in range(0, len(metrics), size)]


def _few_cluster_units(card, rows):
    """``(n, unit)`` when the card's declared intervals resample fewer than ``FEW_CLUSTERS`` whole clusters
    (case reports, documents: units that are not single items), else None."""
    from ..cards import scoring_of

    ok = [c for c in rows if c["status"] == "ok"]
    found = _counted(ok[0]) if ok else None
    if found is None:
        return None
    scoring, uc = found
    rs = scoring.resampling
    if rs.rule == "clusters":
        n = len(set(map(str, uc.groups[rs.by])))
    elif scoring.units_are_clusters:
        n = uc.n
    else:
        return None
    return (n, rs.unit) if n < intervals.FEW_CLUSTERS else None


#: the top row's verdict where the band's units cannot detect the card's margin
TOO_FEW_TO_TELL = "highest point estimate (too few units to tell)"
#: the top row's verdict where its recipe is not a held-out result (the card's ``chosen_after_test``)
NOT_HELD_OUT = "highest point estimate (not a held-out result: {why})"


def tie_text(r, n_units: int | None = None, margin: float | None = None) -> str:
    """A ranked row against its band's best: "best", "not distinguishable (test)" or "below (test)". With the
    band's ``n_units`` (resampling units) and the card's ``margin``: "best" only where those units can detect
    the margin (:func:`atlaslib.metrics.framing.can_detect_margin`), else "highest point estimate (too few
    units to tell)". A top row whose recipe is not a held-out result (its ``chosen_after_test`` in the ranks, from
    the card's declaration) is never "best": :data:`NOT_HELD_OUT` says why."""
    if r["decided_by"] == "best":
        why = r.get("chosen_after_test") if hasattr(r, "get") else None
        if isinstance(why, str) and why:
            return NOT_HELD_OUT.format(why=why)
        if n_units is not None and not F.can_detect_margin(n_units, margin):
            return TOO_FEW_TO_TELL
        return "best"
    if r["tie_group"] == "top":
        return f"not distinguishable ({r['decided_by']})"
    return f"below ({r['decided_by']})"


def _ranks_table(card, version, rows, comparison, notes: Footnotes, run_label, rule: bool = True) -> str:
    ok = [c for c in rows if c["status"] == "ok"]
    if not ok:
        return ""
    ranks = comparison.ranks.set_index("model") if comparison is not None and not comparison.ranks.empty else None
    extra = {run_label(c): cluster_intervals(c) for c in ok}
    extra_cols = []
    for d in extra.values():
        extra_cols += [k for k in d if k not in extra_cols]
    bounds = {run_label(c): upper_bounds(c) for c in ok}
    bound_cols = []
    for d in bounds.values():
        bound_cols += [k for k in d if k not in bound_cols]
    speed_col = "prediction items/s"
    from . import robustness  # the worst perturbation of each run (its variant cells beside its cell)

    worst = {run_label(c): robustness.worst_text(card, version, rows, c) for c in ok} if card.perturbations else {}
    worst = worst if any(v != MISSING for v in worst.values()) else {}

    def row_vals(c, lab):
        vals = []
        for col in extra_cols:
            d = extra[lab].get(col)
            vals.append(_interval_text(d, notes) if d else MISSING)
        for k in bound_cols:
            ub = bounds[lab].get(k)
            vals.append(MISSING if ub is None else f"{ub[2]:.3f} ({ub[0]} of {ub[1]})")
        vals.append(rowinfo.speed_cell(c))
        if worst:
            vals.append(worst[lab])
        return vals

    tail = extra_cols + [f"{k}, one-sided 95 % upper bound" for k in bound_cols] + [speed_col] + (
        ["worst perturbation (exact McNemar, Holm)"] if worst else [])
    primary = card.metrics[0].replace("_", " ")
    blocks = []
    by_band = F.bands(card, ok)
    for band, mine in by_band:
        if band == F.NOT_RANKED:
            head = ["model", "why not ranked"] + tail
            lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            for c in mine:
                lab = run_label(c)
                lines.append("| " + " | ".join([_name(lab), _md(F.overlap_reason(c))] + row_vals(c, lab)) + " |")
            blocks.append(f"**{band.capitalize()}** ({len(mine)} run{'s' if len(mine) != 1 else ''}): trained on "
                          "data that overlap the test data, so a score here is not a held-out score; shown, and "
                          "left out of every rank, tie group, P(rank 1), Holm family and minimum detectable "
                          "difference.\n\n:::{container} atlas-leaderboard\n" + "\n".join(lines) + "\n:::\n")
            continue
        head = ["model", "vs the band's best (Holm, 5 %)", "rank [95 %]", "P(rank 1)"] + tail
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for c in mine:
            lab = run_label(c)
            if len(mine) == 1:              # alone in its band: nothing to rank it against
                vals = ["the band's only run", MISSING, MISSING]
            elif ranks is not None and lab in ranks.index:
                r = ranks.loc[lab]
                verdict = tie_text(r, (comparison.mdd or {}).get("n_units"), F.margin_of(card))
                vals = [verdict, f"{int(r['rank'])} [{int(r['rank_low'])}–{int(r['rank_high'])}]",
                        f"{r['p_rank1']:.3f}"]
            else:
                vals = [MISSING] * 3
            lines.append("| " + " | ".join([_name(lab)] + vals + row_vals(c, lab)) + " |")
        blocks.append(f"**{band.capitalize()}** ({len(mine)} run{'s' if len(mine) != 1 else ''})\n\n"
                      ":::{container} atlas-leaderboard\n" + "\n".join(lines) + "\n:::\n")
    if rule:
        intro = ranks_rule(card, ok, perturbations=bool(worst), clusters=bool(extra_cols))
    else:
        intro = (f"**Ranks on {primary}, within each band**, by the card's rule ({{ref}}`how the rows are ranked "
                 f"<{rule_label(card)}>`, above).")
    return intro + "\n\n" + "\n".join(blocks)


def rule_label(card) -> str:
    """The MyST target of a card's decision-rule paragraph (one per card page)."""
    return f"rank-rule-{card.name}"


def ranks_rule(card, cells: list[dict], perturbations: bool | None = None, clusters: bool | None = None) -> str:
    """The decision rule of the ranks tables, in words: bands, *best*, not distinguishable, rank interval, P(rank 1)
    and how ties count, items per second (on the machine of ``cells``), the worst perturbation (``perturbations``:
    default, whether the card declares perturbations) and the cluster columns (``clusters``: default, whether its
    scoring declares extra resamplings). Written once per card page (:func:`rule_markdown`); a leaderboard
    rendered alone carries it."""
    from ..cards import scoring_of

    primary = card.metrics[0].replace("_", " ")
    ok = [c for c in cells if c.get("status") == "ok"]
    if perturbations is None:
        perturbations = bool(card.perturbations)
    if clusters is None:
        try:
            clusters = bool(scoring_of(card).extra)
        except KeyError:
            clusters = False
    intro = (f"**Ranks on {primary}, within each band.** A row is ranked only against rows of the same training "
             "regime: no training on the card's data (zero-shot models, rules, fixed baselines), trained on the "
             "card's train items (a protocol or baseline the card declares as learning from them), outside "
             "predictions (systems the atlas did not run). The regimes answer different questions (what a model "
             "brings to the task, what the card's own train items add, what someone else's system does), so one "
             "ranking across them would mix them. In each band the best row by point estimate is named: *best* "
             f"only where the test's units can detect the card's margin (a test at 5 % needs at least "
             f"{F.fewest_deciding_units()} units favouring one row, so n units detect no difference below "
             f"{F.fewest_deciding_units()}/n), else *{TOO_FEW_TO_TELL}*, and never for a row whose recipe "
             "the card declares not a held-out result (chosen after a test score: *highest point estimate (not a "
             "held-out result: …)*); a row "
             f"*{F.NOT_DISTINGUISHABLE}* has a Holm-adjusted p-value of at least 0.05 against it over the band's "
             "pairs (the test that decided is named): not shown different, which is not the same as equal (the "
             "paired comparisons say where a pair is equivalent within the card's margin). The rank interval is "
             "the 2.5–97.5 % range of the row's rank in its band over the paired resamples, P(rank 1) the share of "
             "resamples where it ranks first. Rows tied for first on a resample (no row strictly better) each "
             "count it, so the column is not a distribution and can sum above 1: two rows that answer alike on "
             "every resample both get 1.000. Items per second: " + rowinfo.speed_note(ok))
    if perturbations:
        from ..analysis.perturbed import WORST_RULE

        intro += (f" The worst perturbation is, {WORST_RULE.replace('the primary metric', primary)}. One "
                  "procedure decides and is shown: the difference in "
                  f"{primary} (perturbed − default run), McNemar's b (items the run got right and the perturbed run "
                  "wrong) and c (the reverse) of the items the perturbation read, and the Holm-adjusted exact p; "
                  "where no perturbation qualifies the cell says \"none shown worse\" with how many perturbations "
                  "and items were read, which is not the same as robust. A row trained with several seeds ran "
                  "every seed's model under each perturbation: its difference is the mean over its seeds' models and "
                  "an item counts as right when more than half of them are, as in the paired comparisons. Every "
                  "perturbation, with its paired bootstrap interval, is on the version's robustness page.")
    if clusters:
        intro += (" The interval columns assume something different from the declared one: they resample whole "
                  "clusters (sentences, templates) instead of items.")
    conditions = list(dict.fromkeys((getattr(card, "ranking_conditions", None) or {}).values()))
    if conditions:
        intro += (" Rows of different conditions (" + "; ".join(md(c) for c in conditions) + ") answer different "
                  "questions: each condition is ranked apart, within its regime.")
    return intro


def rule_markdown(card, cells: list[dict]) -> str:
    """The card page's one decision-rule paragraph (a MyST target the versions' ranks refer to), from the card's
    ok cells of every version; "" without one."""
    if not any(c.get("status") == "ok" for c in cells):
        return ""
    return f"({rule_label(card)})=\n## How the rows are ranked\n\n" + ranks_rule(card, cells) + "\n"


def leaderboard_frame(card, version: str, cells: list[dict], comparison=None) -> pd.DataFrame:
    """The leaderboard as a flat table (the CSV/JSON download): per metric value, ci_low, ci_high, reason;
    tie group, rank interval and P(rank 1)."""
    from ..metrics.compare import run_label

    ranks = comparison.ranks.set_index("model") if comparison is not None and not comparison.ranks.empty else None
    out = []
    for c in _rows(card, version, cells):
        band = F.band_of(card, c)
        row = {"card": card.name, "version": version, "model": c["model"], "protocol": c["protocol"],
               "status": c["status"], "overlap": ", ".join(c.get("overlap") or []), "regime": F.regime(card, c),
               "band": F.band_name(band, F.condition_of(card, c)), "not_ranked_reason": F.overlap_reason(c)}
        for b in card.metrics:
            e = c["metrics"].get(f"{b}_{c['protocol']}") or {}
            row[b] = e.get("value")
            row[f"{b}_ci_low"], row[f"{b}_ci_high"] = e.get("ci_low"), e.get("ci_high")
            row[f"{b}_reason"] = e.get("reason") or (c.get("reason") if c["status"] != "ok" else None)
        lab = run_label(c)
        if band != F.NOT_RANKED and ranks is not None and lab in ranks.index:
            r = ranks.loc[lab]
            n_units = (comparison.mdd or {}).get("n_units")
            tie = (tie_text(r, n_units, F.margin_of(card)) if r["decided_by"] == "best"
                   else F.NOT_DISTINGUISHABLE if r["tie_group"] == "top" else "below the best")
            row.update(tie_group=tie, decided_by=r["decided_by"], rank=int(r["rank"]),
                       rank_low=int(r["rank_low"]), rank_high=int(r["rank_high"]), p_rank1=float(r["p_rank1"]))
        row.update(rowinfo.download_fields(c))
        out.append(row)
    return pd.DataFrame(out)


def write_downloads(frame: pd.DataFrame, folder: Path, stem: str, omit_null=()) -> tuple[Path, Path]:
    """``<stem>.csv`` and ``<stem>.json`` (records) in ``folder``; a JSON record has no key of ``omit_null``
    whose value is null (a not-ranked row has no rank fields at all)."""
    folder.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = folder / f"{stem}.csv", folder / f"{stem}.json"
    frame.to_csv(csv_path, index=False, float_format="%.6g")
    records = json.loads(frame.to_json(orient="records"))
    records = [{k: v for k, v in r.items() if not (k in omit_null and v is None)} for r in records]
    json_path.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    return csv_path, json_path
