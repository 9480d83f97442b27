"""The card contract (see :mod:`atlaslib.cards`) for the NLI negation challenge: :func:`load_items` and
:func:`split` (the cases of every split version, every case a test case), and thin entry points over
:func:`.card.run_card` and the card's scoring (:mod:`.counting` through the scoring engine, gates by
:func:`.counting.gates`), so they give the notebook's numbers."""
from __future__ import annotations

from collections import Counter

from .. import NotRun, record
from .card import CARD, PROTOCOL, run_card, version_cases
from .corpus import ABSTENTION, VERSION


def load_items(data_dir=None):
    """The cases of every split version as one items table (``item_id`` = case id, ``version``, ``pattern``,
    ``gold``, ``depth``); ``data_dir`` is accepted for the card contract and unused (the cases are generated
    or shipped with the package, not read from the data folder)."""
    import pandas as pd

    return pd.DataFrame([{"item_id": c.case_id, "version": v, "pattern": c.pattern, "gold": c.gold_label,
                          "depth": c.negation_depth} for v in CARD.versions for c in version_cases(v)])


def split(items, version: str = VERSION):
    """The version's manifest: every case of the version is a test case (a challenge set has no training
    side)."""
    from ...splits import SplitManifest

    if version not in CARD.versions:
        raise ValueError(f"card {CARD.name} has no version {version!r}; expected one of {', '.join(CARD.versions)}")
    test = list(items.loc[items["version"] == version, "item_id"]) if "version" in items else list(items["item_id"])
    what = "built-in case" if version == VERSION else "case"
    return SplitManifest(card=CARD.name, version=version, seed=0, train=[], test=test,
                         rules=f"challenge set: every {what} is a test case; no draw, no training side")


def audit_items(items, data_dir=None) -> dict:
    """Cases per pattern and per gold label (``data_dir`` unused: the corpus is generated)."""
    return {"n_items": int(len(items)), "patterns": dict(Counter(items["pattern"])),
            "gold": dict(Counter(items["gold"]))}


def predict(items, manifest, model: str, protocol: str = PROTOCOL, *, data_dir=None, load=None,
            **options) -> list[dict]:
    """One record per test case (``gold`` / ``prediction`` NLI labels, ``abstention`` for no label, as in the
    result cell; ``score`` None; ``pattern``); a run that cannot happen raises :class:`atlaslib.cards.NotRun`."""
    run = run_card(model, protocol, manifest.version, load=load, **options)
    if not run.ok:
        raise NotRun(run.reason)
    test = set(manifest.test)
    return [record(c.case_id, c.gold_label, ABSTENTION if p is None else p, None, pattern=c.pattern)
            for c, p in zip(run.cases, run.labels) if c.case_id in test]


def score(records: list[dict], protocol: str = PROTOCOL, *, model: str | None = None) -> dict:
    """Aggregate accuracy and false-entailment rate with exact Clopper-Pearson intervals (the card's ``counts``
    under its ``SCORING`` through the scoring engine, as :meth:`atlaslib.cards.run.CardRun.score` makes them),
    and the two gates at the default thresholds (the scoring's :func:`.counting.gates`)."""
    from ...metrics import engine
    from .counting import SCORING

    if protocol not in CARD.protocols:
        raise ValueError(f"card {CARD.name} has no protocol {protocol!r}; expected one of {', '.join(CARD.protocols)}")
    return engine.evaluate(SCORING, counts({"predictions": list(records)}), protocol, parameters={})


from .counting import counts  # noqa: E402,F401  (the card contract: per-unit counts, see .counting)
