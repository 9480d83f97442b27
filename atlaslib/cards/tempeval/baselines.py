"""The Clinical TempEval 2015 baselines, on :class:`~.anafora_io.Document` objects.

closest (narrative containers)
    Each TIMEX3 is predicted to CONTAIN exactly one EVENT: the EVENT nearest to it in the text.
    *Distance*: characters between the two annotations' extents (from the lower start to the higher end
    over all their spans), ``max(0, later start - earlier end)``: 0 when they touch or overlap, so an EVENT
    may sit on either side. *Ties*: the EVENT that starts first wins (then the shorter one, then the
    smaller id), i.e. an equally near EVENT before the time beats one after it. A document without EVENTs
    gets no relation; TIMEX3s never contain TIMEX3s; DOCTIME/SECTIONTIME are not used.
    Relation: ``TLINK`` Source = TIMEX3, Target = EVENT, Type = CONTAINS.

majority DocTimeRel
    Every EVENT gets the DocTimeRel most frequent among the training EVENT elements (ties: the
    alphabetically first value). On THYME Train this is OVERLAP.

memorize (everything but narrative containers)
    :class:`atlaslib.models.memorize.PhraseMemorizer` (phrases annotated in more than half of their exact,
    word-bounded occurrences in the training text; most frequent label; longest match first, no overlaps)
    with labels ``("EVENT", ContextualModality, Degree, Polarity, Type, DocTimeRel)`` and
    ``("TIMEX3", Class)``. Phase 1 tags raw text. Phase 2 keeps the gold EVENTs/TIMEX3s with their gold
    attributes and predicts each EVENT's DocTimeRel: the memorized label when the EVENT's whole text is a
    memorized EVENT phrase, else the majority DocTimeRel.

Phase 2 inputs (:func:`phase2_input`): the gold EVENT and TIMEX3 annotations with their attributes,
without DocTimeRel and without relations.
"""
from __future__ import annotations

import collections
import copy

from .anafora_io import EVENT_ATTRIBUTES, AnaforaError, Document, Entity, Relation

SYSTEM = "system"


def _gap(a: Entity, b: Entity) -> int:
    return max(0, max(a.start, b.start) - min(a.end, b.end))


def closest_relations(doc: Document) -> list[Relation]:
    """Each TIMEX3 CONTAINS its nearest EVENT (rules in the module docstring)."""
    # (start, end, length, id, event) of each EVENT, worked out once per document (an extent is a min and a max
    # over the annotation's spans); the key of the rules: (gap, start, length, id), the gap as _gap computes it
    extents = [(e.start, e.end, e.end - e.start, e.id, e) for e in doc.of_type("EVENT")]
    rels = []
    for t in doc.of_type("TIMEX3") if extents else ():
        ts, te = t.start, t.end
        best = min(extents, key=lambda x: (max(0, max(ts, x[0]) - min(te, x[1])), x[0], x[2], x[3]))
        rels.append(Relation(f"{len(rels) + 1}@r@{doc.doc_id}@closest", "TLINK",
                             {"Source": t.id, "Type": "CONTAINS", "Target": best[4].id}))
    return rels


def _system_copy(doc: Document, entities: list[Entity], relations=()) -> Document:
    return Document(doc.doc_id, entities=entities, relations=list(relations), schema="Temporal-Relation",
                    annotator=SYSTEM, status="completed", text=None)


def phase2_input(gold: Document) -> Document:
    """What phase 2 gives a system: gold EVENT/TIMEX3 with attributes, no DocTimeRel, no relations."""
    ents = []
    for e in gold.entities:
        if e.type in ("EVENT", "TIMEX3"):
            props = {k: v for k, v in e.properties.items() if k != "DocTimeRel"}
            ents.append(Entity(e.id, e.type, e.spans, props))
    return _system_copy(gold, ents)


