"""Checks of what the pages say a run cost, what a language model may have memorised, what is calibrated and where a
robustness interval is none, each against the cells read directly (not through the pages' code):

- a rate ("prediction items/s", "items/s (prediction)") is a number only for a run whose prediction phase held at
  least 50 answers over at least 1 s (the rule the pages declare), and then the cell's own answers over its
  seconds; below, "too short to time" (a constant baseline read 20,753,623 items/s, a rule 2.4 items/s on 7 items
  for its warm-up against 65.8 on 207);
- tokens per item are a number only where every cost record of the run counts the tokens of every item, served
  from the model-call store or not (``tokens_of: "every item"``), and then its tokens over its items (a probe read
  0.0 tokens per item because an earlier run had filled the store);
- the memorisation reference is a figure only on a card that is not the reference itself and from a reference
  drawn to match the test in length (``matching``), else the page says so (the NLI card compared its 123 premises
  with themselves);
- a calibration table's "n/a (labels only)" is never said of a run whose every record holds a score or every
  label's probability (the NLI card's SmolLM2 run);
- a robustness row read on fewer items than the cluster-bootstrap floor is marked †, and a marked row prints no
  interval ("2 of 2 | … -0.018 [-0.289, +0.200]" unmarked; "+0.514 [+0.514, +0.514] †").

Only a whole default book has these tables (language-model rows, calibration, robustness): whole-book-only,
tested on hand-made pages in ``tests/test_cost_rules.py``.
"""
from __future__ import annotations

import re
from pathlib import Path

from tests.statements import missing
from tests.statements.robust import md_tables

#: the rule the pages declare for a rate (atlaslib.pages.rowinfo.MIN_TIMED_ITEMS / MIN_TIMED_SECONDS)
MIN_ITEMS, MIN_SECONDS = 50, 1.0
#: the cluster-bootstrap floor (atlaslib.metrics.intervals.FEW_CLUSTERS): fewer units give no interval
FLOOR = 30
NUM = r"[+-]?[\d,]*\.?\d+"


def _clean(cell: str) -> str:
    s = re.sub(r"<sup>.*?</sup>", "", cell)
    s = re.sub(r"<[^>]+>", "", s).replace("\\", "")
    return re.sub(r"\s+", " ", s).strip()


def _label(c: dict) -> str:
    return f"{c['model']} ({c['protocol']})"


def _timed(c: dict):
    p = ((c.get("timing") or {}).get("phases") or {}).get("prediction")
    if not p or c.get("status") != "ok":
        return None
    return int(p.get("items") or 0), float(p.get("seconds") or 0) + float(p.get("served_seconds") or 0)


def _card_tables(src: Path):
    for page in sorted((Path(src) / "book" / "cards").glob("*.md")):
        for head, rows in md_tables(page.read_text(encoding="utf-8")):
            yield page.stem, [_clean(h) for h in head], [[_clean(x) for x in r] for r in rows]


def _close(text: str, value: float) -> bool:
    """Whether a printed number is ``value`` rounded as printed."""
    m = re.fullmatch(NUM, text.strip())
    if not m:
        return False
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(float(text.replace(",", "")) - value) <= 0.5 * 10 ** -decimals + 1e-12


def check_rates_are_timed_long_enough(src: Path, cells) -> list[str]:
    problems, seen = [], 0
    for card, head, rows in _card_tables(src):
        col = next((i for i, h in enumerate(head) if h in ("prediction items/s", "items/s (prediction)")), None)
        if col is None:
            continue
        for r in rows:
            if col >= len(r):
                continue
            label = r[0].replace(" †", "").replace(" ◊", "").strip()
            mine = [c for c in cells if c.get("card") == card and _label(c) == label and _timed(c)]
            if not mine:
                continue
            seen += 1
            shown = r[col]
            ok = []
            for c in mine:
                n, s = _timed(c)
                ok.append("too short" if n < MIN_ITEMS or s < MIN_SECONDS else n / s if s > 0 else None)
            if shown == "too short to time":
                if "too short" not in ok:
                    problems.append(f"{card}: {label} is 'too short to time' but every run of it was timed long enough")
            elif re.fullmatch(NUM, shown):
                if not any(isinstance(v, float) and _close(shown, v) for v in ok):
                    why = " (its prediction held too few answers or seconds to time)" if "too short" in ok else ""
                    problems.append(f"{card}: {label} at {shown} items/s, which no run of it gives{why}")
    return problems if seen else missing("a rate of a timed run")


def _costs(c: dict) -> list[dict]:
    """The run's cost records, found where the pages find them (what the check recomputes is the figure)."""
    from atlaslib.pages.rowinfo import cost_records

    return cost_records(c)


def _lm_rows(src: Path, cells):
    for card, head, rows in _card_tables(src):
        if not any(h.startswith("tokens per item") for h in head):
            continue
        for r in rows:
            label = r[0].strip()
            mine = [c for c in cells if c.get("card") == card and _label(c) == label and c.get("status") == "ok"]
            if mine:
                yield card, head, r, label, mine


