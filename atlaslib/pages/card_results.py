"""What a card page shows of its result cells, in Markdown: a metric entry formatted, the leaderboard of one
(card, version), forest plots per band, the note on paired intervals that end on 0 (ties), and the published
figures reproduced beside ours. It reads cells and the comparison :mod:`atlaslib.pages.comparisons` made; the
pages that hold these blocks are put together and written by :mod:`atlaslib.pages.card_pages`.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from .. import plots
from ..cards import Card
from ..escape import md, table_cell

if TYPE_CHECKING:
    from ..runner import RunRequest


def fmt_metric(entry: dict | None) -> str:
    """``0.912 [0.880, 0.940]`` (three decimals); ``n/a (<reason>)`` when the metric has no value (an
    undefined metric reads ``n/a (undefined: …)``, never a number)."""
    if entry is None:
        return "n/a"
    if entry.get("value") is None:
        reason = entry.get("reason") or "not applicable"
        return "—" if reason.startswith("not run") else f"n/a ({reason})"
    v, lo, hi = entry["value"], entry.get("ci_low"), entry.get("ci_high")
    if lo is None or hi is None:
        return f"{v:.3f}"
    return f"{v:.3f} [{lo:.3f}, {hi:.3f}]"


def short_reason(reason: str | None) -> str:
    """The headline of a not-run reason ('weights unavailable', 'capability missing'); the full text is in
    the run's notebook and result cell."""
    return (reason or "unknown reason").split(":")[0].strip()


def short_title(card: Card) -> str:
    """``NegEx test kit`` from ``NegEx test kit: is the concept negated?``."""
    return card.title.split(":")[0].strip()


def leaderboard_markdown(card: Card, version: str, cells: list[dict], page_dir: Path, src: Path,
                         failed: list[RunRequest] = (), comparison=None, rule: bool = True) -> str:
    """The leaderboard of one (card, version): the card's metrics with their declared intervals (exact
    intervals beside degenerate ones, one footnote per reason), then per band (rows of one training regime;
    overlap-flagged rows not ranked) the rows not distinguishable from the best, rank interval and P(rank 1)
    of every ok run and the intervals that assume clusters (see :mod:`atlaslib.pages.leaderboard`)."""
    from . import leaderboard as lb
    from .comparisons import comparison_for

    if comparison is None:
        comparison = comparison_for(card, version, cells)
    comp = None if isinstance(comparison, str) else comparison
    return lb.leaderboard_tables(card, version, cells, page_dir, src, failed, comp, short_reason, rule=rule)


#: a pair whose resamples tie this often has a paired interval that can end on 0 by the ties alone
TIE_SHARE = 0.025


def tied_resamples(comp, a: str, b: str, base: str) -> tuple[int, int]:
    """(resamples whose difference ``a − b`` of ``base`` is exactly 0, resamples with a difference), from the
    comparison's own resamples."""
    import numpy as np

    d = comp.data.resampled(a, base) - comp.data.resampled(b, base)
    d = d[np.isfinite(d)]
    return int(np.sum(np.abs(d) < 1e-12)), int(d.size)


def ties_markdown(card: Card, comp) -> str:
    """Why a paired interval of the primary metric can end exactly on 0 while its test finds no difference:
    the share of resamples in which the two runs tie, computed from the comparison's resamples (one sentence
    per such pair); "" when no pair has an interval ending on 0 with ties behind it."""
    if comp is None or isinstance(comp, str) or comp.pairs.empty:
        return ""
    base = card.metrics[0]
    t = comp.pairs[comp.pairs["metric"] == base]
    notes = []
    for _, r in t.iterrows():
        lo, hi = float(r["ci_low"]), float(r["ci_high"])
        if not (abs(lo) < 5e-7 or abs(hi) < 5e-7):
            continue
        ties, n = tied_resamples(comp, r["model_a"], r["model_b"], base)
        if n == 0 or ties / n < TIE_SHARE:
            continue
        end = "lower" if abs(lo) < 5e-7 else "upper"
        why = ""
        if r.get("b") is not None and not pd.isna(r.get("b")):
            b, c = int(r["b"]), int(r["c"])
            how = ("does not draw it" if b + c == 1 else "draws none of them") if min(b, c) == 0 else \
                "draws none of them (or draws them so that both runs' counts come out the same)"
            items = "item" if b + c == 1 else "items"
            why = (f" The two runs disagree about being right on only {b + c} {items} (b = {b}, c = {c}); a resample "
                   f"that {how} scores both runs alike.")
        decided = f"{r['test']}, p {r['p']:.3f}" if not pd.isna(r.get("p")) else str(r["test"])
        note = (f"- `{r['model_a']}` − `{r['model_b']}`: {ties:,} of the {n:,} resamples ({100 * ties / n:.1f} %) "
                f"give a difference of exactly 0, so the percentile interval [{lo:.3f}, {hi:.3f}] has 0 as its "
                f"{end} end.{why}")
        if not bool(r["significant"]):
            note += (f" An interval that touches 0 does not exclude it; the test that decides the pair ({decided}, "
                     f"Holm {r['p_holm']:.3f}) finds no difference at 5 %.")
        notes.append(note)
    if not notes:
        return ""
    return (f"**Intervals that end on 0.** A paired difference of `{base}` is exactly 0 on every resample in which "
            "the two runs are right and wrong on the same drawn items. When that happens often, the percentile "
            "interval stops at 0 instead of crossing it:\n\n" + "\n".join(notes) + "\n")


