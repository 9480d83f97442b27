"""Checks of how a card page frames its rows, read from the page and the card's declarations:

- a forest plot never sets rows of different bands side by side: each version's section draws one figure per band
  (training regime from the card's declared training protocols and baselines, split by its declared conditions;
  overlap-flagged rows apart) that has two or more rows, and each figure's caption names its band;
- rows of different declared conditions (``Card.ranking_conditions``, e.g. TempEval's phases) never share a ranks
  table;
- a row whose protocol the card declares chosen after a test score (``Card.chosen_after_test``) is never "best",
  and as its band's top row its verdict says it is not a held-out result;
- a pair's star agrees with the Holm p printed beside it (starred iff that p reads below 0.05);
- a comparisons note names McNemar only where its table has a McNemar column;
- a starred pair that a test shown beside it does not reject (a cluster interval that includes 0, a McNemar p of
  0.05 or more beside a bootstrap) is marked ‡, saying the verdict follows the declared unit;
- a page whose ranks table shows P(rank 1) summing above 1 within a band says how ties count;
- the ranks' decision rule is written once per card page, not once per version.
"""
from __future__ import annotations

import re
from pathlib import Path

from atlaslib.cards import available_cards
from tests.statements import missing

RULE = "A row is ranked only against rows of the same training regime"
PAIRS_RULE = "Every pair of runs of one band on the same test items"
TIES = "can sum above 1"
NOT_HELD_OUT = "not a held-out result"


def _pages(src: Path):
    for card in available_cards():
        page = Path(src) / f"book/cards/{card.name}.md"
        if page.is_file():
            yield card, page.read_text(encoding="utf-8")


def _versions(text: str):
    parts = re.split(r"^## Leaderboard: `([^`]+)`", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2]))