def with_closest(doc: Document) -> Document:
    """``doc`` (a system document) plus the closest-baseline CONTAINS relations."""
    out = copy.deepcopy(doc)
    out.relations = [r for r in out.relations if not (r.type == "TLINK" and r.properties.get("Type") == "CONTAINS")]
    out.relations += closest_relations(out)
    return out


def majority_doctimerel(train_docs: list[Document]) -> tuple[str, dict]:
    """Most frequent DocTimeRel among training EVENT elements, and the counts."""
    counts = collections.Counter(e.properties["DocTimeRel"] for d in train_docs for e in d.of_type("EVENT")
                                 if "DocTimeRel" in e.properties)
    if not counts:
        raise AnaforaError("majority DocTimeRel: the training documents have no EVENT with a DocTimeRel")
    label = min(counts, key=lambda v: (-counts[v], v))
    return label, dict(counts.most_common())


def with_doctimerel(doc: Document, value_for) -> Document:
    """Copy of ``doc`` whose EVENTs get ``DocTimeRel = value_for(event)``."""
    out = copy.deepcopy(doc)
    for e in out.of_type("EVENT"):
        e.properties["DocTimeRel"] = value_for(e)
    return out


# --- memorize --------------------------------------------------------------------------------------

def entity_label(e: Entity):
    if e.type == "EVENT":
        return ("EVENT", *(e.properties.get(a, "N/A") for a in EVENT_ATTRIBUTES), e.properties.get("DocTimeRel", "OVERLAP"))
    return ("TIMEX3", e.properties.get("Class", "DATE"))


def training_spans(doc: Document) -> tuple[str, list]:
    """``(text, [(start, end, label)])`` for PhraseMemorizer; discontinuous annotations use their extent."""
    if doc.text is None:
        raise AnaforaError(f"{doc.doc_id}: memorize needs the note text, and this document has none")
    spans = [(e.start, e.end, entity_label(e)) for e in doc.entities if e.type in ("EVENT", "TIMEX3")]
    return doc.text, spans


def entity_from_label(doc_id: str, n: int, start: int, end: int, label) -> Entity:
    if label[0] == "EVENT":
        props = {**dict(zip(EVENT_ATTRIBUTES, label[1:5])), "DocTimeRel": label[5]}
        return Entity(f"{n}@e@{doc_id}@memorize", "EVENT", ((start, end),), props)
    return Entity(f"{n}@e@{doc_id}@memorize", "TIMEX3", ((start, end),), {"Class": label[1]})


class Memorize:
    """The memorize baseline over documents (see module docstring)."""

    def __init__(self, **memorizer_kw):
        from atlaslib.models.memorize import PhraseMemorizer

        self.memorizer = PhraseMemorizer(**memorizer_kw)
        self.majority = None

    def fit(self, train_docs: list[Document]) -> "Memorize":
        self.memorizer.fit(training_spans(d) for d in train_docs)
        self.majority, _ = majority_doctimerel(train_docs)
        return self

    @property
    def n_phrases(self) -> dict:
        return dict(collections.Counter(label[0] for label in self.memorizer.phrases.values()))

    def predict_phase1(self, doc: Document) -> Document:
        if doc.text is None:
            raise AnaforaError(f"{doc.doc_id}: phase 1 needs the note text, and this document has none")
        ents = [entity_from_label(doc.doc_id, n, s, e, lab)
                for n, (s, e, lab) in enumerate(self.memorizer.predict(doc.text), 1)]
        return _system_copy(doc, ents)

    def predict_phase2(self, gold: Document) -> Document:
        """The memorized DocTimeRel of an EVENT whose whole text is a memorized EVENT phrase, else the majority."""
        if gold.text is None:
            raise AnaforaError(f"{gold.doc_id}: memorize needs the note text, and this document has none")

        def value(e: Entity) -> str:
            label = self.memorizer.phrases.get(self.memorizer._norm(gold.text[e.start:e.end]))
            return label[5] if label is not None and label[0] == "EVENT" else self.majority
        return with_doctimerel(phase2_input(gold), value)
