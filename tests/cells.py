"""Helpers for tests that compare result cells across runs (serial vs Dask, killed vs uninterrupted)."""
import json
from pathlib import Path

from atlaslib import book

# where a run on another process/machine may differ; the run key follows atlaslib's source, which may be
# edited while the tests run
VOLATILE = ("environment", "timing", "run_key")


def build_paths(root: Path) -> book.BuildPaths:
    return book.BuildPaths(results=root / "results", runs=root / "runs", build=root / "_build")


def comparable(path: Path) -> dict:
    cell = json.loads(path.read_text())
    cell["spec"]["parameters"].pop("run_key", None)
    return {k: v for k, v in cell.items() if k not in VOLATILE}


def cells(paths: book.BuildPaths) -> dict:
    """The build's result cells (a run's variant cells, under ``<model>/variants/``, are the robustness table's
    inputs, not runs of the matrix: left out, as :func:`atlaslib.results.read_cells` leaves them out)."""
    return {str(p.relative_to(paths.results)): comparable(p) for p in sorted(paths.results.rglob("*.json"))
            if "variants" not in p.relative_to(paths.results).parts}
