"""Audit of the THYME temporal annotations (no text needed).

Two ways to count, kept apart on purpose:

- **scorer counts** (:func:`scorer_counts`): what the official scorer (anaforatools 1.2.0) counts as the
  reference: per document, the *set* of items of the views ``EVENT`` (span + every property),
  ``TIMEX3``, ``TLINK:Type:CONTAINS`` (pair of argument spans); exact duplicates collapse. These are the
  Clinical TempEval 2015 Table 1 numbers: Train 293 / 38,890 / 3,833 / 11,176, Dev 147 / 20,974 / 2,078 /
  6,173. ``EVENT:<span>`` (distinct spans) is given beside them.
- **raw element counts** (:func:`raw_counts`): ``<entity>`` / ``<relation>`` elements in the XML.

Train's files hold 39,002 EVENT elements but the scorer sees 38,890 items. Two causes, 65 + 47 = 112:

1. one file, ``ID090_path_266a.Temporal-Entity.gold.completed.xml``, keeps an ``<adjudication>`` block
   after ``</annotations>`` with 65 EVENT (and 1 DOCTIME) elements of the adjudication bookkeeping; the
   scorer (and :mod:`.anafora_io`) reads only ``<annotations>``, which holds 38,937 EVENT elements;
2. 47 of those repeat another EVENT of the same document exactly (same span, same attribute values,
   another id), and the scorer's sets collapse them (18 spans carry two different attribute sets and count
   twice in ``EVENT`` but once in ``EVENT:<span>``: 38,872).

11,248 CONTAINS elements give 11,176 distinct (source span, target span) pairs: 72 repeat a pair (often
through a duplicated EVENT). :func:`duplicates` and :func:`raw_counts` give these per split.
"""
from __future__ import annotations

import collections
import os
from pathlib import Path

import pandas as pd

from .anafora_io import EVENT_ATTRIBUTES, Document, parse_once, parse_root, read_corpus
from .baselines import _gap  # the characters between two annotations' extents, as closest measures them
from .scoring import _evaluate, _memo_select, _MemoSelect, anafora

CONTAINS_VIEW = ("TLINK", "Type", "CONTAINS")

#: Table 1 of Bethard et al. (2015). Train: the figures the card's specification gives as the paper's Train row (the
#: transcription lost the table's numbers; not re-checked against the PDF). Dev: not found in any search
#: corpus -> None (unverified); the scorer's Dev counts are shown without a paper figure beside them.
PAPER_TABLE1 = {
    "Train": {"documents": 293, "EVENT": 38890, "TIMEX3": 3833, "CONTAINS": 11176,
              "source": "the card's specification (stated as the paper's Table 1 Train row); not verified against the PDF"},
    "Dev": {"documents": None, "EVENT": None, "TIMEX3": None, "CONTAINS": None,
            "source": "not verified: the transcription lost the numbers and no search corpus holds them"},
}


class _ClosureCounter(_evaluate.TemporalClosureScores):
    """The scorer's own closure, counting how many CONTAINS relations closure(reference) holds."""

    def __init__(self):
        super().__init__()
        self.closed = 0

    def add(self, reference, predicted):
        reference = {a for a in reference if self._is_valid(a)}
        reference = self._remove_duplicate_relations(reference)
        self.reference += len(reference)
        self.closed += sum(1 for (_, _, (_, value)) in self._closure(reference) if value == "CONTAINS")

    def update(self, other):
        super().update(other)
        self.closed += other.closed


def scorer_counts(split_dir: str | os.PathLike, *, closure: bool = True) -> dict:
    """Reference counts as the official scorer sees them: per document, ``len`` of the set that
    ``anafora.evaluate.ToSet`` (the object ``score_data`` scores each view with) builds, summed; plus, with
    ``closure``, how many CONTAINS relations temporal closure (the scorer's) yields. Inside
    :func:`.anafora_io.parse_once` a file already parsed (e.g. by :func:`read_corpus`) is not parsed again,
    and the scorer's selections are worked out once each (:class:`.scoring._MemoSelect`, same answers)."""
    split_dir = Path(split_dir)
    totals = collections.Counter()
    closed = reference_pairs = 0
    # the scorer's own view objects, built as score_data builds them for this include set
    select = _MemoSelect({"EVENT", "TIMEX3", CONTAINS_VIEW, ("EVENT", "<span>")})
    views = {"EVENT": _evaluate.ToSet(select=select, type_name="EVENT"),
             "EVENT_spans": _evaluate.ToSet(select=select, type_name="EVENT", prop_name=None),
             "TIMEX3": _evaluate.ToSet(select=select, type_name="TIMEX3"),
             "CONTAINS": _evaluate.ToSet(select=select, type_name="TLINK", prop_name="Type", prop_value="CONTAINS")}
    for sub_dir, _text_name, xml_names in anafora.walk(str(split_dir), r"[.]Temporal-(Relation|Entity)[.].*[.]xml$"):
        [xml_name] = xml_names
        data = anafora.AnaforaData(parse_root(split_dir / sub_dir / xml_name))  # = AnaforaData.from_file
        totals["documents"] += 1
        for key, to_set in views.items():
            totals[key] += len(to_set(data.annotations))
        if closure:
            with _memo_select():
                c = _evaluate.score_data(data, None, include={CONTAINS_VIEW},
                                         scores_type=_ClosureCounter)
            if CONTAINS_VIEW in c:
                closed += c[CONTAINS_VIEW].closed
                reference_pairs += c[CONTAINS_VIEW].reference
    out = dict(totals)
    if closure:
        out.update(CONTAINS_closure_input=reference_pairs, CONTAINS_after_closure=closed,
                   CONTAINS_added_by_closure=closed - reference_pairs)
    return out


