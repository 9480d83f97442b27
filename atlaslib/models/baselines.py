"""Baselines that need no model: they give every leaderboard a floor."""
from __future__ import annotations

from atlaslib.models.registry import Profile, check_texts


class Majority:
    """``predict.assertion`` that always answers PRESENT ("affirmed"), the NegEx kit's majority class.

    Its macro F1 follows from the test set's label balance alone: with n_neg negated and n_aff affirmed
    items, F1(affirmed) = 2 n_aff / (2 n_aff + n_neg), F1(negated) = 0, macro F1 = F1(affirmed) / 2.
    """

    capability = "predict.assertion"
    answer = "PRESENT"
    reads_text = False  # its answer never depends on the input: no variant run (atlaslib.variants) for it

    def __init__(self, profile: Profile, progress: bool = True, **unknown):
        if unknown:
            raise TypeError(f"Majority ({profile.name}): unknown option(s) {sorted(unknown)}; allowed: progress")
        self.profile = profile

    def predict_assertion(self, marked_texts) -> list[str]:
        return [self.answer] * len(check_texts(marked_texts, "marked_texts"))

    @property
    def info(self) -> dict:
        return {"profile": self.profile.name, "source": self.profile.source, "revision": self.profile.revision,
                "capability": self.capability, "adapter": "atlaslib.models.baselines.Majority",
                "rule": f"always {self.answer}", "batch_size": None, "dtype": None, "device": None,
                "max_length": None, "torch_threads": None, "pooling": None}
