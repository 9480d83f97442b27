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
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .. import results as _results
from ..metrics.spans import mentions as tag_mentions, span_metrics_with_ci, tags_from_mentions
from ..sources import PinnedFile, read_sha256sums, resolve, sha256_bytes
from ..splits import SplitManifest, group_disjoint_check, rank
from . import Card

# --------------------------------------------------------------------------------------------- source
SOURCE_REPO = "Saieiei/NLP"
SOURCE_COMMIT = "f2b522984cc621d5c7e00fbce02ddeee2a5b8077"
URL_TEMPLATE = f"https://raw.githubusercontent.com/{SOURCE_REPO}/{SOURCE_COMMIT}/MACCROBAT2020/{{path}}"
DATA_PREFIX = "maccrobat/brat/"
_SUMS_PATH = Path(__file__).with_name("maccrobat_sha256.txt")
SHA256SUMS_TEXT = _SUMS_PATH.read_text(encoding="utf-8")
#: sha256 of the pinned list itself (= sha256 of the data directory's SHA256SUMS)
SHA256SUMS_DIGEST = sha256_bytes(SHA256SUMS_TEXT.encode("utf-8"))
FILES: list[PinnedFile] = read_sha256sums(SHA256SUMS_TEXT, DATA_PREFIX, URL_TEMPLATE)
PMIDS: list[str] = sorted({Path(f.name).stem for f in FILES})
REFERENCE = ("hf_dataset singh-aditya/MACCROBAT_biomedical_ner at revision "
             "1470ebf27c9fdf65850ceb841ccd757e4aa79aa5 (MACCROBAT2020-V2.json)")

# --------------------------------------------------------------------------------------------- labels
TYPE_MAP = {
    "Sign_symptom": "problem",
    "Disease_disorder": "problem",
    "Medication": "treatment",
    "Therapeutic_procedure": "treatment",
    "Diagnostic_procedure": "test",
}
TYPES = ("problem", "treatment", "test")
TAGS = ("O", "B-problem", "I-problem", "B-treatment", "I-treatment", "B-test", "I-test")
#: zero-shot mapping of native NER types: identity for i2b2-style heads, TYPE_MAP for MACCROBAT heads
NER_LABEL_TABLE = {**{t: t for t in TYPES}, **TYPE_MAP}
REFERENCE_COUNTS = {"sentences": 4541, "problem": 4656, "treatment": 2098, "test": 4574}

# --------------------------------------------------------------------------------------------- split
SEED = 20261006
VERSIONS = {"atlas-n100-v1": {"n_test": 100, "n_train": 500}}
BOOTSTRAP_RESAMPLES = 1000
METRIC_BASES = ("entity_f1", "entity_precision", "entity_recall", "entity_macro_f1")
PROTOCOL_CAPABILITY = {"zero_shot": "predict.ner", "probe": "embed.text.tokens", "finetune": "embed.text.tokens"}
#: The ``finetune`` protocol's recipe (atlaslib.protocols.finetune): the encoder and a new linear head over
#: the 7 TAGS, each word labelled on its first sub-word, trained on the 500 train sentences only, fixed
#: epochs, no early stopping; sentences over max_length sub-words are cut into chunks of whole words.
#: The learning rate was chosen once, with all-MiniLM-L6-v2, on the train sentences alone: the 101
#: sentences of 24 train case reports held out, the other 399 trained (3 epochs), entity F1 on the held-out
#: ones for 5e-5 / 1e-4 / 2e-4 / 3e-4 (batch 16) and 5e-5 (batch 8): 0.097 / 0.278 / 0.371 / 0.414 / 0.295.
FINETUNE_RECIPE = {
    "optimizer": "torch.optim.AdamW", "learning_rate": 3e-4, "epochs": 3, "batch_size": 16, "length_grouping": 8,
    "max_length": 128, "warmup_ratio": 0.1, "weight_decay": 0.01, "adam_betas": [0.9, 0.999], "adam_eps": 1e-8,
    "max_grad_norm": 1.0,
    "head_dropout": 0.1, "seed": SEED, "torch_threads": 2, "eval_batch_size": 64,
    "validation": ("none while training (fixed epochs, no early stopping; test items unseen until prediction); "
                   "the learning rate was chosen once, among 5e-05, 1e-04, 2e-04 and 3e-04, on 101 sentences of "
                   "24 train case reports held out of the 500 train sentences, after a first recipe at 5e-05 "
                   "had already been scored on the test items"),
}
BASELINES = ("memorize",)
#: The protocol each card baseline runs under: ``train_lookup`` = look up phrases memorised from the train
#: sentences (it learns from the train split, so it is not zero-shot, and it has no features to probe).
BASELINE_PROTOCOL = {"memorize": "train_lookup"}

