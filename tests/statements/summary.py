"""Checks of each card page's summary ("## In brief", first on the page after its title and licence banner)
against the tables of the same build that it summarises, read as rendered text (an independent cross-check:
the check never calls the summary's code):

- every row's figure (value [interval]) equals the first metric column of the leaderboard row of the same run on
  the same page, and every figure the summary gives is one of those or a slice figure;
- each verdict ("Best", "Highest point estimate (too few units to tell)", "not distinguishable from it") is the
  verdict of that row in the page's ranks table, and each items/s is that table's items/s of the row;
- a not-ranked row's reason is the reason the page's not-ranked table gives;
- each "weakest on <slice> = <group>" figure is that run's figure for the group on the version's "where models
  fail" page.
"""
from __future__ import annotations

import re
from pathlib import Path

from atlaslib.cards import available_cards
from tests.statements import missing

FIG = r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]"
#: "weakest on <slice> = <group> (n = N): <metric> <figure>"
WEAKEST = rf"weakest on (.+?) = (.+?) \(n = [\d,]+\): \S+(?: \S+)*? ({FIG})"


def _clean(cell: str) -> str:
    """A rendered table cell as plain text: no footnote marks, word-break hints, tags, escapes or row marks."""
    s = re.sub(r"<sup>.*?</sup>", "", cell)
    s = re.sub(r"<[^>]+>", "", s)
    s = s.replace("\\", "").replace(" †", "").replace(" ◊", "")
    return re.sub(r"\s+", " ", s).strip()


def _tables(text: str):
    """Each Markdown table of ``text`` as (header cells, [row cells]) (cleaned)."""
    out = []
    for block in re.findall(r"((?:^\|.*\|[ \t]*\n)+)", text, flags=re.M):
        rows = [[_clean(c) for c in ln.strip().strip("|").split(" | ")] for ln in block.strip().split("\n")]
        if len(rows) >= 2:
            out.append((rows[0], rows[2:]))
    return out


def _summary(text: str) -> str | None:
    """The summary section of a card page when it comes first (after the title and the licence banner), else None."""
    body = text.split("\n", 1)[1] if "\n" in text else ""
    body = re.sub(r"\A\s*```\{warning\}\n.*?\n```\n", "", body, flags=re.S).lstrip()
    if not body.startswith("## In brief\n"):
        return None
    end = body.find("*Licence of the data:*")
    return body[:end] if end >= 0 else body


def _blocks(summary: str):
    """(version, its part of the summary): one per ``**`V`**`` line, else the one version the summary names."""
    parts = re.split(r"^\*\*`([^`]+)`\*\*$", summary, flags=re.M)
    if len(parts) > 1:
        return list(zip(parts[1::2], parts[2::2]))
    m = re.search(r"On `([^`]+)`, the split version the card ranks on", summary)
    return [(m.group(1), summary)] if m else []


def _version_section(text: str, version: str) -> str:
    parts = re.split(r"^## Leaderboard: `([^`]+)`", text, flags=re.M)
    for v, body in zip(parts[1::2], parts[2::2]):
        if v == version:
            return body
    return ""


def _boards(section: str):
    """({run label: first metric figure}, {run label: ranks row as {column: text}}, {label: why not ranked})."""
    figures, ranks, apart = {}, {}, {}
    for head, rows in _tables(section):
        if head[:2] == ["model", "protocol, regime"]:
            for r in rows:
                m = re.match(rf"({FIG}|\d\.\d{{3}}|n/a|—|not run)", r[2])
                # the first such table holds the primary metric (a card with many metrics has several tables)
                figures.setdefault(f"{r[0]} ({r[1].split()[0]})", m.group(1) if m else r[2])
        elif head[:2] == ["model", "vs the band's best (Holm, 5 %)"]:
            for r in rows:
                ranks[r[0]] = dict(zip(head, r))
        elif head[:2] == ["model", "why not ranked"]:
            for r in rows:
                apart[r[0]] = dict(zip(head, r))
    return figures, ranks, apart


