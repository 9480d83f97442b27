"""The model calls made and served in this process (a run's kernel), counted where the model-call store
(:mod:`atlaslib.models.calls`) answers them and read by :class:`atlaslib.results.Timer`, so every timed block
(a run, a variant run) records the calls it made. A module of its own, below both: results never imports the
models package."""
from __future__ import annotations


class Tally:
    """Model calls made and served in this process (a run's kernel), and the damaged entries met: what the
    run's cell records (``timing.model_calls``) and the build report prints."""

    def __init__(self):
        self.made = self.served = self.write_errors = 0
        self.corrupt: list[str] = []

    def snapshot(self) -> dict:
        return {"made": self.made, "served": self.served, "corrupt": list(self.corrupt),
                "write_errors": self.write_errors}

    @staticmethod
    def since(before: dict, after: dict) -> dict:
        return {"made": after["made"] - before["made"], "served": after["served"] - before["served"],
                "corrupt": after["corrupt"][len(before["corrupt"]):],
                "write_errors": after["write_errors"] - before["write_errors"]}

    @staticmethod
    def total(parts) -> dict:
        """The counts of several blocks (``since`` results, a run's and its variant runs') added up."""
        parts = list(parts)
        return {"made": sum(p.get("made", 0) for p in parts), "served": sum(p.get("served", 0) for p in parts),
                "corrupt": [c for p in parts for c in p.get("corrupt") or []],
                "write_errors": sum(p.get("write_errors", 0) for p in parts)}


TALLY = Tally()
