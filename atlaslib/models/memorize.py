"""The ``memorize`` baseline: tag test text with the phrases that were mentions in training.

It learns from the train split, so it is never a zero-shot model: MACCROBAT runs it under its own
protocol ``train_lookup`` (look up phrases memorised from the train sentences); Clinical TempEval runs it
in the task's phases, as the 2015 paper did.

Generic over character spans, so any span card can use it (MACCROBAT applies it to its sentence
words joined by single spaces; Clinical TempEval to document text):

>>> m = PhraseMemorizer().fit([("chest pain and fever", [(0, 10, "problem"), (15, 20, "problem")])])
>>> m.predict("fever, then chest pain")
[(0, 5, 'problem'), (12, 22, 'problem')]

Rules
-----
*Phrases.* A phrase is the exact text of an annotated span ``text[start:end]`` in a training document.

*Occurrences.* The occurrences of a phrase are all positions in the training texts where its text
appears at word boundaries (see below), plus its annotated positions. A phrase is *memorized* when
more than half of its occurrences are annotated mentions (``annotated / occurrences > 0.5``): "pain"
annotated 3 times out of 5 occurrences is kept, 1 out of 2 is not.

*Label.* A memorized phrase keeps its most frequent label among its annotated occurrences; a tie is
broken by the label seen first in training order. Labels may be any hashable value (a type name, a
tuple of attribute values, ...).

*Case.* By default matching is exact, case-sensitive ("Pain" and "pain" are different phrases).
With ``casefold=True`` phrases and texts are compared lower-cased (character by character, so offsets
never move), and the counts and labels of "Pain" and "pain" are pooled.

*Word boundaries.* A match ``[s, e)`` is at word boundaries when it does not cut a run of letters or
digits: ``text[s-1]`` and ``text[s]`` are not both alphanumeric, nor are ``text[e-1]`` and ``text[e]``.
So "pain" never matches inside "painful", while "(" or "-" may sit next to a word.

*Prediction.* All matches of all memorized phrases in the test text are collected, then taken
longest first (ties: earlier start first), each kept only if it overlaps no match already kept;
the result is sorted by start. Whitespace-only or empty phrases are ignored.
"""
from __future__ import annotations

from collections import Counter
from typing import Hashable, Iterable, Sequence


def _fold(text: str) -> str:
    """Lower-case character by character, keeping the length (offsets stay valid)."""
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


def at_word_boundaries(text: str, start: int, end: int) -> bool:
    """True when ``[start, end)`` does not cut a run of letters/digits of ``text``."""
    if start > 0 and text[start - 1].isalnum() and text[start].isalnum():
        return False
    if end < len(text) and text[end - 1].isalnum() and text[end].isalnum():
        return False
    return True


def find_occurrences(text: str, phrase: str) -> list[int]:
    """Start offsets of every (possibly overlapping) occurrence of ``phrase`` at word boundaries."""
    out, k = [], text.find(phrase)
    while k != -1:
        if at_word_boundaries(text, k, k + len(phrase)):
            out.append(k)
        k = text.find(phrase, k + 1)
    return out


class PhraseMemorizer:
    """Memorize training mentions, tag test text longest-first (rules in the module docstring)."""

    def __init__(self, casefold: bool = False, threshold: float = 0.5):
        self.casefold = casefold
        self.threshold = threshold
        self.phrases: dict[str, Hashable] = {}
        self.stats: dict[str, dict] = {}

    def _norm(self, text: str) -> str:
        return _fold(text) if self.casefold else text

    def fit(self, docs: Iterable[tuple[str, Sequence[tuple[int, int, Hashable]]]]) -> "PhraseMemorizer":
        """``docs``: iterable of ``(text, [(start, end, label), ...])``; returns ``self``."""
        texts: list[str] = []
        annotated: dict[str, set] = {}
        labels: dict[str, Counter] = {}
        first_seen: dict[Hashable, int] = {}
        for d, doc in enumerate(docs):
            try:
                text, spans = doc
            except (TypeError, ValueError):
                raise ValueError(f"training document {d}: expected (text, [(start, end, label), ...])") from None
            if not isinstance(text, str):
                raise ValueError(f"training document {d}: text must be str, got {type(text).__name__}")
            norm = self._norm(text)
            texts.append(norm)
            for k, span in enumerate(spans):
                try:
                    start, end, label = span
                except (TypeError, ValueError):
                    raise ValueError(f"training document {d}, span {k}: expected (start, end, label), "
                                     f"got {span!r}") from None
                if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text)):
                    raise ValueError(f"training document {d}, span {k}: offsets ({start}, {end}) are not "
                                     f"0 <= start < end <= {len(text)}")
                phrase = norm[start:end]
                if not phrase.strip():
                    continue
                annotated.setdefault(phrase, set()).add((d, start))
                labels.setdefault(phrase, Counter())[label] += 1
                first_seen.setdefault(label, len(first_seen))
        self.phrases, self.stats = {}, {}
        for phrase, positions in annotated.items():
            occ = set(positions)
            for d, text in enumerate(texts):
                occ.update((d, k) for k in find_occurrences(text, phrase))
            n_ann, n_occ = len(positions), len(occ)
            counts = labels[phrase]
            label = min(counts, key=lambda lab: (-counts[lab], first_seen[lab]))
            kept = n_ann / n_occ > self.threshold
            self.stats[phrase] = {"annotated": n_ann, "occurrences": n_occ, "label": label, "kept": kept}
            if kept:
                self.phrases[phrase] = label
        return self

    def predict(self, text: str) -> list[tuple[int, int, Hashable]]:
        """Non-overlapping ``(start, end, label)`` matches in ``text``, sorted by start."""
        if not isinstance(text, str):
            raise ValueError(f"predict expects a str, got {type(text).__name__}")
        norm = self._norm(text)
        cands = []
        for phrase, label in self.phrases.items():
            for k in find_occurrences(norm, phrase):
                cands.append((k, k + len(phrase), label))
        cands.sort(key=lambda c: (-(c[1] - c[0]), c[0]))
        taken = [False] * (len(text) + 1)
        out = []
        for s, e, label in cands:
            if any(taken[s:e]):
                continue
            for j in range(s, e):
                taken[j] = True
            out.append((s, e, label))
        return sorted(out, key=lambda c: c[0])