def _slice_figure(failures: str, slice_name: str, group: str, run: str) -> str | None:
    m = re.search(rf"^\*\*{re.escape(slice_name)}\*\*\n\n((?:^\|.*\n)+)", failures, flags=re.M)
    if not m:
        return None
    for head, rows in _tables(m.group(1)):
        for r in rows:
            if r[0] == group:
                row = dict(zip(head, r))
                cell = next((v for k, v in row.items()
                             if k == run or k.startswith((run[:-1] + ", seed", run[:-1] + ", mean over"))), None)
                f = re.match(FIG, cell or "")
                return f.group(0) if f else cell
    return None


def check_card_summary_figures_are_the_leaderboards(src: Path, cells) -> list[str]:
    problems, seen = [], 0
    for card in available_cards():
        page = Path(src) / f"book/cards/{card.name}.md"
        if not page.is_file():
            continue
        text = page.read_text(encoding="utf-8")
        summary = _summary(text)
        if summary is None:
            problems.append(f"{card.name}: the card page does not start with its summary (## In brief)")
            continue
        for version, block in _blocks(summary):
            figures, ranks, apart = _boards(_version_section(text, version))
            failures_page = Path(src) / f"book/cards/{card.name}/{version}/failures.md"
            failures = failures_page.read_text(encoding="utf-8") if failures_page.is_file() else ""
            where = f"{card.name} {version} summary"
            checked = set()
            for label, fig in figures.items():
                for m in re.finditer(rf"(?<![\w-]){re.escape(label)}(?:\*\*)? ({FIG}|\d\.\d{{3}}|n/a)", _clean(block)):
                    seen += 1
                    checked.add(m.start(1))
                    if m.group(1) != fig:
                        problems.append(f"{where}: {label} {m.group(1)}, the leaderboard says {fig}")
            plain = _clean(block)
            for m in re.finditer(WEAKEST, plain):
                checked.add(m.start(3))
            for m in re.finditer(FIG, plain):
                if m.start() not in checked:
                    problems.append(f"{where}: the figure {m.group(0)} is no leaderboard row's nor a slice's")
            for line in block.splitlines():
                row = re.match(r"\s*- \*\*(.+?)\*\* ", line)
                if not row:
                    continue
                label, plain_line = _clean(row.group(1)), _clean(line)
                speed = re.search(r"; ([\d,.]+) items/s$", plain_line)
                table = ranks.get(label) or apart.get(label) or {}
                if speed and table.get("prediction items/s") != speed.group(1):
                    problems.append(f"{where}: {label} at {speed.group(1)} items/s, the ranks table says "
                                    f"{table.get('prediction items/s')}")
                if label in apart and apart[label]["why not ranked"] not in plain_line:
                    problems.append(f"{where}: {label}'s reason is not the not-ranked table's "
                                    f"({apart[label]['why not ranked']})")
                weak = re.search(WEAKEST, plain_line)
                if weak:
                    seen += 1
                    shown = _slice_figure(failures, weak.group(1), weak.group(2), label)
                    if shown != weak.group(3):
                        problems.append(f"{where}: {label} weakest on {weak.group(1)} = {weak.group(2)} "
                                        f"{weak.group(3)}, the failures page says {shown}")
            plain = _clean(block)
            for m in re.finditer(r"(Best|Highest point estimate \(too few units to tell\)): \*\*(.+?)\*\*", block):
                seen += 1
                want = "best" if m.group(1) == "Best" else "highest point estimate (too few units to tell)"
                got = (ranks.get(_clean(m.group(2))) or {}).get("vs the band's best (Holm, 5 %)")
                if got != want:
                    problems.append(f"{where}: {_clean(m.group(2))} called {want!r}, the ranks table says {got!r}")
            for m in re.finditer(r"not distinguishable from it \(Holm, 5 %\): (.*?)\.(?: |$)", plain):
                for name, test in re.findall(r"(\S.*?\)) \(([^,()]+), Holm p", m.group(1)):
                    name = name.lstrip(", ")
                    got = (ranks.get(name) or {}).get("vs the band's best (Holm, 5 %)")
                    if got != f"not distinguishable ({test})":
                        problems.append(f"{where}: {name} not distinguishable ({test}), the ranks table says {got!r}")
    return problems + ([] if seen else missing("a card page's summary with a leaderboard row"))


CHECKS = (check_card_summary_figures_are_the_leaderboards,)
#: the two-run book's card page summarises two outside systems with a paired comparison and slices
SITES: dict = {"two-run book": (check_card_summary_figures_are_the_leaderboards,)}
WHOLE_BOOK_ONLY = ()
