"""One NegEx run: ``model`` under ``zero_shot`` (an assertion head, else scored answer options), ``probe`` or
``finetune`` on the split (:func:`run_protocol`); a run that cannot happen raises :class:`NotRun`."""
from __future__ import annotations

import pandas as pd

from .. import NotRun
from .card import (ASSERTION_TO_DECISION, CARD, FINETUNE_RECIPE, LABELS, OPTION_PROMPT, OPTIONS,
                   POSITIVE, SEED)
from .data import data_sha256

def option_prompts(frame: pd.DataFrame) -> list[str]:
    """The score.options prompt per item (unmarked, cleaned sentence)."""
    return [OPTION_PROMPT.format(sentence=s, concept=c) for s, c in zip(frame["sentence"], frame["concept"])]


def assertion_label_map() -> dict:
    """Adapter assertion labels → 1 (negated) / 0 (affirmed)."""
    return {k: int(v == POSITIVE) for k, v in ASSERTION_TO_DECISION.items()}


def run_protocol(model: str, protocol: str, train: pd.DataFrame, test: pd.DataFrame, *, seed: int = SEED,
                 data_dir=None, retrain: bool = False, load=None, version: str | None = None) -> dict:
    """Run ``model`` under ``protocol`` on the split; returns ``{pred, score, capability, details, profile}``.

    ``load``: the run's :meth:`CardRun.load <atlaslib.cards.run.CardRun.load>` (the model by the run's
    decision); None: decided and loaded here by the same rule (:mod:`atlaslib.cards.deciding`) for the split's
    version: ``version``, else the one the test frame knows (:func:`.splitting.split_frames`; a decision is the
    run's own, never another version's). zero_shot uses ``predict.assertion`` when the profile has it, else
    ``score.options``; probe uses ``embed.text.pooled``; finetune trains the encoder of an
    ``embed.text.pooled`` model with a new head (:data:`FINETUNE_RECIPE`; ``retrain`` ignores cached weights).
    A run that cannot happen raises :class:`NotRun` with the reason.
    """
    from ...protocols import items as P
    from .. import deciding

    if protocol not in CARD.protocols:
        raise ValueError(f"unknown protocol {protocol!r}; expected one of {', '.join(CARD.protocols)}")
    version = version or test.attrs.get("version")
    if load is None and version not in CARD.versions:
        raise ValueError(f"negex run_protocol of {model} {protocol}: decided here (no load of the run), it needs the "
                         f"split's version (version=, or test items from negex.split_frames), one of "
                         f"{', '.join(CARD.versions)}; got {version!r}")
    loaded = deciding.load_for(CARD, version, model, protocol, load, data_dir=data_dir)
    adapter, capability = loaded.adapter, loaded.capability
    res = None
    if capability == "predict.assertion":
        out = P.zero_shot_assertion(adapter, test["text"].tolist(), assertion_label_map(), gold=test["label"])
    elif capability == "score.options":
        out = P.zero_shot_options(adapter, option_prompts(test), OPTIONS)
    elif protocol == "finetune":
        from ...protocols import finetune as FT

        res = FT.finetune_sequence(adapter, train["item_id"].tolist(), train["text"].tolist(),
                                   train["decision"].tolist(), test["text"].tolist(), LABELS, FINETUNE_RECIPE,
                                   data_sha256=data_sha256(data_dir), retrain=retrain)
        pos = LABELS.index(POSITIVE)
        out = {"pred": (res["pred"] == pos).astype(int), "score": res["proba"][:, pos], "details": res["details"],
               "seed_runs": [{"seed": r["seed"], "pred": (r["pred"] == pos).astype(int), "score": r["proba"][:, pos],
                              "details": r["details"]} for r in res["seed_runs"]]}
    else:
        out = P.probe(adapter, train["text"].tolist(), train["label"].tolist(), test["text"].tolist(), seed=seed)
    out.update(capability=capability, profile=loaded.profile, adapter=adapter,
               predict=_predictor(adapter, capability, protocol, out, res))
    from ..llm import llm_row_extra

    out["llm"] = llm_row_extra(adapter, out["profile"], CARD, test["sentence"].tolist())
    return out


def _predictor(adapter, capability: str, protocol: str, out: dict, finetuned: dict | None):
    """``predict(frame, prompts=None, options=OPTIONS) -> {pred, score[, native]}``: this run's model on other
    test items (a variant run), with what the run trained kept as it is: the probe's head, the fine-tuned
    encoder and head. ``prompts`` (score.options only): other prompts than the card's for the items."""
    from ...protocols import items as P

    def predict(frame: pd.DataFrame, prompts=None, options=OPTIONS) -> dict:
        if capability == "predict.assertion":
            return P.zero_shot_assertion(adapter, frame["text"].tolist(), assertion_label_map(), gold=frame["label"])
        if capability == "score.options":
            return P.zero_shot_options(adapter, prompts if prompts is not None else option_prompts(frame), options)
        if protocol == "finetune":   # every training seed's model: the variant is a row over the same seeds
            from ...protocols import finetune as FT

            pos = LABELS.index(POSITIVE)
            runs = []
            for seed, model in finetuned["models"]:
                proba = FT.predict_sequence(adapter, model, frame["text"].tolist(), FINETUNE_RECIPE)
                runs.append({"seed": seed, "pred": (proba.argmax(axis=1) == pos).astype(int), "score": proba[:, pos],
                             "details": {}})
            return {"pred": runs[0]["pred"], "score": runs[0]["score"], "seed_runs": runs}
        return P.probe_predict(adapter, out["head"], frame["text"].tolist())

    return predict
