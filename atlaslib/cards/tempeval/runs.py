"""One call per run: (version, model, protocol) -> predictions written as Anafora XML, scored by the
official scorer, and result-cell parts. The card contract's ``predict`` is :func:`run` (the notebook and
:func:`atlaslib.cards.run.run` make the same calls); :meth:`RunResult.cell_parts` scores its records through the run's
:class:`atlaslib.cards.run.CardRun` (the card's counts and declared scoring, :mod:`.counting`). Whether a run
can happen is the run's decision (the card's declared gate on the note text, ``CARD.parameter_gates``).

Gated data: a run never returns or records note text. Predictions in the cell are per document counts
plus the sha256 of the predicted XML (which holds offsets and labels only).
"""
from __future__ import annotations

import hashlib
import shutil
import tempfile
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...phases import phase
from .. import NotRun, deciding
from .card import (ADDRESSES, BOOTSTRAP, CARD, FOUND, METRIC_ROWS, data_sha256, not_addressed,  # noqa: F401
                   thyme_dir)
from . import synthetic
from .anafora_io import Document, Entity, parse_once, read_corpus, write_corpus
from .baselines import Memorize, _gap, majority_doctimerel, phase2_input, with_closest, with_doctimerel
from .scoring import score_directories


@dataclass
class Corpus:
    train: list[Document]
    test: list[Document]
    reference_dir: Path | None
    gated: bool
    data_sha256: dict = field(default_factory=dict)
    source: str = ""

    @property
    def split_hash(self) -> str:
        """The sha256 of the document split (train ids, then test ids): what the cells and ``atlas export`` give."""
        return hashlib.sha256(("|".join(d.doc_id for d in self.train) + "#" +
                               "|".join(d.doc_id for d in self.test)).encode()).hexdigest()


def _text_dir(thyme_text_dir, split):
    base = Path(thyme_text_dir)
    if not base.is_dir():
        raise NotRun(f"thyme_text_dir {base} is not a directory (expected the THYME note text, "
                     f"<dir>/<split>/<doc> or <dir>/<doc>)")
    return base / split if (base / split).is_dir() else base


def load_corpus(version: str, data_dir=None, thyme_text_dir=None, annotation_dir=None, work_dir=None) -> Corpus:
    """Train and test documents (Train -> Dev) of a version, with text when available.

    ``synthetic-v1`` writes its reference folder (annotations only) under ``work_dir``; without one, into a
    temporary folder that lives as long as the returned :class:`Corpus` (removed when it is collected, or when
    the process exits)."""
    if version == "synthetic-v1":
        corpus = synthetic.build_corpus()
        own = work_dir is None
        work_dir = Path(tempfile.mkdtemp(prefix="tempeval-") if own else work_dir)
        ref = work_dir / "reference"
        try:
            write_corpus([replace(d, text=None) for d in corpus["Dev"]], ref)
        except BaseException:
            if own:
                shutil.rmtree(work_dir, ignore_errors=True)
            raise
        out = Corpus(corpus["Train"], corpus["Dev"], ref, False, {}, "synthetic.build_corpus(seed=%d)" % synthetic.SEED)
        if own:
            weakref.finalize(out, shutil.rmtree, work_dir, True)
        return out
    if version != "thyme-dev-2015":
        raise ValueError(f"version {version!r}: expected one of {', '.join(CARD.versions)}")
    if annotation_dir is not None:
        dirs = {s: Path(annotation_dir) / s for s in ("Train", "Dev")}
        sha = {}
    else:
        dirs = {s: thyme_dir(s, data_dir) for s in ("Train", "Dev")}
        sha = {**data_sha256("Train"), **data_sha256("Dev")}
    text = {s: (_text_dir(thyme_text_dir, s) if thyme_text_dir else None) for s in dirs}
    train = read_corpus(dirs["Train"], text_dir=text["Train"])
    test = read_corpus(dirs["Dev"], text_dir=text["Dev"])
    if thyme_text_dir is not None:
        missing = [d.doc_id for d in [*train, *test] if d.text is None]
        if missing:
            raise NotRun(f"thyme_text_dir {thyme_text_dir}: no text for {len(missing)} documents "
                         f"(e.g. {missing[:3]}); expected <dir>/<split>/<doc> or <dir>/<doc>")
    return Corpus(train, test, dirs["Dev"], True, sha, "THYME coloncancer Train -> Dev")


