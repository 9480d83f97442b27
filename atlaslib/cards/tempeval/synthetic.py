"""A synthetic, PHI-free Clinical TempEval demo corpus with text (``synthetic-v1``).

Written for this project: short colon-cancer clinic and pathology notes assembled from hand-written
sentence templates about an invented patient, with invented dates (years 2031-2033). Nothing comes from
THYME or any real record. The gold Anafora annotations exist by construction: every template marks its
TIMEX3s (Class), EVENTs (ContextualModality, Degree, Polarity, Type, DocTimeRel; ContextualAspect N/A,
Permanence UNDETERMINED as THYME's defaults) and the CONTAINS links among them, so offsets are exact.

Template markup: ``[E1:nausea|ACTUAL,LITTLE,POS,N/A,OVERLAP]`` is an EVENT (attributes in the order
ContextualModality, Degree, Polarity, Type, DocTimeRel), ``[T1:{date}|DATE]`` a TIMEX3 with its Class, and a
template's ``links`` list the CONTAINS pairs by label (``("T1", "E1")``: T1 contains E1). ``{date}``,
``{time}``, ``{dur}`` ... are filled from seeded choices. Some words recur unannotated (``pain clinic``,
``scan room``) and some phrases take different DocTimeRels in different templates, so the memorize and
closest baselines make real errors. The corpus is a check that the pipeline works, not a benchmark:
its numbers say nothing about THYME.
"""
from __future__ import annotations

import random
import re

from .anafora_io import Document, Entity, Relation, check_document

VERSION = "synthetic-v1"
SEED = 20150605
N_TRAIN, N_DEV = 28, 12

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")

CLINIC = [
    ("The patient is a {age}-year-old with [E1:adenocarcinoma|ACTUAL,N/A,POS,N/A,BEFORE/OVERLAP] of the sigmoid colon.", []),
    ("On [T1:{date}|DATE] she had a [E1:colonoscopy|ACTUAL,N/A,POS,N/A,BEFORE] that found a [E2:mass|ACTUAL,N/A,POS,N/A,BEFORE].", [("T1", "E1")]),
    ("She [E1:underwent|ACTUAL,N/A,POS,N/A,BEFORE] a low anterior [E2:resection|ACTUAL,N/A,POS,N/A,BEFORE] on [T1:{date}|DATE].", [("T1", "E2"), ("T1", "E1")]),
    ("[T1:Postoperative|PREPOSTEXP] [E1:recovery|ACTUAL,N/A,POS,N/A,BEFORE] was uneventful.", [("T1", "E1")]),
    ("She [E1:denies|ACTUAL,N/A,POS,EVIDENTIAL,OVERLAP] any [E2:bleeding|ACTUAL,N/A,NEG,N/A,OVERLAP] or [E3:fever|ACTUAL,N/A,NEG,N/A,OVERLAP].", []),
    ("She [E1:reports|ACTUAL,N/A,POS,EVIDENTIAL,OVERLAP] slight [E2:nausea|ACTUAL,LITTLE,POS,N/A,OVERLAP] for [T1:{dur}|DURATION].", [("T1", "E2")]),
    ("There is some [E1:pain|ACTUAL,N/A,POS,N/A,OVERLAP] near the incision; she was seen in the pain clinic.", []),
    ("[E1:Chemotherapy|ACTUAL,N/A,POS,N/A,BEFORE] with FOLFOX was [E2:given|ACTUAL,N/A,POS,N/A,BEFORE] [T1:{count}|QUANTIFIER].", [("T1", "E2")]),
    ("We will [E1:resume|ACTUAL,N/A,POS,ASPECTUAL,AFTER] [E2:chemotherapy|ACTUAL,N/A,POS,N/A,AFTER] on [T1:{weekday}|DATE].", [("T1", "E1")]),
    ("She should take ondansetron [T1:daily|SET] if [E1:nausea|HYPOTHETICAL,N/A,POS,N/A,AFTER] returns.", [("T1", "E1")]),
    ("A repeat CT [E1:scan|ACTUAL,N/A,POS,N/A,AFTER] is planned in [T1:{dur}|DURATION]; she knows where the scan room is.", [("T1", "E1")]),
    ("This could represent a [E1:recurrence|HEDGED,N/A,POS,N/A,OVERLAP], although [E2:scarring|HEDGED,N/A,POS,N/A,OVERLAP] is more likely.", []),
    ("FOLFOX [E1:chemotherapy|GENERIC,N/A,POS,N/A,OVERLAP] can cause [E2:neuropathy|GENERIC,N/A,POS,N/A,OVERLAP].", []),
    ("Her CEA was [E1:checked|ACTUAL,N/A,POS,N/A,BEFORE] at [T1:{time}|TIME] and was [E2:normal|ACTUAL,N/A,POS,N/A,BEFORE].", [("T1", "E1")]),
    ("The [E1:diarrhea|ACTUAL,MOST,POS,N/A,BEFORE] stopped [E2:completely|ACTUAL,N/A,POS,ASPECTUAL,BEFORE] on [T1:{date}|DATE].", [("T1", "E2")]),
    ("No [E1:metastasis|ACTUAL,N/A,NEG,N/A,OVERLAP] is seen on [E2:imaging|ACTUAL,N/A,POS,N/A,BEFORE] from [T1:{date}|DATE].", [("T1", "E2")]),
    ("Follow-up [E1:visit|ACTUAL,N/A,POS,N/A,AFTER] [T1:{later}|DATE].", [("T1", "E1")]),
]
PATH = [
    ("Specimen [E1:received|ACTUAL,N/A,POS,N/A,BEFORE] [T1:{date}|DATE] at [T2:{time}|TIME].", [("T1", "E1"), ("T2", "E1")]),
    ("The [E1:biopsy|ACTUAL,N/A,POS,N/A,BEFORE] of the sigmoid colon [E2:shows|ACTUAL,N/A,POS,EVIDENTIAL,OVERLAP] invasive [E3:adenocarcinoma|ACTUAL,N/A,POS,N/A,OVERLAP].", []),
    ("The tumor [E1:invades|ACTUAL,N/A,POS,N/A,OVERLAP] the muscularis propria.", []),
    ("No [E1:dysplasia|ACTUAL,N/A,NEG,N/A,OVERLAP] is identified at the margins.", []),
    ("Twelve lymph nodes are [E1:negative|ACTUAL,N/A,POS,N/A,OVERLAP] for [E2:carcinoma|ACTUAL,N/A,NEG,N/A,OVERLAP].", []),
    ("[E1:Lymphovascular invasion|HEDGED,N/A,POS,N/A,OVERLAP] is possibly present.", []),
    ("The [E1:resection|ACTUAL,MOST,POS,N/A,BEFORE] is complete, with [E2:clear|ACTUAL,N/A,POS,N/A,OVERLAP] margins.", []),
    ("Compared with the [E1:biopsy|ACTUAL,N/A,POS,N/A,BEFORE] of [T1:{date}|DATE], the [E2:tumor|ACTUAL,N/A,POS,N/A,OVERLAP] is smaller.", [("T1", "E1")]),
]
AGES = tuple(range(48, 80))
COUNTS = ("twice", "three times", "four times")
DURS = ("two weeks", "three days", "one month", "six weeks", "ten days")
WEEKDAYS = ("Monday", "Tuesday", "Thursday", "Friday")
LATERS = ("next month", "in the spring", "next week")
MARK = re.compile(r"\[(?P<kind>[ET])(?P<n>\d+):(?P<text>[^|\]]+)\|(?P<attrs>[^\]]+)\]")
EVENT_KEYS = ("ContextualModality", "Degree", "Polarity", "Type", "DocTimeRel")


