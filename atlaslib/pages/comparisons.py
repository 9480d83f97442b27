"""Paired comparisons of one (card, split version), rendered from result cells: what the test set can
detect (minimum detectable difference), the pairwise differences of the primary metric with paired
intervals, McNemar's b and c and Holm-adjusted p-values, a figure of those differences, and the whole
comparison table (every leaderboard metric) as CSV and JSON downloads beside the leaderboard's own.

The numbers come from :mod:`atlaslib.metrics.compare`; this module only lays them out.
"""
from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .. import atomicio, plots
from ..analysis.paired import paired_from_cells
from ..metrics import bootstrap
from ..escape import md
from ..metrics import compare as K
from ..metrics import framing as F
from ..metrics.intervals import FEW_CLUSTERS
from . import explorer
from .leaderboard import _name, fmt_interval, leaderboard_frame, rule_label, write_downloads

METRICS_MARK = "<!-- paired-example -->"


def comparison_for(card, version: str, cells: list[dict]):
    """The comparisons of the ok runs of (card, version), one per band (:mod:`atlaslib.metrics.framing`: rows
    ranked within their training regime; overlap-flagged rows in a band of their own, never compared), as a
    :class:`~atlaslib.metrics.framing.Banded`; None without an ok run; a string (the reason) when no band
    could be compared because the runs lack the per-item records the card's resampling needs."""
    ok = [c for c in cells if c["card"] == card.name and c["version"] == version and c["status"] == "ok"]
    if not ok:
        return None

    def primary(c):
        v = (c["metrics"].get(f"{card.metrics[0]}_{c['protocol']}") or {}).get("value")
        return -math.inf if v is None else (v if card.higher_is_better.get(card.metrics[0], True) else -v)

    ok.sort(key=lambda c: (-primary(c), c["model"], c["protocol"]))
    banded = F.Banded(not_ranked=[(K.run_label(c), F.overlap_reason(c)) for c in ok if F.overlap_reason(c)])
    for name, mine in F.bands(card, ok):
        comp = _compare(card, mine) if name != F.NOT_RANKED else None
        if comp is not None and not isinstance(comp, str) and not comp.ranks.empty:
            why = {K.run_label(c): F.chosen_after_test(card, c) for c in mine}
            comp.ranks["chosen_after_test"] = [why.get(m) for m in comp.ranks["model"]]
        banded.bands.append(F.Band(name, mine, comp))
    reasons = [b.comparison for b in banded.bands if isinstance(b.comparison, str)]
    if not banded.compared and reasons:
        return reasons[0]
    return banded


def comparison_of(card, version: str, cells: list[dict], known: dict | None = None):
    """:func:`comparison_for` of (card, version), taken from ``known`` (version -> its comparison, where the page
    computed it already) when it holds the version, so a card page computes each version's comparison once."""
    return known[version] if known and version in known else comparison_for(card, version, cells)


def _compare(card, ok: list[dict]):
    """The :class:`~atlaslib.metrics.compare.Comparison` of ``ok`` (one band, best first), or the reason there
    is none."""
    try:
        p = paired_from_cells(ok)
    except (ValueError, KeyError) as exc:
        return str(exc).removeprefix("compare: ")
    p.higher_is_better = {**p.higher_is_better, **card.higher_is_better}
    return K.compare_paired(p)


