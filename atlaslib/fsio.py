"""Reading files that someone else put there: a regular file, or refused by name.

A named pipe (FIFO) makes its reader wait until a writer comes, which may be never; a character device
(``/dev/zero``) never ends; a socket cannot be read at all. Reading one of them where a data file,
predictions, a reference annotation or an answers file belongs hangs the command or fails far from the
cause. Every reader of such files opens them with :func:`open_regular` (or :func:`read_bytes` /
:func:`read_text`): the path is opened without blocking (``O_NONBLOCK``, which a FIFO without a writer
honours), the open descriptor is checked with ``fstat`` (so nothing can be swapped in between the check and
the read), and only a regular file is handed back, as an ordinary blocking file object. Anything else raises
:class:`NotAFile`, naming the path and what it is. Symbolic links are followed: what counts is what they
point at.

This module imports nothing of atlaslib: every reader, from :mod:`atlaslib.sources` up, can use it.
"""
from __future__ import annotations

import io
import os
import stat
from pathlib import Path

#: what a path is when it is not a regular file, in the words a message uses
KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device (like /dev/null)"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


class NotAFile(ValueError):
    """A path that exists but is not a regular file (a pipe, a device, a socket, a folder). Its message is one
    line: ``PATH: a named pipe (FIFO), not a file`` (and what was expected, when the reader says)."""

    def __init__(self, path, what: str, expected: str | None = None):
        self.path, self.what = Path(path), what
        super().__init__(f"{path}: {what}, not a file" + (f"; expected {expected}" if expected else ""))


def kind_of(mode: int) -> str | None:
    """What a ``st_mode`` is when it is not a regular file (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in KINDS if test(mode)), "not a regular file")


def kind(path) -> str | None:
    """What ``path`` is when it exists but is not a regular file; None for a regular file or a path that does
    not exist (or cannot be looked at)."""
    try:
        return kind_of(os.stat(path).st_mode)
    except OSError:
        return None


def open_regular(path, mode: str = "rb", *, encoding: str | None = None, errors: str | None = None,
                 newline: str | None = None, expected: str | None = None):
    """``open(path, mode)`` for reading (``"r"`` or ``"rb"``), refusing anything but a regular file with
    :class:`NotAFile` before a byte is read and without ever blocking on a pipe. OSError as ``open`` raises it
    for a path that is missing or cannot be read."""
    if mode not in ("r", "rb", "rt"):
        raise ValueError(f"open_regular reads only (mode 'r' or 'rb'), not {mode!r}")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        what = kind_of(os.fstat(fd).st_mode)
        if what is not None:
            raise NotAFile(path, what, expected)
        os.set_blocking(fd, True)
        raw = io.FileIO(fd, "r", closefd=True)
        raw.name = os.fspath(path)                  # the path, not the descriptor, in reprs and parsers' errors
    except BaseException:
        os.close(fd)
        raise
    buffered = io.BufferedReader(raw)
    if mode == "rb":
        return buffered
    return io.TextIOWrapper(buffered, encoding=encoding or "utf-8", errors=errors, newline=newline)


def read_bytes(path, expected: str | None = None) -> bytes:
    """The bytes of a regular file (:func:`open_regular`)."""
    with open_regular(path, "rb", expected=expected) as fh:
        return fh.read()


def read_text(path, encoding: str = "utf-8", expected: str | None = None) -> str:
    """The text of a regular file (:func:`open_regular`; universal newlines, as ``Path.read_text``)."""
    with open_regular(path, "r", encoding=encoding, expected=expected) as fh:
        return fh.read()


def remove_unless_regular(path) -> bool:
    """Remove what stands at ``path`` when it is not a regular file (a symbolic link itself, never what it points
    at; a folder with what it holds; a pipe, a socket, a device node): a cache's writer calls it before putting a
    file there, so that a damaged entry of the wrong kind is replaced instead of failing every later write.
    True when something was removed; a regular file or a missing path is left alone."""
    import shutil

    try:
        st = os.lstat(path)
    except OSError:
        return False
    if stat.S_ISREG(st.st_mode):
        return False
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)
    return True
