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
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from .. import plots
from ..escape import md
from ..metrics import compare as K
from . import explorer
from .leaderboard import _name, fmt_interval, leaderboard_frame, write_downloads

METRICS_MARK = "<!-- paired-example -->"


def comparison_for(card, version: str, cells: list[dict]):
    """The :class:`~atlaslib.metrics.compare.Comparison` of the ok runs of (card, version), best first; None
    when no ok run holds per-item records the card's resampling needs (the reason is logged in the page)."""
    ok = [c for c in cells if c["card"] == card.name and c["version"] == version and c["status"] == "ok"]
    if not ok:
        return None

    def primary(c):
        v = (c["metrics"].get(f"{card.metrics[0]}_{c['protocol']}") or {}).get("value")
        return -math.inf if v is None else (v if card.higher_is_better.get(card.metrics[0], True) else -v)

    ok.sort(key=lambda c: (-primary(c), c["model"], c["protocol"]))
    try:
        p = K.paired(ok)
    except (ValueError, KeyError) as exc:
        return str(exc).removeprefix("compare: ")
    p.higher_is_better = {**p.higher_is_better, **card.higher_is_better}
    return K.compare_paired(p)


def _p(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return "< 0.001" if x < 0.001 else f"{x:.3f}"


def _peq(x) -> str:
    t = _p(x)
    return f"p {t}" if t.startswith("<") else f"p = {t}"


def mdd_markdown(comp) -> str:
    m = comp.mdd
    base = m["metric"].replace("_", " ")
    parts = [f"**What this test set can detect.** {m['n_units']:,} resampling units ({m['unit']})."]
    if "mdd_bootstrap" in m:
        parts.append(f"A difference in {base} smaller than about **{m['mdd_bootstrap']:.3f}** is unlikely to "
                     f"be detected (80 % power, 5 % two-sided; {m['basis']}, SD {m['sd_difference']:.3f}).")
    if "mdd_mcnemar" in m:
        mdd = m["mdd_mcnemar"]
        parts.append(f"For the item-level decision ({m['decision']}), McNemar's test on {m['n_items']:,} paired "
                     f"items at the observed discordance {m['discordance']:.3f} (median over pairs) detects an "
                     "accuracy difference of " + (f"**{mdd:.3f}**." if not math.isnan(mdd) else
                                                   "no size at all: too few discordant items."))
    return " ".join(parts) + "\n"


def pairs_markdown(comp, metric: str | None = None, link=None) -> str:
    t = comp.pairs
    metric = metric or comp.mdd["metric"]
    if t.empty or not (t["metric"] == metric).any():
        return ""
    t = t[t["metric"] == metric]
    has_b = t["b"].notna().any()
    head = ["A − B", "difference [95 % paired]", "test", "p", "Holm p"] + (["b / c (McNemar p)"] if has_b else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in t.iterrows():
        star = " *" if r["significant"] else ""
        vals = [f"{_name(r['model_a'])} − {_name(r['model_b'])}",
                f"{r['difference']:+.3f} {fmt_interval(r['ci_low'], r['ci_high'])}{star}",
                r["test"], _p(r["p"]), _p(r["p_holm"])]
        if has_b:
            vals.append("—" if pd.isna(r["b"]) else f"{explorer.b_c(r, link)} (p {_p(r['p_mcnemar'])})")
        lines.append("| " + " | ".join(str(v) for v in vals) + " |")
    note = (f"\n\\* significant at 5 % after Holm over the {len(t)} pairs. b = items A decides right and B "
            "wrong, c the reverse (exact McNemar on b of b + c)." if has_b else
            f"\n\\* significant at 5 % after Holm over the {len(t)} pairs.")
    return ":::{container} atlas-leaderboard\n" + "\n".join(lines) + "\n:::\n" + note + "\n"


def render(card, version: str, cells: list[dict], page_dir: Path, src: Path, comp=None) -> str:
    """The comparisons section of one (card, version), and its downloads."""
    comp = comparison_for(card, version, cells) if comp is None else comp
    vcells = [c for c in cells if c["card"] == card.name and c["version"] == version]
    if not vcells:
        return ""
    out = []
    dl_dir = page_dir / "_downloads"
    stem = f"{card.name}-{version}"
    lb_csv, lb_json = write_downloads(leaderboard_frame(card, version, vcells, comp if not isinstance(comp, str)
                                                        else None), dl_dir, f"leaderboard-{stem}")
    links = [f"{{download}}`leaderboard CSV <{os.path.relpath(lb_csv, page_dir)}>`",
             f"{{download}}`leaderboard JSON <{os.path.relpath(lb_json, page_dir)}>`"]
    if isinstance(comp, str):
        out.append(f"*No paired comparison: {comp}.*\n")
    elif comp is not None:
        out.append(mdd_markdown(comp))
        if not comp.pairs.empty:
            out.append(f"### Paired comparisons: `{version}`\n")
            out.append("Every pair of runs on the same test items, on the same resamples (the card's own unit "
                       "and seed). A difference whose paired interval excludes 0 is not the same as two "
                       "leaderboard intervals that do not overlap: intervals of two models can overlap while "
                       "their paired difference is clearly non-zero.\n")
            out.append(pairs_markdown(comp, link=explorer.pair_linker(card.name, version, vcells, page_dir, src)))
            fig_dir = page_dir / "_figures"
            fig_dir.mkdir(parents=True, exist_ok=True)
            name = f"pairs-{stem}.png"
            base = comp.mdd["metric"]
            fig = plots.pairwise_differences(comp.pairs[comp.pairs["metric"] == base],
                                             title=f"{base} · {version}",
                                             xlabel=f"{base.replace('_', ' ')}: A − B, 95 % paired interval")
            fig.savefig(fig_dir / name, dpi=110)
            plt.close(fig)
            out.append(f"```{{figure}} _figures/{name}\n:alt: paired differences of {base} on {version}\n\n"
                       f"Paired differences of `{base}` on `{version}`; red: significant at 5 % after Holm.\n```\n")
            c_csv, c_json = write_downloads(comp.pairs.drop(columns=["sd"]), dl_dir, f"comparisons-{stem}")
            links += [f"{{download}}`comparisons CSV <{os.path.relpath(c_csv, page_dir)}>`",
                      f"{{download}}`comparisons JSON <{os.path.relpath(c_json, page_dir)}>`"]
    out.append("Downloads: " + " · ".join(links) + "\n")
    return "\n".join(out)


# -- the worked example of the metrics chapter ------------------------------------------------------------

def worked_example(cells: list[dict], card_name: str = "negex") -> str:
    """A paired comparison and McNemar on real counts: the two best ok runs of a card (NegEx: macro F1 on its
    largest split version with two runs; the NLI challenge: accuracy), rendered into the metrics chapter
    where :data:`METRICS_MARK` stands. Empty when the card has no split version with two runs."""
    from ..cards import get_card

    card = get_card(card_name)
    metric = card.metrics[0]
    for version in sorted(card.versions, key=lambda v: -card.test_sizes.get(v, 0)):  # the largest first
        comp = comparison_for(card, version, cells)
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


def render_metrics_chapter(src: Path, cells: list[dict]) -> None:
    """Fill every data-rendered part of the metrics chapter still marked, from all cells shown in the build
    (a final pass after the cards; :func:`fill_metrics_chapter` fills them card by card)."""
    def fill(text: str) -> str:
        if METRICS_MARK in text:
            example = worked_example(cells) or worked_example(cells, "nli_negation")
            text = text.replace(METRICS_MARK, example or NO_EXAMPLE)
        return text.replace(WIDTH_MARK, _width_block(src, cells) or NO_WIDTH) if WIDTH_MARK in text else text

    _edit_metrics_chapter(src, fill)


def comparison_json(comp) -> str:
    return json.dumps(json.loads(comp.pairs.to_json(orient="records")), indent=1)


WIDTH_MARK = "<!-- width-vs-size -->"
COVERAGE_MARK = "<!-- coverage-figure -->"
COVERAGE_ICC = (0.0, 0.1, 0.3, 0.5)
COVERAGE_SIMS = 200


def width_frame(cells: list[dict], base: str = "macro_f1") -> pd.DataFrame:
    """NegEx: the width of each ok run's declared interval of ``base`` per split version, with the test size."""
    rows = []
    for c in cells:
        if c["card"] != "negex" or c["status"] != "ok":
            continue
        e = c["metrics"].get(f"{base}_{c['protocol']}") or {}
        if e.get("ci_low") is None:
            continue
        rows.append({"model": f"{c['model']} ({c['protocol']})", "version": c["version"],
                     "n": int((c.get("split") or {}).get("n_test") or len(c.get("predictions") or [])),
                     "width": e["ci_high"] - e["ci_low"], "metric": base,
                     "items": {r["item_id"] for r in c.get("predictions") or []}})
    return pd.DataFrame(rows)


def _width_block(src: Path, cells: list[dict]) -> str:
    frame = width_frame(cells)
    if frame.empty or frame["version"].nunique() < 2:
        return ""
    small, large = frame.sort_values("n").iloc[0], frame.sort_values("n").iloc[-1]
    inside = len(small["items"] & large["items"])
    fig_dir = src / "book" / "methods" / "_figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    fig = plots.width_vs_size(frame.drop(columns=["items"]), title="NegEx macro F1: interval width by test size")
    fig.savefig(fig_dir / "width-vs-size.png", dpi=110)
    plt.close(fig)
    wide = frame.pivot_table(index="model", columns="n", values="width")
    ratio = (wide[small["n"]] / wide[large["n"]]).replace([float("inf")], float("nan")).dropna()
    if ratio.empty:
        return ""
    return (f"The NegEx runs of this build on `{small['version']}` ({small['n']:,} test items) and "
            f"`{large['version']}` ({large['n']:,}): {inside:,} of the {small['n']:,} smaller test set's items "
            f"are also in the larger one, so the two sizes measure the same models on nested item sets. "
            f"The larger set narrows the declared macro-F1 interval by a factor of {ratio.min():.1f} to "
            f"{ratio.max():.1f} (√{large['n'] / small['n']:.1f} = {(large['n'] / small['n']) ** 0.5:.1f} "
            "if width fell as 1/√n).\n\n"
            "```{figure} _figures/width-vs-size.png\n:alt: interval width against test size\n\n"
            "Width of each NegEx run's declared 95 % macro-F1 interval on the two split versions.\n```\n")


def _coverage_block(src: Path) -> str:
    from ..metrics.intervals import simulate_coverage

    key = f"coverage-{'-'.join(map(str, COVERAGE_ICC))}-{COVERAGE_SIMS}.json"
    cache = src.parent / "_atlas_cache" / key
    if cache.is_file():
        rows = json.loads(cache.read_text())
    else:
        rows = [simulate_coverage(COVERAGE_SIMS, icc=icc, n_resamples=300) for icc in COVERAGE_ICC]
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(rows))
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
NO_WIDTH = "*This build has no NegEx runs on both split versions; the figure needs them.*\n"


def fill_metrics_chapter(src: Path, card, cells: list[dict]) -> None:
    """Fill the metrics chapter's rendered parts where their markers stand: the coverage figure (on the
    first card rendered), the worked paired example and the width-by-size figure (from NegEx's cells; when
    the NLI challenge, rendered after NegEx, finds them still marked, its own example and a note)."""
    def fill(text: str) -> str:
        if card.name == "negex":
            if METRICS_MARK in text:
                text = text.replace(METRICS_MARK, worked_example(cells) or METRICS_MARK)
            if WIDTH_MARK in text:
                text = text.replace(WIDTH_MARK, _width_block(src, cells) or WIDTH_MARK)
        elif card.name == "nli_negation":  # rendered after NegEx: what NegEx did not fill, it cannot fill any more
            text = text.replace(METRICS_MARK, worked_example(cells, "nli_negation") or NO_EXAMPLE)
            text = text.replace(WIDTH_MARK, NO_WIDTH)
        return text

    _edit_metrics_chapter(src, fill)
