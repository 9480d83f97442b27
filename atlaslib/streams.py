"""The command's own output, kept from ending its work: standard output and error read by a pipe that closes
early (``atlas book | head -1``) or written to a device that is full (``atlas list > /dev/full``).

A command's lines are what it says about work, never the work: :func:`guarded` puts a :class:`GuardedStream` in
front of ``sys.stdout`` and ``sys.stderr`` for the command's whole time, and a write or flush the system refuses
never raises. The stream's file descriptor is pointed at ``/dev/null`` at the first refusal (so later writes,
the interpreter's last flush and the processes the command starts after it write nowhere instead of failing),
and the work goes on to its end: a build still finishes its site and removes its temporary folders. A pipe
closed early is quiet, as Unix tools are (``head`` wanted no more); any other refusal (a full disk or device)
is kept and told in one line on standard error when the command ends (:meth:`GuardedStream.lost_line`), with
exit 1: its output is lost, though nothing the command computed is.
"""
from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
import threading


class GuardedStream(io.TextIOBase):
    """``stream`` (a text stream) whose writes and flushes never raise :class:`OSError` (module docstring)."""

    def __init__(self, stream, label: str):
        self._stream, self.label = stream, label
        self.closed_early = False   # the reader went away (EPIPE): nothing to tell
        self.error: OSError | None = None   # anything else the system refused (ENOSPC, EIO, ...)
        self.target = _target(stream)
        self._lock = threading.Lock()

    @property
    def lost(self) -> bool:
        return self.closed_early or self.error is not None

    def write(self, text) -> int:
        if not self.lost:
            try:
                return self._stream.write(text)
            except (OSError, ValueError) as exc:   # ValueError: the stream was closed under us
                self._refused(exc)
        return len(text)

    def flush(self) -> None:
        if not self.lost:
            try:
                self._stream.flush()
            except (OSError, ValueError) as exc:
                self._refused(exc)

    def _refused(self, exc: BaseException) -> None:
        with self._lock:
            if self.lost:
                return
            if isinstance(exc, BrokenPipeError) or getattr(exc, "errno", None) in (errno.EPIPE, errno.ECONNRESET):
                self.closed_early = True
            else:
                self.error = exc if isinstance(exc, OSError) else OSError(errno.EBADF, str(exc))
            _to_devnull(self._stream)

    def lost_line(self, command: str) -> str | None:
        """The one line that says the output was lost, when it was for another reason than a reader that went
        away; None otherwise."""
        if self.error is None:
            return None
        why = self.error.strerror or str(self.error) or type(self.error).__name__
        where = f" ({self.target})" if self.target else ""
        return (f"atlas {command}: standard {self.label}{where} could not be written: {why}; the command's work "
                f"went on to its end, but what it printed is lost: write it where there is room")

    # the rest is the stream's own
    def isatty(self) -> bool:
        return False if self.lost else self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self):
        return getattr(self._stream, "encoding", "utf-8")

    @property
    def errors(self):
        return getattr(self._stream, "errors", "strict")

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _target(stream) -> str | None:
    """The file a stream writes to, where the system says (``/dev/full``, a path): named in the line."""
    try:
        name = os.readlink(f"/proc/self/fd/{stream.fileno()}")
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None
    return None if name.startswith(("pipe:", "socket:", "anon_inode:")) else name


def _to_devnull(stream) -> None:
    """Point ``stream``'s file descriptor at ``/dev/null``: what is still in its buffer, later writes and the
    interpreter's last flush go nowhere instead of failing again (a stream without one is left as it is)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


@contextlib.contextmanager
def guarded():
    """``sys.stdout`` and ``sys.stderr`` guarded for the block (module docstring); yields (stdout, stderr) guards.
    Both are flushed at the end, still guarded, and put back."""
    out, err = sys.stdout, sys.stderr
    g_out, g_err = GuardedStream(out, "output"), GuardedStream(err, "error")
    sys.stdout, sys.stderr = g_out, g_err
    try:
        yield g_out, g_err
    finally:
        g_out.flush()
        g_err.flush()
        sys.stdout, sys.stderr = out, err