def predict(model: str, protocol: str, corpus: Corpus) -> tuple[list[Document], dict]:
    """System documents for the test split, and facts about the model (never text). Whether the run may read
    the corpus' text is decided before (:func:`run`: the card's gate)."""
    if (model, protocol) not in ADDRESSES:
        raise ValueError(f"model {model!r} has no {protocol} run; expected one of {sorted(ADDRESSES)}")
    info = {}
    answers = phase("prediction", items=len(corpus.test))   # one answer per test document
    if model == "majority-doctimerel":
        with phase("training"):
            label, counts = majority_doctimerel(corpus.train)
        info.update(majority_doctimerel=label, train_doctimerel_counts=counts)
        with answers:
            return [with_doctimerel(phase2_input(d), lambda e: label) for d in corpus.test], info
    if model == "closest" and protocol == "phase2":
        with answers:
            return [with_closest(phase2_input(d)) for d in corpus.test], info
    with phase("training"):
        mem = Memorize().fit(corpus.train)
    info.update(memorized_phrases=mem.n_phrases, majority_doctimerel=mem.majority)
    with answers:
        if model == "memorize" and protocol == "phase1":
            return [mem.predict_phase1(d) for d in corpus.test], info
        if model == "memorize":
            return [mem.predict_phase2(d) for d in corpus.test], info
        return [with_closest(mem.predict_phase1(d)) for d in corpus.test], info  # closest, phase 1


@dataclass
class RunResult:
    version: str
    model: str
    protocol: str
    table: dict
    predictions: list
    info: dict
    corpus: Corpus
    predicted_dir: Path | None

    def cell_parts(self, card_run) -> dict:
        """What the result cell of ``card_run`` (a :class:`atlaslib.cards.run.CardRun`) holds beyond its spec
        (:meth:`~atlaslib.cards.run.CardRun.finish`'s arguments): the baseline's profile, the metrics scored by the
        run (:meth:`~atlaslib.cards.run.CardRun.score` of the records with the scorer's per-document counts: the
        card's counts under its ``SCORING``, the one engine), the scorer's table in ``extra``, per-document
        prediction records, the split, data hashes and seeds."""
        metrics = card_run.score(self.predictions, cell={"extra": {"scorer_table": self.table}})
        c = self.corpus
        extra = {"scorer_table": self.table, "model_info": self.info, "gated_text": c.gated,
                 "corpus": c.source, "n_train_documents": len(c.train), "n_test_documents": len(c.test),
                 "ci": {"method": "percentile bootstrap over test documents (scorer counts summed per resample)",
                        **BOOTSTRAP, "level": 0.95}}
        split = {"hash": c.split_hash, "n_train": len(c.train), "n_test": len(c.test), "train": "Train", "test": "Dev"}
        seeds = {"bootstrap": BOOTSTRAP["seed"], **({"synthetic": synthetic.SEED} if not c.gated else {})}
        return dict(profile={"name": card_run.spec.model, "kind": PROFILE_KIND}, capability=CAPABILITY,
                    metrics=metrics, predictions=self.predictions, split=split, data_sha256=c.data_sha256,
                    seeds=seeds, extra=extra)


GAP_BANDS = ((0, 20, "0-20"), (21, 100, "21-100"), (101, 500, "101-500"), (501, None, ">500"))


#: (found kind, slice field, the kind of ``_items`` whose values give it): the same gold items in the same order
FOUND_SLICES = (("event_span", "polarity", "polarity"), ("timex3_span", "timex3_class", "timex3_class"),
                ("doctimerel", "doctimerel", "doctimerel"), ("contains", "contains_gap", "contains"))


