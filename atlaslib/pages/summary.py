"""A card's summary, first on its page: which systems to trust on its task, and how sure the atlas is.

:func:`card_summary` takes a card and its result cells (all versions) and answers, in sentences made from the
cells, what the leaderboard, the paired comparisons, the slices and the run times below it say across several
tables. Per split version (only the card's leaderboard version where it declares one, and the summary says so)
and per band (:func:`atlaslib.metrics.framing.bands`: rows of one training regime; overlap-flagged rows apart):

- the band's best row and the rows not distinguishable from it, each with its declared interval, where each
  is weakest (the slice group with its lowest value of the slice metric, among the groups large enough for
  an interval, on the same pooled groups as the version's "where models fail" page) and its prediction items per
  second;
- the rows below the best, with the paired test on the card's declared unit that separates them and its
  Holm-adjusted p-value;
- where the band's units cannot detect the card's margin, the comparisons' rule: the top row is the
  "highest point estimate (too few units to tell)" and no row is called best;
- the overlap-flagged rows, not ranked, with their reason;
- what the page cannot tell: the test size and the difference its top pair would detect (the comparisons'
  own minimum detectable difference), and the data's licence.

Nothing is computed here that the leaderboard (:mod:`atlaslib.pages.leaderboard`), the comparisons
(:mod:`atlaslib.pages.comparisons`, :mod:`atlaslib.metrics.framing`), the slices
(:func:`atlaslib.analysis.slices.slice_table`) or the run times (:func:`atlaslib.pages.rowinfo.speed`) do not
already compute; a name or reason from a cell is escaped (:func:`atlaslib.escape.md`).
"""
from __future__ import annotations

import math

from ..escape import md
from ..metrics import framing as F
from ..metrics.compare import run_label
from . import rowinfo
from .comparisons import comparison_of, p_text
from .leaderboard import MISSING, TOO_FEW_TO_TELL, fmt_interval, fmt_value, tie_text

HEADING = "## In brief"


def _entry(card, cell: dict, base: str | None = None) -> dict:
    return cell["metrics"].get(f"{base or card.metrics[0]}_{cell['protocol']}") or {}


def figure(card, cell: dict) -> str:
    """The row's primary metric as the leaderboard writes it: ``0.941 [0.927, 0.956]`` (three decimals), or
    ``n/a (reason)``."""
    e = _entry(card, cell)
    if e.get("value") is None:
        return f"n/a ({md(e.get('reason') or 'not applicable')})"
    iv = fmt_interval(e.get("ci_low"), e.get("ci_high"))
    return fmt_value(e["value"]) + (f" {iv}" if iv else "")


def _seeds_note(card, cell: dict) -> str:
    n = (_entry(card, cell).get("seeds") or {}).get("n_seeds")
    return f", the mean over {n} training seeds" if n else ""


def _speed(cell: dict) -> str:
    s = rowinfo.speed(cell)
    if s is None:
        why = rowinfo.speed_reason(cell)
        if rowinfo.too_short(cell):
            return md(why)
        return "no prediction time" + (f" ({md(why)})" if why else " (outside predictions: the atlas did not run it)")
    return f"{rowinfo.speed_text(s)} items/s"


# -- where each row is weakest -----------------------------------------------------------------------------------

def _slice_rows(card, vcells: list[dict], listed: list[dict]):
    """The slice table of the ``listed`` cells on the groups the version's "where models fail" page shows (its
    small groups pooled over all of ``vcells``), and the slice metric; (None, None) without slices."""
    from ..analysis.slices import slice_table
    from ..cards import scoring_of
    from .analysis import pool_small_slices

    try:
        rule = scoring_of(card).slices
    except KeyError:
        return None, None
    if rule is None or not card.analysis.slices or not listed:
        return None, None
    pooled, specs = pool_small_slices(card, vcells, rule.min_units)
    keys = {(c["model"], c["protocol"]) for c in listed}
    mine = [c for c in pooled if (c["model"], c["protocol"]) in keys]
    table = slice_table(mine, card.name, specs)
    return table[table["metric"] == rule.primary], rule.primary