CARD = Card(
    name="maccrobat",
    title="Clinical entity recognition (MACCROBAT)",
    notebook="notebooks/maccrobat.md",
    versions=("atlas-n100-v1",),
    protocols=("zero_shot", "probe", "train_lookup", "finetune"),
    metrics=METRIC_BASES,
    default_matrix=(
        ("atlas-n100-v1", "memorize", "train_lookup"),
        ("atlas-n100-v1", "all-minilm-l6-v2", "probe"),
        ("atlas-n100-v1", "all-minilm-l6-v2", "finetune"),
        ("atlas-n100-v1", "samrawal/bert-base-uncased_clinical-ner", "zero_shot"),
        ("atlas-n100-v1", "d4data/biomedical-ner-all", "zero_shot"),
    ),
    higher_is_better={m: True for m in METRIC_BASES},
    licence_confirmed=True,
    licence_note=("MACCROBAT2020's licence is stated on its figshare record (Caufield et al.), which is usually "
                  "cited as CC BY 4.0 but could not be consulted here, so that licence is unconfirmed; the HF "
                  "conversion used as reference is tagged MIT in its dataset card; the GitHub copy pinned here "
                  "(Saieiei/NLP) states no licence."),
    task="entity recognition with exact word boundaries (problem / treatment / test), IOB2 over words",
    data="MACCROBAT2020, 200 case reports, {{fact:maccrobat.sentences}} sentences (brat standoff)",
    licence="unconfirmed (figshare record usually cited as CC BY 4.0; the pinned GitHub copy states none)",
    test_sizes={v: s["n_test"] for v, s in VERSIONS.items()},
    pinned_files=tuple(FILES),
    resampling_unit="document (case report)",
    caveats=("d4data/biomedical-ner-all was trained on MACCROBAT: its numbers are not held out.",
             "samrawal/bert-base-uncased_clinical-ner follows the i2b2/VA 2010 guideline, not MACCROBAT's.",
             "Every model is scored on the gold word cuts (words are cut at the gold mention boundaries).",
             "The memorize baseline sees only the 500 train sentences."),
    baselines={"memorize": ("train_lookup",)},
    capabilities={"zero_shot": ("predict.ner",), "probe": ("embed.text.tokens",),
                  "finetune": ("embed.text.tokens",)},
)


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


_WORD = re.compile(r"[^\W_]+|\S")


def words_of(text: str, cuts: Sequence[int] = ()) -> list[tuple[int, int]]:
    """Word spans ``(start, end)`` of ``text``: runs of letters/digits and single other non-space
    characters, with a cut forced at every offset in ``cuts`` (mention boundaries)."""
    bounds = sorted({0, len(text), *[c for c in cuts if 0 < c < len(text)]})
    spans = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        spans.extend((a + m.start(), a + m.end()) for m in _WORD.finditer(text[a:b]))
    return spans


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


