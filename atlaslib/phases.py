"""Where a run's time goes: loading, training, prediction and side measurements.

The generic code marks its parts with :func:`phase`:

- ``loading``: an adapter and its weights (:func:`atlaslib.models.load_adapter`), a fine-tuned model's cached
  weights;
- ``training``: what a protocol fits on the train items (a probe's train features and its head, a fine-tune's
  epochs, a rule baseline's counts);
- ``prediction``: the model's answers to the run's test items, with how many answers (``items``: a seeded row
  answers each test item once per seed);
- ``side``: what a run measures beside its declared metric (perturbation variants, the memorisation probe):
  it keeps all the time spent inside it, so a variant's answers are not counted as the run's prediction.

Time outside every phase (data, splits, scoring, intervals, plots) is the rest of the run's wall time. The
innermost phase gets the time, except inside ``side``; a phase already open is not opened again (a
prediction inside a prediction counts its items once). :class:`atlaslib.results.Timer` records the phases of
each timed block as ``timing.phases``.

Answers the model-call store (:mod:`atlaslib.models.calls`) serves cost a read, not the model's time: the
store records what each answer took when it was computed, and the open phase adds that (``served_seconds``),
so a row's prediction throughput is the model's whichever build computed its answers. An entry stored
without its time counts in ``served_untimed``; a throughput resting on one is not claimed.

A module of its own below ``results`` and ``models`` (as :mod:`atlaslib.calltally` is): one clock per process
(a run's kernel).
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager

PHASES = ("loading", "training", "prediction", "side")
#: the phase that keeps the time of the phases opened inside it
ABSORBING = "side"
_FIELDS = ("seconds", "items", "served_seconds", "served_untimed")


def _empty() -> dict:
    return {p: {"seconds": 0.0, "items": 0, "served_seconds": 0.0, "served_untimed": 0} for p in PHASES}


class Clock:
    """Seconds, answers and store-served time per phase of this process (see the module docstring)."""

    def __init__(self, now=time.perf_counter):
        self._now = now
        self._lock = threading.RLock()
        self.totals = _empty()
        self.stack: list[str] = []
        self._since = now()

    def _flush(self) -> None:
        t = self._now()
        if self.stack:
            self.totals[self.stack[-1]]["seconds"] += t - self._since
        self._since = t

    @contextmanager
    def phase(self, name: str, items: int = 0):
        """Time the block as ``name``; ``items``: the answers it gives (prediction), counted when it ends
        without an error."""
        if name not in PHASES:
            raise ValueError(f"phase {name!r}: expected one of {', '.join(PHASES)}")
        with self._lock:
            nested = name in self.stack or ABSORBING in self.stack
            if not nested:
                self._flush()
                self.stack.append(name)
        if nested:
            yield
            return
        ok = False
        try:
            yield
            ok = True
        finally:
            with self._lock:
                self._flush()
                self.stack.remove(name)
                if ok:
                    self.totals[name]["items"] += int(items)

    def served(self, seconds: float, untimed: int = 0) -> None:
        """Answers the model-call store served in the open phase: the ``seconds`` they took when computed, and
        how many had no recorded time. Outside every phase: not counted."""
        with self._lock:
            if self.stack:
                top = ABSORBING if ABSORBING in self.stack else self.stack[-1]
                self.totals[top]["served_seconds"] += float(seconds)
                self.totals[top]["served_untimed"] += int(untimed)

    def snapshot(self) -> dict:
        with self._lock:
            self._flush()
            return {p: dict(v) for p, v in self.totals.items()}

    @staticmethod
    def since(before: dict, after: dict) -> dict:
        """The phases of a block: ``after`` minus ``before`` (two :meth:`snapshot` results), seconds to the microsecond."""
        out = {}
        for p in PHASES:
            d = {k: after[p][k] - before[p][k] for k in _FIELDS}
            out[p] = {"seconds": round(d["seconds"], 6), "items": int(d["items"]),
                      "served_seconds": round(d["served_seconds"], 6), "served_untimed": int(d["served_untimed"])}
        return out


CLOCK = Clock()


def phase(name: str, items: int = 0):
    """``with phase("prediction", items=len(test)):`` on this process's clock (:class:`Clock.phase`)."""
    return CLOCK.phase(name, items)


def throughput(timing: dict | None) -> dict | None:
    """``{items, seconds, items_per_second}`` of a cell's prediction phase (``timing.phases.prediction``:
    the answers over the time they took, served answers at their computed time), or ``{"reason": ...}``
    when it cannot be said; None for a timing without phases (a cell from before they were recorded)."""
    phases = (timing or {}).get("phases")
    if not phases:
        return None
    p = phases.get("prediction") or {}
    items, secs = int(p.get("items") or 0), float(p.get("seconds") or 0) + float(p.get("served_seconds") or 0)
    if not items:
        return {"reason": "no test answers timed"}
    if p.get("served_untimed"):
        return {"reason": f"{p['served_untimed']:,} answers served from the model-call store without their time"}
    if secs <= 0:
        return {"reason": "no prediction time measured"}
    return {"items": items, "seconds": secs, "items_per_second": items / secs}


def seconds(timing: dict | None) -> dict:
    """Seconds of each phase of a timed block (``timing``: a cell's) and the rest of its wall time (``other``:
    data, splits, scoring, plots); {} for a timing without phases."""
    timing = timing or {}
    ph = timing.get("phases") or {}
    if not ph:
        return {}
    out = {p: float((ph.get(p) or {}).get("seconds") or 0.0) for p in PHASES}
    wall = timing.get("wall_seconds")
    out["other"] = max(0.0, float(wall) - sum(out.values())) if wall is not None else None
    return out


def side(fn):
    """Decorator: ``fn``'s time is a side measurement (phase ``side``: a perturbation's variant runs, the
    memorisation probe, a reproduction or leakage probe beside the declared metric)."""
    import functools

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with phase("side"):
            return fn(*args, **kwargs)

    return wrapped
