"""One definition per rule: the zero-division rule (:func:`atlaslib.metrics.engine.ratio`), the overlap rule
(:meth:`atlaslib.cards.Card.overlap`) and the departures from them a card declares (``Departure.code``). Each
test greps atlaslib for a second definition; the hand-computed cases show what the one rule gives."""
import ast
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np

import atlaslib
from atlaslib.cards import available_cards, get_card

ATLASLIB = Path(atlaslib.__file__).parent

#: the atlas's zero-division rule, the one function that writes it
RATIO = "atlaslib.metrics.engine.ratio"

#: a guarded division: ``x / y if y else …``, ``np.errstate(divide=…)``, ``np.where(d > 0, … / …)``,
#: ``… / np.maximum(d, 1)`` (``//`` and a path joined with a string, ``folder / "x.json"``, are no division)
GUARDED = re.compile(r"(?<!/)/(?![/=])(?!\s*f?[\"'])[^#\n]*\bif\b[^#\n]*\belse\s+(?:0\.0|0|1\.0|None|nan|np\.nan|math\.nan|float\(.nan.\))\b"
                     r"|errstate\(divide|np\.where\([^,\n]+[=>]=?\s*0[^,\n]*,[^,\n]*/|/\s*np\.maximum\(")

#: guarded divisions that are no score, with what they are (a rate of work, a share printed as "none", a
#: similarity): the zero-division rule is about metrics; these say "not measured" in their own terms
NOT_A_SCORE = {
    "atlaslib.progress": "a run's progress (a share of expected time)",
    "atlaslib.models.cost": "seconds per item, items per second (not measured: None)",
    "atlaslib.pages.rowinfo": "items per second and tokens per item of a row (not measured: None)",
    "atlaslib.models.contamination.memorisation_probe": "the probe's shares over sentences probed (none: None)",
    "atlaslib.metrics.seeds": "shares of variance over seeds and items (none: None)",
    "atlaslib.cards.nli_negation.predictors": "cosine similarity of two vectors (0 for a zero vector)",
}


def _guarded_functions(source: str, module: str) -> list[str]:
    """Dotted names (``module.Class.function``; ``module`` for the module body) of the innermost functions
    whose own lines hold a guarded division."""
    tree = ast.parse(source)
    lines = source.splitlines()
    owner = {}

    def walk(node, name):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = f"{name}.{child.name}"
                for ln in range(child.lineno, (child.end_lineno or child.lineno) + 1):
                    owner[ln] = inner
                walk(child, inner)
            else:
                walk(child, name)

    walk(tree, module)
    # a docstring or comment that shows a formula is no definition
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            docs.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return sorted({owner.get(i, module) for i, line in enumerate(lines, 1)
                   if i not in docs and GUARDED.search(line.split("#")[0])})


def _declared_departures() -> set[str]:
    return {code for card in available_cards() for d in card.departures for code in getattr(d, "code", ())}


def _allowed(name: str, departures: set[str]) -> bool:
    return name == RATIO or name in departures or any(name == k or name.startswith(k + ".") for k in NOT_A_SCORE)


def test_the_grep_sees_each_way_of_writing_the_rule_again():
    src = ('def a(x, y):\n    return x / y if y else 0.0\n'
           'def g(k, n):\n    return k // n + (1 if n else 0)\n'
           'def h(d):\n    return Path(d) / "x.json" if d else None\n'
           'def b(x, y):\n    with np.errstate(divide="ignore"):\n        return x / y\n'
           'def c(x, y):\n    return np.where(y > 0, x / np.where(y > 0, y, 1), np.nan)\n'
           'def d(x, y):\n    return 2 * x / np.maximum(y, 1)\n'
           'def e(x, y):\n    """x / y if y else 0.0"""\n    return ratio(x, y)  # not x / y if y else 0.0\n'
           'class K:\n    def f(self, n):\n        return self.k / n if n else None\n')
    assert _guarded_functions(src, "m") == ["m.K.f", "m.a", "m.b", "m.c", "m.d"]


def test_one_zero_division_rule():
    """Only :func:`atlaslib.metrics.engine.ratio` writes "a ratio with a zero denominator is …"; a card that
    scores otherwise declares it as a departure (its ``code``), and the rest are no scores."""
    departures = _declared_departures()
    found = []
    for path in sorted(ATLASLIB.rglob("*.py")):
        module = ".".join(path.relative_to(ATLASLIB.parent).with_suffix("").parts).removesuffix(".__init__")
        found += _guarded_functions(path.read_text(encoding="utf-8"), module)
    assert RATIO in found
    stale = [k for k in NOT_A_SCORE if not any(f == k or f.startswith(k + ".") for f in found)]
    assert not stale, f"NOT_A_SCORE names what no longer divides: {stale}"
    second = [f for f in found if not _allowed(f, departures)]
    assert not second, ("a second zero-division rule (use atlaslib.metrics.engine.ratio, or declare the card's "
                        "departure with its code):\n" + "\n".join(f"- {f}" for f in second))


def test_every_declared_departure_names_a_real_function_and_tempeval_declares_its_scorer():
    import importlib

    for code in _declared_departures():
        module, _, name = code.rpartition(".")
        assert callable(getattr(importlib.import_module(module), name)), code
    tempeval = get_card("tempeval")
    row = [d for d in tempeval.departures if "atlaslib.cards.tempeval.scoring.f1_from_counts" in d.code]
    assert len(row) == 1 and "P = 1" in row[0].card and "R = 1" in row[0].card and "F1 = 0" in row[0].card
    from atlaslib.cards.tempeval.scoring import f1_from_counts

    p, r, f = f1_from_counts([0, 3], [0, 0], [0, 0], [0, 0])   # the convention the row declares, by hand
    assert p.tolist() == [1.0, 1.0] and r.tolist() == [1.0, 0.0] and f.tolist() == [1.0, 0.0]
    from atlaslib.pages.departures import departures_markdown

    assert "a score with nothing to count" in departures_markdown(tempeval)


