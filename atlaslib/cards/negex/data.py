"""NegEx test kit card: is the named clinical concept negated in its sentence?

Data: ``Annotations-1-120-random.txt`` of GenNegEx 1.2 (chapmanbe/negex at a pinned commit): TAB-separated
with Excel-style quoting, CRLF, no header; columns number, concept, sentence, decision. 2,376 rows
(491 Negated / 1,885 Affirmed). The 11 rows whose stripped concept does not occur (case-insensitively) in
the sentence are dropped, leaving 2,365 items, ``item_id = "negex-%04d" % number``.

Normalisation and marking
-------------------------
- ``clean(text)``: every run of whitespace (spaces, tabs, CR/LF) becomes one space; ends stripped.
  Report headers inside sentences are kept verbatim.
- The model input wraps the target occurrence: ``... or [entity] AIR HUNGER [entity].``. Among the
  case-insensitive occurrences of the cleaned concept in the cleaned sentence, the first one written in
  upper case (its text equals its upper-cased text and has a letter) is the target; when none is upper
  case, the first occurrence.
- ``sentence_key = sha256(NFKC(clean(sentence)).casefold())``: rows that share a sentence (the kit
  upper-cases a different concept in each copy) share a key, so a sentence never sits on both sides of
  a split.
"""
from __future__ import annotations

import csv
import hashlib
import io
import re
import unicodedata
from pathlib import Path

import pandas as pd

from ...sources import resolve
from .card import ANNOTATIONS, MARK, POSITIVE

class NegexDataError(ValueError):
    """The annotation file does not have the expected shape."""


_WS = re.compile(r"\s+")


def clean(text: str) -> str:
    """Collapse every whitespace run to one space and strip the ends."""
    return _WS.sub(" ", text).strip()


def sentence_key(sentence: str) -> str:
    """sha256 of ``NFKC(clean(sentence)).casefold()`` (see module docstring)."""
    norm = unicodedata.normalize("NFKC", clean(sentence)).casefold()
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()


def find_target(sentence: str, concept: str) -> tuple[int, int] | None:
    """(start, end) of the target occurrence of ``concept`` in ``sentence`` (both cleaned), or None."""
    s, c = clean(sentence), clean(concept)
    if not c:
        return None
    hits = [m.start() for m in re.finditer(re.escape(c.casefold()), s.casefold())]
    if not hits:
        return None
    for start in hits:
        text = s[start:start + len(c)]
        if text == text.upper() and any(ch.isalpha() for ch in text):
            return start, start + len(c)
    return hits[0], hits[0] + len(c)


def mark(sentence: str, concept: str) -> str:
    """The model input: the cleaned sentence with the target wrapped as ``[entity] X [entity]``."""
    s = clean(sentence)
    span = find_target(s, concept)
    if span is None:
        raise NegexDataError(f"concept {concept!r} does not occur in sentence {s[:80]!r}")
    a, b = span
    return f"{s[:a]}{MARK} {s[a:b]} {MARK}{s[b:]}"


def read_rows(path: str | Path) -> pd.DataFrame:
    """All rows of the kit file as a frame (number, concept, sentence, decision, row), CSV-unquoted."""
    path = Path(path)
    text = path.read_bytes().decode("utf-8")
    rows = []
    for lineno, rec in enumerate(csv.reader(io.StringIO(text, newline=""), delimiter="\t"), 1):
        if not rec:
            continue
        if len(rec) != 4:
            raise NegexDataError(f"{path}: row {lineno}: expected 4 TAB-separated columns "
                                 f"(number, concept, sentence, decision), got {len(rec)}")
        number, concept, sentence, decision = rec
        if not number.strip().isdigit():
            raise NegexDataError(f"{path}: row {lineno}: column 1 (number) should be an integer, got {number!r}")
        if decision.strip() not in ("Negated", "Affirmed"):
            raise NegexDataError(f"{path}: row {lineno}: column 4 (decision) should be Negated or Affirmed, "
                                 f"got {decision!r}")
        rows.append({"row": lineno, "number": int(number), "concept": concept, "sentence": sentence,
                     "decision": decision.strip().lower()})
    frame = pd.DataFrame(rows)
    dup = frame["number"].duplicated()
    if dup.any():
        raise NegexDataError(f"{path}: row {int(frame.loc[dup, 'row'].iloc[0])}: duplicate number "
                             f"{int(frame.loc[dup, 'number'].iloc[0])}")
    frame["item_id"] = frame["number"].map(lambda n: f"negex-{n:04d}")
    frame["concept_found"] = [c.strip().casefold() in s.casefold()
                              for c, s in zip(frame["concept"], frame["sentence"])]
    return frame


def load_rows(data_dir=None) -> pd.DataFrame:
    return read_rows(resolve(ANNOTATIONS, data_dir))


def items_from_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Items: rows whose concept occurs in the sentence, with the model inputs and keys."""
    kept = rows[rows["concept_found"]].copy()
    kept["concept"] = kept["concept"].map(clean)
    kept["text"] = [mark(s, c) for s, c in zip(kept["sentence"], kept["concept"])]
    kept["sentence_clean"] = kept["sentence"].map(clean)
    kept["sentence_key"] = kept["sentence"].map(sentence_key)
    kept["label"] = (kept["decision"] == POSITIVE).astype(int)
    kept["n_concepts"] = kept.groupby("sentence_key")["item_id"].transform("size").astype(int)
    cols = ["item_id", "number", "concept", "sentence_clean", "text", "decision", "label", "sentence_key",
            "n_concepts"]
    return kept[cols].rename(columns={"sentence_clean": "sentence"}).reset_index(drop=True)


def load_items(data_dir=None) -> pd.DataFrame:
    return items_from_rows(load_rows(data_dir))


# -- audit -------------------------------------------------------------------------------------------

HEADER_RE = re.compile(r"\b([A-Z][A-Z /&-]{2,}[A-Z]):")


def _shorten(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def audit(rows: pd.DataFrame, items: pd.DataFrame) -> dict:
    """Counts for the data audit: rows, label balance, dropped rows, sentence lengths, header fragments."""
    lengths = items["sentence"].str.len()
    headers = items["sentence"].str.findall(HEADER_RE)
    return {
        "counts": pd.DataFrame({
            "rows": rows["decision"].value_counts(),
            "items": items["decision"].value_counts(),
        }).rename_axis("decision").reindex(["negated", "affirmed"]).assign(
            dropped=lambda d: d["rows"] - d["items"]),
        "dropped": rows.loc[~rows["concept_found"], ["item_id", "concept", "sentence", "decision"]]
                       .assign(concept=lambda d: d["concept"].map(lambda t: _shorten(t, 50)),
                               sentence=lambda d: d["sentence"].map(lambda t: _shorten(clean(t), 90))),
        "sentence_length": lengths.describe().round(1),
        "long_sentences": int((lengths > 300).sum()),
        "distinct_sentences": int(items["sentence_key"].nunique()),
        "items_with_header_fragment": int((headers.str.len() > 0).sum()),
        "top_headers": headers.explode().dropna().value_counts().head(10),
    }