def weakest(card, cell: dict, table, metric: str) -> str:
    """``weakest on <slice> <group> (n units): v [lo, hi] against <overall> overall`` for one row: the group of its
    slices (among those with an interval) where the slice metric is lowest relative to the run's own overall
    value; "" when the run has no such group."""
    from ..analysis import one_model_label, seeds_label

    if table is None or table.empty:
        return ""
    run = seeds_label(cell)        # a row over training seeds: its slices are the mean over its seeds' models
    t = table[(table["run"] == run) & table["value"].notna() & (table["note"] == "")]
    if t.empty:
        return ""
    higher = card.higher_is_better.get(metric, True)
    r = t.sort_values("value", ascending=higher, kind="stable").iloc[0]
    e = _entry(card, cell, metric)
    single = run == one_model_label(cell) != run_label(cell)     # seeds without their answers: the first seed's
    overall = (e.get("seeds") or {}).get("single_seed", {}).get("value") if single and e.get("seeds") else e.get("value")
    seed_runs = (cell.get("extra") or {}).get("seed_runs") or []
    whose = f"seed {md(seed_runs[0]['seed'])}'s model " if single and seed_runs else ""
    owner = "that model's" if whose else "its"
    against = "" if overall is None else f" against {owner} {fmt_value(overall)} overall"
    return (f"{whose}weakest on {md(r['slice'])} = {md(r['group'])} (n = {int(r['n']):,}): "
            f"{metric.replace('_', ' ')} {fmt_value(r['value'])} {fmt_interval(r['ci_low'], r['ci_high'])}{against}")


def _system(card, cell: dict, table, metric) -> str:
    where = weakest(card, cell, table, metric)
    return (f"**{md(run_label(cell))}** {figure(card, cell)}{_seeds_note(card, cell)}; "
            + (f"{where}; " if where else "") + _speed(cell))


# -- one band ---------------------------------------------------------------------------------------------------

def _ranked_band(card, band, unit: str) -> tuple[list[str], list[dict]]:
    """The sentences of one ranked band and the cells they list (best and not distinguishable)."""
    name = band.name.capitalize()
    comp = band.comparison
    by_label = {run_label(c): c for c in band.cells}
    if len(band.cells) == 1:
        return [f"**{name}.** The band's only run, nothing to rank it against:"], band.cells
    if comp is None or isinstance(comp, str) or comp.ranks is None or comp.ranks.empty:
        why = f": {md(comp)}" if isinstance(comp, str) else ""
        return [f"**{name}.** No paired comparison{why}; by point estimate only:"], band.cells
    ranks = comp.ranks.sort_values(["rank", "model"])
    n_units = int((comp.mdd or {}).get("n_units") or 0)
    margin = F.margin_of(card)
    best = ranks[ranks["decided_by"] == "best"].iloc[0]
    verdict = tie_text(best, n_units, margin)
    ties = ranks[(ranks["tie_group"] == "top") & (ranks["decided_by"] != "best")]
    below = ranks[(ranks["tie_group"] != "top")]
    listed = [by_label[best["model"]]] + [by_label[m] for m in ties["model"] if m in by_label]
    head = "Best" if verdict == "best" else verdict[0].upper() + verdict[1:]
    lines = [f"**{name}.** {head}: **{md(best['model'])}**"
             + (f", and not distinguishable from it (Holm, 5 %): "
                + ", ".join(f"**{md(m)}** ({md(t)}, Holm p {p_text(p)})" for m, t, p in
                            zip(ties["model"], ties["decided_by"], ties["p_holm_vs_best"]))
                if not ties.empty else ", alone: every other row of the band is below it") + "."]
    if verdict == TOO_FEW_TO_TELL:
        lines[-1] += f" No row is called best: {F.too_few_units_text(n_units, unit, margin)}."
    if not below.empty:
        tests = sorted(set(below["decided_by"]))
        how = "on the paired items" if tests == ["exact McNemar"] else f"on {md(unit)}"
        lines[-1] += (f" Below it, separated by the {' and '.join(tests)} {how}: "
                      + ", ".join(f"{md(m)} {figure(card, by_label[m]) if m in by_label else MISSING} (Holm p "
                                  f"{p_text(p)})" for m, p in zip(below["model"], below["p_holm_vs_best"])) + ".")
    return lines, listed


def _cannot_tell(card, comps: list, n_test) -> str:
    """What the version's test cannot tell: its size and what its top pairs would detect."""
    parts = []
    margin = F.margin_of(card)
    for band, comp in comps:
        m = comp.mdd or {}
        n = int(m.get("n_units") or 0)
        top = F.top_pair(comp)
        r = F.pair_row(F.framed_pairs(comp, margin), *top) if top else None
        if r is not None and not (isinstance(r["mdd"], float) and math.isnan(r["mdd"])):
            parts.append(f"{band.lower()}: its top pair ({md(top[0])} − {md(top[1])}) would detect a difference in "
                         f"{m['metric'].replace('_', ' ')} of about {r['mdd']:.3f} (80 % power, 5 % two-sided)"
                         + ("" if F.can_detect_margin(n, margin) else
                            f"; {F.too_few_units_text(n, m.get('unit', 'units'), margin)}"))
        elif r is not None:
            parts.append(f"{band.lower()}: {F.too_few_units_text(n, m.get('unit', 'units'), margin)}")
    size = f"{n_test:,} test items" if n_test else "an unrecorded number of test items"
    text = f"*Cannot tell.* {size}"
    if not parts:
        return text + ("; no band has two runs compared on them, so this version says nothing of differences "
                       "between runs" + (f" (the card's equivalence margin is ±{margin:g})" if margin else "") + ".")
    text += "; " + "; ".join(parts)
    text += (f". A true difference smaller than that would likely go unseen"
             + (f"; the card's equivalence margin is ±{margin:g}" if margin else "") + ".")
    return text


