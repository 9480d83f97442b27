"""Checks that a row trained with several seeds is over its seeds on the "where models fail" pages, as on its
leaderboard, recomputed from the cells with independent references (scikit-learn, seqeval), never the atlas's
own slice or calibration code:

- its column in every slice table is named as the mean over its seeds (not one seed's model), and each figure of
  a group the check can rebuild from the records (a category, a band or the missing label of a record field; an
  entity type of a span card) is the mean over the seeds' models of that model's figure on the group: macro F1
  (scikit-learn) on a binary card, strict entity F1 (seqeval, IOB2) on a span card;
- its calibration row is named so too, and its Brier score is the mean over the seeds' models of scikit-learn's
  ``brier_score_loss`` (or the row has none, saying which seeds give no scores).

The page once showed the first seed's model only, "seed 20261006's model of 5", beside a leaderboard mean over
five seeds (the best seed on NegEx full, a near-worst one on MACCROBAT). Only a whole default book has
fine-tuned rows, so the check is whole-book-only; ``tests/analysis/test_seeded_slices.py`` tests it on hand-made
pages.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from tests.statements import missing
from tests.statements.robust import md_tables

FIG = re.compile(r"^(\d\.\d{3})")
TOL = 0.0005 + 1e-9


def _label(cell: dict) -> str:
    return f"{cell['spec']['model']} ({cell['spec']['protocol']})"


def _seeds(cell: dict) -> list[tuple]:
    """``[(seed, records)]`` of a seeded row: each seed's answers over the row's own records (gold, fields)."""
    runs = (cell.get("extra") or {}).get("seed_runs") or []
    if len(runs) < 2 or not all(isinstance(r.get("predictions"), list) for r in runs):
        return []
    own = {r["item_id"]: r for r in cell["predictions"]}
    return [(r["seed"], [{**own[x["item_id"]], **x} for x in r["predictions"]]) for r in runs]


def _clean(text: str) -> str:
    return re.sub(r"<[^>]+>", "", text).replace("\\", "").strip()


def _column(head: list[str], cell: dict) -> int | None:
    want = _label(cell)[:-1] + ","
    return next((k for k, h in enumerate(head) if _clean(h).startswith(want)), None)


def _sections(text: str) -> dict:
    """{slice name: its table's (head, rows)} of the page's Slices section."""
    out = {}
    for m in re.finditer(r"^\*\*(.+?)\*\*\n\n((?:^\|.*\n)+)", text, flags=re.M):
        tables = md_tables(m.group(2))
        if tables:
            out[m.group(1)] = tables[0]
    return out


def _in_group(value, group: str, spec: dict) -> bool:
    if value is None:
        return group == spec.get("missing", "missing")
    if spec.get("bands"):
        m = re.fullmatch(r"(\d+)–(\d+)|≥ (\d+)|(\d+)", group)
        if not m:
            return False
        if m.group(1):
            return int(m.group(1)) <= value <= int(m.group(2))
        if m.group(3):
            return value >= int(m.group(3))
        return value == int(m.group(4))
    return str(value) == group


def _binary_figure(recs: list[dict], positive: str) -> float | None:
    from sklearn.metrics import f1_score

    y = np.array([r["gold"] == positive for r in recs], dtype=int)
    p = np.array([r["pred"] == positive for r in recs], dtype=int)
    if len(set(y)) < 2:
        return None
    return float(f1_score(y, p, average="macro", labels=[0, 1], zero_division=0))


def _span_figure(recs: list[dict], entity_type: str | None = None) -> float | None:
    from seqeval.metrics import f1_score
    from seqeval.scheme import IOB2

    gold, pred = [r["gold"] for r in recs], [r["pred"] for r in recs]
    if entity_type is not None:
        keep = lambda seq: [t if t != "O" and t[2:] == entity_type else "O" for t in seq]  # noqa: E731
        gold, pred = [keep(s) for s in gold], [keep(s) for s in pred]
    if not any(t != "O" for s in gold for t in s):
        return None
    return float(f1_score(gold, pred, mode="strict", scheme=IOB2, zero_division=0))


def _slice_problems(card, cell: dict, text: str, where: str) -> tuple[list[str], int]:
    problems, seen = [], 0
    by_seed = _seeds(cell)
    kind, positive = card.analysis.kind, card.analysis.positive
    for name, (head, rows) in _sections(text).items():
        spec = dict(card.analysis.slices).get(name)
        k = _column(head, cell)
        if spec is None or k is None:
            continue
        seen += 1
        if "mean over" not in _clean(head[k]):
            problems.append(f"{where}: the slice table {name!r} shows {_clean(head[k])!r}, one seed's model, not "
                            f"the mean over the row's {len(by_seed)} seeds the leaderboard gives")
            continue
        for row in rows:
            group, shown = _clean(row[0]), FIG.match(_clean(row[k]))
            if shown is None or group.startswith("other"):
                continue
            if kind == "binary" and spec.get("unit") != "mention":
                each = [_binary_figure([r for r in recs if _in_group(r.get(spec["field"]), group, spec)], positive)
                        for _, recs in by_seed]
            elif kind == "spans" and spec.get("unit") == "mention" and spec.get("field") == "type":
                each = [_span_figure(recs, group) for _, recs in by_seed]
            elif kind == "spans" and spec.get("unit") != "mention" and not spec.get("bands"):
                each = [_span_figure([r for r in recs if _in_group(r.get(spec["field"]), group, spec)])
                        for _, recs in by_seed]
            else:
                continue
            if any(v is None for v in each):
                continue
            seen += 1
            mean = float(np.mean(each))
            if abs(mean - float(shown.group(1))) > TOL:
                problems.append(f"{where}: {name} = {group}: {_clean(head[k])} shows {shown.group(1)}, the mean "
                                f"over its seeds' models is {mean:.3f} (each: "
                                + ", ".join(f"{v:.3f}" for v in each) + ")")
    return problems, seen


def _calibration_problems(card, cell: dict, text: str, where: str) -> tuple[list[str], int]:
    from sklearn.metrics import brier_score_loss

    part = text.split("Calibration\n", 1)
    if len(part) < 2:
        return [], 0
    by_seed, positive = _seeds(cell), card.analysis.positive
    for head, rows in md_tables(part[1].split("\n#", 1)[0]):
        if not head or _clean(head[0]) != "run" or "Brier" not in head:
            continue
        b = head.index("Brier")
        for row in rows:
            run = _clean(row[0])
            if not run.startswith(_label(cell)[:-1] + ","):
                continue
            if "mean over" not in run:
                return [f"{where}: the calibration row {run!r} is one seed's model, not the mean over the row's "
                        f"{len(by_seed)} seeds the leaderboard gives"], 1
            lacking = [sd for sd, recs in by_seed if any(r.get("score") is None for r in recs)]
            shown = FIG.match(_clean(row[b]))
            if lacking or positive is None:
                if shown is not None and lacking:
                    return [f"{where}: {run} shows a Brier score though seeds {lacking} give no scores"], 1
                return [], 1
            each = [float(brier_score_loss([r["gold"] == positive for r in recs], [float(r["score"]) for r in recs]))
                    for _, recs in by_seed]
            mean = float(np.mean(each))
            if shown is None or abs(mean - float(shown.group(1))) > TOL:
                return [f"{where}: {run}'s Brier is {_clean(row[b])}, the mean over its seeds' models is "
                        f"{mean:.3f}"], 1
            return [], 1
    return [], 0


def check_seeded_slices_and_calibration_are_over_the_seeds(src: Path, cells) -> list[str]:
    from atlaslib.cards import get_card

    problems, seen = [], 0
    for cell in cells:
        if cell.get("status") != "ok" or not cell.get("predictions") or not _seeds(cell):
            continue
        page = Path(src) / "book" / "cards" / cell["card"] / cell["version"] / "failures.md"
        if "variant" in (cell.get("spec") or {}).get("parameters", {}) or not page.is_file():
            continue
        try:
            card = get_card(cell["card"])
        except KeyError:
            continue
        text = page.read_text(encoding="utf-8")
        where = f"{cell['card']} {cell['version']} failures page, {_label(cell)}"
        for found, n in (_slice_problems(card, cell, text, where), _calibration_problems(card, cell, text, where)):
            problems += found
            seen += n
    return problems + ([] if seen else missing("a seeded row's slices or calibration on a failures page"))


CHECKS = (check_seeded_slices_and_calibration_are_over_the_seeds,)
SITES: dict = {}
WHOLE_BOOK_ONLY = (check_seeded_slices_and_calibration_are_over_the_seeds,)
