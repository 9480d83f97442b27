"""Ctrl-C that no library can swallow: the ``atlas`` command's SIGINT handler records the interrupt before it
raises :class:`KeyboardInterrupt`.

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be when SIGINT arrives. Late in a
run (a kernel shutting down, its sockets being closed and collected) that can be inside a finaliser
(``__del__``) or a library callback, where the exception is printed as "Exception ignored in ..." and
dropped: the run then went on and finished as if nothing had happened (exit 0). With :func:`handling`
active, :func:`interrupted` stays true after such a drop, and :func:`check` (called before anything is moved
into place: a run's notebook and cell, a scored cell, a failed notebook kept for reading) raises the
interrupt again, so an interrupt always ends the command with nothing partial, however late it arrives.
"""
from __future__ import annotations

import contextlib
import signal
import threading

_INTERRUPTED = threading.Event()


def interrupted() -> bool:
    """True once SIGINT arrived while :func:`handling` was active."""
    return _INTERRUPTED.is_set()


def check() -> None:
    """Raise :class:`KeyboardInterrupt` if an interrupt arrived (even one a library swallowed)."""
    if _INTERRUPTED.is_set():
        raise KeyboardInterrupt


def _on_sigint(signum, frame):
    _INTERRUPTED.set()
    raise KeyboardInterrupt


@contextlib.contextmanager
def handling():
    """Record SIGINT for :func:`interrupted` while the block runs (main thread only; elsewhere a no-op), then
    restore the previous handler; the record starts empty and is emptied again at the end."""
    _INTERRUPTED.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _INTERRUPTED.clear()