def check_tokens_per_item_count_every_item(src: Path, cells) -> list[str]:
    problems, seen = [], 0
    for card, head, r, label, mine in _lm_rows(src, cells):
        col = next(i for i, h in enumerate(head) if h.startswith("tokens per item"))
        seen += 1
        m = re.fullmatch(rf"({NUM}) / ({NUM})", r[col])
        if not m:
            continue
        ok = False
        for c in mine:
            costs = _costs(c)
            n = sum(float(x.get("items") or 0) for x in costs)
            if costs and n and all(x.get("tokens_of") == "every item" for x in costs):
                ok = ok or _close(m.group(1), sum(float(x.get("prompt_tokens") or 0) for x in costs) / n)
        if not ok:
            problems.append(f"{card}: {label} reads {r[col]} tokens per item, not from records that count the "
                            f"tokens of every item it was given, those served from the model-call store included")
    return problems if seen else missing("a language-model row's tokens per item")


def check_memorisation_reference_is_other_text_matched_in_length(src: Path, cells) -> list[str]:
    problems, seen = [], 0
    for card, head, r, label, mine in _lm_rows(src, cells):
        col = next((i for i, h in enumerate(head) if h.startswith("memorisation:") and "test" not in h), None)
        if col is None:
            continue
        seen += 1
        if not re.match(rf"{NUM} / {NUM}", r[col]) or "not matched in length" in r[col]:
            continue
        for c in mine:
            mem = (c.get("extra") or {}).get("memorisation") or {}
            if mem.get("reference_card") == card:
                problems.append(f"{card}: {label}'s memorisation reference is its own test sentences ({r[col]})")
                break
            if mem.get("reference") and not mem["reference"].get("matching"):
                problems.append(f"{card}: {label}'s memorisation reference ({r[col]}) was not drawn to match the "
                                f"test sentences in length, and the page does not say so")
                break
    return problems if seen else missing("a language-model row's memorisation reference")


def _has_scores(c: dict) -> bool:
    recs = c.get("predictions") or []
    return bool(recs) and (all(r.get("score") is not None for r in recs) or
                           all(isinstance(r.get("scores"), dict) and r.get("pred") in r["scores"] for r in recs))


def check_calibration_is_not_missing_where_the_cell_has_it(src: Path, cells) -> list[str]:
    problems, seen = [], 0
    for page in sorted((Path(src) / "book" / "cards").glob("*/*/failures.md")):
        card, version = page.parent.parent.name, page.parent.name
        for head, rows in md_tables(page.read_text(encoding="utf-8")):
            head = [_clean(h) for h in head]
            if "Brier" not in head or "run" not in head:
                continue
            for r in rows:
                r = [_clean(x) for x in r]
                seen += 1
                if "labels only" not in r[head.index("Brier")]:
                    continue
                label = r[head.index("run")]
                for c in cells:
                    if (c.get("card"), c.get("version")) == (card, version) and _label(c) == label \
                            and c.get("status") == "ok" and _has_scores(c):
                        problems.append(f"{card} {version}: {label}'s calibration shown 'n/a (labels only)' while "
                                        f"its cell holds a probability for every answer")
    return problems if seen else missing("a calibration table row")


def check_tiny_robustness_reads_have_no_interval(src: Path, cells) -> list[str]:
    problems, seen = [], 0
    for page in sorted((Path(src) / "book" / "cards").glob("*/*/robustness.md")):
        where = f"{page.parent.parent.name} {page.parent.name}"
        for head, rows in md_tables(page.read_text(encoding="utf-8")):
            head = [_clean(h) for h in head]
            diff = next((i for i, h in enumerate(head) if h.startswith("difference")), None)
            read = next((i for i, h in enumerate(head) if h.startswith("items read")), None)
            if diff is None or read is None:
                continue
            for r in rows:
                r = [_clean(x) for x in r]
                seen += 1
                marked = "†" in r[diff]
                if marked and re.search(rf"\[{NUM}, {NUM}\]", r[diff]):
                    problems.append(f"{where}: {r[0]} {r[2]} is marked † but prints an interval ({r[diff]})")
                m = re.match(r"([\d,]+) of", r[read])
                if m and int(m.group(1).replace(",", "")) < FLOOR and not marked:
                    problems.append(f"{where}: {r[0]} {r[2]} read {r[read]} items, under the {FLOOR} units an "
                                    f"interval needs, without the † mark ({r[diff]})")
    return problems if seen else missing("a robustness table row")


CHECKS = (check_rates_are_timed_long_enough, check_tokens_per_item_count_every_item,
          check_memorisation_reference_is_other_text_matched_in_length,
          check_calibration_is_not_missing_where_the_cell_has_it, check_tiny_robustness_reads_have_no_interval)
SITES: dict = {}
WHOLE_BOOK_ONLY = CHECKS
