"""The functions of the NegEx card's perturbations (declared in :mod:`.card` as ``PERTURBATIONS``, with their
versions, parameters and seed) and the perturbed test items they give.

Each function takes an item (``item_id``, the cleaned ``sentence``, the ``concept`` and the target's ``span``:
the occurrence :func:`.data.find_target` picks in the unperturbed sentence) and returns the perturbed sentence
with the target's new place, ``{"sentence", "span"}``, or ``NOT_APPLICABLE``; the place is carried through the
perturbation (a lower-cased sentence no longer marks the target by its case). The model inputs are then made
the card's way from the perturbed sentence (:func:`.variants.perturbed_items`): the marked text
(``[entity] X [entity]``) and the option prompt, whose question keeps the card's concept. Nothing of the card
is imported here (the card's declaration imports these functions).
"""
from __future__ import annotations

import re

from ...variants import NOT_APPLICABLE, Perturbation

VERSION = "v1"

#: a report header at the very start of the sentence: the audit's header pattern (``HEADER_RE``) anchored
#: there, with the spaces after its colon
LEADING_HEADER_RE = re.compile(r"^([A-Z][A-Z /&-]{2,}[A-Z]):\s*")
#: concepts of the kit, as the kit writes them (lower case), used by ``scope-distractor``: each is a concept of
#: some kit row, unrelated to any given target (one not in the target's sentence is drawn)
DISTRACTORS = ("fever", "chills", "chest pain", "nausea", "vomiting", "cough", "headache", "rash")


def _target(item):
    return tuple(item["span"])


def concept_lowercase(item, rng):
    """The target occurrence in lower case, nothing else changed. Case carries no negation: the kit writes
    every target in upper case only to mark it (real notes do not), and the target's place is given to the
    model by the markers, not by its case. Not applicable when the occurrence is already lower case."""
    s = item["sentence"]
    a, b = _target(item)
    low = s[a:b].lower()
    if low == s[a:b]:
        return NOT_APPLICABLE
    return {"sentence": s[:a] + low + s[b:], "span": (a, a + len(low))}


def sentence_lowercase(item, rng):
    """The whole sentence lower-cased (each part on its own, so the target's place is kept even where
    lower-casing changes a character's length). Case carries no negation: "NO FEVER", "No fever" and "no
    fever" state the same absence. Not applicable when the sentence is already lower case."""
    s = item["sentence"]
    a, b = _target(item)
    pre, mid, post = s[:a].lower(), s[a:b].lower(), s[b:].lower()
    out = pre + mid + post
    if out == s:
        return NOT_APPLICABLE
    return {"sentence": out, "span": (len(pre), len(pre) + len(mid))}


def header_removed(item, rng):
    """The report header at the start of the sentence ("SKIN: No RASHES" -> "No RASHES") removed, with the
    spaces after its colon. A header names the section a statement sits in; the negation of the target is
    said by the words around it, which all stay. Not applicable when the sentence has no leading header or
    the target is inside it."""
    s = item["sentence"]
    a, b = _target(item)
    m = LEADING_HEADER_RE.match(s)
    if m is None or a < m.end():
        return NOT_APPLICABLE
    cut = m.end()
    return {"sentence": s[cut:], "span": (a - cut, b - cut)}


def concept_typo(item, rng, min_letters: int = 5):
    """One seeded transposition of two neighbouring letters inside one word of the target (a word of at
    least ``min_letters`` letters; never its first or last letter, never two equal letters). A misspelt
    mention is still the same mention: the words that negate or affirm it are untouched. Not applicable when
    the target has no such word."""
    s = item["sentence"]
    a, b = _target(item)
    choices = []
    for m in re.finditer(r"[^\W\d_]+", s[a:b]):
        w, start = m.group(), a + m.start()
        if len(w) < min_letters:
            continue
        choices += [start + k for k in range(1, len(w) - 2) if w[k] != w[k + 1]]
    if not choices:
        return NOT_APPLICABLE
    k = int(choices[int(rng.integers(len(choices)))])
    return {"sentence": s[:k] + s[k + 1] + s[k] + s[k + 2:], "span": (a, b)}


def scope_distractor(item, rng, template: str = "No {concept}.", concepts: tuple = DISTRACTORS):
    """An unrelated negated sentence ("No fever.") appended after the target's sentence, its concept drawn
    (seeded) from the kit's concepts not in the sentence. A negation's scope ends with its sentence: a
    statement after it says nothing of the target, whose decision must not change. Not applicable when every
    distractor concept already occurs in the sentence."""
    s = item["sentence"]
    a, b = _target(item)
    free = [c for c in concepts if c.casefold() not in s.casefold()]
    if not free:
        return NOT_APPLICABLE
    c = free[int(rng.integers(len(free)))]
    return {"sentence": f"{s} {template.format(concept=c)}", "span": (a, b)}