def _tables(text: str):
    """Each Markdown table of ``text``: (the paragraph line before it, header cells, rows of cells)."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            head = [h.strip() for h in lines[i].strip().strip("|").split("|")]
            before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip() and not lines[j].startswith(":::")), "")
            rows, j = [], i + 2
            while j < len(lines) and lines[j].startswith("|"):
                rows.append([c.strip() for c in lines[j].strip().strip("|").split("|")])
                j += 1
            after = "\n".join(lines[j:j + 4])
            out.append((before, head, rows, after))
            i = j
        else:
            i += 1
    return out


def _plain(cell: str) -> str:
    return re.sub(r"<[^>]+>", "", cell)


def _protocol(name: str) -> str | None:
    m = re.search(r"\(([^()]+)\)\s*$", _plain(name))
    return m.group(1) if m else None


def _ranks_tables(text):
    return [(b, h, r, a) for b, h, r, a in _tables(text) if "P(rank 1)" in h and "vs the band's best (Holm, 5 %)" in h]


def _pairs_tables(text):
    return [(b, h, r, a) for b, h, r, a in _tables(text) if h and h[0] == "A − B" and "Holm p" in h]


# -- the band of a row, from the card's declarations (not the library's framing) ------------------------------

def _band(card, cell) -> str:
    if cell.get("overlap"):
        return "not ranked"
    prof = ((cell.get("spec") or {}).get("profile") or {})
    if prof.get("source") == "external" or cell.get("external"):
        regime = "outside"
    elif cell["protocol"] in tuple(card.training_protocols) or cell["model"] in tuple(card.training_baselines):
        regime = "trained"
    else:
        regime = "none"
    return regime + "|" + (getattr(card, "ranking_conditions", {}) or {}).get(cell["protocol"], "")


def check_forest_plots_do_not_mix_bands(src: Path, cells) -> list[str]:
    problems, seen = [], 0
    for card, text in _pages(src):
        for version, sec in _versions(text):
            ok = [c for c in cells if c.get("card") == card.name and c.get("version") == version
                  and c.get("status") == "ok"
                  and ((c.get("metrics") or {}).get(f"{card.metrics[0]}_{c['protocol']}") or {}).get("ci_low") is not None]
            bands: dict = {}
            for c in ok:
                bands.setdefault(_band(card, c), []).append(c)
            want = sum(1 for v in bands.values() if len(v) >= 2)
            figs = re.findall(r"```\{figure\} _figures/forest-[^\n]*\n(?:.*\n){0,3}?\n([^\n]*)", sec)
            seen += 1
            if len(figs) != want:
                problems.append(f"{card.name} {version}: {len(figs)} forest plot(s) of {card.metrics[0]}, but "
                                f"{want} band(s) with two or more rows ({', '.join(sorted(bands))}): rows of different "
                                "bands are drawn side by side")
            for cap in figs if len(bands) > 1 else ():     # one band: nothing to mix, nothing to name
                if not any(w in cap for w in ("no training on the card's data", "trained on the card's train items",
                                              "outside predictions", "not ranked")):
                    problems.append(f"{card.name} {version}: a forest plot's caption names no band: {cap[:120]}")
    return problems if seen else missing("a card page's leaderboard section")


def _declared_ranks_tables(src: Path, field: str):
    """(card, its declaration ``field``, version, the text before the table, the table's rows) of every ranks
    table on the page of a card that declares ``field`` (a mapping by protocol)."""
    for card, text in _pages(src):
        declared = getattr(card, field, {}) or {}
        if not declared:
            continue
        for version, sec in _versions(text):
            for before, _, rows, _ in _ranks_tables(sec):
                yield card, declared, version, before, rows


def check_conditions_are_ranked_apart(src: Path, cells) -> list[str]:
    problems, seen = [], 0
    for card, conds, version, before, rows in _declared_ranks_tables(src, "ranking_conditions"):
        seen += 1
        found = {conds.get(_protocol(r[0])) for r in rows if _protocol(r[0]) in conds}
        if len(found) > 1:
            problems.append(f"{card.name} {version}: one ranks table ({_plain(before)[:60]}) ranks rows of "
                            f"different conditions together: {sorted(found)}")
    return problems if seen else missing("a ranks table of a card declaring conditions")


def check_not_held_out_rows_are_never_best(src: Path, cells) -> list[str]:
    problems, seen = [], 0
    for card, informed, version, _, rows in _declared_ranks_tables(src, "chosen_after_test"):
        for r in rows:
            if _protocol(r[0]) not in informed:
                continue
            seen += 1
            verdict = r[1]
            if verdict == "best" or (verdict.startswith("highest point estimate") and NOT_HELD_OUT not in verdict):
                problems.append(f"{card.name} {version}: {_plain(r[0])} reads {verdict!r}, though the card "
                                f"declares its recipe not a held-out result ({informed[_protocol(r[0])]})")
    return problems if seen else missing("a ranks-table row of a protocol declared chosen after a test score")


def _shown_p(text: str) -> float | None:
    t = _plain(text).strip()
    if t.startswith("<"):
        return 0.0
    try:
        return float(t)
    except ValueError:
        return None


def check_stars_agree_with_the_holm_p_shown(src: Path, cells) -> list[str]:
    problems, seen = [], 0
    for card, text in _pages(src):
        for version, sec in _versions(text):
            for _, head, rows, _ in _pairs_tables(sec):
                k, d = head.index("Holm p"), head.index("difference [95 % paired]")
                for r in rows:
                    p = _shown_p(r[k])
                    if p is None:
                        continue
                    seen += 1
                    starred = bool(re.search(r"\]\s*\*", r[d]))
                    if starred != (p < 0.05):
                        problems.append(f"{card.name} {version}: {_plain(r[0])} is {'starred' if starred else 'not starred'}"
                                        f" beside Holm p {r[k]}")
    return problems if seen else missing("a pairs table's Holm p")


def check_mcnemar_named_only_with_its_column(src: Path, cells) -> list[str]:
    problems, seen = [], 0
    for card, text in _pages(src):
        for version, sec in _versions(text):
            for _, head, rows, after in _pairs_tables(sec):
                seen += 1
                note = next((ln for ln in after.splitlines() if ln.startswith("\\* significant")), "")
                if "McNemar" in note and not any("McNemar" in h for h in head):
                    problems.append(f"{card.name} {version}: the note under a pairs table speaks of McNemar, but the "
                                    "table has no McNemar column")
    return problems if seen else missing("a pairs table")


def check_declared_only_verdicts_are_marked(src: Path, cells) -> list[str]:
    problems, seen = [], 0
    for card, text in _pages(src):
        for version, sec in _versions(text):
            for _, head, rows, after in _pairs_tables(sec):
                d = head.index("difference [95 % paired]")
                beside = [i for i, h in enumerate(head) if h.endswith("paired [95 %]") and i != d]
                mc = next((i for i, h in enumerate(head) if h.startswith("b / c (McNemar")), None)
                t = head.index("test")
                for r in rows:
                    if not re.search(r"\]\s*\*", r[d]):
                        continue
                    seen += 1
                    why = []
                    for i in beside:
                        m = re.search(r"\[(-?[\d.]+), (-?[\d.]+)\]", r[i])
                        if m and float(m.group(1)) <= 0 <= float(m.group(2)):
                            why.append(f"{head[i]} {m.group(0)}")
                    if mc is not None and r[t] != "exact McNemar":
                        m = re.search(r"\(p ([<\d.]+(?: [\d.]+)?)\)\s*$", _plain(r[mc]))
                        if m and not m.group(1).startswith("<") and float(m.group(1)) >= 0.05:
                            why.append(f"McNemar p {m.group(1)}")
                    if why and "‡" not in r[d]:
                        problems.append(f"{card.name} {version}: {_plain(r[0])} is starred on the declared unit "
                                        f"({_plain(r[d])}) while {'; '.join(why)} does not reject, and the page does "
                                        "not say the verdict rests on the declared unit alone")
    return problems if seen else missing("a starred pair")


def check_p_rank1_sums_say_how_ties_count(src: Path, cells) -> list[str]:
    problems, seen = [], 0
    for card, text in _pages(src):
        for version, sec in _versions(text):
            for before, head, rows, _ in _ranks_tables(sec):
                k = head.index("P(rank 1)")
                vals = [float(r[k]) for r in rows if re.fullmatch(r"[\d.]+", r[k])]
                seen += 1
                if sum(vals) > 1.0 + 0.0005 * len(vals) and TIES not in text:
                    problems.append(f"{card.name} {version}: P(rank 1) sums to {sum(vals):.3f} in one band "
                                    f"({_plain(before)[:60]}), and the page does not say how ties count")
    return problems if seen else missing("a ranks table's P(rank 1)")


def check_the_rule_is_written_once_per_card(src: Path, cells) -> list[str]:
    problems, seen = [], 0
    for card, text in _pages(src):
        seen += 1
        for what in (RULE, PAIRS_RULE):
            n = text.count(what)
            if n > 1:
                problems.append(f"{card.name}: the decision rule ({what[:40]}…) is written {n} times, once per version")
    return problems if seen else missing("a card page")


CHECKS = (check_forest_plots_do_not_mix_bands, check_conditions_are_ranked_apart,
          check_not_held_out_rows_are_never_best, check_stars_agree_with_the_holm_p_shown,
          check_mcnemar_named_only_with_its_column, check_declared_only_verdicts_are_marked,
          check_p_rank1_sums_say_how_ties_count, check_the_rule_is_written_once_per_card)
SITES: dict = {}
WHOLE_BOOK_ONLY = CHECKS
