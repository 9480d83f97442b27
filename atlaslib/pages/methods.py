"""Parts of the methods chapters rendered from code and result cells: the calibration facts of the metrics
chapter (``{{fact:calibration.*}}``) and its table of seqeval's two modes on this build's span runs
(where ``<!-- seqeval-modes -->`` stands).

The seqeval table takes every ok run of a card whose task family scores tags (``seqeval``: spans), reads the gold and
predicted IOB2 tags of its prediction records and scores them with seqeval twice: the default mode
(conlleval chunking, what the atlas uses) and the strict mode (``mode="strict"``, ``scheme=IOB2``); it
counts the predicted sequences that are not well-formed IOB2 (an ``I-X`` that continues nothing), the
only place where the two modes can differ.
"""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from ..cards.families import family_of
from . import facts

SEQEVAL_MARK = "<!-- seqeval-modes -->"
#: uniform scores of these sizes show the ECE noise floor in the metrics chapter
FLOOR_SIZES = (100, 1000)
FLOOR_SEED = 20261006


def _calibration_facts(ctx: facts.FactContext) -> dict[str, facts.Fact]:
    from ..analysis import calibration as CAL

    src = "atlaslib.analysis.calibration"
    out = {"calibration.bins": facts.Fact(CAL.N_BINS, "count", src),
           "calibration.draws": facts.Fact(CAL.N_CONSISTENCY, "count", src),
           "calibration.brier_of_half": facts.Fact(float(CAL.brier([0.0, 1.0], [0.5, 0.5])), "decimal2", src)}
    rng = np.random.default_rng(FLOOR_SEED)
    for n in FLOOR_SIZES:
        s = rng.random(n)
        out[f"calibration.floor_n{n}"] = facts.Fact(CAL.ece_if_calibrated(s, seed=FLOOR_SEED), "rate",
                                                    src + ".ece_if_calibrated (uniform scores, seeded)")
    return out


facts.register_provider("calibration", _calibration_facts)


def _probe_facts(ctx: facts.FactContext) -> dict[str, facts.Fact]:
    """The probes' logistic heads as declared (``PROBE_SETTINGS``): solver and the tolerance they converge to."""
    from ..protocols import items, tokens

    def head(s) -> str:
        return f"L2, C = {s['C']:g}, {s['solver']} to tolerance {s['tol']:g}"

    return {"probe.item_head": facts.Fact(head(items.PROBE_SETTINGS), "text", "atlaslib.protocols.items.PROBE_SETTINGS"),
            "probe.word_head": facts.Fact(head(tokens.PROBE_SETTINGS), "text",
                                          "atlaslib.protocols.tokens.PROBE_SETTINGS")}


facts.register_provider("probe", _probe_facts)


def _scale_out_facts(ctx: facts.FactContext) -> dict[str, facts.Fact]:
    """The executor's declared limits the scale-out page quotes."""
    from .. import executor

    return {"scale_out.min_worker_memory": facts.Fact(f"{executor.MIN_WORKER_MEMORY // 2 ** 20} MiB", "text",
                                                      "atlaslib.executor.MIN_WORKER_MEMORY")}


facts.register_provider("scale_out", _scale_out_facts)


def _tags(value) -> list[str]:
    if isinstance(value, str):
        value = ast.literal_eval(value)
    return [str(t) for t in value]


def well_formed(tags: list[str]) -> bool:
    """IOB2 without repair: every ``I-X`` follows ``B-X`` or ``I-X``."""
    prev = "O"
    for t in tags:
        if t.startswith("I-") and (prev == "O" or prev[2:] != t[2:]):
            return False
        prev = t
    return True


def seqeval_modes(cell: dict) -> dict | None:
    """Micro F1 of one span run's records in seqeval's default and strict modes, and how many predicted
    tag sequences are ill-formed; None when the records carry no tags."""
    from seqeval.metrics import f1_score
    from seqeval.scheme import IOB2

    recs = cell.get("predictions") or []
    try:
        gold = [_tags(r["gold"]) for r in recs]
        pred = [_tags(r["pred"]) for r in recs]
    except (KeyError, ValueError, SyntaxError):
        return None
    if not gold or any(len(g) != len(p) for g, p in zip(gold, pred)):
        return None
    return {"default": float(f1_score(gold, pred)), "strict": float(f1_score(gold, pred, mode="strict", scheme=IOB2)),
            "ill_formed": sum(not well_formed(p) for p in pred), "sequences": len(pred)}


def seqeval_markdown(cards, cells) -> str:
    rows = []
    for card in cards:
        if not family_of(card).seqeval:
            continue
        for c in cells:
            if c.get("card") != card.name or c.get("status") != "ok":
                continue
            m = seqeval_modes(c)
            if m is None:
                continue
            same = "yes" if abs(m["default"] - m["strict"]) < 5e-7 else f"no ({m['strict'] - m['default']:+.4f})"
            rows.append(f"| {card.title.split(':')[0].split('(')[-1].rstrip(')')} `{c['version']}` | "
                        f"{c['model']} ({c['protocol']}) | {m['default']:.4f} | {m['strict']:.4f} | {same} | "
                        f"{m['ill_formed']:,} of {m['sequences']:,} |")
    if not rows:
        return "*This build has no span run with predicted tags to score both ways.*\n"
    head = ["| card, version | run | micro F1, default mode (the atlas) | micro F1, strict mode | same? | "
            "predicted sentences with an `I-X` that continues nothing |", "|---|---|---|---|---|---|"]
    return "\n".join(head + rows) + "\n"


def render_methods(src: Path, cards, cells) -> None:
    """Fill the rendered parts of the methods chapters that this module owns."""
    page = Path(src) / "book" / "methods" / "metrics.md"
    if not page.is_file():
        return
    text = page.read_text(encoding="utf-8")
    if SEQEVAL_MARK in text:
        page.write_text(text.replace(SEQEVAL_MARK, seqeval_markdown(cards, cells)), encoding="utf-8")
