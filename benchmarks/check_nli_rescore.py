"""The NLI card's published runs re-score to themselves without a kernel: each ok result cell of a built book passes
the re-score guard (:func:`atlaslib.rescore.refusal`), is scored again from its stored predictions
(:func:`atlaslib.rescore.rescored_cell`: its ``extra.report`` made anew of the new cell) equal to itself, extra bytes
included, and the notebook's ``from-cell`` cells re-rendered from it (:func:`atlaslib.rescore.render_from_cell`)
give the published page's outputs of the same cells (PNG included).

    ATLAS_DATA_DIR=/work/shared/data .venv/bin/python benchmarks/check_nli_rescore.py /work/final-s9x-book
"""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import jupytext
import nbformat

from atlaslib import notebook, rescore
from atlaslib.cards import get_card

#: what identifies, on a page built before the notebook tagged them, the cell each from-cell cell replaces (in order)
PUBLISHED = ("display(nli_report_table", "pattern_frame(", "gate_table(", "confusion_markdown(cell")


def _bare(outputs) -> list:
    return [{k: v for k, v in dict(o).items() if k != "execution_count"} for o in outputs]


def check(book: Path) -> list[str]:
    card, problems = get_card("nli_negation"), []
    src = jupytext.read(Path(__file__).parents[1] / "notebooks" / "nli_negation.md")
    tagged = rescore.tagged_cells(src)
    for path in sorted((book / "results" / "nli_negation").glob("*/*/zero_shot.json")):
        cell = json.loads(path.read_text())
        name = f"{cell['version']} {cell['model']}"
        why = rescore.refusal(card, cell, [])
        if why:
            print(f"{name}: executes ({why})")
            continue
        new = json.loads(json.dumps(rescore.rescored_cell(copy.deepcopy(cell), "prediction.new-scoring")))
        differ = [k for k in cell if k not in ("run_key", "spec") and new.get(k) != cell.get(k)]
        if differ or json.dumps(new["extra"]) != json.dumps(cell["extra"]):
            problems.append(f"{name}: the re-scored cell differs in {differ or ['extra bytes']}")
        page = nbformat.read(book / "book" / "runs" / path.relative_to(book / "results").with_suffix(".ipynb"),
                             as_version=4)
        shown = rescore.tagged_cells(page)   # a book built from the tagged notebook; an older one: by PUBLISHED
        for k, (t, mark) in enumerate(zip(tagged, PUBLISHED)):
            old = shown[k] if len(shown) == len(tagged) else \
                next((c for c in page.cells if c.cell_type == "code" and mark in c.source), None)
            c = copy.deepcopy(t)
            c.outputs = old.outputs if old is not None else []
            out = rescore.render_from_cell(c, new, [], rescore.cells_above(src, t))
            if old is None or out is None or _bare(out) != _bare(old.outputs):
                problems.append(f"{name}: the from-cell cell replacing {mark!r} does not show the published outputs")
        print(f"{name}: re-scored, equal to the published cell and page", flush=True)
    return problems


if __name__ == "__main__":
    found = check(Path(sys.argv[1]))
    print("\n".join(found) or "ok: every ok NLI run re-scores to its published cell and page outputs")
    sys.exit(1 if found else 0)
