"""What a language model's row holds on any card beyond its metrics: the contamination mark and the
memorisation probe (:mod:`atlaslib.models.contamination`), as a result cell's ``extra`` parts.

A card's run calls :func:`llm_row_extra` with the adapter it ran, the profile, its ``CARD`` and its test
sentences as published (the text a crawl would hold); the reference sentences of the probe come from the
card whose test set is declared ``synthetic`` (``Card.test_set_exposure``: the contamination-free
reference), through that card module's ``memorisation_sentences()``, so no card names another.
"""
from __future__ import annotations

from typing import Sequence

from ..phases import side


def reference_card():
    """The module of the card whose test set is synthetic (the contamination-free reference), or None."""
    from . import available_cards
    from .run import card_module

    for card in available_cards():
        if getattr(card, "test_set_exposure", "") == "synthetic":
            mod = card_module(card.name)
            if callable(getattr(mod, "memorisation_sentences", None)):
                return mod
    return None


@side
def llm_row_extra(adapter, profile, card, test_sentences: Sequence[str], **probe_options) -> dict:
    """``{"contamination": may_have_seen(...), "memorisation": {...}}`` for a language model's row (``{}``
    for any other model). ``memorisation`` holds the probe on ``test_sentences`` (``test``) and on the
    reference card's sentences (``reference``, with ``reference_card``), or ``None`` with the reason when
    the adapter cannot continue text (an API answering in words)."""
    from ..models.contamination import is_language_model, may_have_seen, memorisation_probe

    if not is_language_model(profile):
        return {}
    extra = {"contamination": may_have_seen(profile, card)}
    if not callable(getattr(adapter, "greedy_continuations", None)):
        extra["memorisation"] = None
        extra["memorisation_reason"] = "not measured: the adapter cannot continue token ids"
        return extra
    from ..models.contamination import MATCHING, length_matched

    ref = reference_card()
    test = memorisation_probe(adapter, list(test_sentences), **probe_options)
    reference, ref_name, why = None, None, None
    if ref is None:
        why = "no card declares a synthetic test set to serve as the reference"
    elif ref.CARD.name == card.name:
        # the test sentences are the reference's own: comparing them with themselves would say nothing
        ref_name, why = card.name, "none: this card's test sentences are the synthetic reference itself"
    else:
        ref_name = ref.CARD.name
        picks = length_matched(adapter, list(ref.memorisation_sentences()), test.get("token_lengths") or [],
                               list(test_sentences), min_tokens=probe_options.get("min_tokens", 8),
                               seed=probe_options.get("seed", 0))
        if picks:
            reference = memorisation_probe(adapter, picks, **{**probe_options, "max_sentences": len(picks)})
            reference["matching"] = MATCHING
        else:
            why = f"none: the {ref_name} card has no sentence long enough to match this card's"
    extra["memorisation"] = {"test": test, "reference": reference, "reference_card": ref_name,
                             "reference_reason": why}
    return extra
