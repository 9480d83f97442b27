"""Outside systems on the NLI negation challenge (``atlas export``, ``atlas score``, :func:`atlaslib.evaluate`):
the case set as an outside system sees it, and its labels scored by the card's own run
(:func:`.card.run_card` with the labels as the predictor: exact Clopper-Pearson intervals, gates)."""
from __future__ import annotations

#: one line of a predictions file, as ``atlas export`` shows it in task.json
OUTSIDE_EXAMPLE = '{"item_id": "...", "label": "contradiction"}'


class FixedLabels:
    """The challenge's predictor contract (called with one case) over labels given by case id."""

    def __init__(self, labels: dict, info: dict):
        self._labels, self.info = labels, info

    def __call__(self, case):
        return self._labels[case.case_id]


def outside_split(version: str, split: str, data_dir=None, protocol: str | None = None):
    """Every case of the built-in set (premise, hypothesis); the challenge has no train split."""
    from ...external.tasks import Split
    from .corpus import ABSTENTION, LABELS, case_set_sha256, default_nli_negation_cases

    if split == "train":
        raise ValueError(f"card nli_negation version {version} has no train split: every case is a test case")
    cases = default_nli_negation_cases()
    records = [{"item_id": c.case_id, "premise": c.premise, "hypothesis": c.hypothesis} for c in cases]
    return Split("nli_negation", version, split, [c.case_id for c in cases], records, [*LABELS, ABSTENTION],
                 case_set_sha256(cases), answer="label (entailment | neutral | contradiction | abstention)",
                 context={"cases": cases})


def outside_cell_parts(s, preds, profile: dict, protocol: str, key: str, n_resamples: int, data_dir=None) -> dict:
    """The cell parts of checked predictions ``preds`` on split ``s`` (see :mod:`atlaslib.external.score`)."""
    from ...external.tasks import EXTERNAL
    from .card import run_card
    from .corpus import ABSTENTION

    labels = {p.item_id: (None if p.label == ABSTENTION else p.label) for p in preds}
    run = run_card(profile["name"], protocol, s.version, run_key=key, predictor=FixedLabels(labels, profile),
                   predictions_sha256=profile["revision"])
    return dict(run.cell_parts(), capability=EXTERNAL)
