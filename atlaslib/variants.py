"""Variants of a run: the same model, protocol and split, with the input perturbed or the prompt changed.

One mechanism for both, declared as card data (``Card.perturbations``, ``Card.prompt_set``):

- a :class:`Perturbation` has a name, a version, its parameters and seed, a docstring arguing why it
  preserves the gold label (:attr:`Perturbation.why`), and a function from an item (a mapping of the card's
  input fields) to the perturbed item's changed fields, or :data:`NOT_APPLICABLE` for an item it cannot
  perturb (a sentence without a leading header, a concept without a long word). Its randomness comes from
  :meth:`Perturbation.rng`: a generator seeded by ``sha256("<seed>:<name>:<version>:<item id>")``, so an
  item's perturbation depends on nothing but the item and the declaration;
- a :class:`PromptSet` is a versioned set of :class:`PromptVariant` s of the card's own prompt (paraphrases
  of its question, other option strings, in-context examples drawn from the train items, seeded and
  stratified: :func:`few_shot`).

A *variant run* is one result cell per (run, variant): the default run's spec with
``parameters["variant"]`` naming the variant (:func:`variant_cell`), its predictions over the items the
variant applies to, and the card's metrics on them. Trained heads are those of the default run (the probe's
logistic head, a fine-tuned encoder: never trained again on perturbed text); the embedding cache keys on
the text, so a perturbed text is embedded once and never served an unperturbed vector. A variant cell
carries the run key of the default run it belongs to (``parent_run_key``) and its own (``run_key``: the
parent's, the variant's spec and the sha256 of the variant's inputs), so a variant cell left from an older
run is never paired with a newer default run (:func:`of_cell`, :func:`parents`).

Variant cells live beside the default cells, under ``<results>/<card>/<version>/<model>/variants/
<protocol>/<variant>.json``: :func:`atlaslib.results.read_cells` (three levels deep) never reads them, so they
never enter a leaderboard's ranking; :func:`of_cell` reads a default cell's own.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np


class _NotApplicable:
    """The answer of a perturbation to an item it cannot perturb (the item is left out of the variant run)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NOT_APPLICABLE"

    def __bool__(self) -> bool:
        return False


NOT_APPLICABLE = _NotApplicable()

#: the key of the run spec's parameters that names a variant
PARAMETER = "variant"


def _seed_int(*parts) -> int:
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little")


@dataclass(frozen=True)
class Perturbation:
    """One declared, label-preserving perturbation of a card's items (see the module docstring).

    ``function(item, rng, **parameters)`` returns a mapping of the fields it changes (the card reads the
    perturbed input from it) or :data:`NOT_APPLICABLE`; ``doc`` (default: the function's docstring) says
    why the gold label stays what it was. ``max_items``: the variant run reads at most this many of the items
    the perturbation applies to, the first by seed-hash rank (:func:`sample`; None: all of them; a mapping:
    split version -> that number)."""
    name: str
    version: str
    function: Callable
    parameters: Mapping = field(default_factory=dict)
    seed: int = 0
    doc: str = ""
    max_items: int | Mapping | None = None

    @property
    def key(self) -> str:
        """``<name>-<version>``: the variant's name in cells, files and tables."""
        return f"{self.name}-{self.version}"

    @property
    def why(self) -> str:
        text = self.doc or inspect.getdoc(self.function) or ""
        if not text.strip():
            raise ValueError(f"perturbation {self.key}: no docstring saying why it preserves the gold label")
        text = re.sub(r":\w+:`[~.]*([^`]+)`", r"\1", text.replace("``", ""))  # plain text: no reST roles, literals
        return " ".join(text.split())

    def rng(self, item_id) -> np.random.Generator:
        """The item's own generator: seeded by ``sha256("<seed>:<name>:<version>:<item id>")``."""
        return np.random.default_rng(_seed_int(self.seed, self.name, self.version, item_id))

    def apply(self, item: Mapping, id_field: str = "item_id"):
        """The perturbed fields of ``item`` (a mapping), or :data:`NOT_APPLICABLE`."""
        return self.function(item, self.rng(item[id_field]), **dict(self.parameters))

    def spec(self) -> dict:
        return {"kind": "perturbation", "name": self.name, "version": self.version, "key": self.key,
                "parameters": _plain(self.parameters), "seed": int(self.seed), "max_items": self.max_items,
                "why": self.why}


