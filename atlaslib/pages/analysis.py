"""Where and why models fail, on the card page: disagreement between runs, the metric per slice,
calibration and (NegEx) the rule triggers behind the errors, for one (card, split version) with two or more
``ok`` runs. Every table is also written as a CSV download.

The numbers come from :mod:`atlaslib.analysis`; this module only lays them out.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd

from ..cards.families import family_of
from ..escape import md, md_code
from ..analysis import calibration as CAL, disagreement as DIS, ok_cells, slices as SL, triggers as TRG
from . import explorer

SHOW_ROWS = 10


def _num(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{float(v):.3f}"


def _short(note: str) -> str:
    """The slice table's cell note: the reason without the counts the ``n`` column already shows."""
    if not note:
        return ""
    return "too few for an interval" if note.startswith("too few") else note


def _with_ci(v, lo, hi, note="") -> str:
    s = _num(v)
    if lo is not None and hi is not None and not any(isinstance(x, float) and math.isnan(x) for x in (lo, hi)):
        return f"{s} [{lo:.3f}, {hi:.3f}]"
    return f"{s} ({note})" if note else s


class _Downloads:
    def __init__(self, page_dir: Path, card: str, version: str):
        self.page_dir, self.dir = page_dir, page_dir / "_downloads"
        self.stem = f"analysis-{card}-{version}"

    def link(self, frame: pd.DataFrame, name: str, what: str) -> str:
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"{self.stem}-{name}.csv"
        frame.to_csv(path, index=False, float_format="%.6g")
        return f"{{download}}`{what} (CSV) <{os.path.relpath(path, self.page_dir)}>`"


def _table(frame: pd.DataFrame) -> str:
    """A Markdown table whose text (run labels: user names; item and trigger text) is shown as text."""
    def text(v):
        return md(v) if isinstance(v, str) else v

    shown = frame.rename(columns=text)
    shown = shown.apply(lambda col: col.map(text) if col.dtype == object else col)
    return shown.to_markdown(index=False) + "\n"


def disagreement_markdown(card, version, vcells, dl: _Downloads) -> str:
    d = DIS.disagreement(vcells, card.name)
    out = ["### Disagreement between runs\n"]
    compared = ", ".join(md_code(r) for r in d.runs) or "none"
    note = (f" Runs that give the same answer to every item are left out: "
            f"{', '.join(md_code(r) for r in d.excluded)}." if d.excluded else "")
    if len(d.runs) < 2:
        return "\n".join(out + [f"Fewer than two runs to compare ({compared}).{note}\n"])
    if d.unit == "item":
        out.append(f"Runs compared: {compared}.{note} An item is *disputed* when the runs do not all give the "
                   "same answer, and *hard* when every run gets it wrong.\n")
        out.append(_table(explorer.linked_summary(d, card.name, version, dl.page_dir, dl.src)))
        hard = d.hard.drop(columns=["status"])
        out.append(f"Hard items ({len(hard):,}):\n")
        if len(hard):
            out.append(_table(hard.head(SHOW_ROWS)))
            if len(hard) > SHOW_ROWS:
                out.append(f"The first {SHOW_ROWS} of {len(hard):,} are shown; all are in the download.\n")
        frame = d.items[d.items["status"] != "agreed, right"]
        out.append(dl.link(frame, "disagreement", "disputed and hard items") + " · " +
                   dl.link(d.summary, "disagreement-summary", "counts") + "\n")
    else:
        unit = "gold mention" if d.unit == "mention" else "gold item"
        how = ("the run predicts exactly that mention (type, first and last word)" if d.unit == "mention"
               else "the scorer counts the run's prediction of it as correct; only runs that address the "
                    "sub-task count (column `runs`)")
        out.append(f"Runs compared: {compared}.{note} A {unit} is found by a run when {how}.\n")
        if d.items.empty:
            return "\n".join(out + ["The runs' prediction records do not say which gold items they found.\n"])
        out.append(_table(explorer.linked_summary(d, card.name, version, dl.page_dir, dl.src)))
        out.append(dl.link(d.items, "found", f"every {unit} with the runs that found it") + " · " +
                   dl.link(d.summary, "found-summary", "counts") + "\n")
    return "\n".join(out)


def pooled_label(k: int, n: int, unit: str = "items") -> str:
    return f"other ({k} slices, {n:,} {unit})"