COUNT_KEYS = ("documents", "EVENT", "TIMEX3", "CONTAINS", "TLINK", "ALINK", "DOCTIME", "SECTIONTIME")


def element_counts_per_document(docs: list[Document]) -> pd.DataFrame:
    """Per document, elements anywhere in its file (``<annotations>`` and any ``<adjudication>`` block) by
    type, plus TLINKs with Type=CONTAINS; the layout of ``derived_counts_per_doc.tsv``."""
    rows = []
    for d in docs:
        c = collections.Counter()
        for el in parse_root(d.path).iter():
            if el.tag in ("entity", "relation"):
                c[(el.findtext("type") or "").strip()] += 1
                props = el.find("properties")
                if props is not None and (props.findtext("Type") or "").strip() == "CONTAINS":
                    c["CONTAINS"] += 1
        rows.append({"doc_id": d.doc_id, **{k: c[k] for k in COUNT_KEYS[1:]}})
    return pd.DataFrame(rows)


def file_element_counts(docs: list[Document]) -> dict:
    """Elements anywhere in the files, summed (as a text search for ``<type>EVENT</type>`` counts them)."""
    per_doc = element_counts_per_document(docs)
    return {"documents": len(docs), **{k: int(per_doc[k].sum()) for k in COUNT_KEYS[1:]}}


def raw_counts(docs: list[Document]) -> dict:
    """Element counts inside ``<annotations>``: documents, EVENT, TIMEX3, TLINK with Type=CONTAINS, all TLINK,
    ALINK, DOCTIME, SECTIONTIME."""
    c = collections.Counter(documents=len(docs))
    for d in docs:
        c.update(a.type for a in [*d.entities, *d.relations])
        c["CONTAINS"] += len(d.tlinks("CONTAINS"))
    return {k: c[k] for k in COUNT_KEYS}


def duplicates(docs: list[Document]) -> dict:
    """Why raw and scorer counts differ: EVENT elements repeating another exactly, EVENT spans carrying two
    different attribute sets, CONTAINS elements repeating another (source span, target span) pair."""
    exact = same_span_diff = contains_dup = 0
    for d in docs:
        events = [(e.spans, tuple(sorted(e.properties.items()))) for e in d.of_type("EVENT")]
        exact += len(events) - len(set(events))
        distinct = set(events)
        same_span_diff += len(distinct) - len({s for s, _ in distinct})
        ids = d.by_id()
        pairs = [(ids[r.source].spans, ids[r.target].spans) for r in d.tlinks("CONTAINS")]
        contains_dup += len(pairs) - len(set(pairs))
    return {"EVENT_exact_duplicates": exact, "EVENT_spans_with_two_attribute_sets": same_span_diff,
            "CONTAINS_duplicate_pairs": contains_dup}


def table1(scorer: dict[str, dict], raw: dict[str, dict], file_elements: dict[str, dict]) -> pd.DataFrame:
    """Table 1 reproduction: per split the paper's row (where known), the scorer's counts, the elements in
    ``<annotations>`` and the elements anywhere in the files."""
    return pd.DataFrame([{"split": split, "count": what, "paper": PAPER_TABLE1.get(split, {}).get(what),
                          "official scorer": scorer[split].get(what), "elements in <annotations>": raw[split].get(what),
                          "elements in file": file_elements[split].get(what)}
                         for split in scorer for what in ("documents", "EVENT", "TIMEX3", "CONTAINS")]
                        ).set_index(["split", "count"])


def attribute_distribution(docs_by_split: dict[str, list[Document]]) -> pd.DataFrame:
    """Long table (split, type, attribute, value, count, share) over EVENT (ContextualModality, Degree,
    Polarity, Type, DocTimeRel) and TIMEX3 (Class) elements."""
    rows = collections.Counter()
    for split, docs in docs_by_split.items():
        for d in docs:
            for e in d.entities:
                attrs = (*EVENT_ATTRIBUTES, "DocTimeRel") if e.type == "EVENT" else ("Class",) if e.type == "TIMEX3" else ()
                for a in attrs:
                    rows[(split, e.type, a, e.properties.get(a, "(missing)"))] += 1
    df = pd.DataFrame([(*k, v) for k, v in rows.items()], columns=["split", "type", "attribute", "value", "count"])
    df["share"] = df["count"] / df.groupby(["split", "type", "attribute"])["count"].transform("sum")
    return df.sort_values(["split", "type", "attribute", "count"], ascending=[True, True, True, False]).reset_index(drop=True)


