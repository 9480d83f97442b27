"""What a model's calls cost: wall seconds, inputs, prompt and completion tokens (``info["cost"]``).

Every adapter of a language model (and every Hugging Face adapter) keeps one :class:`Cost` for the calls of
its capability and reports :meth:`Cost.to_dict` in its ``info``, which the run spec records (a card's
``details``); so a page can show items per second on the machine the run spec names, and a reader what a
point of a metric cost. Tokens: ``prompt_tokens`` are the tokens read (prompts, texts to embed),
``completion_tokens`` those scored (answer options) or generated (answers). Requests served from a cache cost
no tokens and count in ``cached`` (openai-compatible), so their wall time is not mistaken for the model's.

Tokens per item must not depend on what an earlier run left in the model-call store: an adapter that counts the
tokens of every item it was given, computed or served from the store, says so (``Cost(tokens_of=EVERY_ITEM)``,
recorded as ``tokens_of``); a page gives tokens per item only from such records (:func:`tokens_of_every_item`).
"""
from __future__ import annotations


#: the ``tokens_of`` of an adapter whose token counts cover every item asked, whether computed or served
EVERY_ITEM = "every item"


def tokens_of_every_item(recorded: dict) -> bool:
    """Whether a recorded cost (``Cost.to_dict``) counts the tokens of every item, served ones included (a
    record without ``tokens_of`` counted only the items computed in that run, or a server's usage)."""
    return isinstance(recorded, dict) and recorded.get("tokens_of") == EVERY_ITEM


class Cost:
    """Sums over an adapter's calls; :meth:`to_dict` (a copy) adds seconds per input and inputs per second."""

    def __init__(self, tokens_of: str | None = None):
        self.data = {"calls": 0, "items": 0, "wall_seconds": 0.0, "prompt_tokens": 0, "completion_tokens": 0,
                     "seconds_per_item": None, "items_per_second": None}
        if tokens_of is not None:
            self.data["tokens_of"] = str(tokens_of)

    def add(self, items: int, seconds: float, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        d = self.data
        d["calls"] += 1
        d["items"] += int(items)
        d["wall_seconds"] = round(d["wall_seconds"] + float(seconds), 6)
        d["prompt_tokens"] += int(prompt_tokens)
        d["completion_tokens"] += int(completion_tokens)
        n, t = d["items"], d["wall_seconds"]
        d["seconds_per_item"] = round(t / n, 6) if n else None
        d["items_per_second"] = round(n / t, 3) if n and t > 0 else None

    def to_dict(self) -> dict:
        return dict(self.data)
