"""Outside systems on the NLI negation challenge (``atlas export``, ``atlas score``, :func:`atlaslib.evaluate`):
the case set as an outside system sees it, and its labels scored by the card's own run
(the contract's calls with the labels as the predictor: exact Clopper-Pearson intervals, gates).
``atlas export`` also writes the case set, gold labels included, as an openmed fixture file
(:func:`write_outside_files`)."""
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
    """Every case of the version (premise, hypothesis); the challenge has no train split."""
    from ...splits import Split
    from .card import version_cases
    from .corpus import ABSTENTION, LABELS, case_set_sha256

    if split == "train":
        raise ValueError(f"card nli_negation version {version} has no train split: every case is a test case")
    cases = version_cases(version)
    records = [{"item_id": c.case_id, "premise": c.premise, "hypothesis": c.hypothesis} for c in cases]
    return Split("nli_negation", version, split, [c.case_id for c in cases], records, [*LABELS, ABSTENTION],
                 case_set_sha256(cases), answer="label (entailment | neutral | contradiction | abstention)",
                 context={"cases": cases})


def outside_cell_parts(s, preds, profile: dict, protocol: str, key: str, n_resamples: int, data_dir=None) -> dict:
    """The cell parts of checked predictions ``preds`` on split ``s`` (see :mod:`atlaslib.external.score`): the
    run's two calls, the contract's ``predict`` (the labels as the predictor) and :func:`.card.cell_parts`."""
    from ...results import EXTERNAL
    from ..run import CardRun
    from .card import cell_parts
    from .contract import load_items, predict, split
    from .corpus import ABSTENTION

    labels = {p.item_id: (None if p.label == ABSTENTION else p.label) for p in preds}
    params = {"run_key": key, "predictions_sha256": profile["revision"]}
    run = CardRun("nli_negation", s.version, profile["name"], protocol, parameters=params)
    items = load_items(data_dir)
    records = predict(items, split(items, s.version), profile["name"], protocol, predictor=FixedLabels(labels, profile))
    return dict(cell_parts(run, records, parameters=params), capability=EXTERNAL)


def write_outside_files(s, out) -> list[str]:
    """``openmed_fixtures.json``: the version's cases with their gold labels as an openmed fixture file
    (:mod:`.exchange`: every row marked synthetic and PHI-free), which openmed's
    ``load_nli_negation_fixtures`` loads unchanged. The items file stays without gold; this file is the case
    set itself, for a team that runs openmed's challenge on the atlas's cases."""
    from pathlib import Path

    from .exchange import FIXTURE_FILE, write_openmed_fixtures

    source = (f"atlaslib card nli_negation, version {s.version} ({len(s.ids)} cases, atlas case-set sha256 "
              f"{s.manifest_hash})")
    write_openmed_fixtures(s.context["cases"], Path(out) / FIXTURE_FILE, source=source)
    return [FIXTURE_FILE]
