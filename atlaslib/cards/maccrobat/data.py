"""MACCROBAT card: problems, treatments and tests in sentences of clinical case reports.

Data
----
200 PubMed Central case reports of MACCROBAT2020 (Caufield et al.) as brat standoff, ``<PMID>.txt``
(one sentence per line) and ``<PMID>.ann``, pinned file by file (:data:`FILES`, sha256 list in
``maccrobat_sha256.txt``) at commit :data:`SOURCE_COMMIT` of github.com/Saieiei/NLP (the only complete
copy reachable; the reference conversion singh-aditya/MACCROBAT_biomedical_ner is not).

Conversion (reproduces the reference conversion's counts exactly)
-----------------------------------------------------------------
1. Entities are the T-lines of a report; discontinuous ones (offsets with ``;``) are dropped.
2. Overlap rule, per report, over the entities of *all 41 types*: sort by start offset with a stable
   sort, so entities with the same start keep their order of appearance in the ``.ann`` file (not
   their T-number); walk that list and keep an entity when it starts at or after the end of the last
   kept one, else drop it. The reference ``create_dataset.py`` (hub page, as far as the search corpus
   shows it) sorts the entities with Python's stable ``sorted(..., key=start)`` and keeps them
   greedily, which is where the file-order tie rule comes from. Sorting ties by T-number instead
   gives 4,654 / 2,098 / 4,575; resolving overlaps among the five mapped types only gives
   4,730 / 2,110 / 4,576. Keeping or dropping adjacent entities (end == next start; 3 pairs, none
   mapped) does not change the three counts.
3. Types are mapped (:data:`TYPE_MAP`): Sign_symptom, Disease_disorder → problem; Medication,
   Therapeutic_procedure → treatment; Diagnostic_procedure → test; the 36 other types → O.
   Result: 4,656 problem, 2,098 treatment, 4,574 test mentions (:data:`REFERENCE_COUNTS`).
4. Sentences are the non-empty lines (4,541). A kept mention belongs to the line holding its start;
   none crosses a line break in this release (one that did would raise MaccrobatFormatError).
5. Words: each sentence is cut at its mentions' boundaries, then each piece into runs of letters/
   digits and single other non-space characters (:func:`words_of`); gold tags are IOB2 over the
   7 tags :data:`TAGS`.

Items: one per sentence, ``item_id = maccrobat-d<doc:03d>-s<sent:03d>`` (doc = index of the report in
PMID order, sent = index among the report's non-empty lines).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from ... import results as _results
from ...metrics.spans import tags_from_mentions
from ...sources import resolve
from .card import DATA_PREFIX, FILES, PMIDS, REFERENCE_COUNTS, TYPE_MAP, TYPES

class MaccrobatFormatError(ValueError):
    """A brat file does not have the expected shape (names file, line and what was expected)."""


# ------------------------------------------------------------------------------------------ parsing
@dataclass
class Entity:
    tid: str
    type: str
    start: int
    end: int
    text: str
    line: int            # 1-based line in the .ann file
    order: int           # position among the file's T-lines (0-based)


def parse_ann(text: str, source: str = "<ann>", txt: str | None = None) -> tuple[list[Entity], list[dict]]:
    """T-lines of one ``.ann`` file → (continuous entities, discontinuous ones as dicts).

    Other annotation lines (E, R, A, *, #, ...) are ignored. When ``txt`` is given, each entity's
    text must equal ``txt[start:end]`` (a line break inside the span may
    appear as a space). Raises :class:`MaccrobatFormatError` naming ``source`` and the
    line for a malformed T-line."""
    ents, disc = [], []
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.startswith("T"):
            continue
        parts = line.split("\t")
        if len(parts) < 3:
            raise MaccrobatFormatError(f"{source} line {lineno}: expected 'T<n>\\t<type> <start> <end>\\t<text>', "
                                       f"got {line!r}")
        tid, middle, span_text = parts[0], parts[1], parts[2]
        head = middle.split(" ", 1)
        if len(head) != 2 or not re.fullmatch(r"T\d+", tid):
            raise MaccrobatFormatError(f"{source} line {lineno}: expected 'T<n>\\t<type> <start> <end>', got {line!r}")
        typ, offsets = head
        if ";" in offsets:
            disc.append({"tid": tid, "type": typ, "offsets": offsets, "text": span_text, "line": lineno})
            continue
        m = re.fullmatch(r"(\d+) (\d+)", offsets)
        if not m or int(m.group(1)) >= int(m.group(2)):
            raise MaccrobatFormatError(f"{source} line {lineno}: offsets {offsets!r} are not '<start> <end>' "
                                       f"with start < end")
        start, end = int(m.group(1)), int(m.group(2))
        if txt is not None:
            if end > len(txt):
                raise MaccrobatFormatError(f"{source} line {lineno}: end offset {end} beyond the text "
                                           f"({len(txt)} characters)")
            if txt[start:end] != span_text and txt[start:end].replace("\n", " ") != span_text:
                raise MaccrobatFormatError(f"{source} line {lineno}: span text {span_text!r} differs from the "
                                           f"text at {start}-{end}: {txt[start:end]!r}")
        ents.append(Entity(tid, typ, start, end, span_text, lineno, len(ents) + len(disc)))
    return ents, disc


def remove_overlaps(entities: Sequence[Entity]) -> list[Entity]:
    """The reference overlap rule: stable sort by start (ties keep file order), keep an entity when it
    starts at or after the end of the last kept entity. Returns the kept entities in start order."""
    kept: list[Entity] = []
    for e in sorted(entities, key=lambda e: e.start):
        if not kept or e.start >= kept[-1].end:
            kept.append(e)
    return kept


from .words import _WORD, words_of  # noqa: E402,F401  (word cuts: a module of their own)


def convert_document(pmid: str, doc_index: int, txt: str, ann: str, source: str = "") -> tuple[list[dict], list[dict]]:
    """One report → (sentence records, entity records). See the module docstring for the rules."""
    source = source or f"{pmid}.ann"
    ents, disc = parse_ann(ann, source, txt)
    kept_ids = {e.tid for e in remove_overlaps(ents)}
    # sentences: non-empty lines with their offsets
    lines, offset = [], 0
    for raw in txt.split("\n"):
        if raw.strip():
            lines.append((offset, raw))
        offset += len(raw) + 1
    starts = np.array([o for o, _ in lines])

    def sentence_of(pos: int) -> int:
        return int(np.searchsorted(starts, pos, side="right") - 1)

    per_sentence: dict[int, list[Entity]] = {}
    records = []
    for e in ents:
        s = sentence_of(e.start)
        kept = e.tid in kept_ids
        group = TYPE_MAP.get(e.type)
        if kept and group:
            so, stext = lines[s]
            if s < 0 or e.end > so + len(stext):
                raise MaccrobatFormatError(f"{source} line {e.line}: mention {e.tid} ({e.start}-{e.end}) "
                                           f"crosses a sentence (line) boundary")
            per_sentence.setdefault(s, []).append(e)
        records.append({"document": pmid, "tid": e.tid, "type": e.type, "start": e.start, "end": e.end,
                        "text": e.text, "kept": kept, "group": group or "O", "discontinuous": False,
                        "sentence": s, "ann_line": e.line})
    for d in disc:
        records.append({"document": pmid, "tid": d["tid"], "type": d["type"], "start": None, "end": None,
                        "text": d["text"], "kept": False, "group": TYPE_MAP.get(d["type"], "O"),
                        "discontinuous": True, "sentence": None, "ann_line": d["line"]})
    sentences = []
    for s, (so, stext) in enumerate(lines):
        ms = sorted(per_sentence.get(s, []), key=lambda e: e.start)
        rel = [(e.start - so, e.end - so, TYPE_MAP[e.type]) for e in ms]
        spans = words_of(stext, [c for a, b, _ in rel for c in (a, b)])
        wstart = {a: k for k, (a, _) in enumerate(spans)}
        wend = {b: k for k, (_, b) in enumerate(spans)}
        mlist = []
        for (a, b, typ), e in zip(rel, ms):
            # mention text may carry outer spaces; snap to the words inside it
            inside = [k for k, (x, y) in enumerate(spans) if x >= a and y <= b]
            if not inside:
                raise MaccrobatFormatError(f"{source} line {e.line}: mention {e.tid} {e.text!r} holds no word")
            first, last = inside[0], inside[-1]
            if spans[first][0] not in wstart or spans[last][1] not in wend:
                raise MaccrobatFormatError(f"{source} line {e.line}: mention {e.tid} does not align to words")
            mlist.append((typ, first, last))
        words = [stext[x:y] for x, y in spans]
        sentences.append({
            "item_id": f"maccrobat-d{doc_index:03d}-s{s:03d}", "document": pmid, "doc_index": doc_index,
            "sent_index": s, "text": stext, "offset": so, "words": words, "word_spans": spans,
            "tags": tags_from_mentions(len(words), mlist), "mentions": mlist,
        })
    return sentences, records


@dataclass
class Corpus:
    items: pd.DataFrame                    # one row per sentence
    entities: pd.DataFrame                 # one row per T-line (kept / dropped, mapped group)
    files: dict = field(default_factory=dict)  # pinned name -> sha256


def load_corpus(data_dir=None) -> Corpus:
    """Resolve the 400 pinned files (local dir, cache or download, sha256-checked) and convert them."""
    items, ents, files = [], [], {}
    for d, pmid in enumerate(PMIDS):
        pair = {}
        for ext in ("txt", "ann"):
            pf = next(f for f in FILES if f.name == f"{DATA_PREFIX}{pmid}.{ext}")
            path = resolve(pf, data_dir)
            files[pf.name] = pf.sha256
            try:
                pair[ext] = path.read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                raise MaccrobatFormatError(f"{path}: not UTF-8 ({exc})") from None
        s, r = convert_document(pmid, d, pair["txt"], pair["ann"], source=f"{DATA_PREFIX}{pmid}.ann")
        items.extend(s)
        ents.extend(r)
    frame = pd.DataFrame(items)
    if not frame["item_id"].is_unique:
        raise MaccrobatFormatError("item ids are not unique")
    return Corpus(frame, pd.DataFrame(ents), files)


def load_items(data_dir=None) -> pd.DataFrame:
    """Items frame: ``item_id, document, doc_index, sent_index, text, offset, words, word_spans,
    tags, mentions`` (one row per non-empty line; ``mentions`` = ``(type, first word, last word)``)."""
    return load_corpus(data_dir).items


# ------------------------------------------------------------------------------------------- audit
def type_counts(entities: pd.DataFrame) -> pd.DataFrame:
    """Per MACCROBAT type: all T-lines, discontinuous, continuous, kept by the overlap rule, mapped group."""
    e = entities
    t = pd.DataFrame({
        "all": e.groupby("type").size(),
        "discontinuous": e[e.discontinuous].groupby("type").size(),
        "continuous": e[~e.discontinuous].groupby("type").size(),
        "kept": e[e.kept].groupby("type").size(),
    }).fillna(0).astype(int)
    t["dropped_by_overlap"] = t["continuous"] - t["kept"]
    t["group"] = [TYPE_MAP.get(x, "O") for x in t.index]
    return t.sort_values(["group", "kept"], ascending=[True, False])


def group_counts(entities: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """Mapped groups before/after the overlap rule and the mentions present in the items' IOB2 tags, next to the
    reference counts."""
    e = entities[entities.group != "O"]
    rows = []
    for g in TYPES:
        eg = e[e.group == g]
        row = {"group": g, "all_T_lines": len(eg), "discontinuous_dropped": int(eg.discontinuous.sum()),
               "before_overlap_rule": int((~eg.discontinuous).sum()), "after_overlap_rule": int(eg.kept.sum()),
               "reference": REFERENCE_COUNTS[g],
               "in_tags": int(sum(sum(1 for m in ms if m[0] == g) for ms in items["mentions"]))}
        row["difference"] = row["after_overlap_rule"] - row["reference"]
        rows.append(row)
    return pd.DataFrame(rows).set_index("group")


def mention_lengths(items: pd.DataFrame) -> pd.DataFrame:
    """Mention length in words per type: count, mean, median, max and share of one-word mentions."""
    rows = [(m[0], m[2] - m[1] + 1) for ms in items["mentions"] for m in ms]
    f = pd.DataFrame(rows, columns=["type", "words"])
    g = f.groupby("type")["words"]
    out = pd.DataFrame({"mentions": g.size(), "mean": g.mean().round(2), "median": g.median(),
                        "max": g.max(), "one_word_share": g.apply(lambda s: round(float((s == 1).mean()), 3))})
    return out.loc[[t for t in TYPES if t in out.index]]


def audit(corpus: Corpus) -> dict:
    """All audit tables: ``summary`` (reference vs found), ``groups``, ``types``, ``lengths``,
    ``sentences_per_report`` (its distribution: describe)."""
    items, ents = corpus.items, corpus.entities
    groups = group_counts(ents, items)
    summary = pd.DataFrame([
        {"check": "reports", "reference": 200, "found": items["document"].nunique()},
        {"check": "sentences (non-empty lines)", "reference": REFERENCE_COUNTS["sentences"], "found": len(items)},
        *[{"check": f"{g} mentions", "reference": REFERENCE_COUNTS[g], "found": int(groups.loc[g, "in_tags"])}
          for g in TYPES],
        {"check": "words", "reference": None, "found": int(items["words"].map(len).sum())},
    ])
    summary["match"] = [r is None or r != r or int(r) == f for r, f in zip(summary.reference, summary.found)]
    return {"summary": summary, "groups": groups, "types": type_counts(ents),
            "lengths": mention_lengths(items),
            "sentences_per_report": items.groupby("document").size().describe().round(2)}


def plot_sentences_per_report(items: pd.DataFrame):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 2.6))
    items.groupby("document").size().plot.hist(bins=30, ax=ax, color="#8fbf8f")
    ax.set_xlabel("sentences per case report")
    ax.set_ylabel("reports")
    fig.tight_layout()
    return fig


def reproduction_rows(audit_result: dict) -> list[dict]:
    """Rows for the book's reproduction chapter: each count of the reference conversion beside the
    count this converter produces (from :func:`audit`'s summary)."""
    summary = audit_result["summary"].dropna(subset=["reference"])
    return [_results.reproduction_row(r["check"], r["reference"], r["found"],
                                      "brat conversion with the reference's overlap rule (see the audit)",
                                      "singh-aditya/MACCROBAT_biomedical_ner @ 1470ebf")
            for r in summary.to_dict(orient="records")]