@dataclass(frozen=True)
class PromptVariant:
    """A variant of the card's prompt: another wording of the question (``template``, the card's fields in
    braces), other answer options (``options``, the positive option first), or ``k_shot`` in-context examples
    from the train items. None / 0: the card's own."""
    name: str
    template: str | None = None
    options: tuple | None = None
    k_shot: int = 0
    note: str = ""

    def spec(self, prompt_set: "PromptSet") -> dict:
        return {"kind": "prompt", "name": self.name, "version": prompt_set.version,
                "key": f"{self.name}-{prompt_set.version}", "template": self.template,
                "options": list(self.options) if self.options else None, "k_shot": int(self.k_shot),
                "seed": int(prompt_set.seed), "max_items": prompt_set.max_items, "note": self.note}


@dataclass(frozen=True)
class PromptSet:
    """A versioned set of prompt variants for the runs that score answer options (``capability``);
    ``max_items``: each variant reads at most this many test items, the first by seed-hash rank (:func:`sample`;
    None: all); ``versions``: the split versions it runs on (none: all)."""
    version: str
    variants: tuple
    seed: int = 0
    max_items: int | None = None
    capability: str = "score.options"
    protocols: tuple = ("zero_shot",)
    versions: tuple = ()   # the split versions its variants run on (none: every version)

    def runs_on(self, version: str, protocol: str) -> bool:
        return protocol in self.protocols and (not self.versions or version in self.versions)

    def __post_init__(self):
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ValueError(f"prompt set {self.version}: variant names repeat: {names}")


def sample(item_ids: Sequence[str], max_items, seed: int, version: str | None = None) -> list[str]:
    """The ids a variant run reads: all of ``item_ids`` when ``max_items`` is None or not below their number,
    else the first ``max_items`` by seed-hash rank (:func:`atlaslib.splits.rank`), in their given order.
    ``max_items`` may map split versions to numbers (``version`` picks one; a version it does not name: all)."""
    ids = list(item_ids)
    if isinstance(max_items, Mapping):
        max_items = max_items.get(version)
    if max_items is None or len(ids) <= max_items:
        return ids
    from .splits import rank

    keep = set(rank(ids, seed)[:max_items])
    return [i for i in ids if i in keep]


