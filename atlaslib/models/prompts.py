"""Prompts answered by scoring fixed options, declared as data: :class:`OptionPrompt` and :class:`PromptSet`.

A card declares its prompts beside its other data (``card.py``); an adapter that answers by option scoring
(a causal LM's ``predict.nli``) receives the prompt object and records :meth:`OptionPrompt.to_dict` (name,
template, options and their labels, sha256) in its ``info``, so the run spec says exactly what was asked.

A :class:`PromptSet` is a versioned set of named variants of one question: the variant named by
``default`` is the card's (the one the leaderboard ranks); paraphrases, other option strings or few-shot
variants are declared beside it as more entries, and a new wording is a new entry (or a new set version),
never an edit of one already published::

    NLI_PROMPTS = PromptSet("nli-negation-options-v1", {
        "card": OptionPrompt("card", "{premise}\\nQuestion: {hypothesis} True, False, or Neither?\\nAnswer:",
                             ((" True", "entailment"), (" Neither", "neutral"), (" False", "contradiction"))),
    })
    NLI_PROMPTS.card.render(premise="No fever.", hypothesis="The patient has fever.")

This module imports nothing from the atlas: cards and adapters both use it.
"""
from __future__ import annotations

import hashlib
import json
import string
from dataclasses import dataclass, field
from typing import Mapping


@dataclass(frozen=True)
class OptionPrompt:
    """One prompt: ``template`` (``str.format`` fields such as ``{premise}``) and ``options``, pairs of
    (the exact string scored after the prompt, with its leading space, the label it stands for)."""

    name: str
    template: str
    options: tuple[tuple[str, str], ...]

    def __post_init__(self):
        opts = tuple((str(o), str(lab)) for o, lab in self.options)
        if len(opts) < 2:
            raise ValueError(f"prompt {self.name!r}: expected at least two (option, label) pairs, got {opts!r}")
        if len({o for o, _ in opts}) != len(opts) or len({lab for _, lab in opts}) != len(opts):
            raise ValueError(f"prompt {self.name!r}: option strings and labels must each be distinct, got {opts!r}")
        object.__setattr__(self, "options", opts)

    @property
    def fields(self) -> tuple[str, ...]:
        """The template's field names, in order of first appearance."""
        return tuple(dict.fromkeys(f for _, f, _, _ in string.Formatter().parse(self.template) if f))

    @property
    def option_strings(self) -> list[str]:
        return [o for o, _ in self.options]

    @property
    def labels(self) -> list[str]:
        return [lab for _, lab in self.options]

    def render(self, **values) -> str:
        """The prompt for one item; a missing or unexpected field raises ValueError naming it."""
        missing = [f for f in self.fields if f not in values]
        extra = sorted(set(values) - set(self.fields))
        if missing or extra:
            raise ValueError(f"prompt {self.name!r}: fields {list(self.fields)} expected; missing {missing}, "
                             f"unexpected {extra}")
        return self.template.format(**values)

    def to_dict(self) -> dict:
        """What a run spec records: name, template, options (string -> label) and the sha256 of those."""
        body = {"name": self.name, "template": self.template, "options": [list(p) for p in self.options]}
        digest = hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()
        return {**body, "sha256": digest}


@dataclass(frozen=True)
class PromptSet:
    """A versioned set of :class:`OptionPrompt` variants of one question; ``default`` names the card's."""

    version: str
    prompts: Mapping[str, OptionPrompt] = field(default_factory=dict)
    default: str = "card"

    def __post_init__(self):
        if self.default not in self.prompts:
            raise ValueError(f"prompt set {self.version!r}: no prompt named {self.default!r} (the default); "
                             f"it has {sorted(self.prompts)}")
        for key, p in self.prompts.items():
            if p.name != key:
                raise ValueError(f"prompt set {self.version!r}: entry {key!r} holds a prompt named {p.name!r}")

    @property
    def card(self) -> OptionPrompt:
        """The card's prompt (the variant the leaderboard ranks)."""
        return self.prompts[self.default]

    def __getitem__(self, name: str) -> OptionPrompt:
        try:
            return self.prompts[name]
        except KeyError:
            raise KeyError(f"prompt set {self.version!r} has no variant {name!r}; it has {sorted(self.prompts)}") \
                from None

    def record(self, name: str | None = None) -> dict:
        """The run-spec record of one variant (default: the card's), with the set's version."""
        return {"prompt_set": self.version, **self[name or self.default].to_dict()}