def pool_small_slices(card, vcells, minimum: int):
    """The cells and slice specs with, per slice, the groups of fewer than ``minimum`` units pooled into one
    group "other (k slices, n items)" (when two or more are that small; when the slice's ``top`` rule already
    pools its rarer values as "other", one small group is enough and they join that group, k counting the distinct
    values pooled, so a table has one "other" row): each record gets the group it falls
    in under a derived field, so the card's own slice scorer scores the pooled group like any other. Slices
    of mentions stay as they are (their groups are not fields of a record). Returns ``(cells, slices)``."""
    import copy

    slices = dict(SL.card_slices(card.name))
    ok = [c for c in vcells if c.get("status") == "ok" and c.get("predictions")]
    if not ok:
        return vcells, slices
    groups = family_of(card).slice_groups   # where a record's slice group is: its fields, its found slices, none
    out_specs, relabel = {}, {}
    first = ok[0]["predictions"]
    for name, spec in slices.items():
        f = spec.get("field")
        top = None
        if spec.get("unit") == "mention" or groups is None or not f:
            out_specs[name] = spec
            continue
        if groups == "found":
            if not all("slices" in r and f in r["slices"] for r in first):
                out_specs[name] = spec
                continue
            values = sorted({v for r in first for v in r["slices"][f]})
            order = SL.group_order(spec, values)
            size = {g: int(sum((r["slices"][f].get(g) or [0])[0] for r in first)) for g in order}
        else:
            if not all(f in r for r in first):
                out_specs[name] = spec
                continue
            top = SL._top_values([r[f] for r in first], spec)
            labels = [SL.group_of(r[f], spec, top) for r in first]
            order = SL.group_order(spec, labels)
            size = {g: labels.count(g) for g in order}
        small = [g for g in order if size[g] < minimum]
        k = len(small)
        if top is not None and "other" in size and any(g != "other" for g in small):
            # the values the slice's ``top`` rule pools as "other" and the small groups are one pooled group (never
            # two "other" rows in one table); k counts the distinct values in it
            small = [g for g in order if g in small or g == "other"]
            k = len({repr(r[f]) for r, g in zip(first, labels) if g in small})
        elif len(small) < 2:
            out_specs[name] = spec
            continue
        unit = family_of(card).slice_units
        pooled = pooled_label(k, sum(size[g] for g in small), unit)
        key = f"{f}__pooled"
        out_specs[name] = {"field": key, "order": tuple(g for g in order if g not in small) + (pooled,),
                           **({"metric": spec["metric"]} if "metric" in spec else {})}
        relabel[name] = (spec, f, key, set(small), pooled)
    if not relabel:
        return vcells, slices
    cells = []
    for c in vcells:
        if c.get("status") != "ok" or not c.get("predictions"):
            cells.append(c)
            continue
        c = {**c, "predictions": copy.deepcopy(c["predictions"])}
        for spec, f, key, small, pooled in relabel.values():
            if groups == "found":
                for r in c["predictions"]:
                    merged = {}
                    for g, counts in r["slices"][f].items():
                        g2 = pooled if g in small else g
                        merged[g2] = [a + b for a, b in zip(merged.get(g2, [0] * len(counts)), counts)]
                    r["slices"][key] = merged
            else:
                top = SL._top_values([r[f] for r in c["predictions"]], spec)
                for r in c["predictions"]:
                    g = SL.group_of(r[f], spec, top)
                    r[key] = pooled if g in small else g
        cells.append(c)
    return cells, out_specs


def _exact_beside(value, lo, hi, n) -> str:
    """A zero-width slice interval at 0 or 1 (every resample scores the slice the same): the exact
    Clopper–Pearson interval of the share of its ``n`` units the run got right (all or none), beside it."""
    from ..metrics.intervals import clopper_pearson

    if value is None or lo is None or hi is None or lo != hi or value not in (0.0, 1.0) or not n:
        return ""
    elo, ehi = clopper_pearson(int(round(value * n)), int(n))
    return f" exact [{elo:.3f}, {ehi:.3f}]"


#: the note under a slice or calibration table with a row over training seeds (its figures are over every seed)
SEEDED_NOTE = ("A row trained with several seeds (named \"mean over … seeds\") is, as on the leaderboard, the mean "
               "over its seeds' models of each model's own {what}, with the leaderboard's two-level interval: the seeds "
               "drawn with replacement and {where}, the same draw for every seed. Each seed's figure, with its own "
               "interval, is in the download.")


