"""Work beside the caller: a function run in a daemon thread, its result (or exception) collected later.

The book uses it twice: the data stories run beside the run matrix, and the course's lessons execute while
the pages render. :class:`concurrent.futures.Future` carries the outcome; the thread is a daemon (unlike
the threads of ``concurrent.futures`` executors, which the interpreter joins at exit), so Ctrl-C ends the
build without waiting for the work beside it.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Callable


def in_background(fn: Callable, name: str) -> Future:
    """Start ``fn()`` in a daemon thread named ``name``. The returned future's ``result()`` waits for it and
    returns its value, or raises its exception (KeyboardInterrupt included) in the caller's thread."""
    future: Future = Future()

    def run():
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn())
        except BaseException as exc:  # noqa: BLE001  (handed to the caller, re-raised by result())
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future
