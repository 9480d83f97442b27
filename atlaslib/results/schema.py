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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from .provenance import environment

SCHEMA_VERSION = 1


class ResultCellError(ValueError):
    """A result cell file is missing fields or is not valid JSON."""


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


def _is_number(x) -> bool:
    """A finite real number a float can hold: not NaN or infinity (JSON has neither, Python's reader takes both:
    a page would show NaN as a blank and rank it first), not an integer too large for a float (it would fail
    every page that shows it)."""
    from ..jsonio import as_float

    return as_float(x) is not None


def validate_cell(cell, path="result cell") -> dict:
    """Check a cell against the schema above: identity fields are non-empty strings, ``status`` is ok or
    not_run, ``metrics`` maps names to ``{value, ci_low, ci_high[, reason]}`` with finite numbers or null (a null
    value needs a reason), ``predictions`` is a list of objects. Raises :class:`ResultCellError` naming the
    file and the field; returns the cell."""
    from ..jsonio import describe

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