def p_text(x, alpha: float = F.ALPHA) -> str:
    """A p-value in three decimals ("< 0.001" below that), with as many more as it takes to stay on its own side
    of ``alpha``: a p of 0.0499 is rejected at 5 % and reads 0.0499, never "0.050" beside a star."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if x < 0.001:
        return "< 0.001"
    for k in range(3, 9):
        t = f"{x:.{k}f}"
        if (float(t) < alpha) == (x < alpha):
            return t
    return f"{x:.9f}"


def _peq(x) -> str:
    t = p_text(x)
    return f"p {t}" if t.startswith("<") else f"p = {t}"


def _mdd_text(x) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def mdd_markdown(comp, card=None) -> str:
    """What the test set can detect, for one band's comparison: the top pair's own minimum detectable
    difference (and McNemar's at its discordance), not a summary over pairs that include baselines."""
    m = comp.mdd
    base = m["metric"].replace("_", " ")
    parts = [f"**What this test set can detect.** {m['n_units']:,} resampling units ({m['unit']})."]
    top = F.top_pair(comp)
    framed = F.framed_pairs(comp, F.margin_of(card))
    r = F.pair_row(framed, *top) if top else None
    if r is not None:
        parts.append(f"The top pair, {md(r['model_a'])} − {md(r['model_b'])}, would detect a difference in {base} "
                     f"of about **{_mdd_text(r['mdd'])}** (its own minimum detectable difference: 80 % power, 5 % "
                     f"two-sided, (z₀.₉₇₅ + z₀.₈) × the SD {r['sd']:.3f} of its paired resamples"
                     + (f", or {F.fewest_deciding_units()}/{m['n_units']:,} where that is more: no test detects less "
                        f"on {m['n_units']:,} units)" if r["mdd"] > F.pair_mdd(r["sd"]) + 1e-12 else ")"))
        if not pd.isna(r.get("mdd_mcnemar")):
            parts[-1] += (f"; McNemar's test on its {int(r['n_items']):,} paired items at its discordance "
                          f"{(int(r['b']) + int(r['c'])) / int(r['n_items']):.3f} detects an accuracy difference of "
                          f"**{r['mdd_mcnemar']:.3f}**")
        elif r.get("b") is not None and not pd.isna(r.get("b")):
            parts[-1] += "; McNemar's test detects no size at all on it: too few discordant items"
        parts[-1] += ". Every pair's own MDD is in the table."
        margin = F.margin_of(card)
        if not F.can_detect_margin(m["n_units"], margin):
            parts.append(f"No pair here is called equivalent, and no row best: "
                         f"{F.too_few_units_text(m['n_units'], m['unit'], margin)}.")
    elif "mdd_bootstrap" in m:
        parts.append(f"With one run in this band there is no pair: a difference in {base} smaller than about "
                     f"**{m['mdd_bootstrap']:.3f}** would be unlikely to be detected against another run like it "
                     f"(80 % power, 5 % two-sided; {m['basis']}).")
    return " ".join(parts) + "\n"


def cluster_resamplings(card, comp, band_cells=None) -> list:
    """The card's paired cluster resamplings of the primary metric, shown beside the declared test: the extra
    cluster resamplings of its scoring (:class:`~atlaslib.metrics.engine.Resampling`) declared for the
    primary metric, as ``[(name, what it assumes, resampling)]``."""
    base = comp.mdd["metric"]
    scoring = getattr(comp.data, "scoring", None)
    return [(rs.label or f"{rs.by}-cluster", rs.assumes or f"whole clusters of {rs.by} are drawn", rs)
            for rs in getattr(scoring, "extra", ()) if rs.rule == "clusters" and rs.among is None
            and (not rs.metrics or base in rs.metrics)]


def _decides(card, comp, resamplings=()) -> str:
    """Which test decides a pair (and so the tie group), and what the tests shown beside it assume."""
    t = comp.pairs
    base = comp.mdd["metric"]
    tests = sorted(set(t.loc[t["metric"] == base, "test"])) if not t.empty else []
    if not tests:
        return ""
    how = ("on the paired items" if tests == ["exact McNemar"] else
           f"on the card's declared resampling ({comp.data.unit})")
    text = f"The tie group and each pair's verdict are decided by the {' and '.join(tests)} {how}."
    beside = []
    if (t["metric"] == base).any() and t.loc[t["metric"] == base, "b"].notna().any() and "exact McNemar" not in tests:
        beside.append("McNemar's test (b / c), which treats the items as independent")
    for name, assumes, _ in resamplings:
        beside.append(f"the {md(name)} paired interval ({md(assumes)})")
    if beside:
        text += " Shown beside it and deciding nothing: " + "; ".join(beside) + "."
    return text


def cluster_columns(card, comp, band_cells, resamplings=None, crossing: dict | None = None) -> dict:
    """``{column: {(a, b): text}}``: the card's paired cluster intervals of the primary metric for each pair
    of one band (:func:`cluster_resamplings`, :func:`atlaslib.metrics.framing.cluster_paired`), or ``{}``.
    ``crossing``, when given, gets ``{(a, b): [name, ...]}``: the resamplings whose interval includes 0."""
    out = {}
    t = comp.pairs
    base = comp.mdd["metric"]
    if t.empty or not band_cells:
        return out
    seed = int((band_cells[0].get("seeds") or {}).get("bootstrap") or bootstrap.DEFAULT_SEED)
    for name, _, clusters in (cluster_resamplings(card, comp, band_cells) if resamplings is None else resamplings):
        vals = {}
        for _, r in t[t["metric"] == base].iterrows():
            try:
                c = F.cluster_paired(comp.data, r["model_a"], r["model_b"], base, clusters, seed=seed)
            except (KeyError, ValueError):
                continue
            vals[(r["model_a"], r["model_b"])] = (f"{c['difference']:+.3f} {fmt_interval(c['ci_low'], c['ci_high'])}"
                                                  + (" ⚠" if c["few_clusters"] else ""))
            if crossing is not None and c["ci_low"] <= 0 <= c["ci_high"]:
                crossing.setdefault((r["model_a"], r["model_b"]), []).append(f"the {md(name)} paired interval")
        out[f"{md(name)}, paired [95 %]"] = vals
    return out


def pairs_markdown(comp, metric: str | None = None, link=None, card=None, band_cells=None) -> str:
    t = comp.pairs
    metric = metric or comp.mdd["metric"]
    if t.empty or not (t["metric"] == metric).any():
        return ""
    margin = F.margin_of(card) if metric == comp.mdd["metric"] else None
    framed = F.framed_pairs(comp, margin) if metric == comp.mdd["metric"] else t[t["metric"] == metric]
    t = t[t["metric"] == metric]
    has_b = t["b"].notna().any()
    crossing: dict = {}
    clusters = (cluster_columns(card, comp, band_cells, crossing=crossing)
                if card is not None and metric == comp.mdd["metric"] else {})
    eq_head = [f"90 % paired; within ±{margin:g}?"] if margin else []
    mdd_head = ["MDD (own)"] if "mdd" in framed else []
    has_aso = "aso_eps_min" in t and t["aso_eps_min"].notna().any()     # two rows over training seeds met
    head = (["A − B", "difference [95 % paired]", "test", "p", "Holm p"] + eq_head + mdd_head
            + (["b / c (McNemar p)"] if has_b else []) + (["ASO ε_min (better row)"] if has_aso else [])
            + list(clusters))
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    declared_only: list = []     # the tests shown beside that do not reject a starred pair
    for idx, r in t.iterrows():
        star = " *" if r["significant"] else ""
        beside = _beside_disagree(r, crossing.get((r["model_a"], r["model_b"]), [])) if r["significant"] else []
        if beside:
            star += " ‡"
            declared_only += [b for b in beside if b not in declared_only]
        vals = [f"{_name(r['model_a'])} − {_name(r['model_b'])}",
                f"{r['difference']:+.3f} {fmt_interval(r['ci_low'], r['ci_high'])}{star}",
                r["test"], p_text(r["p"]), p_text(r["p_holm"])]
        f = framed.loc[idx]
        if margin:
            eqv = f["equivalent"]
            verdict = ("not claimed: too few units to detect the margin" if f.get("margin_detectable") in (False,)
                       else "—" if not isinstance(eqv, (bool, np.bool_)) else "equivalent" if eqv else
                       "not shown equivalent")
            vals.append(f"{fmt_interval(f['ci90_low'], f['ci90_high'])} {verdict}")
        if mdd_head:
            text = _mdd_text(f["mdd"])
            if not pd.isna(f.get("mdd_mcnemar")):
                text += f" (McNemar {_mdd_text(f['mdd_mcnemar'])})"
            vals.append(text)
        if has_b:
            vals.append("—" if pd.isna(r["b"]) else f"{explorer.b_c(r, link)} (p {p_text(r['p_mcnemar'])})")
        if has_aso:
            vals.append("—" if pd.isna(r["aso_eps_min"]) else
                        f"{r['aso_eps_min']:.3f} ({_name(r['aso_better'])}; "
                        f"{'below' if r['aso_eps_min'] < r['aso_threshold'] else 'not below'} "
                        f"{r['aso_threshold']:g})")
        for col in clusters:
            vals.append(clusters[col].get((r["model_a"], r["model_b"]), "—"))
        lines.append("| " + " | ".join(str(v) for v in vals) + " |")
    note = (f"\n\\* significant at 5 % after Holm over the {len(t)} pair{'s' if len(t) != 1 else ''} of this "
            "band.")
    if declared_only:
        note += (f" ‡ the verdict follows the card's declared unit ({md(comp.data.unit)}), as every verdict here "
                 f"does, but a test shown beside it, which assumes something else, does not reject this pair ("
                 + " or ".join(declared_only) + "): read the difference as shown on the declared unit only.")
    if has_b:
        note += " b = items A decides right and B wrong, c the reverse (exact McNemar on b of b + c)."
    if margin:
        note += (f" Equivalent: the paired 90 % interval lies inside ±{margin:g} ({md(card.margin_note)}), so both "
                 "one-sided tests at 5 % reject a difference of the margin or more (TOST); \"not shown equivalent\" is "
                 "not a difference either.")
    if mdd_head:
        note += (" MDD (own): the smallest difference this pair would detect with 80 % power at 5 % two-sided, from "
                 "the SD of its own paired resamples.")
    if has_aso:
        note += (" ASO: almost stochastic order (deepsig's `aso`) on the two seeded rows' per-seed values; the row "
                 "named is almost stochastically better when ε_min is below the threshold (the metrics chapter).")
    seeded = sorted(getattr(comp.data, "seeded", {}) or {})
    if seeded:
        note += (" Rows over several training seeds (" + ", ".join(_name(x) for x in seeded) + "): their value is "
                 "the mean over seeds" + (", their paired interval draws seeds and test units, and their McNemar "
                                          "decision per item is the majority of their seeds' models." if has_b else
                                          " and their paired interval draws seeds and test units."))
    if any(any(v.endswith("⚠") for v in c.values()) for c in clusters.values()):
        note += (f" ⚠ fewer than {FEW_CLUSTERS} clusters: a cluster bootstrap interval is then too narrow; read it as "
                 "optimistic.")
    return ":::{container} atlas-leaderboard\n" + "\n".join(lines) + "\n:::\n" + note + "\n"


def _beside_disagree(r, crossing: list) -> list:
    """The tests shown beside a pair's deciding test that do not reject it: the cluster intervals that include 0
    (``crossing``) and McNemar's exact test where it is shown beside a bootstrap and its p is 0.05 or more."""
    out = [f"{c} includes 0" for c in crossing]
    pm = r.get("p_mcnemar")
    if r.get("test") != "exact McNemar" and pm is not None and not pd.isna(pm) and float(pm) >= F.ALPHA:
        out.append("McNemar's p is 0.05 or more")
    return out


def _bands_of(comp) -> list:
    """The compared bands of a comparison (a plain Comparison is one band)."""
    if isinstance(comp, F.Banded):
        return [b for b in comp.bands if b.ranked]
    return [F.Band(F.REGIME_NONE, [], comp)]


PAIRS_RULE = ("Every pair of runs of one band on the same test items, on the same resamples (the card's own unit "
              "and seed); pairs never cross bands, and a not-ranked row is in no pair. A difference whose paired "
              "interval excludes 0 is not the same as two leaderboard intervals that do not overlap: intervals of "
              "two models can overlap while their paired difference is clearly non-zero. Every verdict (the star, "
              "the tie group) is the card's declared test on its declared unit; the tests shown beside it, which "
              "assume something else, decide nothing, and ‡ marks a pair they do not reject.")


def pairs_rule(card) -> str:
    """The paired comparisons' rule and the card's margin, in words: once per card page (:func:`render` with
    ``rule`` True writes it in each version's section instead)."""
    margin = F.margin_of(card)
    out = PAIRS_RULE + "\n"
    if margin:
        out += (f"\nThe card's equivalence margin for {card.metrics[0].replace('_', ' ')} is ±{margin:g}"
                + (f": {md(card.margin_note)}" if getattr(card, "margin_note", "") else "") + ".\n")
    return out


def render(card, version: str, cells: list[dict], page_dir: Path, src: Path, comp=None, rule: bool = True) -> str:
    """The comparisons section of one (card, version), band by band, and its downloads; ``rule`` False: the
    comparisons' rule and the card's margin are written once on the card page (:func:`pairs_rule`), not here."""
    comp = comparison_for(card, version, cells) if comp is None else comp
    vcells = [c for c in cells if c["card"] == card.name and c["version"] == version]
    if not vcells:
        return ""
    out = []
    dl_dir = page_dir / "_downloads"
    stem = f"{card.name}-{version}"
    lb_csv, lb_json = write_downloads(leaderboard_frame(card, version, vcells, comp if not isinstance(comp, str)
                                                        else None), dl_dir, f"leaderboard-{stem}",
                                      omit_null=F.RANK_FIELDS)
    links = [f"{{download}}`leaderboard CSV <{os.path.relpath(lb_csv, page_dir)}>`",
             f"{{download}}`leaderboard JSON <{os.path.relpath(lb_json, page_dir)}>`"]
    if isinstance(comp, str):
        out.append(f"*No paired comparison: {comp}.*\n")
    elif comp is not None:
        bands = _bands_of(comp)
        several = len(bands) > 1
        if not comp.pairs.empty:
            out.append(f"### Paired comparisons: `{version}`\n")
            out.append(pairs_rule(card) if rule else
                       f"By the card's rule for paired comparisons ({{ref}}`how the rows are ranked "
                       f"<{rule_label(card)}>`, above).\n")
        elif rule and F.margin_of(card):
            out.append(pairs_rule(card).split("\n\n", 1)[-1])
        linker = explorer.pair_linker(card.name, version, vcells, page_dir, src)
        for k, band in enumerate(bands):
            c = band.comparison
            if c is None or isinstance(c, str):
                if isinstance(c, str):
                    out.append(f"*{md(band.name.capitalize())}: no paired comparison: {c}.*\n")
                continue
            if several:   # a paragraph, not a heading: the section may have no "Paired comparisons" heading
                out.append(f"**{band.name.capitalize()}.**\n")
            out.append(mdd_markdown(c, card))
            if c.pairs.empty:
                continue
            decides = _decides(card, c, cluster_resamplings(card, c, band.cells))
            if decides:
                out.append(decides + "\n")
            out.append(pairs_markdown(c, link=linker, card=card, band_cells=band.cells))
            fig_dir = page_dir / "_figures"
            fig_dir.mkdir(parents=True, exist_ok=True)
            name = f"pairs-{stem}.png" if k == 0 else f"pairs-{stem}-{k}.png"
            base = c.mdd["metric"]
            fig = plots.pairwise_differences(c.pairs[c.pairs["metric"] == base],
                                             title=f"{base} · {version}" + (f" · {band.name}" if several else ""),
                                             xlabel=f"{base.replace('_', ' ')}: A − B, 95 % paired interval")
            fig.savefig(fig_dir / name, dpi=110)
            plt.close(fig)
            out.append(f"```{{figure}} _figures/{name}\n:alt: paired differences of {base} on {version}\n\n"
                       f"Paired differences of `{base}` on `{version}`"
                       + (f" ({band.name})" if several else "") + "; red: significant at 5 % after Holm.\n```\n")
        pairs = comp.pairs
        if not pairs.empty:
            with warnings.catch_warnings():   # a band whose McNemar columns are all None
                warnings.simplefilter("ignore", FutureWarning)
                framed = pd.concat([_framed_all(card, b.comparison, b.name) for b in bands
                                    if b.comparison is not None and not isinstance(b.comparison, str)
                                    and not b.comparison.pairs.empty], ignore_index=True)
            c_csv, c_json = write_downloads(framed.drop(columns=["sd"]), dl_dir, f"comparisons-{stem}")
            links += [f"{{download}}`comparisons CSV <{os.path.relpath(c_csv, page_dir)}>`",
                      f"{{download}}`comparisons JSON <{os.path.relpath(c_json, page_dir)}>`"]
    out.append("Downloads: " + " · ".join(links) + "\n")
    return "\n".join(out)


# -- the worked example of the metrics chapter ------------------------------------------------------------

def worked_example(cells: list[dict], card_name: str, comps: dict | None = None) -> str:
    """A paired comparison and McNemar on real counts: the two best ok runs of a card (its primary metric on
    its largest split version with two runs), rendered into the metrics chapter where :data:`METRICS_MARK`
    stands. Empty when the card has no split version with two runs. ``comps``: as :func:`comparison_of`."""
    from ..cards import get_card

    card = get_card(card_name)
    metric = card.metrics[0]
    for version in sorted(card.versions, key=lambda v: -card.test_sizes.get(v, 0)):  # the largest first
        comp = comparison_of(card, version, cells, comps)
        if comp is None or isinstance(comp, str) or comp.pairs.empty:
            continue
        rows = comp.pairs[(comp.pairs["metric"] == metric) & comp.pairs["b"].notna()]
        if rows.empty:
            continue
        r = rows.iloc[0]
        b, c, n = int(r["b"]), int(r["c"]), int(r["n_items"])
        name = metric.replace("_", " ")
        return (
            f"On {card.title.split(':')[0]} `{version}` ({n:,} test items), {md(r['model_a'])} scores {name} "
            f"{r['value_a']:.3f} and {md(r['model_b'])} {r['value_b']:.3f}. On each of the 1,000 resamples of the "
            f"card's own unit both are scored on the same drawn items; the 2.5 and 97.5 percentiles of the 1,000 "
            f"differences give the paired interval: {r['difference']:+.3f} "
            f"{fmt_interval(r['ci_low'], r['ci_high'])} (paired-bootstrap {_peq(r['p_bootstrap'])}).\n\n"
            f"McNemar looks only at the items where the two disagree about being right: {md(r['model_a'])} is right "
            f"and {md(r['model_b'])} wrong on b = {b} items, the reverse on c = {c}. Under the null hypothesis of "
            f"equal accuracy each of the {b + c} discordant items is a fair coin, so p = P(a Binomial({b + c}, ½) "
            f"is at least as far from {(b + c) / 2:g} as {b}): {_peq(r['p_mcnemar'])}. The {n - b - c:,} items "
            "where both are right or both are wrong carry no information about which is better.\n")
    return ""


def _framed_all(card, comp, band: str) -> pd.DataFrame:
    """Every pair of one band's comparison (all metrics), the primary metric's rows with the TOST and MDD
    columns of :func:`atlaslib.metrics.framing.framed_pairs`, and the band."""
    framed = F.framed_pairs(comp, F.margin_of(card))
    rest = comp.pairs[comp.pairs["metric"] != comp.mdd["metric"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        out = pd.concat([framed, rest]).sort_index()
    out.insert(2, "band", band)
    return out


WIDTH_MARK = "<!-- width-vs-size -->"
COVERAGE_MARK = "<!-- coverage-figure -->"
COVERAGE_ICC = (0.0, 0.1, 0.3, 0.5)
COVERAGE_SIMS = 200


def chapter_cards(part: str) -> list:
    """The cards whose pages module offers ``part`` of the metrics chapter (``METRICS_CHAPTER``: "worked_example",
    "width"), in the book's card order: the first with the runs for it fills it."""
    from ..cards import available_cards, card_pages

    return [c for c in available_cards() if part in getattr(card_pages(c), "METRICS_CHAPTER", ())]


def width_frame(cells: list[dict], card_name: str, base: str | None = None) -> pd.DataFrame:
    """The width of each ok run's declared interval of ``base`` (default: the card's primary metric) per split
    version of ``card_name``, with the test size."""
    from ..cards import get_card

    base = base or get_card(card_name).primary_metric
    rows = []
    for c in cells:
        if c["card"] != card_name or c["status"] != "ok":
            continue
        e = c["metrics"].get(f"{base}_{c['protocol']}") or {}
        if e.get("ci_low") is None:
            continue
        rows.append({"model": f"{c['model']} ({c['protocol']})", "version": c["version"],
                     "n": int((c.get("split") or {}).get("n_test") or len(c.get("predictions") or [])),
                     "width": e["ci_high"] - e["ci_low"], "metric": base,
                     "items": {r["item_id"] for r in c.get("predictions") or []}})
    return pd.DataFrame(rows)


def _width_block(src: Path, cells: list[dict], card) -> str:
    from ..cards import scoring_of

    frame = width_frame(cells, card.name)
    short = card.short_name or card.title.split(":")[0]
    label = scoring_of(card).metric(card.primary_metric).label or card.primary_metric.replace("_", " ")
    if frame.empty or frame["version"].nunique() < 2:
        return ""
    small, large = frame.sort_values("n").iloc[0], frame.sort_values("n").iloc[-1]
    inside = len(small["items"] & large["items"])
    fig_dir = src / "book" / "methods" / "_figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    fig = plots.width_vs_size(frame.drop(columns=["items"]), title=f"{short} {label}: interval width by test size")
    fig.savefig(fig_dir / "width-vs-size.png", dpi=110)
    plt.close(fig)
    wide = frame.pivot_table(index="model", columns="n", values="width")
    ratio = (wide[small["n"]] / wide[large["n"]]).replace([float("inf")], float("nan")).dropna()
    if ratio.empty:
        return ""
    return (f"The {short} runs of this build on `{small['version']}` ({small['n']:,} test items) and "
            f"`{large['version']}` ({large['n']:,}): {inside:,} of the {small['n']:,} smaller test set's items "
            f"are also in the larger one, so the two sizes measure the same models on nested item sets. "
            f"The larger set narrows the declared {label.replace(' ', '-')} interval by a factor of {ratio.min():.1f} to "
            f"{ratio.max():.1f} (√{large['n'] / small['n']:.1f} = {(large['n'] / small['n']) ** 0.5:.1f} "
            "if width fell as 1/√n).\n\n"
            "```{figure} _figures/width-vs-size.png\n:alt: interval width against test size\n\n"
            f"Width of each {short} run's declared 95 % {label.replace(' ', '-')} interval on the two split "
            "versions.\n```\n")


def _coverage_block(src: Path) -> str:
    from ..metrics.intervals import simulate_coverage

    key = f"coverage-{'-'.join(map(str, COVERAGE_ICC))}-{COVERAGE_SIMS}.json"
    cache = src.parent / "_atlas_cache" / key
    rows = atomicio.read_cache_json(cache, lambda v: isinstance(v, list) and len(v) == len(COVERAGE_ICC) and all(
        isinstance(r, dict) and {"icc", "cluster", "item"} <= set(r) for r in v))  # a damaged entry: computed again
    if rows is None:
        rows = [simulate_coverage(COVERAGE_SIMS, icc=icc, n_resamples=300) for icc in COVERAGE_ICC]
        atomicio.atomic_write_text(cache, json.dumps(rows))
    frame = pd.DataFrame(rows)
    fig_dir = src / "book" / "methods" / "_figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    fig = plots.coverage(frame, title="Coverage of a 95 % interval on clustered binary data")
    fig.savefig(fig_dir / "coverage.png", dpi=110)
    plt.close(fig)
    hi = frame.iloc[-1]
    return (f"{COVERAGE_SIMS} simulated test sets per point, 100 clusters of 8 items, true proportion 0.3. At "
            f"within-cluster correlation {hi['icc']:g} the cluster interval covers the true value in "
            f"{hi['cluster']:.1%} of the simulations and the item interval in {hi['item']:.1%}.\n\n"
            "```{figure} _figures/coverage.png\n:alt: coverage of cluster and item bootstrap intervals\n\n"
            "Coverage of the true proportion by the cluster bootstrap and by the item bootstrap, against the "
            "within-cluster correlation of the outcomes (seeded simulation, `atlaslib.metrics.intervals."
            "simulate_coverage`).\n```\n")


def _edit_metrics_chapter(src: Path, fill) -> None:
    """Apply ``fill`` (text -> text) to the metrics chapter of the site tree, after the coverage figure has
    taken its marker; write the page only when something changed."""
    page = src / "book" / "methods" / "metrics.md"
    if not page.is_file():
        return
    before = page.read_text(encoding="utf-8")
    text = before.replace(COVERAGE_MARK, _coverage_block(src)) if COVERAGE_MARK in before else before
    text = fill(text)
    if text != before:
        page.write_text(text, encoding="utf-8")


NO_EXAMPLE = "*This build has no card with two runs on the same items to compare.*\n"
NO_WIDTH = "*This build has no card with runs on two nested split versions; the figure needs them.*\n"


def fill_metrics_chapter(src: Path, card, cells: list[dict], comps: dict | None = None) -> None:
    """Fill the metrics chapter's rendered parts where their markers stand, as ``card`` is rendered: the
    coverage figure (on the first card rendered), and each part the card's pages module offers
    (``METRICS_CHAPTER``: the worked paired example, the width-by-size figure) from its cells. A part still
    marked when the last card offering it is rendered gets the note that this build cannot show it."""
    parts = {"worked_example": (METRICS_MARK, lambda: worked_example(cells, card.name, comps), NO_EXAMPLE),
             "width": (WIDTH_MARK, lambda: _width_block(src, cells, card), NO_WIDTH)}

    def fill(text: str) -> str:
        for part, (mark, make, none) in parts.items():
            offering = [c.name for c in chapter_cards(part)]
            if mark not in text or card.name not in offering:
                continue
            block = make()
            text = text.replace(mark, block or (none if card.name == offering[-1] else mark))
        return text

    _edit_metrics_chapter(src, fill)