def test_classification_and_gold_cuts_read_the_one_rule():
    from atlaslib.cards.maccrobat.gold_cuts import char_span_f1
    from atlaslib.metrics import classification, engine

    assert classification.ratio is engine.ratio and not hasattr(classification, "_div")
    # nothing predicted and nothing in gold: every ratio undefined, never 0 (it was published as 0.0)
    s = char_span_f1([set(), set()], [set(), set()])
    assert (s["tp"], s["fp"], s["fn"]) == (0, 0, 0)
    assert all(math.isnan(s[k]) for k in ("precision", "recall", "f1"))
    s = char_span_f1([{("T", 0, 4)}], [set()])            # gold, nothing predicted: P undefined, R = F1 = 0
    assert math.isnan(s["precision"]) and s["recall"] == 0.0 and s["f1"] == 0.0
    s = char_span_f1([{("T", 0, 4), ("T", 6, 9)}], [{("T", 0, 4), ("U", 6, 9)}])   # 1 TP, 1 FP, 1 FN
    assert (s["precision"], s["recall"], s["f1"]) == (0.5, 0.5, 0.5)


def test_macro_f1_over_labels_is_undefined_with_a_class_absent():
    from atlaslib import course

    # row 1: class "b" in neither gold nor predictions -> undefined; row 2 by hand: F1_a = 0 (TP 0, FN 1),
    # F1_b = 2·1 / (2·1 + 1) = 2/3, macro 1/3
    out = course.macro_f1_labels(np.array([["a", "a"], ["a", "b"]]), np.array([["a", "a"], ["b", "b"]]), ["a", "b"])
    assert math.isnan(out[0]) and math.isclose(out[1], 1 / 3)


# --- the overlap rule ---------------------------------------------------------------------------------------------

def _functions_reading_trained_on(source: str, module: str) -> list[str]:
    """Functions that read ``trained_on`` / ``training_data`` and match entries by prefix or substring."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_source_segment(source, node) or ""
            body = "\n".join(line.split("#")[0] for line in text.splitlines())
            if re.search(r"trained_on|training_data", body) and re.search(
                    r"\.startswith\(|\bin\s+\w+\.lower\(\)|\.lower\(\)\s+in\b", body):
                out.append(f"{module}.{node.name}")
    return out


def test_the_overlap_grep_sees_a_prefix_and_a_substring_match():
    src = ('def a(p, card):\n    return [t for t in p["trained_on"] if t.lower().startswith(card.name)]\n'
           'def b(cell, marks):\n    tr = cell["trained_on"]\n    return [t for t in tr if any(m in t.lower() for m in marks)]\n'
           'def c(card, p):\n    return card.overlap(p["trained_on"])\n')
    assert _functions_reading_trained_on(src, "m") == ["m.a", "m.b"]


def test_one_overlap_rule():
    """Only :meth:`atlaslib.cards.Card.overlap` decides whether a model's training data overlap a card, by the
    card's declared ``overlap_marks``: not by its name, not by a substring."""
    found = []
    for path in sorted(ATLASLIB.rglob("*.py")):
        module = ".".join(path.relative_to(ATLASLIB.parent).with_suffix("").parts).removesuffix(".__init__")
        found += _functions_reading_trained_on(path.read_text(encoding="utf-8"), module)
    assert found == ["atlaslib.cards.overlap"], found


def test_contamination_reads_the_cards_declared_data_not_its_name():
    from atlaslib.models.contamination import may_have_seen

    # a card whose data are not named like the card: only its declared marks say what overlaps
    card = replace(get_card("negex"), overlap_marks=("chapman-kit",))
    seen = may_have_seen({"source": "hub", "training_data": ["pubmed"], "trained_on": ["Chapman-kit-2009"]}, card)
    assert seen["may_have_seen"] is True and "Chapman-kit-2009" in seen["reason"]
    named_only = may_have_seen({"source": "hub", "training_data": ["pubmed"], "trained_on": ["negex-notes"]}, card)
    assert named_only["may_have_seen"] is False           # the card's name is no mark


def test_the_not_ranked_reason_names_the_cells_overlap_mark_only():
    from atlaslib.metrics import framing as F

    cell = {"overlap": ["negex-kit-triggers"],
            "spec": {"profile": {"trained_on": ["negex-kit-triggers", "negex", "kit"]}}}
    assert F.overlap_reason(cell) == "trained on data that overlap this card's test data (negex-kit-triggers)"
    assert F.overlap_reason({"overlap": [], "spec": {"profile": {"trained_on": ["negex"]}}}) is None


def test_a_run_through_the_contract_alone_carries_the_notebooks_overlap_mark(data_dir):
    """``atlaslib.cards.run.run`` (no notebook) marks a model trained on the card's data as the notebook does
    (``negex.cells.cell_parts``: ``CARD.overlap`` of the profile's ``trained_on``), and a baseline trained on
    nothing of it with no mark."""
    from atlaslib.cards import negex as N
    from atlaslib.cards.run import run

    cell = run("negex", "atlas-n100-v1", "negspacy-negex-kit", "zero_shot", data_dir=data_dir)
    trained_on = cell["spec"]["profile"]["trained_on"]
    assert cell["status"] == "ok" and trained_on == ["negex-kit-triggers"]
    assert cell["overlap"] == N.CARD.overlap(trained_on) == ["negex-kit-triggers"]
    assert run("negex", "atlas-n100-v1", "majority", "zero_shot", data_dir=data_dir)["overlap"] == []