def slices_markdown(card, version, vcells, dl: _Downloads) -> str:
    from ..cards import scoring_of

    family = family_of(card)
    rule = scoring_of(card).slices
    minimum = rule.min_units
    pooled_cells, specs = pool_small_slices(card, vcells, minimum)
    table = SL.slice_table(pooled_cells, card.name, specs)
    primary = rule.primary
    out = ["### Slices\n"]
    if table.empty:
        return "\n".join(out + ["The runs' prediction records carry no slice fields.\n"])
    what, unit = family.slice_note(card), family.slice_units
    out.append(f"The card's metric per slice: {what}, 95 %. `n` counts the slice's {unit}; the slices of a "
               f"breakdown with fewer than {minimum} each are pooled into one group, \"other (k slices, n "
               f"{unit})\"; a group still under {minimum} has no interval and says so. Where an interval has zero "
               "width because the run is right (or wrong) on every unit of the group, the exact Clopper–Pearson "
               "interval of that share stands beside it.\n")
    if "per_seed" in table.columns:
        out.append(SEEDED_NOTE.format(what="figure for the slice", where="its units resampled as above") + "\n")
    prim = table[table["metric"] == primary]
    cells = {(r.slice, r.group, r.run): r for r in prim.itertuples(index=False)}
    runs = list(dict.fromkeys(prim["run"]))
    present = set(prim["slice"])
    for name in [n for n in specs if n in present] + sorted(present - set(specs)):
        groups = list(dict.fromkeys(prim.loc[prim["slice"] == name, "group"]))
        rows = []
        for g in groups:
            row = {name: g, "n": ""}
            for r in runs:
                x = cells.get((name, g, r))
                if x is None:
                    row[r] = "—"
                    continue
                row["n"] = int(x.n)
                row[r] = _with_ci(x.value, x.ci_low, x.ci_high, _short(x.note))
                if not family.exact_slices:   # a family whose slice intervals are exact already
                    row[r] += _exact_beside(x.value, x.ci_low, x.ci_high, x.n)
            rows.append(row)
        out.append(f"**{name}**\n")
        out.append(_table(pd.DataFrame(rows)[[name, "n", *runs]]))
    out.append(dl.link(table, "slices", "every slice, run and metric") + "\n")
    return "\n".join(out)


def calibration_markdown(card, version, vcells, dl: _Downloads, page_dir: Path) -> str:
    table = CAL.calibration_table(vcells)
    out = ["### Calibration\n",
           f"For runs that give scores: Brier score and expected calibration error (ECE) over "
           f"{CAL.N_BINS} equal-mass bins of the score, with 95 % intervals over the same stratified resamples "
           "as the leaderboard's ({ref}`definitions <calibration>`). ECE is biased upward: "
           "even a perfectly calibrated run shows a positive ECE, the more so the fewer items per bin. Beside it "
           f"stand the ECE that a calibrated run with the same scores shows on average ({CAL.N_CONSISTENCY} "
           "draws of outcomes from the scores themselves) and the debiased ECE, the difference of the two (about "
           "0, or below, when the observed ECE is within the noise). The column *of* says what is calibrated: "
           "the score of the card's positive label, or, for a run that records every label's probability "
           "(and the card has no positive label), the probability of the label it answered against whether that "
           "answer is right (top-label calibration; its intervals resample items). Runs that give labels only have "
           "no calibration.\n"]
    if "brier_seeds" in table.columns:
        out.append(SEEDED_NOTE.format(what="Brier score and ECE", where="the items resampled as above")
                   + " The ECE if calibrated is the mean of the models' own, and the debiased ECE the difference "
                   "of the two means; the reliability diagram shows, per bin, the mean over the models. A row where "
                   "a seed's model gives no scores has no calibration.\n")
    scored = table["note"] == ""
    shown = pd.DataFrame({
        "run": table["run"], "of": [v or "—" for v in table["of"]], "n": table["n"],
        "Brier": [_with_ci(*r) if not n else n for r, n in zip(
            table[["brier", "brier_low", "brier_high"]].itertuples(index=False), table["note"])],
        f"ECE ({CAL.N_BINS} equal-mass bins)": [_with_ci(*r) if not n else n for r, n in zip(
            table[["ece", "ece_low", "ece_high"]].itertuples(index=False), table["note"])],
        "ECE if calibrated": [_num(v) if ok else "—" for v, ok in zip(table["ece_if_calibrated"], scored)],
        "debiased ECE": [(f"{v:+.3f}" if v is not None and not math.isnan(v) else "—") if ok else "—"
                         for v, ok in zip(table["ece_debiased"], scored)],
    })
    if not scored.any():
        shown = shown.drop(columns=["ECE if calibrated", "debiased ECE"])
    if not (table["note"] == "").any():
        shown = shown.drop(columns=["n", "of"])    # nothing scored: the table only says so, run by run
    out.append(_table(shown))
    out.append(dl.link(table, "calibration", "calibration") + "\n")
    if (table["note"] == "").any():
        import matplotlib.pyplot as plt

        fig = CAL.plot_reliability(vcells, title=f"reliability · {version}")
        if fig is not None:
            fig_dir = page_dir / "_figures"
            fig_dir.mkdir(parents=True, exist_ok=True)
            name = f"reliability-{card.name}-{version}.png"
            fig.savefig(fig_dir / name, dpi=110)
            plt.close(fig)
            out.append(f"```{{figure}} _figures/{name}\n:alt: reliability diagram on {version}\n\n"
                       f"Reliability diagram on `{version}`: per equal-mass bin ({CAL.N_BINS} bins), the mean "
                       "score against the observed rate (of the positive class, or, top-label, of right answers); "
                       "the dashed line is perfect calibration.\n```\n")
    return "\n".join(out)


