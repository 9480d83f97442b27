"""The values pages quote and the context they are computed from: :class:`Fact`, :class:`FactContext`,
:func:`missing`, :func:`join_and`. One floor below the pages, so that a card's ``pages`` module declares its
facts (``FACTS``: namespace -> provider) without importing the pages; the site's renderer
(:mod:`atlaslib.pages.facts`) registers them and fills the pages' fact placeholders.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


class UnknownFact(KeyError):
    """A page names a fact no provider knows."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0]


@dataclass(frozen=True)
class Fact:
    """One value and how to write it: ``count``, ``percent`` (a share in [0, 1]), ``rate`` (three
    decimals), ``interval`` (a (low, high) pair), ``text`` or ``markdown`` (a block)."""

    value: Any
    kind: str = "count"
    source: str = ""

    def text(self) -> str:
        v = self.value
        if v is None:
            return "n/a"
        if self.kind == "count":
            return f"{int(v):,}"
        if self.kind == "percent":
            return f"{100 * float(v):.1f} %"
        if self.kind == "rate":
            return f"{float(v):.3f}"
        if self.kind == "decimal2":
            return f"{float(v):.2f}"
        if self.kind == "interval":
            return f"[{float(v[0]):.3f}, {float(v[1]):.3f}]"
        if self.kind in ("text", "markdown"):
            return str(v)
        raise ValueError(f"fact kind {self.kind!r}: expected count, percent, rate, interval, text or markdown")


def missing(what: str, kind: str = "text") -> Fact:
    """The value of a fact whose run is not part of this build."""
    return Fact(f"n/a (no {what} in this build)", "text" if kind != "markdown" else "markdown")


def join_and(parts: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


@dataclass
class FactContext:
    """What facts are computed from: the result cells shown in this build and the data directory.
    Providers are computed on first use and kept for the build. Which providers exist is :meth:`known`: the
    site's renderer (:class:`atlaslib.pages.facts.FactContext`) knows every registered namespace; this base
    knows none (a card's provider only receives a context, it never makes one)."""

    cells: list[dict] = field(default_factory=list)
    data_dir: Any = None
    cache_dir: Any = None          # where slow data facts are kept between builds (keyed by source + data)
    _cache: dict = field(default_factory=dict)

    def known(self) -> dict[str, Callable[["FactContext"], dict[str, Fact]]]:
        """namespace -> provider."""
        return {}

    def cell(self, card: str, version: str, model: str, protocol: str) -> dict | None:
        for c in self.cells:
            if (c.get("card"), c.get("version"), c.get("model"), c.get("protocol")) == (card, version, model,
                                                                                          protocol):
                return c if c.get("status") == "ok" else None
        return None

    def ok_cells(self, card: str, version: str | None = None) -> list[dict]:
        return [c for c in self.cells if c.get("card") == card and c.get("status") == "ok"
                and (version is None or c.get("version") == version)]

    def namespace(self, name: str) -> dict[str, Fact]:
        if name not in self._cache:
            known = self.known()
            if name not in known:
                raise UnknownFact(f"unknown fact namespace {name!r}; known: {', '.join(sorted(known))}")
            self._cache[name] = known[name](self)
        return self._cache[name]

    def get(self, key: str) -> Fact:
        ns, _, _ = key.partition(".")
        facts = self.namespace(ns)
        if key not in facts:
            near = [k for k in facts if k.split(".")[-1] == key.split(".")[-1]]
            raise UnknownFact(f"unknown fact {key!r}" + (f" (did you mean {near[0]!r}?)" if near else "") +
                              f"; namespace {ns!r} has: {', '.join(sorted(facts))}")
        return facts[key]
