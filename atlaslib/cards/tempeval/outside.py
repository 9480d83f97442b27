"""Outside systems on the Clinical TempEval card (``atlas export``, ``atlas score``, :func:`atlaslib.evaluate`):
the documents as an outside system sees them (with an Anafora layout of the phase-2 input), and its Anafora
folder scored by the card's own code (the official anaforatools scorer,
:func:`.scoring.score_directories` with closure and per-document counts), its cell made as a run's
(:meth:`.runs.RunResult.cell_parts`: scored by a :class:`~atlaslib.cards.run.CardRun`, the one engine)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

#: what a prediction is, as ``atlas export`` shows it in task.json
OUTSIDE_EXAMPLE = "<dir>/<doc>/<doc>.Temporal-Relation.system.completed.xml"


def outside_split(version: str, split: str, data_dir=None, protocol: str | None = None):
    """The test (or train) documents of ``version``; the reference copy lives in a work folder as long as
    this process."""
    import atexit
    import shutil
    import tempfile

    from ...splits import Split
    from . import anafora_io
    from .runs import load_corpus

    work = Path(tempfile.mkdtemp(prefix="atlas-tempeval-"))
    atexit.register(shutil.rmtree, work, True)
    corpus = load_corpus(version, data_dir, work_dir=work)
    docs = corpus.test if split == "test" else corpus.train
    ids = [d.doc_id for d in docs]
    records = [{"item_id": d.doc_id} for d in docs]
    labels = [f"{t}.{p}={v}" for t, props in anafora_io.SCHEMA.items() if t in ("EVENT", "TIMEX3", "TLINK")
              for p, vals in props.items() for v in sorted(vals)]
    return Split("tempeval", version, split, ids, records, labels, corpus.split_hash,
                 answer="an Anafora folder <dir>/<doc>/<doc>.Temporal-Relation.system.completed.xml per document",
                 context={"corpus": corpus, "docs": docs, "work": work})


def write_outside_files(s, out: Path) -> list[str]:
    """``atlas export``'s TempEval files: ``documents.txt`` and ``anafora/<doc>/``: the note text where the
    version has public text (never THYME's), and the phase-2 input (test) or the gold annotations (train)."""
    from ...results import atomic_write_text
    from . import anafora_io, baselines

    atomic_write_text(out / "documents.txt", "\n".join(s.ids) + "\n")
    for d in s.context["docs"]:
        doc = (replace(baselines.phase2_input(d), annotator="input") if s.split == "test"
               else replace(d, schema="Temporal-Relation", annotator="gold", status="completed"))
        public = d.text is not None and not s.context["corpus"].gated
        anafora_io.write_document(replace(doc, text=d.text if public else None), out / "anafora", write_text=public)
    return ["documents.txt", "anafora/"]


def outside_cell_parts(s, preds, profile: dict, protocol: str, key: str, n_resamples: int, data_dir=None) -> dict:
    """The cell parts of a checked Anafora folder ``preds`` on split ``s`` (see :mod:`atlaslib.external.score`):
    the official scorer's table, each metric with its document bootstrap, scored by the system's own
    :class:`~atlaslib.cards.run.CardRun` (an outside system reports every metric but phase 2's given spans,
    :func:`.card.not_addressed`)."""
    from ...results import EXTERNAL
    from ..run import CardRun
    from . import scoring
    from .runs import RunResult, _doc_record

    corpus = s.context["corpus"]
    pred_dir = Path(preds[0].label.path).parents[1]
    table = scoring.score_directories(corpus.reference_dir, pred_dir, closure=True, per_document=True)
    docs = [p.label for p in sorted(preds, key=lambda p: p.item_id)]
    records = [_doc_record(d, Path(d.path)) for d in docs]
    result = RunResult(s.version, profile["name"], protocol, table, records, {"source": EXTERNAL}, corpus, pred_dir)
    card_run = CardRun("tempeval", s.version, profile["name"], protocol)
    return dict(result.cell_parts(card_run), profile=profile, capability=EXTERNAL)
