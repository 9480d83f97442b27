"""One NegEx run: ``model`` under ``zero_shot`` (an assertion head, else scored answer options), ``probe`` or
``finetune`` on the split, by the card's family (:meth:`~atlaslib.cards.families.TaskFamily.predictor`:
:func:`run_protocol`); a run that cannot happen raises :class:`NotRun`."""
from __future__ import annotations

import pandas as pd

from .. import NotRun  # noqa: F401  (re-exported: the card's not-run error)
from .card import CARD, OPTION_PROMPT, SEED


def option_prompts(frame: pd.DataFrame) -> list[str]:
    """The score.options prompt per item (unmarked, cleaned sentence)."""
    return [OPTION_PROMPT.format(sentence=s, concept=c) for s, c in zip(frame["sentence"], frame["concept"])]


def run_protocol(model: str, protocol: str, train: pd.DataFrame, test: pd.DataFrame, *, seed: int = SEED,
                 data_dir=None, retrain: bool = False, load=None, version: str | None = None) -> dict:
    """Run ``model`` under ``protocol`` on the split; returns ``{pred, score, capability, details, profile,
    adapter, predict, llm}`` (``pred`` 1 = negated; a fine-tune also ``seed_runs``, one per training seed).

    ``load``: the run's :meth:`CardRun.load <atlaslib.cards.run.CardRun.load>` (the model by the run's
    decision); None: decided and loaded here by the same rule (:mod:`atlaslib.cards.deciding`) for the split's
    version: ``version``, else the one the test frame knows (:func:`.splitting.split_frames`; a decision is the
    run's own, never another version's). The model answers through the card's family
    (:meth:`~atlaslib.cards.families.TaskFamily.predictor`): zero_shot by ``predict.assertion`` when the profile has
    it, else ``score.options``; probe on ``embed.text.pooled`` (its head seeded by ``seed``); finetune trains the
    encoder with a new head (:data:`FINETUNE_RECIPE`; ``retrain`` ignores cached weights). ``predict(frame,
    **kw)``: the same model (and what it trained) on other items, a variant run's.
    """
    from .. import deciding
    from ..llm import llm_row_extra
    from .family import FAMILY

    if protocol not in CARD.protocols:
        raise ValueError(f"unknown protocol {protocol!r}; expected one of {', '.join(CARD.protocols)}")
    version = version or test.attrs.get("version")
    if load is None and version not in CARD.versions:
        raise ValueError(f"negex run_protocol of {model} {protocol}: decided here (no load of the run), it needs the "
                         f"split's version (version=, or test items from negex.split_frames), one of "
                         f"{', '.join(CARD.versions)}; got {version!r}")
    loaded = deciding.load_for(CARD, version, model, protocol, load, data_dir=data_dir)
    predictor = FAMILY.predictor(loaded, train.set_index("item_id"), protocol, seed=seed, retrain=retrain)

    def predict(frame: pd.DataFrame, **kw) -> dict:
        answers = predictor(frame, **kw)
        if not isinstance(answers, dict):
            return dict(answers[2])
        runs = [{"seed": s, "pred": out["pred"].astype(int), "score": out["proba"][:, 1], "details": out["details"]}
                for s, (_, _, out) in answers.items()]
        return {"pred": runs[0]["pred"], "score": runs[0]["score"], "seed_runs": runs}

    out = predict(test)
    if getattr(predictor, "details", None) is not None:
        out["details"] = predictor.details
    out.update(capability=loaded.capability, profile=loaded.profile, adapter=loaded.adapter, predict=predict,
               llm=llm_row_extra(loaded.adapter, loaded.profile, CARD, test["sentence"].tolist()))
    return out