def few_shot(train_ids: Sequence[str], train_labels: Sequence, k: int, seed: int) -> list[str]:
    """``k`` train item ids, stratified by label (``k`` split as evenly as the labels allow, the labels in
    sorted order taking the extra seats), each label's items by seed-hash rank
    (:func:`atlaslib.splits.rank`), then ordered by seed-hash rank: the in-context examples of a prompt
    variant, recorded in its cells."""
    from .splits import rank

    by_label: dict = {}
    for i, y in zip(train_ids, train_labels):
        by_label.setdefault(y, []).append(i)
    labels = sorted(by_label, key=str)
    if k > len(train_ids):
        raise ValueError(f"few_shot: {k} examples asked from {len(train_ids)} train items")
    seats = {y: k // len(labels) + (1 if n < k % len(labels) else 0) for n, y in enumerate(labels)}
    chosen = []
    for y in labels:
        chosen += rank(by_label[y], seed)[:seats[y]]
    return rank(chosen, seed)


def _plain(obj):
    return json.loads(json.dumps(obj, default=list))


def inputs_sha256(inputs: Iterable) -> str:
    """sha256 over the JSON list of a variant's model inputs, in item order (part of its cell's key)."""
    return hashlib.sha256(json.dumps(list(inputs), sort_keys=True, default=str).encode("utf-8")).hexdigest()


def is_variant(cell: Mapping) -> bool:
    return bool(((cell.get("spec") or {}).get("parameters") or {}).get(PARAMETER))


def variant_of(cell: Mapping) -> dict | None:
    """The variant a cell's spec names (None for a default run's cell)."""
    return ((cell.get("spec") or {}).get("parameters") or {}).get(PARAMETER) or None


def variant_cell(base: Mapping, variant: Mapping, *, metrics: dict, predictions: list, inputs_digest: str,
                 n_items: int, n_applicable: int | None = None, timing: dict | None = None,
                 extra: dict | None = None) -> dict:
    """The result cell of a variant run of the default run ``base`` (its cell): ``base``'s spec with
    ``parameters["variant"]`` = ``variant`` (:meth:`Perturbation.spec` or :meth:`PromptVariant.spec`) plus
    the number of test items (``n_items``), of those it applies to (``n_applicable``, default: all it read), of
    those it read (``n_read``: the predictions) and the sha256 of its inputs; ``predictions`` over those items;
    ``parent_run_key`` = ``base``'s run key and ``run_key`` its own. Its per-unit counts are the card's
    (:meth:`atlaslib.cards.run.CardRun.variant` adds them, from the records its metrics were scored on)."""
    import copy

    from .results import schema

    spec_d = copy.deepcopy(dict(base["spec"]))
    applies = len(predictions) if n_applicable is None else n_applicable
    v = dict(variant, n_items=int(n_items), n_applicable=int(applies), n_read=len(predictions),
             inputs_sha256=inputs_digest)
    spec_d.setdefault("parameters", {})[PARAMETER] = v
    spec = schema.RunSpec(**{k: base[k] for k in ("card", "version", "model", "protocol")},
                           profile=spec_d.get("profile") or {}, revision=spec_d.get("revision"),
                           capability=spec_d.get("capability"), parameters=spec_d["parameters"])
    cell = schema.make_cell(spec, metrics=metrics, predictions=predictions, split=base.get("split"),
                             data_sha256=base.get("data_sha256"), seeds=base.get("seeds"), timing=timing,
                             extra=extra or {}, overlap=base.get("overlap"), env=base.get("environment") or {})
    parent = base.get("run_key")
    cell["parent_run_key"] = parent
    cell["run_key"] = hashlib.sha256(json.dumps([parent, v], sort_keys=True, default=str).encode()).hexdigest()
    return cell


def variant_path(model_folder, protocol: str, key: str) -> Path:
    """``<model folder>/variants/<protocol>/<variant key>.json``."""
    return Path(model_folder) / "variants" / protocol / f"{key}.json"


def write_variant_cells(cells: Sequence[dict], result_path, protocol: str) -> list[Path]:
    """Write each variant cell beside the default run's cell (``result_path``: where the run writes its own
    cell; its folder is the model's folder). Nothing is written when ``result_path`` is None (a notebook run
    by hand). A variant file of this protocol that no cell of this run names is removed (a variant dropped
    from the card is not shown from an older run)."""
    from .results import store

    if not result_path:
        return []
    folder = Path(result_path).parent
    written = []
    for cell in cells:
        path = variant_path(folder, protocol, variant_of(cell)["key"])
        path.parent.mkdir(parents=True, exist_ok=True)
        store.write_cell(cell, path)
        written.append(path)
    old = folder / "variants" / protocol
    if old.is_dir():
        for f in old.glob("*.json"):
            if f not in written:
                f.unlink(missing_ok=True)
    return written


def parents(variant_cells: Iterable[dict], cells: Iterable[dict]) -> list[tuple[dict, dict]]:
    """``(default cell, variant cell)`` pairs: same card, version, model and protocol, and, when both carry
    run keys, the variant's ``parent_run_key`` equal to the default cell's ``run_key`` (a variant from an
    older run is left out)."""
    base = {}
    for c in cells:
        if not is_variant(c):
            base[(c["card"], c["version"], c["model"], c["protocol"])] = c
    out = []
    for v in variant_cells:
        b = base.get((v["card"], v["version"], v["model"], v["protocol"]))
        if b is None:
            continue
        if b.get("run_key") and v.get("parent_run_key") and b["run_key"] != v["parent_run_key"]:
            continue
        out.append((b, v))
    return out



def of_cell(cell: Mapping) -> list[dict]:
    """The variant cells written beside a default run's cell (read from its ``_path``: the folder
    :func:`write_variant_cells` wrote them to) that belong to it (their ``parent_run_key`` its run key, when
    both carry one); [] for a cell read from nowhere."""
    from .results import store

    path = cell.get("_path")
    if not path:
        return []
    folder = Path(path).parent / "variants" / cell["protocol"]
    out = []
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        v = store.read_cell(f)
        if parents([v], [cell]):
            out.append(v)
    return out
