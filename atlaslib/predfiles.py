"""Prediction files as the atlas reads them, for any card: JSONL, CSV or CoNLL rows of item ids and answers
(:func:`read_predictions`, given what the answers are: a label per item or a tag per word), streamed row by
row, each problem named with its file and row (:class:`PredictionsError`). One floor below the cards: a card's
own scorer reads with it, and so does :mod:`atlaslib.external` (which adds the Anafora folders of TempEval).
"""
from __future__ import annotations

import contextlib
import csv
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import fsio, jsonio
from .jsonio import long_integer

MAX_LISTED = 5


class PredictionsError(ValueError):
    """A predictions file (or a prediction function's output) does not fit the card's split."""


def fail(where: str, problems: list[str]) -> None:
    """Raise one :class:`PredictionsError` listing up to :data:`MAX_LISTED` problems."""
    if not problems:
        return
    shown = problems[:MAX_LISTED]
    more = len(problems) - len(shown)
    text = f"{where}: " + ("; ".join(shown) if len(shown) == 1 else
                           f"{len(problems)} problems: " + "; ".join(shown))
    if more > 0:
        text += f"; and {more} more"
    raise PredictionsError(text)


@dataclass
class Pred:
    """One prediction as read: its row in the file (1-based), item id, label or tags, optional score."""

    row: int
    item_id: str
    label: Any = None
    score: float | None = None
    words: list | None = None  # CoNLL: the words as written, to check alignment


def at(p: "Pred") -> str:
    """Where a prediction sits: ``row 3`` in a file, ``folder <doc>`` in an Anafora folder."""
    return f"row {p.row}" if isinstance(p.row, int) else str(p.row)