def _date(rng: random.Random) -> str:
    return f"{rng.choice(MONTHS)} {rng.randint(1, 28)}, {rng.randint(2031, 2033)}"


def _fill(template: str, rng: random.Random) -> str:
    values = {"date": _date(rng), "time": f"{rng.randint(7, 17)}:{rng.choice(('00', '15', '30', '45'))}",
              "dur": rng.choice(DURS), "count": rng.choice(COUNTS), "weekday": rng.choice(WEEKDAYS),
              "later": rng.choice(LATERS), "age": str(rng.choice(AGES))}
    return template.format(**values)


def render(doc_id: str, sentences: list[tuple[str, list]]) -> Document:
    """Turn filled templates into text + gold annotations with exact offsets."""
    text_parts: list[str] = []
    pos = 0
    entities: list[Entity] = []
    relations: list[Relation] = []
    for s_idx, (sentence, links) in enumerate(sentences):
        if s_idx:
            text_parts.append(" " if s_idx % 4 else "\n")
            pos += 1
        local: dict[str, str] = {}
        last = 0
        for m in MARK.finditer(sentence):
            plain = sentence[last:m.start()]
            text_parts.append(plain)
            pos += len(plain)
            start, phrase = pos, m.group("text")
            text_parts.append(phrase)
            pos += len(phrase)
            eid = f"{len(entities) + 1}@e@{doc_id}@gold"
            if m.group("kind") == "E":
                vals = m.group("attrs").split(",")
                props = dict(zip(EVENT_KEYS, vals))
                props.update(ContextualAspect="N/A", Permanence="UNDETERMINED")
                entities.append(Entity(eid, "EVENT", ((start, pos),), props))
            else:
                entities.append(Entity(eid, "TIMEX3", ((start, pos),), {"Class": m.group("attrs")}))
            local[m.group("kind") + m.group("n")] = eid
            last = m.end()
        text_parts.append(sentence[last:])
        pos += len(sentence) - last
        for src, tgt in links:
            relations.append(Relation(f"{len(relations) + 1}@r@{doc_id}@gold", "TLINK",
                                      {"Source": local[src], "Type": "CONTAINS", "Target": local[tgt]}))
    text = "".join(text_parts) + "\n"
    return check_document(Document(doc_id, entities, relations, text=text), schema=True)


def make_document(doc_id: str, kind: str, rng: random.Random) -> Document:
    header = (f"Date of service: [T1:{_date(rng)}|DATE].", [])
    pool = CLINIC if kind == "clinic" else PATH
    k = rng.randint(5, 8) if kind == "clinic" else rng.randint(4, 6)
    body = [pool[i] for i in sorted(rng.sample(range(len(pool)), k))]
    return render(doc_id, [header] + [(_fill(t, rng), links) for t, links in body])


def build_corpus(seed: int = SEED, n_train: int = N_TRAIN, n_dev: int = N_DEV) -> dict[str, list[Document]]:
    """``{"Train": [...], "Dev": [...]}``: deterministic for a seed; two clinic notes per pathology note.
    (As in THYME, the held-out part is called Dev.)"""
    rng = random.Random(seed)
    docs = []
    for i in range(n_train + n_dev):
        kind = "path" if i % 3 == 2 else "clinic"
        docs.append(make_document(f"SYN{i // 3 + 1:03d}_{kind}_{i + 1:03d}", kind, rng))
    return {"Train": docs[:n_train], "Dev": docs[n_train:]}
