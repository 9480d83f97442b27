"""MACCROBAT's word cuts, with nothing of the card imported (the card's perturbations read them): words of a
text with cuts forced at given offsets (:func:`words_of`, the card's words: cut at gold mention boundaries),
the natural words without those cuts, and gold mentions carried between the two."""
from __future__ import annotations

import re
from typing import Sequence

from ...metrics.spans import mentions as tag_mentions

_WORD = re.compile(r"[^\W_]+|\S")


def words_of(text: str, cuts: Sequence[int] = ()) -> list[tuple[int, int]]:
    """Word spans ``(start, end)`` of ``text``: runs of letters/digits and single other non-space
    characters, with a cut forced at every offset in ``cuts`` (mention boundaries)."""
    bounds = sorted({0, len(text), *[c for c in cuts if 0 < c < len(text)]})
    spans = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        spans.extend((a + m.start(), a + m.end()) for m in _WORD.finditer(text[a:b]))
    return spans


#: word spans of a text without the gold cuts: what a model would see if the card did not cut words where
#: mentions start or end (:func:`words_of` with no ``cuts``)
natural_word_spans = words_of


def char_mentions(tags: Sequence[str], spans: Sequence[tuple[int, int]]) -> set[tuple[str, int, int]]:
    """Mentions of IOB2 ``tags`` as character spans ``(type, start of first word, end of last word)``."""
    return {(t, spans[a][0], spans[b][1]) for t, a, b in tag_mentions(list(tags))}


def uncut_tags(text: str, spans: Sequence[tuple[int, int]], gold_tags: Sequence[str]) -> tuple[list[str], list[str]]:
    """Natural words of ``text`` and IOB2 tags projected onto them: a gold mention (read off ``gold_tags``
    over the cut ``spans``) covers every natural word it overlaps; a mention whose words are already
    taken by an earlier one is left out (it cannot be represented without the cuts)."""
    nat = natural_word_spans(text)
    tags = ["O"] * len(nat)
    for t, cs, ce in sorted(char_mentions(gold_tags, spans), key=lambda m: m[1]):
        ws = [k for k, (a, b) in enumerate(nat) if a < ce and cs < b]
        if not ws or any(tags[k] != "O" for k in ws):
            continue
        tags[ws[0]] = f"B-{t}"
        for k in ws[1:]:
            tags[k] = f"I-{t}"
    return [text[a:b] for a, b in nat], tags
