"""Progress a person can watch: a bar per model call (:func:`progress_bar`) that behaves in a terminal, in a live
notebook and in a log.

- a normal tqdm bar in a terminal, the widget bar in a live notebook with ipywidgets, otherwise (logs, CI,
  papermill kernels without widgets) a plain ASCII bar that refreshes at most every 30 s, because tqdm writes a
  line per refresh there (tqdm #765). The environment variable ``ATLAS_PROGRESS`` = ``off`` | ``plain`` |
  ``auto`` overrides (a runner executing notebooks with papermill sets ``plain``: widget state is not saved in
  executed notebooks).
"""
from __future__ import annotations

import os
import sys

#: seconds between two status lines in a log while runs go on and nothing changes
HEARTBEAT = 300.0


def plain_mode() -> bool:
    """True where progress goes to a log (papermill kernels, CI, a pipe): ``ATLAS_PROGRESS=plain``, or neither a
    terminal nor a notebook kernel."""
    mode = os.environ.get("ATLAS_PROGRESS", "auto").strip().lower()
    return mode == "plain" or not (sys.stderr.isatty() or "ipykernel" in sys.modules)


def progress_bar(total: int, desc: str, enabled: bool = True):
    """A tqdm bar that behaves in terminals, notebooks and logs (see module docstring)."""
    from tqdm import std

    mode = os.environ.get("ATLAS_PROGRESS", "auto").strip().lower()
    if not enabled or mode in ("0", "off", "false", "no", "none"):
        return std.tqdm(total=total, desc=desc, disable=True)
    in_kernel = "ipykernel" in sys.modules
    if mode == "plain" or not (sys.stderr.isatty() or in_kernel):
        return std.tqdm(total=total, desc=desc, mininterval=30.0, maxinterval=300.0, ascii=True,
                        file=sys.stderr, dynamic_ncols=False, ncols=80)
    if in_kernel:
        try:
            import ipywidgets  # noqa: F401
            from tqdm.notebook import tqdm as nb_tqdm
        except ImportError:  # no widgets: a plain bar, without tqdm.auto's IProgress warning
            return std.tqdm(total=total, desc=desc, mininterval=30.0, ascii=True, file=sys.stderr, ncols=80)
        return nb_tqdm(total=total, desc=desc)
    return std.tqdm(total=total, desc=desc, file=sys.stderr)


def _clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    return f"{h}h{rest // 60:02d}m" if h else f"{rest // 60}m{rest % 60:02d}s"


_ALL = object()   # every group of runs (MatrixStatus._borrowed)


class Expected(dict):
    """label -> expected seconds of each run, and which of them are this machine's own record
    (``measured_here``; the others are another machine's times or estimates). A plain dict counts as measured
    here throughout."""

    def __init__(self, seconds=(), measured_here=None):
        super().__init__(seconds)
        self.measured_here = frozenset(self) if measured_here is None else frozenset(measured_here)


