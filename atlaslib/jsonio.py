"""The one reader of the JSON users give the atlas: bounded, and every problem one error naming the file.

Predictions files (JSONL rows), NLI case and openmed fixture files, a course's answers, result cells, a local
model's ``config.json`` (and a cached hub config) are read here. :func:`loads` parses one text (a whole file,
or one row of a JSONL file) and :func:`load` reads one file; both answer every problem with one error of the
class the caller passes (``error=``, default :class:`JsonError`) that names where (``FILE`` or ``FILE, row N``)
and, when the caller says it, what was expected:

- not JSON (the message, line and column of the decoder);
- nested more than :data:`MAX_DEPTH` arrays and objects deep (``'[' * 200000`` would otherwise end in a
  ``RecursionError`` in the decoder, or in whatever walks the data after it);
- a number of more digits than Python turns into an integer (``sys.get_int_max_str_digits()``, 4,300 by
  default), with the line and column of the number;
- an object that gives one key twice (``{"label": "A", "label": "B"}``: the decoder would silently keep the
  last), naming the key;
- (:func:`load`) the path is missing, a folder or not a regular file (a named pipe would block), larger than
  ``max_bytes``, or not UTF-8 text (a byte-order mark is fine).

A number that JSON reads as an integer can still be too large for a float (``1`` and 400 zeros):
:func:`as_float` is the one conversion of a user's number, None for anything that is not a finite real number.
"""
from __future__ import annotations

import json
import math
import os
import re
import sys
from typing import Any

#: arrays and objects nested deeper than this are refused (the atlas's own files are a few levels deep)
MAX_DEPTH = 100
#: a JSON file larger than this is refused unless the caller allows more
MAX_BYTES = 256 * 2 ** 20
#: one row of a JSONL or CSV file longer than this is refused (a prediction row is a few hundred bytes)
MAX_ROW_BYTES = 16 * 2 ** 20


class JsonError(ValueError):
    """A user JSON file (or row) cannot be read, is not JSON, or is nested too deeply."""


def describe(value) -> str:
    """What a JSON value is, for an error message: 'an object', 'an array', 'text', 'the number 3', 'null'."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and value.bit_length() > 100:
        return f"the integer {long_integer(value)}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, str):
        return "text"
    return f"a {type(value).__name__}"


def long_integer(value: int) -> str:
    """A long integer for a message: its first digits and how many it has (``100000000000… (401 digits)``)."""
    try:
        digits = str(abs(value))
    except ValueError:  # more digits than Python writes out (sys.get_int_max_str_digits)
        return f"of more than {sys.get_int_max_str_digits():,} digits"
    return f"{'-' if value < 0 else ''}{digits[:12]}… ({len(digits):,} digits)" if len(digits) > 15 else digits


def as_float(value) -> float | None:
    """``value`` as a finite float when it is a real number (not a bool) whose float is finite; None for
    anything else: text, null, NaN, infinity, or an integer too large for a float (``OverflowError``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        x = float(value)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None


def _depth(data) -> int:
    """How many arrays and objects deep ``data`` is (iterative: no recursion)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, dict):
            node = node.values()
        elif not isinstance(node, list):
            continue
        deepest = max(deepest, d)
        if d > MAX_DEPTH:
            return d
        stack.extend((child, d + 1) for child in node if isinstance(child, (dict, list)))
    return deepest


class _DuplicateKey(Exception):
    """Raised by :func:`_unique_keys` for an object that gives ``key`` twice."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list) -> dict:
    """The decoder's ``object_pairs_hook``: the object of ``pairs``, or :class:`_DuplicateKey` for a key given
    twice (JSON leaves it to the reader; Python's keeps the last silently)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


def _at(text: str, index: int, row: int | None) -> str:
    """Where character ``index`` of ``text`` stands: ``column C`` in a row, else ``line L, column C``."""
    col = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"column {col}" if row is not None else f"line {text.count(chr(10), 0, index) + 1}, column {col}"


def loads(text: str, where: str, *, row: int | None = None, error=JsonError, expected: str = "") -> Any:
    """The JSON value of ``text`` under the rules of this module. ``where`` names it in messages (a file), ``row``
    the row of a JSONL file it is (messages then say ``WHERE, row N`` and a column); ``expected`` (optional)
    says what it should have been."""
    if row is not None:
        where = f"{where}, row {row}" if where else f"row {row}"
    tail = f"; expected {expected}" if expected else ""
    deep = (f"{where}: arrays or objects nested more than {MAX_DEPTH} levels deep; the atlas reads at most "
            f"{MAX_DEPTH}{tail}")
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        key = exc.key if len(exc.key) <= 60 else exc.key[:59] + "…"
        raise error(f"{where}: an object gives the key {key!r} twice (a reader would silently keep one of the two "
                    f"values); give each key once{tail}") from None
    except json.JSONDecodeError as exc:
        raise error(f"{where}: not valid JSON ({_at(text, exc.pos, row)}: {exc.msg}){tail}") from None
    except RecursionError:
        raise error(deep) from None
    except ValueError:  # an integer of more digits than int() takes (sys.set_int_max_str_digits)
        limit = sys.get_int_max_str_digits()
        m = re.compile(r"-?\d{%d,}" % (limit + 1)).search(text)
        what = f"a number of {len(m.group().lstrip('-')):,} digits (at {_at(text, m.start(), row)})" if m else \
            "a number"
        raise error(f"{where}: {what}; a number has at most {limit:,} digits{tail}") from None
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(data) > MAX_DEPTH:
        raise error(deep)
    return data


def read_text(path: str | os.PathLike, *, what: str = "a JSON file", error=JsonError,
              max_bytes: int = MAX_BYTES) -> str:
    """The text of the user file ``path`` (:func:`atlaslib.userfile.read_text`: a regular UTF-8 file of at most
    ``max_bytes`` bytes), one error naming the file otherwise."""
    from .userfile import read_text as read

    return read(path, what=what, error=error, max_bytes=max_bytes)


def load(path: str | os.PathLike, *, what: str = "a JSON file", error=JsonError, max_bytes: int = MAX_BYTES,
         expected: str = "") -> Any:
    """The JSON value of the user file ``path`` (:func:`read_text`, then :func:`loads`); ``what`` names the
    kind of file in messages ("a result cell", "the answers file"), ``expected`` the shape it should have."""
    return loads(read_text(path, what=what, error=error, max_bytes=max_bytes), str(path), error=error,
                 expected=expected)


def load_lines(path: str | os.PathLike, *, what: str = "a JSONL file", error=JsonError, max_bytes: int = MAX_BYTES,
               expected: str = "") -> list[tuple[int, Any]]:
    """``(row, value)`` of each non-blank line of the JSONL file ``path`` (rows counted from 1, blank lines
    included in the count); each row read by :func:`loads`, so an error names the file and the row."""
    text = read_text(path, what=what, error=error, max_bytes=max_bytes)
    return [(n, loads(line, str(path), row=n, error=error, expected=expected))
            for n, line in enumerate(text.splitlines(), 1) if line.strip()]
