"""Score a predictions file (or a prediction function) on a card's split: one result cell per system.

Formats (one prediction per test item, each item exactly once):

- JSONL: one object per line, ``{"item_id": ..., "label": ..., "score": ...}`` (``score`` optional, on
  every row or on none); MACCROBAT ``{"item_id": ..., "tags": ["O", "B-problem", ...]}``, one tag per word.
- CSV with a header: ``item_id,label[,score]``; MACCROBAT ``item_id,tags`` with the tags separated by spaces.
- CoNLL (MACCROBAT): per item a line ``# item_id = <id>``, then one ``word<TAB>tag`` line per word, then a
  blank line: what ``atlas export`` writes, with a tag column added.
- TempEval: an Anafora folder, ``<dir>/<doc>/<doc>.Temporal-Relation.<annotator>.completed.xml`` per test
  document.

The result cell is the card's own (same metric and interval code as a model run); its spec is marked
``capability = "external predictions"`` and ``profile = {name, source: "external predictions", location:
<file name>, revision: "sha256:<file sha256>", trained_on, description}``; ``run_key`` covers the file's
sha256, the card's data pins and atlaslib's source, so scoring an unchanged file again is served from the
existing cell and a changed file re-scores.
"""
from __future__ import annotations

import hashlib
import json
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import predfiles
from ..results import schema, store
from ..cards.run import CardRun
from ..predfiles import Pred, PredictionsError, fail
from .tasks import (EXTERNAL, Split, check_ids, check_labels, check_spans, check_tags, iob2_notes, load_split,
                    outside_module, sha256_path)

N_RESAMPLES = 1000


@dataclass
class ScoreOutcome:
    status: str          # "scored" | "cached"
    cell: dict
    path: Path | None
    notes: list = field(default_factory=list)  # what the checks accepted but say (see iob2_notes)


# --------------------------------------------------------------------------------------------- reading

def _format(card: str) -> str:
    """What the card's answers are (:attr:`atlaslib.cards.Card.prediction_format`): label, tags or anafora."""
    from ..cards import get_card

    return get_card(card).prediction_format


def _answer_key(card: str) -> str:
    return "tags" if _format(card) == "tags" else "label"


#: rows read beyond the test items before a file is given up as not made for this split
EXTRA_ROWS = 10_000


def check_path(path: Path, card: str) -> None:
    """A predictions path that can be read for ``card``: PredictionsError naming what it is otherwise."""
    predfiles.check_path(path, _format(card))


def read_predictions(path: str | Path, card: str, max_rows: int | None = None) -> list[Pred]:
    """Parse a predictions file for ``card`` into :class:`Pred` rows (:func:`atlaslib.predfiles.read_predictions`
    with the card's answers; TempEval's Anafora folders here)."""
    path = Path(path)
    fmt = _format(card)
    if fmt == "anafora":
        predfiles.check_path(path, fmt)
        return read_anafora(path)
    return predfiles.read_predictions(path, fmt, max_rows, who=card)


def read_anafora(path: Path) -> list[Pred]:
    """TempEval: one document per sub-folder, exactly one Temporal-Relation/Entity XML in it, valid against the
    THYME schema; ``Pred.label`` is the parsed :class:`~atlaslib.cards.tempeval.anafora_io.Document`."""
    from ..cards.tempeval import anafora_io

    if not path.is_dir():
        raise PredictionsError(f"{path}: TempEval predictions are an Anafora folder "
                               f"(<dir>/<doc>/<doc>.Temporal-Relation.system.completed.xml), not a file")
    out, problems = [], []
    for folder in sorted(p for p in path.iterdir() if p.is_dir()):
        where = f"folder {folder.name}"
        files = sorted(f for f in folder.iterdir() if re.search(anafora_io.TEMPORAL_FILE_RE, f.name))
        if len(files) != 1:
            problems.append(f"{where}: {len(files)} Temporal-Relation/Entity XML files, expected one")
            continue
        try:
            doc = anafora_io.check_document(anafora_io.read_document(files[0]), schema=True)
        except anafora_io.AnaforaError as exc:
            problems.append(str(exc))
            continue
        if doc.doc_id != folder.name:
            problems.append(f"{where}: its file names document {doc.doc_id!r}")
            continue
        out.append(Pred(where, folder.name, doc))
    fail(str(path), problems)
    return out