class MatrixStatus:
    """What a build is doing while its runs execute: runs done of total, each running run with its elapsed and
    expected time, and the expected end.

    ``expected``: label -> seconds (the last build's record, else an estimate; an :class:`Expected` says which
    are this machine's own record, a plain dict counts as all); ``workers``: how many runs go at once. The
    others carry another machine's time (the atlas's reference build) or an estimate, which a warm model-call
    store or a faster machine can make many times too long: once runs of theirs have finished here, their
    expectations are scaled by how long those runs took against what was expected of them, and the line says
    which times it uses. ``groups`` (label -> the run's model) scales each model's runs by that model's runs
    done here only, a model with none done yet by none: one model's runs served by a warm store say nothing of
    another's that must be computed (without ``groups`` every run is of one group). In a terminal (``stream`` a TTY) the status is one line redrawn in place about once a second, and the
    executor's own lines (:meth:`log`) are printed above it; elsewhere (a log file, CI, a notebook) one line is
    logged per change (a run started or finished) and, while runs go on with nothing changing, one line every
    ``heartbeat`` seconds (default :data:`HEARTBEAT`: a long run's elapsed time shows in a log too), never a line
    per second. ``ATLAS_PROGRESS=off`` shows nothing but the executor's lines; ``plain`` forces the
    one-line-per-change form."""

    def __init__(self, labels, expected: dict, workers: int, log=print, stream=None, clock=None,
                 heartbeat: float | None = None, groups: dict | None = None):
        import threading
        import time

        self.labels, self.expected, self.workers = list(labels), dict(expected), max(1, int(workers))
        self._log, self.stream = log, stream if stream is not None else sys.stderr
        self.clock = clock or time.monotonic
        self.running: dict[str, float] = {}
        self.done: set[str] = set()
        self.measured_here = set(getattr(expected, "measured_here", self.expected))
        self.groups = dict(groups or {})
        self._ran: list[tuple[str, float, float]] = []   # (label, expected, taken) of every run executed here
        mode = os.environ.get("ATLAS_PROGRESS", "auto").strip().lower()
        self.off = mode in ("0", "off", "false", "no", "none")
        self.in_place = not self.off and mode != "plain" and bool(getattr(self.stream, "isatty", lambda: False)())
        self._lock, self._stop = threading.RLock(), threading.Event()
        self._drawn = False
        self.heartbeat = HEARTBEAT if heartbeat is None else float(heartbeat)
        self._last_line = self.clock()
        if self.in_place:
            threading.Thread(target=self._ticker, name="atlas-matrix-status", daemon=True).start()
        elif not self.off and self.heartbeat > 0 and clock is None:   # a given clock (a test) calls beat() itself
            threading.Thread(target=self._beats, name="atlas-matrix-heartbeat", daemon=True).start()

    # -- what the line says
    def scale(self, label: str | None = None) -> float:
        """How long the runs done here on times not measured here took, over what those times expected of them
        (1 before any has finished): of ``label``'s group (:attr:`groups`) when a label is given, else of all."""
        borrowed = self._borrowed(self.groups.get(label) if label is not None else _ALL)
        expected = sum(e for e, _ in borrowed)
        return sum(t for _, t in borrowed) / expected if expected > 0 else 1.0

    def _borrowed(self, group=_ALL) -> list[tuple[float, float]]:
        """(expected, taken) of the runs executed here whose expected time was not measured here (of ``group``;
        every group with :data:`_ALL`)."""
        return [(e, t) for k, e, t in self._ran if k not in self.measured_here and e > 0
                and (group is _ALL or self.groups.get(k) == group)]

    def expect(self, label: str) -> float:
        """The seconds expected of ``label``: its own record as it is; another machine's time or an estimate
        scaled (:meth:`scale`), but never below the quickest run done here that was expected to take no longer
        (each run pays its kernel and imports, which a warm store does not shorten; a longer run's time is no
        floor for a short one, and the longest runs go first); 0 when nothing is known."""
        seconds = self.expected.get(label, 0.0)
        if label in self.measured_here or not seconds:
            return seconds
        floor = min((t for _, e, t in self._ran if e <= seconds), default=0.0)
        return max(seconds * self.scale(label), floor)

    def remaining(self) -> float:
        """Expected seconds until every run is done: the work left (each running run's expected time less its
        elapsed, never below zero; every queued run's expected time) shared by the workers."""
        now = self.clock()
        left = sum(max(self.expect(k) - (now - t0), 0.0) for k, t0 in self.running.items())
        left += sum(self.expect(k) for k in self.labels if k not in self.done and k not in self.running)
        return left / min(self.workers, max(1, len(self.labels) - len(self.done)))

    def line(self) -> str:
        now = self.clock()
        parts = [f"runs {len(self.done)}/{len(self.labels)} done"]
        for k, t0 in self.running.items():
            exp = self.expect(k)
            parts.append(f"{k} {_clock(now - t0)}" + (f" of ~{_clock(exp)}" if exp else ""))
        parts.append(self.end())
        return " | ".join(parts)

    def end(self) -> str:
        import time

        left = self.remaining()
        basis = ""
        if any(k not in self.done and k not in self.measured_here and self.expected.get(k) for k in self.labels):
            basis = " by the reference build's times"
            n = len(self._borrowed(_ALL))
            runs = f"{n} run{'s' if n > 1 else ''} here"
            if n and len(set(self.groups.get(k) for k in self.labels)) > 1:
                basis += f", each model's scaled by its own runs done here ({runs} so far)"
            elif n:
                basis += f" × {self.scale():.2g}, as {runs} took"
        return (f"expected end {time.strftime('%H:%M', time.localtime(time.time() + left))} "
                f"(in ~{_clock(left)}{basis})")

    # -- changes
    def started(self, label: str) -> None:
        with self._lock:
            self.running[label] = self.clock()
            if not self.off and not self.in_place:
                self._log(self.line())
                self._last_line = self.clock()
            self._draw()

    def finished(self, label: str, message: str | None = None, ran: bool = True) -> None:
        """``label`` is done; ``ran``: it executed (not served from the cache, not failed), so its time says how
        this machine compares with the times it was expected to take."""
        with self._lock:
            t0 = self.running.pop(label, None)
            if ran and t0 is not None:
                taken = self.clock() - t0
                self._ran.append((label, self.expected.get(label, 0.0), taken))
            self.done.add(label)
            if message and not self.in_place and not self.off and len(self.done) < len(self.labels):
                message = f"{message} | {self.end()}"
            if message:
                self.log(message)
            elif not self.off and not self.in_place:
                self._log(self.line())
                self._last_line = self.clock()
            self._draw()

    def log(self, message: str) -> None:
        """An executor line: above the status line in a terminal, as it is elsewhere."""
        with self._lock:
            self._clear()
            self._log(message)
            self._last_line = self.clock()
            self._draw()

    def beat(self) -> bool:
        """In a log: the status line again when runs are going and no line was logged for ``heartbeat`` seconds
        (True when it logged one)."""
        with self._lock:
            if self.off or self.in_place or not self.running or self.clock() - self._last_line < self.heartbeat:
                return False
            self.log(self.line())
            return True

    def _beats(self) -> None:
        while not self._stop.wait(min(self.heartbeat, 30.0)):
            self.beat()

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            self._clear()

    # -- the terminal line
    def _clear(self) -> None:
        if self.in_place and self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False

    def _draw(self) -> None:
        if not self.in_place or self._stop.is_set():
            return
        import shutil

        width = shutil.get_terminal_size((120, 24)).columns - 1
        self.stream.write("\r\x1b[K" + self.line()[:width])
        self.stream.flush()
        self._drawn = True

    def _ticker(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                self._draw()