def short(value, n: int = 40) -> str:
    """A predicted value for an error message (never input text), cut to ``n`` characters (an integer too long
    to write out is described by its number of digits)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 3 * n:
        return long_integer(value)
    s = repr(value)
    return s if len(s) <= n else s[: n - 1] + "…"



def check_path(path: Path, fmt: str) -> None:
    """A predictions path that can be read: PredictionsError naming what it is otherwise. ``fmt``: what the
    answers are (``label``, ``tags`` or ``anafora``)."""
    expected = ("an Anafora folder" if fmt == "anafora" else
                "a JSONL or CSV file" + (" or a CoNLL file" if fmt == "tags" else ""))
    other = fsio.kind(path)
    if other is not None and other != "a folder":  # a folder is refused below where the format wants a file
        raise PredictionsError(f"{path}: {other}, not a file; expected {expected}")
    if not path.exists():
        raise PredictionsError(f"{path}: no such file or folder; expected {expected}")


def _lines(path: Path):
    """``(row, text)`` of each line of a UTF-8 file (a byte-order mark at the start is dropped), read as a
    stream: the file is never held whole. A byte that is not UTF-8 raises PredictionsError with its offset, a
    row longer than :data:`atlaslib.jsonio.MAX_ROW_BYTES` PredictionsError naming the row."""
    offset = 0
    limit = jsonio.MAX_ROW_BYTES
    try:
        fh = fsio.open_regular(path, "rb")
    except fsio.NotAFile as exc:
        raise PredictionsError(str(exc)) from None
    with fh:
        for row, raw in enumerate(iter(lambda: fh.readline(limit + 1), b""), 1):
            if len(raw) > limit:
                raise PredictionsError(f"{path}: row {row} is longer than {limit:,} bytes; expected one prediction "
                                       f"per row (a few hundred bytes)")
            if row == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw, offset = raw[3:], 3
            try:
                yield row, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise PredictionsError(f"{path}: not UTF-8 text (row {row}, byte {offset + exc.start} of the "
                                       f"file)") from None
            offset += len(raw)


def read_predictions(path: str | Path, fmt: str, max_rows: int | None = None, who: str = "this card") -> list[Pred]:
    """Parse a predictions file of answers ``fmt`` (``label``: one label per item, ``tags``: one tag per word)
    into :class:`Pred` rows, the file format (JSONL, CSV, CoNLL) from the suffix, else sniffed; streamed line by
    line, keeping only each row's id, answer and score; a file with more than ``max_rows`` rows is refused once
    it has that many. ``who`` names the reader in an error (a card's name)."""
    if fmt not in ("label", "tags"):
        raise ValueError(f"parameter fmt: {fmt!r}; expected 'label' or 'tags'")
    path = Path(path)
    check_path(path, fmt)
    if path.is_dir():
        raise PredictionsError(f"{path}: a folder; expected a JSONL or CSV file"
                               + (" or a CoNLL file" if fmt == "tags" else ""))
    with contextlib.closing(_lines(path)) as lines:
        first = next((ln.strip() for _, ln in lines if ln.strip()), "")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        kind = "csv"
    elif suffix == ".conll" or first.startswith("# item_id"):
        kind = "conll"
    elif suffix in (".jsonl", ".json", ".ndjson") or first.startswith("{"):
        kind = "jsonl"
    else:
        kind = "csv"
    if kind == "conll" and fmt != "tags":
        raise PredictionsError(f"{path}: CoNLL is for tags (one per word, as MACCROBAT's); {who} takes JSONL or CSV")
    with contextlib.closing(_lines(path)) as lines:
        if kind == "conll":
            return _read_conll(path, lines, max_rows)
        return {"csv": _read_csv, "jsonl": _read_jsonl}[kind](path, lines, fmt, max_rows)


def _too_many(path: Path, n: int, max_rows: int | None) -> None:
    if max_rows is not None and n > max_rows:
        raise PredictionsError(f"{path}: more than {max_rows:,} predictions, far more than the split's test items; "
                               f"was the file made for this card and version?")


def _read_jsonl(path: Path, lines, key: str, max_rows: int | None = None) -> list[Pred]:
    out, problems = [], []
    for row, line in lines:
        if not line.strip():
            continue
        try:
            obj = jsonio.loads(line, "", row=row, error=PredictionsError,
                               expected=f"one object per line like {{\"item_id\": ..., \"{key}\": ...}}")
        except PredictionsError as exc:
            problems.append(str(exc))
            continue
        if not isinstance(obj, dict):
            problems.append(f"row {row}: a JSON {type(obj).__name__}, expected an object with item_id and {key}")
            continue
        iid = obj.get("item_id")
        if not isinstance(iid, str) or not iid:
            problems.append(f"row {row}: no string 'item_id'")
            continue
        if key not in obj:
            problems.append(f"row {row} (id {iid!r}): no '{key}'")
            continue
        out.append(Pred(row, iid, obj[key], obj.get("score")))
        _too_many(path, len(out), max_rows)
    fail(str(path), problems)
    return out


class _Rows:
    """The text of ``lines`` (``(row, text)`` pairs) for :mod:`csv`, remembering the row where the record being
    read starts (``first``, its first row that is not blank) and the last row it took (``last``): a record that
    took more than one row holds a quote that does not close on its row."""

    def __init__(self, lines):
        self.lines, self.first, self.last = lines, None, 0

    def __iter__(self):
        return self

    def __next__(self) -> str:
        row, text = next(self.lines)
        if self.first is None and text.strip():
            self.first = row
        self.last = row
        return text

    def record(self, reader, path: Path, expected: str):
        """The next record of ``reader`` (StopIteration at the end); PredictionsError naming the row for a
        quote left open (the rest of the file read as one field) or a record :mod:`csv` cannot read."""
        self.first = None
        try:
            rec = next(reader)
        except csv.Error as exc:
            if self.first is not None and self.last > self.first:
                raise PredictionsError(self._open_quote(path, expected)) from None
            what = (f"a field longer than {csv.field_size_limit():,} characters" if "field larger" in str(exc)
                    else f"not readable as CSV ({exc})")
            raise PredictionsError(f"{path}: row {self.last}: {what}; expected {expected}") from None
        if self.first is not None and self.last > self.first:
            raise PredictionsError(self._open_quote(path, expected))
        if self.first is None:
            self.first = self.last
        return rec

    def _open_quote(self, path: Path, expected: str) -> str:
        return (f"{path}: row {self.first}: a field opens a quote (\") that does not close on its row (rows "
                f"{self.first}-{self.last} were read as one record); close the quote or drop it; expected "
                f"{expected}")


def _read_csv(path: Path, lines, key: str, max_rows: int | None = None) -> list[Pred]:
    columns = f"item_id,{key}" + ("[,score]" if key == "label" else "")
    rows = _Rows(lines)
    reader = csv.reader(rows)
    header = []
    while not header:  # blank rows before the header are skipped
        try:
            header = [h.strip() for h in rows.record(reader, path, f"a header row {columns}")]
        except StopIteration:
            return []
    if "item_id" not in header or key not in header:
        raise PredictionsError(f"{path}: row {rows.first}: the header must name the columns item_id and {key}"
                               + (" (and optionally score)" if key == "label" else "")
                               + f"; found {', '.join(header) or 'nothing'}")
    for col in ("item_id", key, "score"):
        at = [i for i, h in enumerate(header, 1) if h == col]
        if len(at) > 1:
            raise PredictionsError(f"{path}: row {rows.first}: the header names the column {col!r} {len(at)} times "
                                   f"(columns {', '.join(map(str, at))}), so which one holds it is ambiguous; "
                                   f"expected each column once: {columns}")
    expected = f"one prediction per row: {columns}"
    out, problems = [], []
    while True:
        try:
            rec = rows.record(reader, path, expected)
        except StopIteration:
            break
        row = rows.first
        if not rec:  # a blank row
            continue
        if len(rec) > len(header):
            problems.append(f"row {row}: more fields than the header has")
            continue
        rec = dict(zip(header, rec))
        iid = (rec.get("item_id") or "").strip()
        if not iid:
            problems.append(f"row {row}: empty item_id")
            continue
        value = rec.get(key)
        if value is None:
            problems.append(f"row {row} (id {iid!r}): fewer fields than the header has")
            continue
        value = value.split() if key == "tags" else value.strip()
        score = (rec.get("score") or "").strip()
        if score:
            try:
                score = float(score)
            except ValueError:
                problems.append(f"row {row} (id {iid!r}): score is not a number")
                continue
        out.append(Pred(row, iid, value, score if score != "" else None))
        _too_many(path, len(out), max_rows)
    fail(str(path), problems)
    return out


def _read_conll(path: Path, lines, max_rows: int | None = None) -> list[Pred]:
    out, problems, cur = [], [], None
    for row, line in lines:
        line = line.rstrip("\r\n")
        if not line.strip():
            cur = None
            continue
        m = re.match(r"#\s*item_id\s*=\s*(\S+)\s*$", line)
        if m:
            cur = Pred(row, m.group(1), [], None, [])
            out.append(cur)
            _too_many(path, len(out), max_rows)
            continue
        if line.startswith("#"):
            continue
        if cur is None:
            problems.append(f"row {row}: a word line outside an item; each item starts with '# item_id = <id>'")
            continue
        parts = line.split("\t") if "\t" in line else line.split()
        if len(parts) < 2:
            problems.append(f"row {row} (id {cur.item_id!r}): expected 'word<TAB>tag'")
            continue
        cur.words.append(parts[0])
        cur.label.append(parts[-1].strip())
    fail(str(path), problems)
    return out
