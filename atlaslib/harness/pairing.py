"""Imported runs paired on the documents they share, and scored by the one engine.

:func:`pair` checks that the runs can be compared (one task per harness, documents in common, the same metrics)
and lines their documents up by content key; a document whose prompt hash differs between runs is named in
:attr:`Pairing.prompt_drift`, which the report states before any test. :func:`scoring_of` declares the imported
metrics as an engine :class:`~atlaslib.metrics.engine.Scoring` and :func:`unit_counts` gives each run's per-unit
integer counts, so every value, interval, paired difference, McNemar test, Holm adjustment, rank interval and
detectable difference comes from :mod:`atlaslib.metrics.engine` and :mod:`atlaslib.metrics.compare`:

- a metric whose every per-sample value is 0 or 1 (accuracy, exact match) is a proportion: columns
  ``<m>:right`` and ``<m>:n``, its exact interval beside the bootstrap one, and McNemar decides pairs on it;
- any other metric is a mean of per-sample values held as integers in millionths (``<m>:pos``, ``<m>:neg``: the
  positive and negative parts, ``<m>:n``), so its mean is exact to 1e-6; the paired bootstrap decides pairs on it.

The resampling unit is the document (rows drawn with replacement), or a cluster of documents the user names from
the document's fields (``doc.patient_id``), or, for Inspect epochs kept as units, the sample.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..metrics import bootstrap, engine
from .logs import ImportedRun, LogError

#: float metrics are held as integers in millionths
SCALE = 10 ** 6
PROTOCOL = "imported"


@dataclass
class Pairing:
    """Runs lined up on their shared units: ``runs`` (label -> run), ``units`` (unit ids, in order), ``docs``
    (label -> the run's :class:`~atlaslib.harness.logs.Doc` per unit), ``metrics`` (names, primary first),
    ``binary`` (name -> bool), ``clusters`` (one value per unit, or None), ``unit`` (what one draw is),
    ``prompt_drift`` (documents whose prompt hash differs between runs), ``outside`` (label -> documents of the run
    left out because another run lacks them)."""
    runs: dict
    units: list
    docs: dict
    metrics: list
    binary: dict
    higher_is_better: dict
    clusters: list | None
    unit: str
    task: str
    prompt_drift: list = field(default_factory=list)
    outside: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


def _labels(runs: list[ImportedRun]) -> None:
    seen = {}
    for r in runs:
        if r.label in seen:
            raise LogError(f"{r.files[0]} and {seen[r.label]} are both {r.label!r}; give each run its own name "
                           "(--name, once per path, in order)")
        seen[r.label] = r.files[0]


def _field(doc: dict, path: str, where: str):
    value = doc
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise LogError(f"{where}: the document has no field {path!r} (--cluster doc.{path}); expected it in every "
                           "document")
        value = value[part]
    if isinstance(value, (dict, list)) or value is None:
        raise LogError(f"{where}: field {path!r} is {type(value).__name__ if value is not None else 'null'}; "
                       "expected a value naming the document's cluster")
    return str(value)


def pair(runs: list[ImportedRun], *, cluster: str | None = None, shared_only: bool = False,
         primary: str | None = None) -> Pairing:
    """The :class:`Pairing` of ``runs`` (at least one). Refused (:class:`~atlaslib.harness.logs.LogError`): two
    runs of one harness on different tasks; runs with no document in common; document sets that differ unless
    ``shared_only``; no metric common to all runs; a ``cluster`` field missing in a document."""
    if not runs:
        raise LogError("nothing to import: give one or more log files or folders")
    _labels(runs)
    first = {}
    for r in runs:
        f = first.setdefault(r.harness, r)
        if r.task != f.task:
            raise LogError(f"{r.files[0]} is task {r.task!r} but {f.files[0]} is task {f.task!r}; one import compares "
                           "runs of one task (import each task on its own)")
    keysets = {r.label: {d.key for d in r.docs} for r in runs}
    shared = set.intersection(*keysets.values())
    base = runs[0]
    if not shared:
        other = next(r for r in runs[1:] if not (keysets[r.label] & keysets[base.label])) if len(runs) > 1 else base
        raise LogError(f"{other.files[0]} shares no document with {base.files[0]} (by document content hash); "
                       "expected logs of the same documents")
    outside = {lab: len(ks - shared) for lab, ks in keysets.items() if ks - shared}
    if outside and not shared_only:
        lab, n = next(iter(outside.items()))
        r = next(x for x in runs if x.label == lab)
        raise LogError(f"{r.files[0]}: {n} of its {len(keysets[lab])} documents are not in every other log "
                       f"({len(shared)} shared); expected the same document set (add --shared-only to compare on the "
                       "shared documents)")
    epoch_mode = {r.epochs == "cluster" for r in runs}
    if len(epoch_mode) > 1:
        raise LogError("some logs keep epochs as units and others do not; import them with one --epochs rule")
    names = [m for m in base.metric_names() if all(m in r.metric_names() for r in runs)]
    if not names:
        raise LogError(f"{runs[-1].files[0]} has no metric in common with {base.files[0]} "
                       f"({', '.join(base.metric_names())}); expected the same metric names")
    if primary is not None:
        if primary not in names:
            raise LogError(f"--metric {primary!r}: not a metric of every run; expected one of {', '.join(names)}")
        names.remove(primary)
        names.insert(0, primary)
    by_unit = {r.label: {d.unit: d for d in r.docs if d.key in shared} for r in runs}
    units = [d.unit for d in base.docs if d.key in shared]
    for r in runs[1:]:
        if set(by_unit[r.label]) != set(units):
            raise LogError(f"{r.files[0]}: its epochs do not match {base.files[0]}'s; expected the same epochs")
    docs = {r.label: [by_unit[r.label][u] for u in units] for r in runs}
    binary = {m: all(d.metrics[m] in (0.0, 1.0) for r in runs for d in docs[r.label]) for m in names}
    hib = {m: all(r.higher_is_better.get(m, True) for r in runs) for m in names}
    drift = []
    if len(runs) > 1:
        for k, u in enumerate(units):
            hashes = {lab: docs[lab][k].prompt_hash for lab in docs}
            if len(set(hashes.values())) > 1:
                drift.append({"document": docs[base.label][k].doc_id, "key": docs[base.label][k].key,
                              "prompt_hash": hashes})
    clusters, unit = None, "document"
    if cluster:
        path = cluster[4:] if cluster.startswith("doc.") else cluster
        clusters = [_field(docs[base.label][k].fields, path, docs[base.label][k].where) for k in range(len(units))]
        unit = f"cluster of documents ({cluster})"
    elif base.epochs == "cluster":
        clusters = [docs[base.label][k].key for k in range(len(units))]
        unit = "sample (its epochs drawn together)"
    notes = []
    if outside:
        notes.append("compared on the " + f"{len(shared)} shared documents; left out: " +
                     ", ".join(f"{lab} {n}" for lab, n in outside.items()))
    return Pairing({r.label: r for r in runs}, units, docs, names, binary, hib, clusters, unit, base.task, drift,
                   outside, notes)


def scoring_of(p: Pairing, seed: int = bootstrap.DEFAULT_SEED, n_resamples: int = bootstrap.DEFAULT_RESAMPLES):
    """The engine :class:`~atlaslib.metrics.engine.Scoring` of the pairing's metrics (see the module docstring)."""
    columns, metrics, decisions = [], [], {}
    for m in p.metrics:
        if p.binary[m]:
            columns += [f"{m}:right", f"{m}:n"]
            metrics.append(engine.Metric(
                m, formula=lambda t, m=m: engine.ratio(t[f"{m}:right"], t[f"{m}:n"]), higher_is_better=p.higher_is_better[m],
                decision=m, exact_test=True, proportion=lambda t, m=m: (t[f"{m}:right"], t[f"{m}:n"])))
            decisions[m] = lambda c, m=m: c[f"{m}:right"] > 0
        else:
            columns += [f"{m}:pos", f"{m}:neg", f"{m}:n"]
            metrics.append(engine.Metric(
                m, formula=lambda t, m=m: engine.ratio((t[f"{m}:pos"] - t[f"{m}:neg"]) / SCALE, t[f"{m}:n"]),
                higher_is_better=p.higher_is_better[m]))
    if p.clusters is not None:
        rs = engine.Resampling("clusters", p.unit, seed=seed, by="cluster", n_resamples=n_resamples)
    else:
        rs = engine.Resampling("rows", p.unit, seed=seed, n_resamples=n_resamples)
    return engine.Scoring(tuple(columns), tuple(metrics), p.metrics[0], rs, decisions,
                          units_are_clusters=p.clusters is not None)


def unit_counts(p: Pairing, label: str, scoring: engine.Scoring) -> engine.UnitCounts:
    """One run's per-unit integer counts under :func:`scoring_of`."""
    rows = []
    for d in p.docs[label]:
        row = []
        for m in p.metrics:
            v = d.metrics[m]
            if p.binary[m]:
                row += [int(v), 1]
            else:
                q = int(round(v * SCALE))
                row += [max(q, 0), max(-q, 0), 1]
        rows.append(row)
    groups = {"cluster": list(p.clusters)} if p.clusters is not None else {}
    return engine.UnitCounts(list(p.units), scoring.columns, np.asarray(rows, dtype=np.int64).reshape(
        len(p.units), len(scoring.columns)), groups)


def paired_data(p: Pairing, seed: int = bootstrap.DEFAULT_SEED,
                n_resamples: int = bootstrap.DEFAULT_RESAMPLES) -> engine.Paired:
    """The engine's :class:`~atlaslib.metrics.engine.Paired` data of the pairing (shared resamples)."""
    scoring = scoring_of(p, seed, n_resamples)
    counts = {lab: unit_counts(p, lab, scoring) for lab in p.docs}
    return engine.paired(scoring, p.task, "imported", counts, seed, n_resamples)
