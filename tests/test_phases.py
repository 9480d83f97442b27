"""Where a run's time goes (atlaslib.phases): the clock's rules on a hand-driven clock, the model-call store's
recorded times for the answers it serves, and the phases a real run's cell records."""
from __future__ import annotations

import time

import numpy as np
import pytest

from atlaslib import phases
from atlaslib.models import calls


class Hand:
    """A clock the test moves by hand."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_innermost_phase_gets_the_time_side_keeps_all_and_items_count_once():
    hand = Hand()
    c = phases.Clock(now=hand)
    before = c.snapshot()
    hand.t = 5                                    # outside every phase: no phase's time
    with c.phase("prediction", items=10):
        hand.t = 7                                # 2 s prediction
        with c.phase("loading"):                  # a lazy load inside the prediction
            hand.t = 10                           # 3 s loading
        hand.t = 11                               # 1 s prediction
        with c.phase("prediction", items=10):     # already open: its answers are not counted again
            hand.t = 12
    with c.phase("side"):
        with c.phase("prediction", items=99):     # a variant's answers are the side measurement's
            hand.t = 20
            c.served(4.0, untimed=2)              # served inside side: side's
        with c.phase("training"):
            hand.t = 21
    with c.phase("training"):
        hand.t = 24
    with pytest.raises(RuntimeError):             # a phase that fails keeps its time, not its answers
        with c.phase("prediction", items=5):
            hand.t = 25
            raise RuntimeError("boom")
    c.served(100.0)                               # outside every phase: nobody's
    got = phases.Clock.since(before, c.snapshot())
    assert {p: got[p]["seconds"] for p in phases.PHASES} == {"loading": 3, "training": 3, "prediction": 5,
                                                             "side": 9}
    assert got["prediction"]["items"] == 10 and got["side"]["items"] == 0
    assert (got["side"]["served_seconds"], got["side"]["served_untimed"]) == (4.0, 2)
    assert got["prediction"]["served_seconds"] == 0
    with pytest.raises(ValueError, match="phase 'scoring': expected one of loading, training, prediction, side"):
        with c.phase("scoring"):
            pass


def test_throughput_counts_served_answers_at_their_recorded_time_and_says_when_it_cannot():
    def timing(**pred):
        zero = {"seconds": 0.0, "items": 0, "served_seconds": 0.0, "served_untimed": 0}
        return {"phases": {p: dict(zero, **(pred if p == "prediction" else {})) for p in phases.PHASES}}

    assert phases.throughput(timing(seconds=2.0, items=60, served_seconds=28.0))["items_per_second"] == 2.0
    assert "7 answers served" in phases.throughput(timing(seconds=2.0, items=60, served_untimed=7))["reason"]
    assert phases.throughput(timing(seconds=2.0))["reason"] == "no test answers timed"
    assert phases.throughput({"wall_seconds": 3.0}) is None


def test_the_store_records_each_answers_time_and_a_served_answer_brings_it(tmp_path):
    """A computed batch's time is shared among its answers in their entries; served again, the entries' recorded
    times (read back from the files, not re-measured) are what the open phase is given; an entry stored without
    a time counts as untimed."""
    sp = calls.CallSpace({"model": "phases-test"}, "test.cap", root=tmp_path)
    texts = ["a", "b", "c"]

    def compute(positions):
        time.sleep(0.03)          # at least 30 ms for the batch (a loaded machine only adds)
        return [{"v": np.array([float(i)])} for i in positions]

    with phases.phase("prediction", items=3):
        sp.answer(texts, compute)
    recorded = []
    for t in texts:
        meta: dict = {}
        key = sp.key(calls.digest(t))
        assert calls.decode_entry(sp.path(key).read_bytes(), key, meta) is not None
        recorded.append(meta["seconds"])
    assert len(set(recorded)) == 1 and sum(recorded) >= 0.03          # one batch's time, shared by its answers

    old_key = sp.key(calls.digest("d"))                                      # an entry from before times were kept
    sp.path(old_key).parent.mkdir(parents=True, exist_ok=True)
    sp.path(old_key).write_bytes(calls.encode_entry(old_key, {"v": np.array([9.0])}))
    before = phases.CLOCK.snapshot()
    with phases.phase("prediction", items=4):
        out = sp.answer(texts + ["d"], compute)
    got = phases.Clock.since(before, phases.CLOCK.snapshot())["prediction"]
    assert [float(o["v"][0]) for o in out] == [0.0, 1.0, 2.0, 9.0]
    assert got["served_seconds"] == pytest.approx(sum(recorded), abs=1e-3)
    assert got["served_untimed"] == 1 and got["items"] == 4