# --------------------------------------------------------------------------------------------- scoring

def external_profile(name: str, location: str, sha: str, description: str = "", trained_on=()) -> dict:
    """The profile an external system gets in its cell (the registry's fields, source = external predictions)."""
    return {"name": name, "source": EXTERNAL, "location": location, "revision": f"sha256:{sha}",
            "capabilities": [], "label_map": {}, "trained_on": [str(t) for t in trained_on],
            "description": " ".join(str(description or "").split()), "options": {}}


def run_key(card: str, version: str, protocol: str, profile: dict, n_resamples: int) -> str:
    """Cache key of a scored file: the predictions' sha256 (in the profile), the name and description, the
    card's data pins and atlaslib's source digest."""
    from ..version import __version__
    from ..cards import get_card
    from ..runner import source_digest

    payload = {"card": card, "version": version, "protocol": protocol, "profile": profile,
               "n_resamples": n_resamples, "data": get_card(card).data_pins(), "atlaslib_version": __version__,
               "atlaslib_source": source_digest()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _check(where: str, s: Split, preds: list[Pred], data_dir) -> list[str]:
    """Check answers against the split (PredictionsError naming each problem); returns notes on what is
    accepted but read in a way worth saying (IOB2 tags out of order)."""
    check_ids(where, s, preds, data_dir)
    fmt = _format(s.card)
    if fmt == "tags":
        check_tags(where, s, preds)
        return iob2_notes(where, preds)
    if fmt == "label":
        check_labels(where, s, preds)
    elif fmt == "anafora":  # checked against the schema as it was read; spans against the documents here
        check_spans(where, s, preds)
    return []


def _protocol(card: str, protocol: str | None) -> str:
    from ..cards import get_card

    c = get_card(card)
    protocol = protocol or c.protocols[0]
    if protocol not in c.protocols:
        raise ValueError(f"card {c.name} has no protocol {protocol!r}; expected one of {', '.join(c.protocols)}")
    return protocol


MAX_NAME = 100


def _check_name(name: str, results_dir=None, card: str | None = None) -> str:
    """A system name: one line of visible text (NFC-normalised, spaces at the ends dropped), at most
    :data:`MAX_NAME` characters, without filler characters or ``{{`` / ``}}`` (pages read them as placeholders,
    also in the raw HTML of the item explorer), not looking like a name the atlas has without being it
    (:func:`atlaslib.names.check_name`: registry profiles, card baselines, and the names of the result cells
    of ``card`` in ``results_dir``), not the name of one of the atlas's own models nor sharing their folder.
    Any such name has a folder of its own (:func:`atlaslib.results.slug`)."""
    from ..names import check_name
    from ..runner import atlas_names

    own = atlas_names()
    existing = {n: f"a result already in {results_dir}" for n in store.cell_names(results_dir, card)} \
        if results_dir is not None else {}
    name = check_name(name, "--name", taken={**existing, **own})
    if name in own:
        raise ValueError(f"--name {name!r} is a model the atlas runs itself; choose another name for the system")
    taken = {store.slug(m): m for m in own}.get(store.slug(name))
    if taken is not None:
        raise ValueError(f"--name {name!r} would share the result folder of the atlas's model {taken!r}; "
                         f"choose another name for the system")
    return name


def _target(results_dir, card, version, name, protocol) -> Path | None:
    """Where the system's cell goes; ValueError naming both when its folder holds another name's cells (a
    model run of the same name, or a name of the same folder): nothing is replaced."""
    if results_dir is None:
        return None
    target = store.cell_path(results_dir, card, version, name, protocol)
    clash = store.folder_owner(target.parent, name, external=True)
    if clash is not None:
        path, other, external = clash
        what = "external predictions named" if external else "a model run named"
        raise ValueError(f"{path} holds the result of {what} {other!r}; --name {name!r} would share its "
                         f"folder: choose another --name (nothing was written)")
    return target


def _finish(card_run, parts: dict, key: str) -> ScoreOutcome:
    """The scored file's cell, made by ``card_run`` from a scorer's ``parts`` (the run key joins the
    parameters) and written by it (to its ``result_path``, sealed) as every cell is."""
    parts["parameters"] = {"run_key": key, **parts.get("parameters", {})}
    cell = card_run.finish(**parts)
    return ScoreOutcome("scored", cell, card_run.result_path)


def score(card: str, version: str, predictions: str | Path, name: str, *, description: str = "",
          trained_on=(), protocol: str | None = None, results_dir=None, data_dir=None,
          n_resamples: int = N_RESAMPLES, force: bool = False) -> ScoreOutcome:
    """Score a predictions file on the test split of ``card`` / ``version`` and write its result cell to
    ``results_dir`` (not written when None). Raises :class:`PredictionsError` for a bad file (nothing is
    written then), ValueError for a bad card, version, protocol or name."""
    from ..cards import get_card

    c = get_card(card)
    if version not in c.versions:
        raise ValueError(f"card {c.name} has no split version {version!r}; expected one of {', '.join(c.versions)}")
    protocol, name = _protocol(c.name, protocol), _check_name(name, results_dir, c.name)
    path = Path(predictions)
    check_path(path, c.name)  # before hashing it: a named pipe would block the reader
    target = _target(results_dir, c.name, version, name, protocol)
    # timed from here: reading and checking the file too; its cell is written by the run, sealed
    card_run = CardRun(c.name, version, name, protocol, result_path=target, seal=target is not None)
    profile = external_profile(name, path.name, sha256_path(path), description, trained_on)
    key = run_key(c.name, version, protocol, profile, n_resamples)
    notes = []
    if target is not None and target.is_file() and not force:
        existing = store.read_cell(target)
        if existing.get("run_key") == key and not schema.edited_since_written(existing):
            return ScoreOutcome("cached", existing, target)
        if existing.get("run_key") == key:
            notes.append(f"{target} was changed after it was written (its content digest differs from the one "
                         f"recorded); scored again")
    s = load_split(c.name, version, "test", data_dir, protocol)
    preds = read_predictions(path, c.name, max_rows=len(s.ids) + EXTRA_ROWS)
    notes += _check(str(path), s, preds, data_dir)
    parts = outside_module(c.name).outside_cell_parts(s, preds, profile, protocol, key, n_resamples, data_dir)
    out = _finish(card_run, parts, key)
    out.notes = notes
    return out


def _from_function(s: Split, predict_fn) -> list[Pred]:
    """Call ``predict_fn`` on every test item record (``predict_batch(records)`` when it has one); an
    answer is a label (tags for MACCROBAT), a ``(label, score)`` pair or a ``{"label", "score"}`` dict."""
    batch = getattr(predict_fn, "predict_batch", None)
    answers = list(batch([dict(r) for r in s.records])) if callable(batch) else \
        [predict_fn(dict(r)) for r in s.records]
    if len(answers) != len(s.records):
        raise PredictionsError(f"predict_fn: {len(answers)} answers for {len(s.records)} items")
    preds, key, tags = [], _answer_key(s.card), _format(s.card) == "tags"
    for k, (rec, a) in enumerate(zip(s.records, answers), 1):
        label, score = a, None
        if isinstance(a, dict):
            label, score = a.get(key, a.get("label")), a.get("score")
        elif isinstance(a, tuple) and len(a) == 2:
            label, score = a
        if isinstance(score, (np.floating, np.integer)):
            score = score.item()
        preds.append(Pred(k, rec["item_id"], list(label) if tags and label is not None
                          and not isinstance(label, str) else label, score))
    return preds


def _from_object(s: Split, predictions) -> list[Pred]:
    """Predictions given in Python: a mapping ``item_id -> answer`` or a list of ``{"item_id", ...}`` dicts."""
    key = _answer_key(s.card)
    if isinstance(predictions, dict):
        rows = [{"item_id": k, **(v if isinstance(v, dict) else {key: v})} for k, v in predictions.items()]
    elif isinstance(predictions, (list, tuple)):
        rows = list(predictions)
    else:
        raise PredictionsError(f"predictions: expected a mapping item_id -> answer or a list of dicts with an "
                               f"item_id, got {type(predictions).__name__}")
    out = []
    for k, r in enumerate(rows, 1):
        if not isinstance(r, dict) or "item_id" not in r:
            raise PredictionsError(f"predictions: entry {k} is not a dict with an item_id")
        label = r.get(key)
        if key == "tags" and label is not None:
            if not isinstance(label, (list, tuple)):
                raise PredictionsError(f"predictions: entry {k} (item {r['item_id']}): tags must be a list of "
                                       f"IOB2 tags, got {type(label).__name__}")
            label = list(label)
        out.append(Pred(k, str(r["item_id"]), label, r.get("score")))
    return out


def evaluate(card: str, version: str, predict_fn=None, predictions=None, *, name: str = "my-system",
             description: str = "", trained_on=(), protocol: str | None = None, results_dir=None,
             data_dir=None, n_resamples: int = N_RESAMPLES) -> dict:
    """The result cell of a system on ``card`` / ``version``, from Python (a class can evaluate a function
    written in a notebook cell). Give exactly one of:

    - ``predict_fn``: called with each test item's record (the fields ``atlas export`` writes: ``item_id``
      plus the card's inputs), returning a label (MACCROBAT: a list of tags), a ``(label, score)`` pair or a
      ``{"label": ..., "score": ...}`` dict; an object with ``predict_batch(records)`` gets them all at once;
    - ``predictions``: a predictions file or folder (as ``atlas score`` reads), a mapping ``item_id ->
      answer``, or a list of ``{"item_id": ..., "label": ..., "score": ...}`` dicts.

    The cell is the one ``atlas score`` writes (same checks, metrics and intervals); it is written to
    ``results_dir`` when that is given. TempEval takes an Anafora folder only.
    """
    from ..cards import get_card

    if (predict_fn is None) == (predictions is None):
        raise ValueError("evaluate: give exactly one of predict_fn= and predictions=")
    if predictions is not None and isinstance(predictions, (str, Path)):
        return score(card, version, predictions, name, description=description, trained_on=trained_on,
                     protocol=protocol, results_dir=results_dir, data_dir=data_dir, n_resamples=n_resamples,
                     force=True).cell
    c = get_card(card)
    if c.prediction_format == "anafora":
        raise ValueError(f"evaluate: {c.name} predictions are an Anafora folder; pass predictions=<folder>")
    if version not in c.versions:
        raise ValueError(f"card {c.name} has no split version {version!r}; expected one of {', '.join(c.versions)}")
    protocol, name = _protocol(c.name, protocol), _check_name(name, results_dir, c.name)
    target = _target(results_dir, c.name, version, name, protocol)
    card_run = CardRun(c.name, version, name, protocol, result_path=target, seal=target is not None)
    s = load_split(c.name, version, "test", data_dir, protocol)
    if predict_fn is not None:
        preds = _from_function(s, predict_fn)
        where = f"predict_fn {getattr(predict_fn, '__name__', type(predict_fn).__name__)}"
    else:
        preds = _from_object(s, predictions)
        where = "predictions"
    for note in _check(where, s, preds, data_dir):
        warnings.warn(note, stacklevel=2)
    canon = json.dumps([[p.item_id, p.label, p.score] for p in sorted(preds, key=lambda p: p.item_id)],
                       default=str, sort_keys=True)
    sha = hashlib.sha256(canon.encode()).hexdigest()
    location = (f"python function {where.split(' ', 1)[1]}" if predict_fn is not None else "python object")
    profile = external_profile(name, location, sha, description, trained_on)
    key = run_key(c.name, version, protocol, profile, n_resamples)
    parts = outside_module(c.name).outside_cell_parts(s, preds, profile, protocol, key, n_resamples, data_dir)
    return _finish(card_run, parts, key).cell
