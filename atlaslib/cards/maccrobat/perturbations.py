"""The functions of the MACCROBAT card's perturbations (declared in :mod:`.card` as ``PERTURBATIONS``) and the
perturbed test sentences they give.

Each function takes an item (``item_id``, ``words``, gold ``tags``; ``text`` and ``word_spans`` for the gold
cuts) and returns the changed fields, ``{"words"}`` or ``{"words", "tags"}`` (the gold mentions written on the
new words), or ``NOT_APPLICABLE``.
"""
from __future__ import annotations

import pandas as pd

from ...variants import NOT_APPLICABLE

VERSION = "v1"


def sentence_lowercase(item, rng):
    """Every word lower-cased, the gold tags as they were. A mention's type and extent do not depend on its
    case ("CT scan" and "ct scan" are the same test). Not applicable when the sentence is already lower
    case."""
    words = [w.lower() for w in item["words"]]
    return NOT_APPLICABLE if words == list(item["words"]) else {"words": words}


def word_typo(item, rng, min_letters: int = 5):
    """One seeded transposition of two neighbouring letters inside one word outside every gold mention (a
    word of at least ``min_letters`` letters tagged ``O``; never its first or last letter, never two equal
    letters). No gold mention's words change, so the gold tags are the same; a misspelt word around them is
    what notes are full of. Not applicable when the sentence has no such word."""
    choices = []
    for k, (w, t) in enumerate(zip(item["words"], item["tags"])):
        if t == "O" and w.isalpha() and len(w) >= min_letters:
            choices += [(k, j) for j in range(1, len(w) - 2) if w[j] != w[j + 1]]
    if not choices:
        return NOT_APPLICABLE
    k, j = choices[int(rng.integers(len(choices)))]
    w = item["words"][k]
    words = list(item["words"])
    words[k] = w[:j] + w[j + 1] + w[j] + w[j + 2:]
    return {"words": words}


def gold_cuts_removed(item, rng):
    """The sentence's natural words (:func:`.words.natural_word_spans`: no cut where a gold mention starts
    or ends inside a run of letters) with the gold mentions written on them (:func:`.words.uncut_tags`: a
    mention covers every natural word it overlaps). The mentions and their types are the same; only the
    boundary the word list gave away is gone (and a mention whose words an earlier one already took cannot be
    written, as without the cuts it cannot be told apart). Not applicable when the sentence has no gold cut."""
    from .words import natural_word_spans, uncut_tags

    if [tuple(s) for s in natural_word_spans(item["text"])] == [tuple(s) for s in item["word_spans"]]:
        return NOT_APPLICABLE
    words, tags = uncut_tags(item["text"], item["word_spans"], item["tags"])
    return {"words": words, "tags": tags}


def perturbed_items(test: pd.DataFrame, perturbation, version: str | None = None) -> pd.DataFrame:
    """The test sentences the perturbation applies to (at most its ``max_items``, by seed-hash rank), with
    their perturbed ``words`` and gold ``tags`` (every other column as it was), in test order; ``item_id`` a
    column."""
    from ...variants import sample

    rows = []
    frame = test.reset_index() if "item_id" not in test.columns else test
    for rec in frame.to_dict("records"):
        out = perturbation.apply(rec)
        if out is NOT_APPLICABLE:
            continue
        rows.append({**rec, "words": out["words"], "tags": out.get("tags", rec["tags"])})
    out = pd.DataFrame(rows, columns=frame.columns)
    keep = set(sample(out["item_id"].tolist(), perturbation.max_items, perturbation.seed, version))
    res = out[out["item_id"].isin(keep)].reset_index(drop=True)
    res.attrs["n_applicable"] = len(out)
    return res
