"""Frozen item splits: seed-hash rank, stratified and group-disjoint draws, split manifests.

Seed-hash rank
--------------
Each item gets the key ``sha256(f"{seed}:{item_id}")`` (hex digest of the UTF-8 string, e.g.
``"20261006:negex-0003"``); items are ranked by that key, ascending, ties (never seen in practice)
broken by item_id. A draw of ``k`` items takes the first ``k`` in rank order. The rank of an item does
not depend on which other items exist, so adding or removing items never reshuffles the others, and
anyone can recompute a split with nothing but ``sha256``.

Stratified draw
---------------
``n`` items are allocated to strata (labels) in proportion to the pool by the largest-remainder
method (floor of ``n * share``; the leftover seats go to the largest fractional parts, ties by label
name), then each stratum takes its first items by seed-hash rank.

Group-disjoint draw
-------------------
A group key (``sentence_key`` for NegEx, ``document`` for MACCROBAT) marks items that must never sit
on both sides of a split; the draws below remove every item that shares a group with the other side.

What an outside system sees
---------------------------
:class:`Split` is one side of a card's split as a system outside the atlas sees it (``atlas export``,
``atlas score``, ``atlaslib.evaluate``): item ids, records, label set and the manifest hash; each card's
``outside_split`` makes it.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Hashable, Iterable, Mapping, Sequence

import pandas as pd


def seed_hash(seed: int, item_id: str) -> str:
    """``sha256("<seed>:<item_id>")`` as hex: the rank key of one item."""
    return hashlib.sha256(f"{seed}:{item_id}".encode("utf-8")).hexdigest()


def rank(item_ids: Iterable[str], seed: int) -> list[str]:
    """Item ids in seed-hash rank order (ascending key, ties by id)."""
    return sorted(item_ids, key=lambda i: (seed_hash(seed, i), i))


def allocate(n: int, stratum_sizes: Mapping[Hashable, int]) -> dict[Hashable, int]:
    """Largest-remainder allocation of ``n`` seats to strata in proportion to their sizes."""
    total = sum(stratum_sizes.values())
    if n > total:
        raise ValueError(f"cannot draw {n} items from a pool of {total}")
    exact = {k: n * v / total for k, v in stratum_sizes.items()}
    seats = {k: int(v) for k, v in exact.items()}
    leftover = n - sum(seats.values())
    order = sorted(exact, key=lambda k: (-(exact[k] - seats[k]), str(k)))
    for k in order[:leftover]:
        seats[k] += 1
    return seats


def stratified_draw(frame: pd.DataFrame, n: int, label: str, seed: int, id_col: str = "item_id") -> list[str]:
    """Draw ``n`` item ids from ``frame`` stratified by column ``label`` (see module docstring)."""
    sizes = frame[label].value_counts().to_dict()
    seats = allocate(n, sizes)
    chosen: list[str] = []
    for lab, k in sorted(seats.items(), key=lambda kv: str(kv[0])):
        ids = frame.loc[frame[label] == lab, id_col].tolist()
        chosen.extend(rank(ids, seed)[:k])
    return rank(chosen, seed)


@dataclass
class SplitManifest:
    """A frozen split: which items train, which test, which are used by neither (and why)."""

    card: str
    version: str
    seed: int
    train: list[str]
    test: list[str]
    excluded: list[str] = field(default_factory=list)
    rules: str = ""

    def __post_init__(self) -> None:
        self.train = sorted(self.train)
        self.test = sorted(self.test)
        self.excluded = sorted(self.excluded)
        overlap = set(self.train) & set(self.test)
        if overlap:
            raise ValueError(f"split {self.card}/{self.version}: {len(overlap)} items on both sides")

    @property
    def hash(self) -> str:
        """sha256 of the canonical JSON of (card, version, seed, train, test, excluded)."""
        payload = {k: getattr(self, k) for k in ("card", "version", "seed", "train", "test", "excluded")}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("rules")
        return {"card": d["card"], "version": d["version"], "seed": d["seed"], "hash": self.hash,
                "train": d["train"], "test": d["test"], "excluded": d["excluded"]}

    def cell(self, **extra) -> dict:
        """The split as a result cell records it: ``hash``, ``n_train``, ``n_test``, then the card's ``extra``
        facts (e.g. test label counts)."""
        return {"hash": self.hash, "n_train": len(self.train), "n_test": len(self.test), **extra}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


def group_disjoint_check(frame: pd.DataFrame, train: Sequence[str], test: Sequence[str], group: str,
                         id_col: str = "item_id") -> set:
    """The groups present on both sides (empty when the split is group-disjoint)."""
    g = frame.set_index(id_col)[group]
    return set(g.loc[list(train)]) & set(g.loc[list(test)])


@dataclass
class Split:
    """One card split as an outside system sees it."""

    card: str
    version: str
    split: str
    ids: list[str]
    records: list[dict]              # JSONL rows: item_id + input fields (+ gold on the train split)
    labels: list[str]                # the label set (tags for MACCROBAT)
    manifest_hash: str
    answer: str                      # what a prediction holds, for the task file and messages
    context: dict = field(default_factory=dict)
