"""A card notebook's ``from-cell`` cells, as they are now, draw what a built book's executed run pages show: each
tagged cell of ``notebooks/<card>.md`` re-rendered without a kernel (:func:`atlaslib.rescore.render_from_cell`) on
each run's published cell and variant cells, its outputs compared byte for byte (JSON of the nbformat outputs, PNGs
included) with the same cell's outputs in the book's executed notebook. A run page without tagged cells (a stub of a
run that did not happen) is skipped. Exit 1 on any difference.

    ATLAS_DATA_DIR=/work/shared/data .venv/bin/python benchmarks/check_from_cell_outputs.py \
        --book /work/final-s9x-book negex
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import nbformat

from atlaslib import notebook, rescore
from atlaslib.cards import get_card
from atlaslib.notebook import REPO


def check(card: str, book: Path) -> list[str]:
    source = notebook.read_text_notebook(REPO / get_card(card).notebook)
    mine = rescore.tagged_cells(source)
    problems, n = [], 0
    for page in sorted((book / "book" / "runs" / card).glob("*/*/*.ipynb")):
        rel = page.relative_to(book / "book" / "runs")
        cell_path = book / "results" / rel.with_suffix(".json")
        cell = json.loads(cell_path.read_text())
        variants = [json.loads(p.read_text())
                    for p in sorted((cell_path.parent / "variants" / cell_path.stem).glob("*.json"))]
        tagged = rescore.tagged_cells(nbformat.read(page, as_version=4))
        if not tagged:
            continue
        if len(tagged) != len(mine):
            problems.append(f"{rel}: {len(tagged)} tagged cells, the notebook has {len(mine)}")
            continue
        for i, (published, now) in enumerate(zip(tagged, mine), 1):
            c = nbformat.v4.new_code_cell(now.source)
            c.outputs, c.execution_count = published.outputs, published.get("execution_count")
            outputs = rescore.render_from_cell(c, cell, variants, rescore.cells_above(source, now))
            if outputs is None:
                problems.append(f"{rel}: tagged cell {i} draws other kinds of output than the published page")
            elif json.dumps(outputs, sort_keys=True) != json.dumps(published.outputs, sort_keys=True):
                problems.append(f"{rel}: tagged cell {i} draws other outputs than the published page")
        n += 1
    print(f"{card}: {n} run pages, {len(mine)} from-cell cells each", flush=True)
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cards", nargs="+")
    ap.add_argument("--book", type=Path, required=True, help="a built book (its book/runs and results folders)")
    a = ap.parse_args(argv)
    problems = [p for card in a.cards for p in check(card, a.book)]
    print("\n".join(problems) or "ok: every from-cell output equals the published one")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