def triggers_markdown(card, version, vcells, dl: _Downloads) -> str:
    t = TRG.trigger_tables(vcells)
    fp, fn = t["false_positives"], t["false_negatives"]
    if fp.empty and fn.empty:
        return ""
    out = ["### Why the rule systems decided\n",
           "Each rule system records the trigger that made its decision. False positives (affirmed concepts "
           "called negated), by the trigger that fired; false negatives (negated concepts called affirmed), by "
           "what the rules had: no trigger in scope (with or without one of the kit's negation triggers "
           "elsewhere in the sentence), or the trigger of a *possible* decision. The category is the rule "
           "set's own: the kit's trigger file ({term}`[PREN] <PREN>`, {term}`[POST] <POST>`, {term}`[PREP] <PREP>`, "
           "{term}`[POSP] <POSP>`) for negspacy, ConText's ({term}`NEGATED_EXISTENCE`, POSSIBLE_EXISTENCE, "
           "HYPOTHETICAL) for medspaCy.\n"]
    for frame, what, name in ((fp, "False positives", "false-positive-triggers"),
                              (fn, "False negatives", "false-negative-triggers")):
        out.append(f"**{what}** ({int(frame['count'].sum()) if len(frame) else 0:,} over the rule runs)\n")
        if len(frame):
            shown = frame.groupby("run", sort=False).head(SHOW_ROWS)
            out.append(_table(shown))
            if len(shown) < len(frame):
                out.append(f"The {SHOW_ROWS} most frequent per run are shown; all are in the download.\n")
        out.append(dl.link(frame, name, what.lower()) + "\n")
    return "\n".join(out)


def render(card, version: str, cells: list[dict], page_dir: Path, src: Path | None = None,
           heading: bool = True) -> str:
    """The analysis sections of one (card, version), or "" with fewer than two ok runs; ``heading=False``
    leaves out the section's own heading (the page it is on has it as its title)."""
    vcells = [c for c in cells if c.get("card", card.name) == card.name and c.get("version") == version]
    if len(ok_cells(vcells)) < 2:
        return ""
    page_dir = Path(page_dir)
    dl = _Downloads(page_dir, card.name, version)
    dl.src = Path(src) if src is not None else page_dir.parent.parent   # the site tree (pages at book/cards/)
    parts = [f"## Where models fail: `{version}`\n" if heading else "",
             "Computed from the runs' per-item records (no model is run again); the same tables come from "
             "`atlaslib.analysis` for any set of result cells.\n",
             disagreement_markdown(card, version, vcells, dl),
             slices_markdown(card, version, vcells, dl),
             calibration_markdown(card, version, vcells, dl, page_dir)]
    if card.analysis.rule_evidence:
        parts.append(triggers_markdown(card, version, vcells, dl))
    return "\n".join(p for p in parts if p)
