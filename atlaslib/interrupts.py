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


_SIGNAL: list = []  # the signal that stopped the command (SIGINT or SIGTERM)


def stopped_by() -> int | None:
    """The number of the signal that stopped the command (SIGINT or SIGTERM), None when none did."""
    return _SIGNAL[-1] if _SIGNAL and _INTERRUPTED.is_set() else None


def _on_sigint(signum, frame):
    _SIGNAL.append(signum)
    _INTERRUPTED.set()
    raise KeyboardInterrupt


@contextlib.contextmanager
def handling():
    """Record SIGINT (and SIGTERM, which stops the command the same way: the interrupted run's partial outputs
    and work folders are removed, not left to the next command) for :func:`interrupted` while the block runs
    (main thread only; elsewhere a no-op), then restore the previous handlers; the record starts empty and is
    emptied again at the end."""
    _INTERRUPTED.clear()
    _SIGNAL.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _on_sigint) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _INTERRUPTED.clear()