def contains_distances(docs_by_split: dict[str, list[Document]]) -> pd.DataFrame:
    """One row per CONTAINS element: split, doc, argument types (e.g. TIMEX3->EVENT), character gap between
    the arguments' extents, and whether the target lies after the source."""
    rows = []
    for split, docs in docs_by_split.items():
        for d in docs:
            ids = d.by_id()
            for r in d.tlinks("CONTAINS"):
                s, t = ids[r.source], ids[r.target]
                rows.append({"split": split, "doc_id": d.doc_id, "pair": f"{s.type}->{t.type}",
                             "gap": _gap(s, t), "target_after_source": t.start >= s.end})
    return pd.DataFrame(rows)


def distance_summary(distances: pd.DataFrame) -> pd.DataFrame:
    q = distances.groupby(["split", "pair"])["gap"]
    return pd.DataFrame({"n": q.size(), "median": q.median(), "p90": q.quantile(0.9), "max": q.max(),
                         "share_within_50_chars": q.apply(lambda g: (g <= 50).mean())})


def plot_attributes(dist: pd.DataFrame):
    """One bar panel per attribute: share of each value, Train vs Dev side by side."""
    import matplotlib.pyplot as plt

    keys = list(dist.groupby(["type", "attribute"]).groups)
    fig, axes = plt.subplots(1, len(keys), figsize=(3.0 * len(keys), 3.2))
    for ax, (typ, attr) in zip(axes, keys):
        sub = dist[(dist["type"] == typ) & (dist["attribute"] == attr)]
        table = sub.pivot_table(index="value", columns="split", values="share", fill_value=0)
        table.plot.bar(ax=ax, legend=ax is axes[0], rot=60)
        ax.set_title(f"{typ} {attr}", fontsize=9)
        ax.set_xlabel("")
        ax.set_ylim(0, 1)
    axes[0].set_ylabel("share of elements")
    fig.tight_layout()
    return fig


def plot_distances(distances: pd.DataFrame, max_gap: int = 400):
    """Histogram of the character gap between CONTAINS arguments, TIMEX3->EVENT and EVENT->EVENT."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.2))
    for pair in ("TIMEX3->EVENT", "EVENT->EVENT"):
        gaps = distances.loc[distances["pair"] == pair, "gap"].clip(upper=max_gap)
        ax.hist(gaps, bins=40, range=(0, max_gap), alpha=0.6, label=f"{pair} (n={len(gaps)})")
    ax.set_xlabel(f"characters between the arguments (>{max_gap} shown at {max_gap})")
    ax.set_ylabel("CONTAINS relations")
    ax.legend()
    fig.tight_layout()
    return fig


def reproduction_rows(table1_frame) -> list[dict]:
    """Rows for the book's reproduction chapter: the paper's Table 1 beside the official scorer's counts
    (Dev: the paper's row could not be verified, so ``published`` is None), and anaforatools' closure toy
    case through this card's scorer wrapper."""
    from ...results import reproduction_row
    from . import scoring

    rows = []
    for (split, what), rec in table1_frame.iterrows():
        paper = rec.get("paper")
        published = None if pd.isna(paper) else int(paper)
        note = ("set semantics of the official scorer (duplicates collapse, the adjudication block is not read)"
                if published is not None else "the paper's Dev row could not be verified: not compared")
        rows.append(reproduction_row(f"THYME {split} {what} (Table 1)", published, int(rec["official scorer"]), note,
                                     "Bethard et al. 2015, Table 1"))
    toy = scoring.closure_toy_scores()
    for k in ("precision", "recall"):
        rows.append(reproduction_row(f"anaforatools closure toy case: {k}", scoring.CLOSURE_TOY_PUBLISHED[k], toy[k],
                                     "through atlaslib's wrapper of the official scorer", "anaforatools' own test"))
    return rows


def thyme_audit(data_dir=None) -> dict:
    """The whole audit of the real THYME annotations in one pass (each file read once): the parsed
    documents per split, Table 1 beside the paper, exact duplicates, the CONTAINS counts with and without
    closure, and the reproduction rows for the book."""
    from . import SPLITS, thyme_dir

    dirs = {s: thyme_dir(s, data_dir) for s in SPLITS}
    with parse_once():  # the reader, the scorer's counts and the element counts share each parsed file
        docs = {s: read_corpus(p) for s, p in dirs.items()}
        scorer = {s: scorer_counts(p) for s, p in dirs.items()}
        files = {s: file_element_counts(d) for s, d in docs.items()}
    t1 = table1(scorer, {s: raw_counts(d) for s, d in docs.items()}, files)
    return {
        "docs": docs,
        "table1": t1,
        "duplicates": pd.DataFrame({s: duplicates(d) for s, d in docs.items()}),
        "contains": pd.DataFrame({s: {k: v for k, v in c.items() if k.startswith("CONTAINS")}
                                  for s, c in scorer.items()}),
        "reproduction_rows": reproduction_rows(t1),
    }