def forest_markdown(card: Card, version: str, vcells: list[dict], page_dir: Path, bases) -> str:
    """Forest plots per metric of ``bases`` on ``version``, one per band (:func:`atlaslib.metrics.framing.bands`:
    rows of one training regime and condition; overlap-flagged rows in a "not ranked" band of their own), as the
    ranks are: a figure never sets rows of different bands side by side. A band with fewer than two intervals of a
    metric gets none (the table says it all). Figures are written under ``page_dir/_figures``; "" when none."""
    from ..metrics import framing as F

    parts = []
    fig_dir = page_dir / "_figures"
    ok = [c for c in vcells if c.get("status", "ok") == "ok"]
    bands = F.bands(card, ok)
    for base in bases:
        for k, (band, mine) in enumerate(bands):
            frame = forest_frame(card, mine, base)
            if len(frame.dropna(subset=["value", "ci_low", "ci_high"])) < 2:
                continue  # one run (or none with an interval, e.g. pass/fail gates): the table says it all
            fig_dir.mkdir(parents=True, exist_ok=True)
            name = f"forest-{card.name}-{version}-{base}" + (f"-{k}" if k else "") + ".png"
            fig = plots.forest(frame, "value", "ci_low", "ci_high", "label", title=f"{base} · {version} · {band}",
                               higher_is_better=card.higher_is_better.get(base, True),
                               xlabel=f"{base.replace('_', ' ')} (point estimate and 95 % interval)")
            plots.save(fig, fig_dir / name)
            why = (" Not ranked: † marks a model trained on data that overlap this card's test data."
                   if band == F.NOT_RANKED else "")
            parts.append(f"```{{figure}} _figures/{name}\n:alt: forest plot of {base} on {version}, {md(band)}\n\n"
                         f"`{base}` on `{version}`, {md(band)}, with the declared 95 % intervals, models ordered by "
                         f"the point estimate; the axis is zoomed to the intervals. One figure per band, as the rows "
                         f"are ranked.{why}\n```\n")
    return "\n".join(parts)


def forest_frame(card: Card, cells: list[dict], base: str | None = None) -> pd.DataFrame:
    """One row per ok run with a value of ``base``: label (``model (protocol)``, ``†`` when the model's
    training data overlap the card), value and the declared interval."""
    base = base or card.metrics[0]
    rows = []
    for c in cells:
        if c.get("status", "ok") != "ok":
            continue
        e = c["metrics"].get(f"{base}_{c['protocol']}") or {}
        label = f"{c['model']} ({c['protocol']})" + (" †" if c.get("overlap") else "")
        rows.append({"label": label, "value": e.get("value"), "ci_low": e.get("ci_low"), "ci_high": e.get("ci_high")})
    return pd.DataFrame(rows, columns=["label", "value", "ci_low", "ci_high"])


def reproduction_markdown(cells: list[dict]) -> str:
    blocks = []
    for c in cells:
        rep = c.get("extra", {}).get("reproduction")
        if not rep:
            continue
        frame = pd.DataFrame(rep)
        blocks.append(f"## {md(c['model'])} on the whole kit\n\n" + frame.to_markdown(index=False) + "\n")
    return "\n".join(blocks)


def reproduction_table(card: Card, cells: list[dict], heading: str = "") -> str:
    """Every published figure the card's cells reproduce, beside ours (rows from
    ``extra["reproduction_rows"]``, deduplicated per figure; one column per system of ours); "" without any."""
    figures: dict[str, dict] = {}
    systems: list[str] = []
    for c in cells:
        if c["card"] != card.name:
            continue
        for r in c.get("extra", {}).get("reproduction_rows") or []:
            system = r.get("system") or "atlas"
            entry = figures.setdefault(r["figure"], {"published": r["published"], "ours": {},
                                                     "note": r.get("note", ""), "source": r.get("source", "")})
            entry["ours"].setdefault(system, r["ours"])
            if system not in systems and system != "loader":
                systems.append(system)
    if not figures:
        return ""
    cols = ["figure", "published"] + (systems or ["ours"]) + ["note"]
    prev_note = None
    lines = ([heading, ""] if heading else []) + ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for fig, e in figures.items():
        vals = [_fmt_num(e["ours"].get(sys_)) if sys_ in e["ours"] else
                (_fmt_num(e["ours"].get("loader")) if "loader" in e["ours"] else "—") for sys_ in (systems or ["ours"])]
        if not systems:
            vals = [_fmt_num(next(iter(e["ours"].values())))]
        note = table_cell(e["note"]) + (f" ({table_cell(e['source'])})" if e["source"] else "")
        note, prev_note = ("as above" if note == prev_note else note), note
        lines.append("| " + " | ".join([table_cell(fig), _fmt_num(e["published"])] + vals + [note]) + " |")
    return "\n".join(lines) + "\n"


def _fmt_num(x) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:,.0f}" if x.is_integer() else f"{x:.3f}"
    if isinstance(x, int):
        return f"{x:,}"
    return table_cell(x)