def group_counts(entities: pd.DataFrame, items: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mapped groups before/after the overlap rule, next to the reference counts (and, with ``items``,
    the mentions actually present in the IOB2 tags)."""
    e = entities[entities.group != "O"]
    rows = []
    for g in TYPES:
        eg = e[e.group == g]
        row = {"group": g, "all_T_lines": len(eg), "discontinuous_dropped": int(eg.discontinuous.sum()),
               "before_overlap_rule": int((~eg.discontinuous).sum()), "after_overlap_rule": int(eg.kept.sum()),
               "reference": REFERENCE_COUNTS[g]}
        if items is not None:
            row["in_tags"] = int(sum(sum(1 for m in ms if m[0] == g) for ms in items["mentions"]))
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


def sentences_per_report(items: pd.DataFrame) -> pd.Series:
    """Distribution (describe) of the number of sentences per report."""
    return items.groupby("document").size().describe().round(2)


def audit(corpus: Corpus) -> dict:
    """All audit tables: ``summary`` (reference vs found), ``groups``, ``types``, ``lengths``,
    ``sentences_per_report``."""
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
            "lengths": mention_lengths(items), "sentences_per_report": sentences_per_report(items)}


# ------------------------------------------------------------------------------------------- split
def split(items: pd.DataFrame, version: str = "atlas-n100-v1") -> SplitManifest:
    """Report-disjoint split (see ``atlaslib.splits``): the first ``n_test`` sentences by seed-hash rank
    over all sentences are the test set; every sentence of a report holding a test sentence leaves
    the train pool; the first ``n_train`` sentences of the remaining pool by the same rank train."""
    if version not in VERSIONS:
        raise ValueError(f"maccrobat: unknown split version {version!r}; known: {', '.join(VERSIONS)}")
    for col in ("item_id", "document"):
        if col not in items.columns:
            raise ValueError(f"maccrobat.split: items frame lacks column {col!r}")
    n_test, n_train = VERSIONS[version]["n_test"], VERSIONS[version]["n_train"]
    order = rank(items["item_id"].tolist(), SEED)
    if len(order) < n_test:
        raise ValueError(f"maccrobat.split: {len(order)} items, fewer than the {n_test} test items of {version}")
    test = order[:n_test]
    doc = items.set_index("item_id")["document"]
    test_docs = set(doc.loc[test])
    pool = [i for i in order if doc.loc[i] not in test_docs]
    if len(pool) < n_train:
        raise ValueError(f"maccrobat.split: only {len(pool)} sentences outside the test reports, "
                         f"{n_train} needed for {version}")
    train = pool[:n_train]
    chosen = set(test) | set(train)
    excluded = [i for i in items["item_id"] if i not in chosen]
    manifest = SplitManifest(
        card="maccrobat", version=version, seed=SEED, train=train, test=test, excluded=excluded,
        rules=(f"test: first {n_test} sentences by seed-hash rank (seed {SEED}) over all sentences; "
               f"train pool: sentences of reports without a test sentence ({len(pool)}); train: first "
               f"{n_train} of the pool by the same rank; excluded: all other sentences."))
    shared = group_disjoint_check(items, manifest.train, manifest.test, "document")
    if shared:  # cannot happen by construction; guards future edits
        raise AssertionError(f"reports on both sides: {sorted(shared)}")
    return manifest


def split_summary(items: pd.DataFrame, manifest: SplitManifest) -> pd.DataFrame:
    """Per side: sentences, reports, words, mentions per type; last row: reports on both sides."""
    idx = items.set_index("item_id")
    rows = []
    for side in ("train", "test", "excluded"):
        sub = idx.loc[getattr(manifest, side)]
        row = {"side": side, "sentences": len(sub), "reports": sub["document"].nunique(),
               "words": int(sub["words"].map(len).sum())}
        for t in TYPES:
            row[t] = int(sum(1 for ms in sub["mentions"] for m in ms if m[0] == t))
        rows.append(row)
    out = pd.DataFrame(rows).set_index("side")
    out.attrs["reports_on_both_sides"] = len(group_disjoint_check(items, manifest.train, manifest.test, "document"))
    return out


# ------------------------------------------------------------------------------------- protocols
def words_to_text(words: Sequence[str]) -> tuple[str, list[int], list[int]]:
    """Words joined by single spaces, with each word's start and end offset in that text."""
    starts, ends, pos = [], [], 0
    for w in words:
        starts.append(pos)
        ends.append(pos + len(w))
        pos += len(w) + 1
    return " ".join(words), starts, ends


def memorize_tags(train: pd.DataFrame, test: pd.DataFrame, casefold: bool = False) -> tuple[list[list[str]], object]:
    """The memorize baseline on the card's words: fit on train sentences (words joined by spaces,
    mentions as character spans), predict test sentences, map matches back to words."""
    from ..models.memorize import PhraseMemorizer

    docs = []
    for words, ms in zip(train["words"], train["mentions"]):
        text, st, en = words_to_text(words)
        docs.append((text, [(st[a], en[b], t) for t, a, b in ms]))
    mem = PhraseMemorizer(casefold=casefold).fit(docs)
    out = []
    for words in test["words"]:
        text, st, en = words_to_text(words)
        first = {s: k for k, s in enumerate(st)}
        last = {e: k for k, e in enumerate(en)}
        spans = [(t, first[s], last[e]) for s, e, t in mem.predict(text) if s in first and e in last]
        out.append(tags_from_mentions(len(words), spans))
    return out, mem


@dataclass
class Outcome:
    """One run's outcome: predictions + metrics, or why it did not run."""
    model: str
    protocol: str
    version: str
    status: str                                    # "ok" | "not_run"
    reason: str | None = None
    capability: str | None = None
    item_ids: list = field(default_factory=list)
    documents: list = field(default_factory=list)
    gold: list = field(default_factory=list)
    pred: list = field(default_factory=list)
    native: list = field(default_factory=list)   # zero-shot heads: the adapter's own labels per word
    scores: dict = field(default_factory=dict)     # span_metrics_with_ci output
    details: dict = field(default_factory=dict)
    overlap: list = field(default_factory=list)
    seconds: float = 0.0

    def metrics(self) -> dict:
        """Cell metrics ``entity_*_<protocol>`` → ``results.metric(...)`` (null with reason when not run)."""
        out = {}
        undefined = {}
        if self.status == "ok":   # the atlas's zero-division rule: an empty denominator is n/a, never 0
            n_pred = sum(len(tag_mentions(p)) for p in self.pred)
            n_gold = sum(len(tag_mentions(g)) for g in self.gold)
            undefined = {"precision": "undefined: no mention predicted" if n_pred == 0 else None,
                         "recall": "undefined: no gold mention" if n_gold == 0 else None}
            both = "undefined: no mention in gold or predictions" if n_pred + n_gold == 0 else None
            undefined.update(f1=both, macro_f1=both)
        for base, key in zip(METRIC_BASES, ("f1", "precision", "recall", "macro_f1")):
            name = CARD.metric_name(base, self.protocol)
            if self.status != "ok":
                out[name] = _results.metric(None, reason=f"not run: {self.reason}")
            elif undefined.get(key):
                out[name] = _results.metric(None, reason=undefined[key])
            else:
                s = self.scores[key]
                out[name] = _results.metric(s["value"], s["ci_low"], s["ci_high"])
        return out

    def table(self) -> pd.DataFrame:
        """Metric table: value and 95 % CI per metric."""
        m = self.metrics()
        return pd.DataFrame([{"metric": k, "value": v["value"], "ci_low": v["ci_low"], "ci_high": v["ci_high"],
                              "reason": v.get("reason")} for k, v in m.items()]).set_index("metric")

    def per_type(self) -> pd.DataFrame:
        """Per-type precision / recall / F1 with CIs and gold support."""
        if self.status != "ok":
            return pd.DataFrame({"status": [f"not run: {self.reason}"]})
        rows = []
        for t, e in self.scores["per_type"].items():
            row = {"type": t, "support": e["support"]}
            for k in ("precision", "recall", "f1"):
                row[k], row[f"{k}_low"], row[f"{k}_high"] = e[k]["value"], e[k]["ci_low"], e[k]["ci_high"]
            rows.append(row)
        return pd.DataFrame(rows).set_index("type")


def profile_info(model: str) -> dict:
    """The registry profile of ``model`` as a dict (``{}`` for the card's own baselines or a name the
    registry cannot resolve)."""
    if model in BASELINES:
        return {}
    try:
        from .. import models

        return models.get_profile(model).to_dict()
    except Exception:
        return {}


def overlap_of(model: str, info: dict | None = None) -> list:
    """``["maccrobat"]`` when the model's profile (or adapter info) declares it was trained on MACCROBAT."""
    prof = profile_info(model)
    trained = list(prof.get("trained_on") or [])
    if info:
        trained += list(info.get("trained_on") or [])
        if isinstance(info.get("profile"), dict):
            trained += list(info["profile"].get("trained_on") or [])
    return ["maccrobat"] if any(str(t).lower().startswith("maccrobat") for t in trained) else []


def run_protocol(items: pd.DataFrame, manifest: SplitManifest, model: str, protocol: str,
                 n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = SEED, adapter=None,
                 retrain: bool = False) -> Outcome:
    """Run one (model, protocol) on the split: ``memorize`` is the card's own baseline (protocol
    ``train_lookup``: it looks up phrases memorised from the train sentences);
    any other name goes through ``atlaslib.models.load_adapter``. Absent weights or a missing
    capability give an Outcome with status ``not_run`` and the reason (never an exception). ``finetune``
    trains the encoder with a new token head (:data:`FINETUNE_RECIPE`; ``retrain`` ignores cached weights)."""
    import time

    if protocol not in CARD.protocols:
        raise ValueError(f"maccrobat: protocol {protocol!r} unknown; expected one of {CARD.protocols}")
    if protocol in BASELINE_PROTOCOL.values() and model not in BASELINES:
        raise ValueError(f"maccrobat: protocol {protocol!r} is the memorize baseline's; model {model!r} runs "
                         f"under {', '.join(PROTOCOL_CAPABILITY)}")
    t0 = time.perf_counter()
    idx = items.set_index("item_id")
    missing = [i for i in manifest.train + manifest.test if i not in idx.index]
    if missing:
        raise ValueError(f"maccrobat: split {manifest.version} names {len(missing)} items absent from the "
                         f"items frame, e.g. {missing[:3]}")
    train, test = idx.loc[manifest.train], idx.loc[manifest.test]
    out = Outcome(model=model, protocol=protocol, version=manifest.version, status="ok",
                  capability=None if model in BASELINES else PROTOCOL_CAPABILITY[protocol],
                  item_ids=list(manifest.test), documents=test["document"].tolist(),
                  gold=[list(t) for t in test["tags"]])
    if model == "memorize":
        if protocol != BASELINE_PROTOCOL["memorize"]:
            raise ValueError(f"maccrobat: the memorize baseline runs under protocol 'train_lookup' only (it "
                             f"learns phrases from the train sentences; it has no head or features), got {protocol!r}")
        pred, mem = memorize_tags(train, test)
        out.details = {"baseline": "atlaslib.models.memorize.PhraseMemorizer", "casefold": False,
                       "threshold": "annotated in > 1/2 of occurrences", "match": "longest first, word boundaries",
                       "n_phrases": len(mem.phrases), "n_candidate_phrases": len(mem.stats)}
    else:
        from ..protocols import tokens as tok

        if adapter is None:
            from .. import models

            try:
                options = ({"max_length": FINETUNE_RECIPE["max_length"], "embed_cache": False}
                           if protocol == "finetune" else {})
                adapter = models.load_adapter(model, PROTOCOL_CAPABILITY[protocol], **options)
            except models.WeightsUnavailable as exc:
                out.status, out.reason = "not_run", "weights unavailable"
                out.details = {"error": str(exc)}
                out.overlap = overlap_of(model)
                out.seconds = time.perf_counter() - t0
                return out
            except models.CapabilityMissing as exc:
                out.status, out.reason = "not_run", f"capability missing: {PROTOCOL_CAPABILITY[protocol]}"
                out.details = {"error": str(exc)}
                out.overlap = overlap_of(model)
                out.seconds = time.perf_counter() - t0
                return out
        info = dict(getattr(adapter, "info", {}) or {})
        out.overlap = overlap_of(model, info)
        if protocol == "zero_shot":
            res = tok.zero_shot_ner(adapter, test["words"].tolist(), NER_LABEL_TABLE)
        elif protocol == "finetune":
            from ..protocols import finetune as FT

            res = FT.finetune_tokens(adapter, list(manifest.train), train["words"].tolist(), train["tags"].tolist(),
                                     test["words"].tolist(), TAGS, FINETUNE_RECIPE, retrain=retrain,
                                     data_sha256={"maccrobat/SHA256SUMS (400 brat files)": SHA256SUMS_DIGEST})
        else:
            res = tok.probe_ner(adapter, train["words"].tolist(), train["tags"].tolist(), test["words"].tolist())
        pred, out.details = res["tags"], res["details"]
        out.native = res.get("native", [])
    out.pred = [list(p) for p in pred]
    out.scores = span_metrics_with_ci(out.gold, out.pred, out.documents, types=TYPES,
                                      n_resamples=n_resamples, seed=seed)
    out.seconds = time.perf_counter() - t0
    return out


def predictions_frame(out: Outcome, items: pd.DataFrame) -> pd.DataFrame:
    """One row per test sentence: words, gold and predicted mentions as text, TP/FP/FN counts."""
    idx = items.set_index("item_id")
    rows = []
    for iid, g, p in zip(out.item_ids, out.gold, out.pred):
        words = idx.loc[iid, "words"]
        gm, pm = set(tag_mentions(g)), set(tag_mentions(p))

        def show(ms):
            return "; ".join(f"{t}: {' '.join(words[a:b + 1])}" for t, a, b in sorted(ms, key=lambda m: m[1]))

        rows.append({"item_id": iid, "text": idx.loc[iid, "text"], "gold": show(gm), "pred": show(pm),
                     "tp": len(gm & pm), "fp": len(pm - gm), "fn": len(gm - pm)})
    return pd.DataFrame(rows).set_index("item_id")


def error_table(out: Outcome, items: pd.DataFrame, limit: int = 30) -> pd.DataFrame:
    """Each error mention with its kind: ``boundary`` (same type, overlapping gold span),
    ``type`` (same span, other type), ``spurious`` (FP, no overlap), ``missed`` (FN, no overlap)."""
    idx = items.set_index("item_id")
    rows = []
    for iid, g, p in zip(out.item_ids, out.gold, out.pred):
        words = idx.loc[iid, "words"]
        gm, pm = set(tag_mentions(g)), set(tag_mentions(p))
        for side, errs, other in (("predicted", pm - gm, gm), ("gold", gm - pm, pm)):
            for t, a, b in sorted(errs, key=lambda m: m[1]):
                ov = [m for m in other if m[1] <= b and a <= m[2]]
                if any(m[1:] == (a, b) for m in ov):
                    kind = "type"
                elif any(m[0] == t for m in ov):
                    kind = "boundary"
                elif ov:
                    kind = "type+boundary"
                else:
                    kind = "spurious" if side == "predicted" else "missed"
                rows.append({"item_id": iid, "side": side, "type": t, "mention": " ".join(words[a:b + 1]),
                             "kind": kind,
                             "overlaps": "; ".join(f"{m[0]}: {' '.join(words[m[1]:m[2] + 1])}" for m in ov)})
    f = pd.DataFrame(rows, columns=["item_id", "side", "type", "mention", "kind", "overlaps"])
    f.attrs["kind_counts"] = f.groupby(["side", "kind"]).size().to_dict() if len(f) else {}
    return f.head(limit) if limit else f


def error_kinds(out: Outcome, items: pd.DataFrame) -> pd.DataFrame:
    """Counts of error kinds (see :func:`error_table`) per side."""
    f = error_table(out, items, limit=0)
    if not len(f):
        return pd.DataFrame(columns=["side", "kind", "count"])
    return f.groupby(["side", "kind"]).size().rename("count").reset_index()


def false_positive_sources(out: Outcome, corpus: Corpus) -> pd.DataFrame:
    """For each predicted mention that is not in gold: the MACCROBAT annotations (kept by the overlap
    rule, all 41 types) under its words. Counts per (predicted type, MACCROBAT type underneath);
    ``(none)`` when no annotation overlaps. Shows, e.g., "tests" that are Lab_value results and
    "problems" that include Biological_structure words."""
    idx = corpus.items.set_index("item_id")
    kept = corpus.entities[corpus.entities.kept]
    by_doc = {d: g for d, g in kept.groupby("document")}
    rows = []
    for iid, g, p in zip(out.item_ids, out.gold, out.pred):
        r = idx.loc[iid]
        ents = by_doc.get(r["document"], kept.iloc[:0])
        for t, a, b in set(tag_mentions(p)) - set(tag_mentions(g)):
            lo, hi = r["offset"] + r["word_spans"][a][0], r["offset"] + r["word_spans"][b][1]
            under = ents[(ents.start < hi) & (ents.end > lo)]["type"].tolist()
            for u in under or ["(none)"]:
                rows.append({"predicted type": t, "MACCROBAT type underneath": u})
    f = pd.DataFrame(rows, columns=["predicted type", "MACCROBAT type underneath"])
    if not len(f):
        return f.assign(count=[])
    return (f.groupby(["predicted type", "MACCROBAT type underneath"]).size().rename("count")
            .reset_index().sort_values("count", ascending=False).reset_index(drop=True))


def guideline_examples(items: pd.DataFrame, entities: pd.DataFrame, item_ids: Sequence[str] = (
        "maccrobat-d002-s005", "maccrobat-d002-s016", "maccrobat-d000-s005")) -> pd.DataFrame:
    """For the given sentences: every kept MACCROBAT entity with its type and mapped group, showing
    what the three-type view keeps (e.g. anatomy and "pain" as separate entities)."""
    idx = items.set_index("item_id")
    rows = []
    for iid in item_ids:
        r = idx.loc[iid]
        ents = entities[(entities.document == r["document"]) & (entities.sentence == r["sent_index"]) & entities.kept]
        for e in ents.sort_values("start").itertuples():
            rows.append({"item_id": iid, "text": e.text, "MACCROBAT type": e.type, "card type": e.group})
    return pd.DataFrame(rows)


CAVEATS = pd.DataFrame([
    {"model": "d4data/biomedical-ner-all", "caveat": "trained on MACCROBAT",
     "effect": "zero-shot numbers are on its own training data: an upper bound, not transfer; cells carry "
               "the overlap marker"},
    {"model": "samrawal/bert-base-uncased_clinical-ner", "caveat": "i2b2/VA 2010 guideline",
     "effect": "i2b2 marks one problem span ('abdominal pain') where MACCROBAT splits anatomy + 'pain'; strict "
               "F1 counts such spans as errors, so it understates concept recall"},
    {"model": "memorize", "caveat": "sees only the 500 train sentences",
     "effect": "a floor: exact phrases seen as mentions; no generalisation"},
    {"model": "every model", "caveat": "gold word cuts",
     "effect": "words are cut at gold mention boundaries, so a boundary inside a run of letters is given away "
               "by the word list: leakage, counted above (and measured on the probe)"},
    {"model": "all-minilm-l6-v2 (probe)", "caveat": "sentence-embedding model, independent word tags",
     "effect": "no sequence model: B/I consistency comes only from the conlleval repair"},
]).set_index("model")


# ------------------------------------------------------------------------------------------- cells
def run_spec(out: Outcome, **parameters) -> _results.RunSpec:
    prof = profile_info(out.model)
    if out.model in BASELINES:
        prof = {"name": out.model, "source": "builtin", "location": "atlaslib.models.memorize.PhraseMemorizer",
                "description": "card baseline, fit on the split's train sentences only"}
    return _results.RunSpec(card="maccrobat", version=out.version, model=out.model, protocol=out.protocol,
                            profile=prof, revision=prof.get("revision"), capability=out.capability,
                            parameters={**parameters, "details": out.details})


#: Slices, as data: slice name -> field and, for numbers, inclusive bands ``(low, high)`` (``None`` = open).
#: ``unit: "mention"`` slices are properties of each mention ``(type, first word, last word)`` read off the
#: gold and the predicted tags (``type``; ``length`` = words), scored on the mentions that fall in the slice
#: (recall over gold, precision over predicted mentions); the other slices are fields of the prediction
#: record (:func:`report_positions`), scored on the sentences that fall in them.
SLICES = {
    "entity type": {"unit": "mention", "field": "type"},
    "mention length (words)": {"unit": "mention", "field": "length", "bands": ((1, 1), (2, 2), (3, 4), (5, None))},
    "sentence position in the case report": {"field": "report_position",
                                             "order": ("first third", "middle third", "last third")},
}


def report_positions(items: pd.DataFrame, item_ids: Sequence[str]) -> list[dict]:
    """Per item: ``sent_index`` (0-based line of the report), ``report_sentences`` (its report's sentences)
    and ``report_position``: first / middle / last third, by ``3 * sent_index // report_sentences``."""
    per_doc = items.groupby("document")["item_id"].size()
    idx = items.set_index("item_id")
    out = []
    for i in item_ids:
        doc, s = idx.at[i, "document"], int(idx.at[i, "sent_index"])
        n = int(per_doc[doc])
        out.append({"sent_index": s, "report_sentences": n,
                    "report_position": ("first third", "middle third", "last third")[min(2, 3 * s // n)]})
    return out


def build_cell(out: Outcome, manifest: SplitManifest, items: pd.DataFrame, **parameters) -> dict:
    """The result cell (``results.make_cell`` or ``results.not_run_cell``) for one outcome."""
    spec = run_spec(out, **parameters)
    test = items.set_index("item_id").loc[manifest.test]
    split_info = {"hash": manifest.hash, "n_train": len(manifest.train), "n_test": len(manifest.test),
                  "test_label_counts": {t: int(sum(1 for ms in test["mentions"] for m in ms if m[0] == t))
                                        for t in TYPES},
                  "test_reports": int(test["document"].nunique())}
    common = dict(split=split_info, data_sha256={"maccrobat/SHA256SUMS (400 brat files)": SHA256SUMS_DIGEST},
                  seeds={"split": SEED, "bootstrap": SEED, "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
                         **({"finetune": FINETUNE_RECIPE["seed"]} if out.protocol == "finetune" else {})},
                  overlap=out.overlap, timing={"wall_seconds": round(out.seconds, 3),
                                               "peak_rss_mb": round(_results.peak_rss_mb(), 1)})
    if out.status != "ok":
        return _results.not_run_cell(spec, out.reason, [CARD.metric_name(b, out.protocol) for b in METRIC_BASES],
                                     **common)
    per_type = {t: {k: e[k] for k in ("precision", "recall", "f1")} | {"support": e["support"]}
                for t, e in out.scores["per_type"].items()}
    preds = [{"item_id": i, "document": d, "gold": g, "pred": p}
             for i, d, g, p in zip(out.item_ids, out.documents, out.gold, out.pred)]
    for row, native in zip(preds, out.native):
        row["native"] = native
    for row, pos in zip(preds, report_positions(items, out.item_ids)):
        row.update(pos)
    return _results.make_cell(spec, metrics=out.metrics(), predictions=preds,
                              extra={"per_type": per_type, "bootstrap": "cluster by document (case report)"},
                              **common)


# ------------------------------------------------------------------------------------------- plots
def bootstrap_samples(out: Outcome) -> tuple[dict, dict]:
    """``(samples, metrics)`` for :func:`atlaslib.plots.bootstrap_distributions`: the resampled values
    of the four metrics, keyed by their cell names, and their ``{value, ci_low, ci_high}``."""
    if out.status != "ok":
        return {}, {}
    samples, metrics = {}, {}
    for base, key in zip(METRIC_BASES, ("f1", "precision", "recall", "macro_f1")):
        name = CARD.metric_name(base, out.protocol)
        samples[name] = out.scores["resamples"][key]
        metrics[name] = out.scores[key]
    return samples, metrics


def plot_bootstrap(out: Outcome):
    """Bootstrap distributions of the four metrics (shared ``atlaslib.plots``), or a note when not run."""
    import matplotlib.pyplot as plt

    from .. import plots

    if out.status != "ok":
        fig, ax = plt.subplots(figsize=(6, 0.8))
        ax.axis("off")
        ax.text(0.5, 0.5, f"{out.model} / {out.protocol}: not run: {out.reason}", ha="center", va="center")
        return fig
    samples, metrics = bootstrap_samples(out)
    return plots.bootstrap_distributions(
        samples, metrics, title=f"{out.model} · {out.protocol} · {out.version}: "
                                f"{len(samples[next(iter(samples))])} resamples of whole case reports")


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



# ------------------------------------------------------------------------------- gold-cut leakage
def natural_word_spans(text: str) -> list[tuple[int, int]]:
    """Word spans of ``text`` without the gold cuts: what a model would see if the card did not cut words
    where mentions start or end (:func:`words_of` with no ``cuts``)."""
    return words_of(text)


def gold_cut_mentions(items: pd.DataFrame) -> dict:
    """How many gold mentions have a boundary that only the gold cuts create: a first character that is
    not the start of a natural word, or a last character that is not the end of one ("hepatosplenomegaly"
    annotated as "splenomegaly" inside one run of letters). Without the cuts such a mention cannot be
    matched exactly at all; with them its boundary is handed to the model in the word list. Returns
    ``{"mentions": all gold mentions, "cut_inside_word": those, "sentences": sentences holding one}``."""
    total = inside = sentences = 0
    for text, spans, ms in zip(items["text"], items["word_spans"], items["mentions"]):
        nat = natural_word_spans(text)
        starts, ends = {a for a, _ in nat}, {b for _, b in nat}
        hit = 0
        for _, first, last in ms:
            total += 1
            if spans[first][0] not in starts or spans[last][1] not in ends:
                hit += 1
        inside += hit
        sentences += bool(hit)
    return {"mentions": total, "cut_inside_word": inside, "sentences": sentences}


def char_mentions(tags: Sequence[str], spans: Sequence[tuple[int, int]]) -> set[tuple[str, int, int]]:
    """Mentions of IOB2 ``tags`` as character spans ``(type, start of first word, end of last word)``."""
    return {(t, spans[a][0], spans[b][1]) for t, a, b in tag_mentions(list(tags))}


def char_span_f1(gold: Sequence[set], pred: Sequence[set]) -> dict:
    """Micro P/R/F1 over character-span mentions pooled over sentences: a mention counts when its type,
    start and end character match. P = TP / (TP + FP), R = TP / (TP + FN), F1 = 2·TP / (2·TP + FP + FN)
    (0 when there is nothing to count)."""
    tp = sum(len(g & p) for g, p in zip(gold, pred))
    fp = sum(len(p - g) for g, p in zip(gold, pred))
    fn = sum(len(g - p) for g, p in zip(gold, pred))
    return {"tp": tp, "fp": fp, "fn": fn, "precision": tp / (tp + fp) if tp + fp else 0.0,
            "recall": tp / (tp + fn) if tp + fn else 0.0, "f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0}


def uncut_tags(text: str, spans: Sequence[tuple[int, int]], gold_tags: Sequence[str]) -> tuple[list[str], list[str]]:
    """Natural words of ``text`` and IOB2 tags projected onto them: a gold mention (read off ``gold_tags``
    over the cut ``spans``) covers every natural word it overlaps; a mention whose words are already
    taken by an earlier one is left out (it cannot be represented without the cuts)."""
    nat = natural_word_spans(text)
    tags = ["O"] * len(nat)
    for t, cs, ce in sorted(char_mentions(gold_tags, spans), key=lambda m: m[1]):
        ws = [k for k, (a, b) in enumerate(nat) if a < ce and cs < b]
        if not ws or any(tags[k] != "O" for k in ws):
            continue
        tags[ws[0]] = f"B-{t}"
        for k in ws[1:]:
            tags[k] = f"I-{t}"
    return [text[a:b] for a, b in nat], tags


def probe_without_gold_cuts(items: pd.DataFrame, manifest: SplitManifest, adapter, pred_with_cuts) -> dict:
    """The leakage of the gold cuts, measured on the word probe: the same probe trained and tested on the
    natural words (no cuts at gold boundaries), both runs scored against the exact gold character spans
    (:func:`char_span_f1`). ``pred_with_cuts``: the run's own test tags on the cut words (its F1 in
    character spans equals its word-level F1). Returns both scores and their difference."""
    from ..protocols import tokens as tok

    idx = items.set_index("item_id")
    train, test = idx.loc[manifest.train], idx.loc[manifest.test]
    tr = [uncut_tags(t, s, g) for t, s, g in zip(train["text"], train["word_spans"], train["tags"])]
    te_words = [natural_word_spans(t) for t in test["text"]]
    res = tok.probe_ner(adapter, [w for w, _ in tr], [g for _, g in tr],
                        [[t[a:b] for a, b in sp] for t, sp in zip(test["text"], te_words)])
    gold = [char_mentions(g, s) for g, s in zip(test["tags"], test["word_spans"])]
    with_cuts = char_span_f1(gold, [char_mentions(p, s) for p, s in zip(pred_with_cuts, test["word_spans"])])
    without = char_span_f1(gold, [char_mentions(p, s) for p, s in zip(res["tags"], te_words)])
    return {"with_gold_cuts": with_cuts, "without_gold_cuts": without,
            "f1_difference": with_cuts["f1"] - without["f1"], **{f"test_{k}": v for k, v in
                                                                 gold_cut_mentions(test.reset_index()).items()}}


# --------------------------------------------------------------------------------------- the card contract
# Thin entry points with the same names and shapes on every card (see atlaslib.cards); the notebook still
# calls run_protocol / build_cell, so both paths give the same numbers (tests/cards/test_contract.py).

def audit_items(items: pd.DataFrame, data_dir=None) -> dict:
    """Contract entry point: sentences, reports and kept mentions per type, counted on the items (the full
    tables are :func:`audit` on the corpus)."""
    per_type = {t: 0 for t in TYPES}
    for ms in items["mentions"]:
        for m in ms:
            per_type[m[0]] += 1
    return {"n_items": int(len(items)), "documents": int(items["document"].nunique()), "mentions": per_type}


def predict(items: pd.DataFrame, manifest: SplitManifest, model: str, protocol: str, *, data_dir=None,
            **options) -> list[dict]:
    """Contract entry point over :func:`run_protocol`: one record per test sentence (``gold`` /
    ``prediction`` IOB2 tags over its words, ``score`` None, ``document`` the case report); a not-run
    outcome raises :class:`atlaslib.cards.NotRun` with its reason."""
    from . import NotRun, record

    out = run_protocol(items, manifest, model, protocol, **options)
    if out.status != "ok":
        raise NotRun(out.reason)
    return [record(iid, list(g), list(p), None, document=d)
            for iid, g, p, d in zip(out.item_ids, out.gold, out.pred, out.documents)]


def score(records: list[dict], protocol: str, *, model: str | None = None,
          n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = SEED) -> dict:
    """Contract entry point over :func:`atlaslib.metrics.spans.span_metrics_with_ci` and
    :meth:`Outcome.metrics`: exact-span entity F1 / precision / recall / macro F1 with intervals from a
    bootstrap over whole case reports (``document``)."""
    out = Outcome(model=model or "", protocol=protocol, version="", status="ok",
                  item_ids=[r["item_id"] for r in records], documents=[r["document"] for r in records],
                  gold=[list(r["gold"]) for r in records], pred=[list(r["pred"]) for r in records])
    out.scores = span_metrics_with_ci(out.gold, out.pred, out.documents, types=TYPES, n_resamples=n_resamples,
                                      seed=seed)
    return out.metrics()