def _gap_band(a: Entity, b: Entity) -> str:
    """Band of the characters between two arguments' extents (:func:`.baselines._gap`: 0 when they touch or
    overlap)."""
    gap = _gap(a, b)
    return next(lab for lo, hi, lab in GAP_BANDS if gap >= lo and (hi is None or gap <= hi))


def _items(doc: Document) -> dict:
    """The scored items of one document, as the scorer's views define them (see :mod:`.scoring`):
    ``(spans, value)`` for entities, ``((source spans), (target spans))`` for CONTAINS, with the slice value."""
    events, timexes = doc.of_type("EVENT"), doc.of_type("TIMEX3")
    ids = doc.by_id()
    contains = []
    for r in doc.tlinks("CONTAINS"):
        a, b = ids.get(r.source), ids.get(r.target)
        if a is not None and b is not None:
            contains.append(((a.spans, b.spans), _gap_band(a, b)))
    return {
        "event_span": [(e.spans, None) for e in events],
        "timex3_span": [(e.spans, None) for e in timexes],
        "doctimerel": [((e.spans, e.properties.get("DocTimeRel")), e.properties.get("DocTimeRel")) for e in events],
        "polarity": [(e.spans, e.properties.get("Polarity")) for e in events],
        "timex3_class": [(e.spans, e.properties.get("Class")) for e in timexes],
        "contains": contains,
    }


def outcome_record(gold: Document, pred: Document) -> dict:
    """What one document's predictions got right, without text.

    ``found``: per kind, one character per gold item of the scorer's reference (a set: an item that the
    annotations repeat, an exact duplicate EVENT or a CONTAINS pair annotated twice, is one item, at its first
    place in the reference's order), ``1`` when the prediction holds the same item. ``slices``: per slice
    field and value, the scorer's four counts ``[reference, predicted, precision_correct, recall_correct]``
    (as :func:`.scoring.f1_from_counts` takes them): gold items with that value, predicted items with that value, predicted items with that value that
    are in the reference, gold items with that value that are predicted. Polarity and TIMEX3 class slice the
    span items by their attribute (gold's for recall, the prediction's for precision); DocTimeRel and the
    CONTAINS distance band are part of the item itself. Summed over values, the counts are the scorer's row
    (tested). ``found_slices``: per found kind, each gold item's slice value (same order as ``found``)."""
    g, p = _items(gold), _items(pred)
    found = {}
    for kind in FOUND:
        have = {item for item, _ in p[kind]}
        found[kind] = "".join("1" if item in have else "0" for item in dict.fromkeys(item for item, _ in g[kind]))
    # per gold item of each found kind, in the same order (its first occurrence), its slice values (the item
    # explorer's slice columns)
    found_slices = {}
    for kind, field_, src in FOUND_SLICES:
        first: dict = {}
        for (item, _), (_, v) in zip(g[kind], g[src]):
            first.setdefault(item, v)
        found_slices[kind] = {field_: [None if v is None else str(v) for v in first.values()]}
    slices = {}
    for field_, kind in (("doctimerel", "doctimerel"), ("polarity", "polarity"), ("timex3_class", "timex3_class"),
                         ("contains_gap", "contains")):
        gold_items, pred_items = dict(g[kind]), dict(p[kind])
        counts: dict = {}
        for item, v in gold_items.items():
            c = counts.setdefault(str(v), [0, 0, 0, 0])
            c[0] += 1
            c[3] += item in pred_items
        for item, v in pred_items.items():
            c = counts.setdefault(str(v), [0, 0, 0, 0])
            c[1] += 1
            c[2] += item in gold_items
        slices[field_] = counts
    return {"found": found, "slices": slices, "found_slices": found_slices,
            "confusion": doctimerel_confusion(g, p)}


#: a gold EVENT the prediction has no EVENT at (its DocTimeRel confusion column)
NO_EVENT = "(no event at these spans)"


