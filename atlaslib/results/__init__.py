"""Result cells: one JSON per (card, version, model, protocol) run, written atomically.

A result cell is the only place a number lives; pages and leaderboards render from these files. The package
has one module per job:

- :mod:`atlaslib.results.schema`: the cell's schema, made (:func:`make_cell`, :func:`metric`) and checked
  (:func:`validate_cell`), and its content digest;
- :mod:`atlaslib.results.store`: where a cell lives (:func:`slug`, :func:`cell_path`), written and read
  (:func:`write_cell`, :func:`read_cell`, :func:`read_cells`);
- :mod:`atlaslib.results.provenance`: what a cell records of where and how it was made (:func:`environment`,
  :class:`Timer`);
- :mod:`atlaslib.results.frames`: cells as pandas tables;

and the atomic file writing every writer uses is :mod:`atlaslib.atomicio`, a floor down. This package
re-exports their names, so ``from atlaslib.results import read_cell`` keeps working.
"""
from __future__ import annotations

from ..atomicio import atomic_write_text, current_umask, read_cache_json
from .frames import leaderboard, metrics_frame
from .provenance import TRACKED_PACKAGES, Timer, cpu_name, environment, git_commit, package_versions, peak_rss_mb
from .schema import (DIGEST_FIELD, EXTERNAL, SCHEMA_VERSION, ResultCellError, RunSpec, _is_number, _jsonable, _num,
                     content_digest, edited_since_written, is_external, is_gated, make_cell, metric, not_run_cell,
                     reproduction_row, sealed, validate_cell)
from .store import (MAX_PLAIN, RESULTS_DIR_ENV, cell_as_recorded, cell_names, cell_path, folder_owner, is_local_model,
                    read_cell, read_cells, record_path, slug, write_cell)

__all__ = [
    "atomic_write_text", "current_umask", "read_cache_json",
    "leaderboard", "metrics_frame",
    "TRACKED_PACKAGES", "Timer", "cpu_name", "environment", "git_commit", "package_versions", "peak_rss_mb",
    "DIGEST_FIELD", "EXTERNAL", "SCHEMA_VERSION", "ResultCellError", "RunSpec", "content_digest",
    "edited_since_written", "is_external", "is_gated", "make_cell", "metric", "not_run_cell", "reproduction_row",
    "sealed", "validate_cell",
    "MAX_PLAIN", "RESULTS_DIR_ENV", "cell_as_recorded", "cell_names", "cell_path", "folder_owner", "is_local_model",
    "read_cell", "read_cells", "record_path", "slug", "write_cell",
]
