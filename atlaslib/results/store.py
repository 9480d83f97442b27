"""The result store: where a run's cell lives (``<results>/<card>/<version>/<model-slug>/<protocol>.json``), who
owns a model's folder, and cells written (atomically) and read back checked against the schema
(:mod:`atlaslib.results.schema`); the run cache's record of the bytes a run moved into place."""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from ..atomicio import atomic_write_text
from .schema import ResultCellError, _jsonable, is_external, validate_cell

RESULTS_DIR_ENV = "ATLAS_RESULTS_DIR"


def is_local_model(name: str) -> bool:
    """True for a model named by a folder path: absolute (as the runner records local models), ``~``-,
    ``./``- or ``../``-relative, or any relative path with a separator that exists."""
    s = str(name).strip()
    return (os.path.isabs(s) or s.startswith(("~", "./", "../", "." + os.sep))
            or (os.sep in s and os.path.exists(s)))


#: a name that is its own folder name: letters, digits, '.', '_' and single '-' (never two in a row, never last),
#: starting with a letter or digit, at most 100 characters; ``org/name`` of two such parts is ``org--name``
_PLAIN_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._]|-(?=[A-Za-z0-9._]))*"
_PLAIN = re.compile(rf"{_PLAIN_PART}(?:/{_PLAIN_PART})?")
MAX_PLAIN = 100


def _readable(text: str, n: int = 48) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text)[:n].strip("-")


def slug(name: str) -> str:
    """The folder of a model or system name inside its card version: one path component, unique to the name.

    - a plain name (letters, digits, ``.``, ``_`` and single ``-``; at most 100 characters) is its own folder:
      ``majority``, ``all-minilm-l6-v2``; a hub id ``org/name`` of two plain parts becomes ``org--name``
      (``bvanaken--clinical-assertion-negation-bert``);
    - a local folder gives ``local-<folder name>-<first 8 hex of the sha256 of its path>`` (the runner passes the
      resolved absolute path), so two folders of the same name never share a slug;
    - any other name (spaces, punctuation, ``.``, ``..``, non-ASCII, too long) gives ``<readable part>---<first
      12 hex of the sha256 of the name>``: ``my system`` → ``my-system---<hash>``, never ``my-system``. Plain
      names hold no ``--`` and hub ids exactly one, so no other name's folder holds ``---``.
    """
    s = str(name).strip()
    if is_local_model(s):  # the runner names a local model by its resolved absolute path (resolve_model)
        folder = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(s).name)[:48].strip("-") or "model"
        return f"local-{folder}-{hashlib.sha256(s.encode()).hexdigest()[:8]}"
    if len(s) <= MAX_PLAIN and _PLAIN.fullmatch(s):
        return s.replace("/", "--")
    return f"{_readable(s) or 'system'}---{hashlib.sha256(s.encode()).hexdigest()[:12]}"


def folder_owner(folder: str | os.PathLike, model: str, external: bool) -> tuple[Path, str, bool] | None:
    """A result cell in ``folder`` (a model's folder of one card version) that belongs to another name than
    ``model``, or to the same name of the other kind (a model run vs external predictions):
    ``(its path, its model, whether it is external)``; None when the folder is free for ``model``."""
    from ..jsonio import load

    for f in sorted(Path(folder).glob("*.json")):
        try:
            other = load(f, what="a result cell")
        except ValueError:  # unreadable, not JSON, nested too deeply: no owner to name
            continue
        if not isinstance(other, dict) or not isinstance(other.get("model"), str):
            continue
        if other["model"] != model or is_external(other) != external:
            return f, other["model"], is_external(other)
    return None


def cell_names(results_dir: str | os.PathLike | None, card: str | None = None) -> set[str]:
    """The model and system names of the result cells in ``results_dir`` (of ``card`` only when given; cells
    that cannot be read are passed over)."""
    from ..jsonio import load

    if results_dir is None:
        return set()
    out = set()
    for f in Path(results_dir).glob(f"{card or '*'}/*/*/*.json"):
        try:
            cell = load(f, what="a result cell")
        except ValueError:
            continue
        if isinstance(cell, dict) and isinstance(cell.get("model"), str):
            out.add(cell["model"])
    return out


def cell_path(results_dir: str | os.PathLike, card: str, version: str, model: str, protocol: str) -> Path:
    """``<results>/<card>/<version>/<model-slug>/<protocol>.json``"""
    return Path(results_dir) / card / version / slug(model) / f"{protocol}.json"


def record_path(notebook: str | os.PathLike) -> Path:
    """The run cache's record beside a run's executed notebook: the sha256 of the result cell's file as the run
    moved it into place (``<protocol>.cell-sha256``)."""
    return Path(notebook).with_suffix(".cell-sha256")


def cell_as_recorded(notebook: str | os.PathLike, cell_file: str | os.PathLike) -> bool | None:
    """Whether ``cell_file`` holds the bytes the run recorded beside ``notebook`` (None: no record)."""
    import warnings

    from .. import fsio
    from ..sources import sha256_file

    try:  # a pipe in the record's place is never opened for reading (it would block): no record, named
        recorded = fsio.read_text(record_path(notebook)).strip()
    except fsio.NotAFile as exc:
        warnings.warn(f"run cache: {exc}; the run is not served from the cache", RuntimeWarning, stacklevel=2)
        return None
    except (OSError, UnicodeDecodeError):
        return None
    try:
        return sha256_file(cell_file) == recorded
    except OSError:
        return False


def write_cell(cell: dict, path: str | os.PathLike) -> Path:
    for key in ("card", "version", "model", "protocol", "metrics", "status"):
        if key not in cell:
            raise ResultCellError(f"result cell for {path} lacks field {key!r}")
    return atomic_write_text(path, json.dumps(_jsonable(cell), indent=1, sort_keys=False) + "\n")


def read_cell(path: str | os.PathLike) -> dict:
    """A result cell read from ``path`` and checked against the schema (:func:`validate_cell`); any
    fault raises :class:`ResultCellError` naming the file and the field."""
    from ..jsonio import load

    cell = load(path, what="a result cell", error=ResultCellError)  # not JSON, nested too deeply, not a file
    validate_cell(cell, path)
    cell["_path"] = str(path)
    return cell


def read_cells(results_dir: str | os.PathLike, card: str | None = None) -> list[dict]:
    root = Path(results_dir)
    pattern = f"{card}/*/*/*.json" if card else "*/*/*/*.json"
    return [read_cell(p) for p in sorted(root.glob(pattern))]