def doctimerel_confusion(g: dict, p: dict) -> dict:
    """Per gold DocTimeRel item (the scorer's set of (spans, DocTimeRel), as ``found`` counts them), its DocTimeRel against the predicted EVENT's at the same
    spans (:data:`NO_EVENT` where there is none; ``None`` where the prediction gives none), as
    ``{"of": what a unit is, "counts": {gold: {predicted: n}}}``: labels and counts only, no text."""
    predicted: dict = {}
    for (spans, _), v in p["doctimerel"]:
        predicted.setdefault(spans, v)
    counts: dict = {}
    for spans, v in dict.fromkeys(item for item, _ in g["doctimerel"]):   # the scorer's items, as ``found``
        row = counts.setdefault(str(v), {})
        got = str(predicted[spans]) if spans in predicted else NO_EVENT
        row[got] = row.get(got, 0) + 1
    return {"of": "gold EVENTs' DocTimeRel", "counts": counts}


def _doc_record(doc: Document, path: Path, gold: Document | None = None) -> dict:
    rec = {"item_id": doc.doc_id, "n_event": len(doc.of_type("EVENT")), "n_timex3": len(doc.of_type("TIMEX3")),
           "n_contains": len(doc.tlinks("CONTAINS")), "xml_sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    if gold is not None:
        rec.update(outcome_record(gold, doc))
    return rec


def run(version: str, model: str, protocol: str, *, data_dir=None, thyme_text_dir=None, annotation_dir=None,
        work_dir=None, load=None) -> RunResult:
    """Load, predict, write the predictions as Anafora XML under ``work_dir/predicted`` and score them with the
    official scorer (with closure). Only as the run's decision allows (the card's declared gate: the runs that
    read note text need ``thyme_text_dir``): ``load``, the run's :meth:`atlaslib.cards.run.CardRun.load`, else
    decided here by the same rule (:func:`atlaslib.cards.deciding.decide`); a run that cannot happen raises
    :class:`atlaslib.cards.NotRun`. Without ``work_dir`` the run works in a temporary folder removed before it
    returns (the result's ``predicted_dir`` is then None; its corpus keeps no folder of it either)."""
    if work_dir is None:
        with tempfile.TemporaryDirectory(prefix="tempeval-") as tmp:
            result = run(version, model, protocol, data_dir=data_dir, thyme_text_dir=thyme_text_dir,
                         annotation_dir=annotation_dir, work_dir=tmp, load=load)
        corpus = result.corpus
        if Path(tmp) in corpus.reference_dir.parents:
            corpus = replace(corpus, reference_dir=None)
        return replace(result, corpus=corpus, predicted_dir=None)
    if load is None:
        decision = deciding.decide(CARD, version, model, protocol, {"thyme_text_dir": thyme_text_dir})
        deciding.load(CARD, model, protocol, decision, data_dir=data_dir)
    else:
        load(data_dir=data_dir)
    work_dir = Path(work_dir)
    with parse_once():  # each Anafora file is parsed once: the reader and the scorer share its tree
        corpus = load_corpus(version, data_dir, thyme_text_dir, annotation_dir, work_dir)
        docs, info = predict(model, protocol, corpus)
        pred_dir = work_dir / "predicted"
        write_corpus(docs, pred_dir)
        table = score_directories(corpus.reference_dir, pred_dir, closure=True, per_document=True)
    gold = {d.doc_id: d for d in corpus.test}
    preds = [_doc_record(d, pred_dir / d.doc_id / d.file_name, gold.get(d.doc_id)) for d in docs]
    return RunResult(version, model, protocol, table, preds, info, corpus, pred_dir)


#: who a TempEval run's baselines are, in their cells
PROFILE_KIND = "rule baseline (Clinical TempEval 2015)"
CAPABILITY = "predict.temporal"


def spec_parameters(**parameters) -> dict:
    """A run's parameters as its spec records them: ``thyme_text_dir`` only as set / not set (a DUA holder's
    path stays private)."""
    params = dict(parameters)
    if params.get("thyme_text_dir") is not None:
        params["thyme_text_dir"] = "<set>"
    return params