def _version(card, version: str, cells: list[dict], comparisons: dict | None = None) -> list[str]:
    vcells = [c for c in cells if c["version"] == version]
    ok = [c for c in vcells if c.get("status") == "ok"]
    if not ok:
        return [f"*No run of `{version}` has a result yet.*"]
    comp = comparison_of(card, version, cells, comparisons)
    bands = comp.bands if isinstance(comp, F.Banded) else [
        F.Band(name, mine, comp if isinstance(comp, str) else None) for name, mine in F.bands(card, ok)]
    unit = next((b.comparison.data.unit for b in bands if b.ranked and b.comparison is not None
                 and not isinstance(b.comparison, str)), card.resampling_unit)
    out = []
    listed_all: list[tuple[list[str], list[dict]]] = []
    compared = []
    for band in bands:
        if not band.ranked:
            continue
        lines, listed = _ranked_band(card, band, unit)
        listed_all.append((lines, listed))
        if band.comparison is not None and not isinstance(band.comparison, str) and len(band.cells) > 1:
            compared.append((band.name, band.comparison))
    table, metric = _slice_rows(card, vcells, [c for _, ls in listed_all for c in ls])
    for lines, listed in listed_all:
        out.append("- " + " ".join(lines))
        out += [f"  - {_system(card, c, table, metric)}" for c in listed]
    apart = [b for b in bands if not b.ranked]
    for band in apart:
        out.append(f"- **{band.name.capitalize()}**, shown apart: trained on data that overlap the test data, so a "
                   "score here is not a held-out score.")
        out += [f"  - **{md(run_label(c))}** {figure(card, c)}: {md(F.overlap_reason(c))}; {_speed(c)}"
                for c in band.cells]
    n_test = (ok[0].get("split") or {}).get("n_test") or card.test_sizes.get(version)
    out += ["", _cannot_tell(card, compared, n_test)]
    return out


def card_summary(card, cells: list[dict], comparisons: dict | None = None) -> str:
    """The summary of ``card`` from its result cells (all versions; other cards' cells are ignored): Markdown
    headed :data:`HEADING`, placed first on the card page (see the module docstring). ``comparisons``: version ->
    :func:`atlaslib.pages.comparisons.comparison_for` of these cells where the page has computed it already (the
    leaderboard's), so it is computed once per (card, version); a version not in it is computed here."""
    cells = [c for c in cells if c.get("card") == card.name]
    primary = card.metrics[0].replace("_", " ")
    run = [v for v in card.page_versions if any(c["version"] == v and c.get("status") == "ok" for c in cells)]
    lead = card.leaderboard_version
    if lead and lead in run:
        versions = [lead]
        others = [v for v in card.page_versions if v != lead]
        which = (f"On `{lead}`, the split version the card ranks on"
                 + (f" (the leaderboard of {', '.join(f'`{v}`' for v in others)} is further down)" if others else "")
                 + ".")
    else:
        versions = run or list(card.page_versions)
        which = "Per split version (rankings never mix them)" + (
            f"; the version the card ranks on, `{lead}`, has no result in this build" if lead else "") + "."
    parts = [HEADING, "",
             f"{which} Each band ranks rows of one training regime on {primary}, with its declared 95 % interval; "
             "\"not distinguishable\" is not shown different, which is not the same as equal. Each listed run's "
             "weakest slice is the group where its slice metric is lowest (among groups large enough for an "
             "interval); items/s is its prediction speed on the build machine.", ""]
    for version in versions:
        if len(versions) > 1 or version != lead:
            parts += [f"**`{version}`**", ""]
        parts += _version(card, version, cells, comparisons) + [""]
    licence = md(card.licence) if card.licence else "not declared"
    parts.append(f"*Licence of the data:* {licence}"
                 + ("" if card.licence_confirmed else " (not confirmed: local evaluation only)") + ".")
    return "\n".join(parts) + "\n"
