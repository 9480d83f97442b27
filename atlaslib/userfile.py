"""Reading the text of a file a user gives (a profiles or matrix file, predictions, cases, answers, a result
cell, a model's config): the one set of checks before :mod:`atlaslib.yamlio` or :mod:`atlaslib.jsonio` parses it.

:func:`read_text` answers every problem with one error of the caller's class naming the file: missing, a folder,
not a regular file (a named pipe would block the reader), larger than the caller allows, not UTF-8 text (a
byte-order mark is fine), or not readable.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from . import fsio


def read_text(path: str | os.PathLike, *, what: str, error=ValueError, max_bytes: int) -> str:
    """The text of the user file ``path``: a regular file of at most ``max_bytes`` bytes in UTF-8 (a
    byte-order mark is dropped); ``what`` names the kind of file the caller expects ("a result cell")."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error(f"{path}: no such file; expected {what}") from None
    except OSError as exc:
        raise error(f"{path} cannot be read ({exc.strerror or type(exc).__name__}); expected {what}") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{path} is a folder; expected {what}")
    if not stat.S_ISREG(st.st_mode):  # a named pipe would block the reader, a device never end
        raise error(f"{fsio.NotAFile(path, fsio.kind_of(st.st_mode), what)}")
    if st.st_size > max_bytes:
        raise error(f"{path} is {st.st_size:,} bytes; {what} is at most {max_bytes:,} bytes")
    try:
        with fsio.open_regular(path, "rb") as fh:  # checked again on the open descriptor: nothing swapped in
            data = fh.read(max_bytes + 1)
    except fsio.NotAFile as exc:
        raise error(f"{exc}; expected {what}") from None
    except OSError as exc:
        raise error(f"{path} cannot be read ({exc.strerror or type(exc).__name__})") from None
    if len(data) > max_bytes:
        raise error(f"{path} is more than {max_bytes:,} bytes; {what} is at most {max_bytes:,} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{path} is not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x}); save it as UTF-8") \
            from None
