"""The card registry: one package per card, each exposing ``CARD`` (a :class:`Card`), found by discovery.

Cards are found, never listed by hand (in the way of HELM's ``discover_run_spec_functions``):

- every package under ``atlaslib/cards/`` is a card, named after its folder (``pkgutil`` over this
  package; the module ``run`` is :class:`~atlaslib.cards.run.CardRun`, not a card);
- a card outside the atlas is a package of any installed distribution that declares it as an entry point
  in the group ``atlaslib.cards`` (name: the card's name; value: the card package), e.g. in its
  ``pyproject.toml``::

      [project.entry-points."atlaslib.cards"]
      wound_notes = "my_cards.wound_notes"

  installed with ``pip install -e .`` into the atlas's environment (so that the notebook's kernel imports it
  too). A name that both provide is refused (:class:`CardRegistryError`).

:data:`CARD_MODULES` (card name -> module name) holds the atlas's own cards from import and the entry
points' once :func:`discover` has looked (:func:`card_names` and :func:`available_cards` make sure it has;
:func:`get_card` looks again before calling a name unknown).
:func:`available_cards` gives the cards in their declared order (``Card.order``, then name), the order of
the book, ``atlas list`` and the default matrix. A card's page content (facts quoted in prose, worked
examples, extra tables) is in its own ``pages`` module (:func:`card_pages`).

A card is one dataset + task + protocols + metrics, as its specification says. The runner and the book
read everything they need about a card from its ``CARD``: the notebook to execute, its split versions and
their test-set sizes, the default (version, model, protocol) matrix, the leaderboard metrics (primary
first), the pinned data files, the resampling unit of its intervals, its caveats, its baselines and the
capabilities each protocol asks of a model, and the publication flags.

Every card module also exposes the same five functions (the card contract, see CONTRIBUTING.md):

- ``load_items(data_dir=None) -> DataFrame`` with a unique ``item_id`` column;
- ``audit_items(items, data_dir=None) -> dict``: JSON-able facts about the items, at least ``n_items``
  (``audit_items``, not ``audit``: some cards keep an older ``audit`` with card-specific inputs);
- ``split(items, version) -> SplitManifest``;
- ``predict(items, manifest, model, protocol, *, data_dir=None, **options) -> list[dict] | dict``: one
  record per test item, :func:`record` shaped (``item_id``, ``gold``, ``pred``, ``score`` or None, then the
  card's own fields); for a row over training seeds (a fine-tune: one model per seed of the recipe)
  ``{training seed: records}`` in the recipe's order, which :func:`atlaslib.cards.run.contract_parts` makes
  into the book's seeded row (the mean over seeds with the two-level interval); a run that cannot happen
  raises :class:`NotRun` with the reason;
- ``counts(cell) -> UnitCounts``: the per-unit integer counts of a cell's predictions under the card's
  ``SCORING`` (:mod:`atlaslib.metrics.engine`), from which the run's metrics (:meth:`CardRun.score
  <atlaslib.cards.run.CardRun.score>`, the one scorer: a card has no ``score`` of its own) and every page,
  comparison and slice read their numbers (:func:`counted`).

A card of a task family (:mod:`atlaslib.cards.families`) writes ``load_items``, ``audit_items`` and ``split`` and
takes ``predict`` and ``counts`` from its family instance (``FAMILY``); otherwise any of the card's files may
define them, so long as the package exposes them; they give the notebook's numbers. See
:data:`CONTRACT` and ``tests/cards/test_contract.py``.
"""
from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass, field

from ..registries import Registry

#: the entry-point group through which installed distributions declare card packages
ENTRY_POINT_GROUP = "atlaslib.cards"


class CardRegistryError(ValueError):
    """Two card packages claim one name, or a card's ``CARD.name`` is not the name it was found under."""


def _packages() -> dict[str, str]:
    """Card name -> module name of the packages under ``atlaslib/cards/`` (read off the folder, nothing
    imported)."""
    return {m.name: f"{__name__}.{m.name}" for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name)
            if m.ispkg}


def _found() -> dict[str, str]:
    """Card name -> module name: the packages under ``atlaslib/cards/``, then the entry points."""
    from importlib.metadata import entry_points

    found = _packages()
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if found.get(ep.name, ep.value) != ep.value:
            dist = getattr(ep.dist, "name", None) or "an installed distribution"
            raise CardRegistryError(f"card {ep.name!r} is declared twice: {found[ep.name]} and {ep.value} (entry "
                                    f"point of {dist}, group {ENTRY_POINT_GROUP}); rename one of the two")
        found[ep.name] = ep.value
    return found


#: card name -> the card package's module name: the atlas's own packages at import; the entry points'
#: cards join on the first :func:`discover` (which :func:`card_names`, :func:`available_cards` and a name
#: :func:`get_card` does not know yet call), so a kernel running one of the atlas's cards never reads the
#: installed distributions
CARD_MODULES: Registry[str] = Registry("card")
for _name, _module in _packages().items():
    CARD_MODULES.add(_name, _module)
_entry_points_read = False


def discover() -> dict[str, str]:
    """Look for cards (again: e.g. after a card package was installed in this process) and add the new ones
    to :data:`CARD_MODULES`; returns it."""
    global _entry_points_read
    for name, module in _found().items():
        if name not in CARD_MODULES:
            CARD_MODULES.add(name, module)
    _entry_points_read = True
    return CARD_MODULES


def card_names() -> list[str]:
    """Every card's name: the atlas's own and those declared by entry points (looked up once)."""
    if not _entry_points_read:
        discover()
    return list(CARD_MODULES)


#: the functions every card module exposes, with the same names and shapes (CONTRIBUTING.md, "Add a card")
CONTRACT = ("load_items", "audit_items", "split", "predict", "counts")


class NotRun(Exception):
    """A run that cannot happen here (weights unavailable, capability missing, text under a data use
    agreement); the message is the reason its not-run cell records."""


def record(item_id, gold, pred, score=None, **extra) -> dict:
    """One item's prediction record, the same shape on every card and in every result cell's
    ``predictions``: ``item_id``, ``gold``, ``pred`` (the prediction), ``score`` (None when the model gives
    none), then the card's own fields."""
    return {"item_id": item_id, "gold": gold, "pred": pred, "score": score, **extra}


@dataclass(frozen=True)
class ParameterGate:
    """Runs that cannot happen unless a notebook parameter is set: on one of ``versions``, a run of one of
    ``models`` or under one of ``protocols`` needs ``parameter`` (e.g. TempEval's note text, under a data use
    agreement, for the runs that read text); without it the run is not run, for ``reason``."""
    parameter: str
    reason: str
    versions: tuple = ()
    models: tuple = ()
    protocols: tuple = ()

    def blocks(self, version: str, model: str, protocol: str, params: dict) -> bool:
        return (version in self.versions and (model in self.models or protocol in self.protocols)
                and not params.get(self.parameter))


@dataclass(frozen=True)
class Analysis:
    """How the book's "where models fail" section (:mod:`atlaslib.analysis`) reads a card's result cells.

    ``kind`` names the card's task family (:mod:`atlaslib.cards.families`, :func:`~atlaslib.cards.families.family_of`:
    the generic modules read the family, never the kind), which fixes what two runs can disagree on and how a slice
    is scored:

    - ``binary``: items with a positive label (NegEx): item disagreement; macro F1 per slice with the
      stratified bootstrap;
    - ``labels``: labelled items, abstentions allowed (NLI challenge): item disagreement; accuracy per
      slice with its exact interval;
    - ``spans``: tagged mentions (MACCROBAT): gold mentions found by all / some / no runs; strict entity F1
      per slice with the cluster bootstrap over documents;
    - ``temporal``: the official scorer's items (TempEval): gold items found by all / some / no runs; the
      scorer's F1 per slice with the bootstrap over documents.

    ``slices``: slice name -> spec (see :mod:`atlaslib.analysis.slices`); ``positive``: the positive gold
    label, for the calibration of scores; ``rule_evidence``: runs record the trigger behind each decision;
    ``inputs``: the fields of the card's outside split records (what ``atlas export`` gives of an item) that
    the item explorer shows as the item's input (none: ids only);
    ``found`` (``temporal``): the keys of each prediction record's ``found`` bits (one per gold item) -> the
    metric (or metrics) whose gold items they mark, so a run is compared only on what it addresses."""
    kind: str = "labels"
    slices: dict = field(default_factory=dict)
    positive: str | None = None
    rule_evidence: bool = False
    inputs: tuple = ()
    found: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Departure:
    """One way the atlas departs from the card's specification, shown on the card page's table "Where this
    page departs from the card": the ``topic``, what the ``card`` (its specification) says, what the atlas
    does instead (``atlas``) and ``why``. Any number in ``atlas`` is a fact placeholder (``{{fact:…}}``), computed
    from the data and the result cells when the page renders (the card's own published figures, quoted in
    ``card``, are the specification's text). A card adds a departure by adding an entry to its
    ``departures``; every entry is a row of the table. ``code``: the functions that carry a departure from one
    of the atlas's own rules out (``"atlaslib.cards.x.module.function"``; not shown on the page): the one place
    such a second definition may live (``tests/test_one_rule.py``)."""
    topic: str
    card: str
    atlas: str
    why: str = ""
    code: tuple = ()


#: words that say a licence is not confirmed, anywhere in a card's ``licence`` text (any case): a card whose
#: ``licence_confirmed`` is True may not hold them
UNCONFIRMED = re.compile(r"\b(?:un(?:confirmed|verified|clear|known)|not\s+(?:yet\s+)?(?:confirmed|verified|known|"
                         r"clear)|to\s+be\s+(?:confirmed|verified|determined)|tbc|tbd|pending)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Card:
    name: str
    title: str
    notebook: str                                   # MyST text notebook, relative to the repo root
    versions: tuple[str, ...]                       # frozen split versions; rankings never mix them
    protocols: tuple[str, ...]
    metrics: tuple[str, ...]                        # leaderboard metric base names, primary first
    default_matrix: tuple[tuple[str, str, str], ...]  # (version, model, protocol) for the default book
    higher_is_better: dict = field(default_factory=dict)  # base metric -> bool (default True)
    licence_confirmed: bool = True                  # False: left out of `atlas book --publish`
    licence_note: str = ""
    gated: bool = False                             # data under a DUA: outputs must hold no text
    task: str = ""
    data: str = ""
    # -- the card's contract, declared as data (read by the runner, the book and the contract tests) --
    licence: str = ""                               # the data's licence as stated by its source, in short
    test_sizes: dict = field(default_factory=dict)  # version -> number of test units (see resampling_unit)
    pinned_files: tuple = ()                        # every sources.PinnedFile the card reads (the run key's data)
    resampling_unit: str = "item"                   # what the declared intervals resample (item, document, ...)
    caveats: tuple = ()                             # (caveat, what it means): what to know before reading a number
    baselines: dict = field(default_factory=dict)   # card baseline (not a registry profile) -> its protocols
    capabilities: dict = field(default_factory=dict)  # protocol -> capabilities a model needs (first present used)
    adapter_options: dict = field(default_factory=dict)  # protocol -> load_adapter options (cards.deciding.load)
    baseline_weights: dict = field(default_factory=dict)  # baseline -> (registry profile, capability) it runs on
    parameter_gates: tuple = ()                     # runs that need a notebook parameter set (see ParameterGate)
    analysis: Analysis = field(default_factory=Analysis)  # how "where models fail" reads its cells
    # what an outside system answers with (atlas export / atlas score / atlaslib.evaluate): "label" (one label
    # per item, optional score), "tags" (one IOB2 tag per word) or "anafora" (a folder per document); its
    # outside.py reads the split and scores the answers. "": the card takes no outside predictions
    prediction_format: str = ""
    # where the atlas departs from the card's specification (one Departure each; the card page's table)
    departures: tuple = ()
    # item ids the specification shows as its own (training) examples; the departures table says on which
    # side of each split version they land
    spec_examples: tuple = ()
    # the version the card's specification ranks on (its "leaderboard version"); "" = the first of versions.
    # Pages show it first, the other versions after it
    leaderboard_version: str = ""
    # a model whose profile's ``trained_on`` names one of these (an entry starting with it, any case) saw this
    # card's data: its cells carry the overlap marker (:meth:`overlap`), run or not
    overlap_marks: tuple = ()
    # -- where the card stands among the others --
    order: int = 100                                # position in the book, `atlas list`, the default matrix
    short_name: str = ""                            # its name in a table of several cards (default: title to ':')
    # whether the test set's text is out in the open, for the contamination mark of language-model rows
    # (atlaslib.models.contamination.may_have_seen): "public" (on the web, so a crawl may hold it), "synthetic"
    # (generated by atlaslib, never published as text: the contamination-free reference), "private" or
    # "unknown"; test_set_note says where and since when
    test_set_exposure: str = "unknown"
    test_set_note: str = ""
    # -- how the leaderboard frames its rows (atlaslib.metrics.framing) --
    # the protocols whose rows learn from the card's train items (probe, finetune, train_lookup), and the card
    # baselines that learn from them whatever their protocol (a lookup of train mentions, a train majority):
    # such rows are ranked in their own band, "trained on the card's train items"
    training_protocols: tuple = ()
    training_baselines: tuple = ()
    # the equivalence margin of the primary metric (same units): a pair whose paired 90 % interval lies inside
    # ± margin is "equivalent within the margin" (TOST at 5 %); margin_note says why this size. None: no claim
    equivalence_margin: float | None = None
    margin_note: str = ""
    # protocol -> the condition its rows answer under, where a card's protocols pose different questions (phase 1
    # from raw text, phase 2 with the gold spans given): rows of different conditions are ranked apart, each
    # condition a band of its own within its regime (atlaslib.metrics.framing.bands); {}: one question
    ranking_conditions: dict = field(default_factory=dict)
    # protocol -> why its recipe is not a held-out result (e.g. chosen after a test score): such a row is ranked
    # and compared, but never called "best" (atlaslib.metrics.framing.chosen_after_test)
    chosen_after_test: dict = field(default_factory=dict)
    # -- variants of a run (atlaslib.variants): declared, label-preserving input perturbations (each run that
    # reads text runs under every one that applies, as a variant cell) and a versioned prompt set (PromptSet)
    # for the runs that score answer options; none: the card's runs have no variants
    perturbations: tuple = ()
    # the keys of a run cell's ``extra`` that the run's model made, not its scoring code (a language model's probes,
    # an outside system's answers): a re-score from stored predictions keeps them as stored
    # (atlaslib.rescore); a run whose extra holds any other key (but the seeds') executes again
    prediction_extra: tuple = ()
    # key -> function of a finished ok cell: what of its ``extra`` the card's scoring makes from the cell (its unit
    # counts, predictions, spec), made by CardRun.finish on every path, a re-score included (e.g. a report of the
    # same counts); a value the cell's extra does not hold yet comes first, in this order, one it holds keeps its
    # place; None: the cell has none (the key is left out)
    scored_extra: dict = field(default_factory=dict)
    prompt_set: object = None

    def __post_init__(self):
        # the flag decides what is published and the text is what pages say: a confirmed licence is never
        # worded as unconfirmed anywhere in its text (MACCROBAT once said both; "MIT (unconfirmed)" too)
        doubt = UNCONFIRMED.search(self.licence) if self.licence_confirmed else None
        if doubt is not None:
            raise ValueError(f"card {self.name}: licence_confirmed is True while its licence reads "
                             f"{self.licence!r} ({doubt.group()!r}); make the flag and the text agree (the note says "
                             f"where each licence statement comes from)")

    @property
    def page(self) -> str:
        return f"book/cards/{self.name}.md"

    @property
    def primary_metric(self) -> str:
        """The base name of the metric the leaderboard ranks by (the first of :attr:`metrics`)."""
        return self.metrics[0]

    @property
    def page_versions(self) -> tuple[str, ...]:
        """The split versions in the order pages show them: the leaderboard version first, then the others
        in declared order."""
        first = self.leaderboard_version or self.versions[0]
        return (first, *(v for v in self.versions if v != first))

    def data_pins(self) -> list[list[str]]:
        """``[name, sha256]`` of every pinned file the card reads, sorted (part of a run's cache key)."""
        return sorted([pf.name, pf.sha256] for pf in self.pinned_files)

    def overlap(self, trained_on) -> list[str]:
        """The entries of ``trained_on`` that start with one of :attr:`overlap_marks` (any case): the datasets the
        model saw that overlap this card, its cells' overlap marker (``[]``: none). The one rule for model runs,
        runs decided before a kernel and outside systems alike."""
        marks = tuple(m.lower() for m in self.overlap_marks)
        return [str(t) for t in trained_on or () if marks and str(t).lower().startswith(marks)]

    def metric_name(self, base: str, protocol: str) -> str:
        """Cell metric names carry the protocol: ``macro_f1`` + ``probe`` → ``macro_f1_probe``."""
        return f"{base}_{protocol}"

    def caveats_table(self, *computed):
        """The card's caveats as a table (``caveat``, ``what it means``): the declared ones, then ``computed``
        rows a notebook works out for the version at hand (e.g. its class balance). The one place a card's
        caveats are shown from (its data page)."""
        import pandas as pd

        from ..display import whole_frame  # caveats are sentences: displayed whole, never cut with "..."

        return whole_frame(pd.DataFrame([*self.caveats, *computed], columns=["caveat", "what it means"]))

    def metric_names(self, protocol: str) -> list[str]:
        """Every declared metric's cell name under ``protocol`` (what a not-run cell of the card carries)."""
        return [self.metric_name(b, protocol) for b in self.metrics]


def card_module(name: str):
    """The package of the card called ``name`` (KeyError naming the known cards for an unknown one)."""
    if name not in CARD_MODULES:
        discover()
    if name not in CARD_MODULES:
        raise KeyError(f"unknown card {name!r}; known cards: {', '.join(sorted(CARD_MODULES))}")
    try:
        module = importlib.import_module(CARD_MODULES[name])
    except ModuleNotFoundError as exc:
        if exc.name is None or not CARD_MODULES[name].startswith(exc.name):
            raise
        raise CardRegistryError(f"card {name!r}: its package {CARD_MODULES[name]} cannot be imported ({exc}); is "
                                f"the distribution that declares it installed in this environment?") from None
    found = getattr(getattr(module, "CARD", None), "name", None)
    if found != name:
        raise CardRegistryError(f"{CARD_MODULES[name]} was found as card {name!r} but its CARD is "
                                + (f"named {found!r}" if found else "missing") + "; a card's CARD.name is the "
                                "name of its folder (or of its entry point)")
    return module


def get_card(name: str) -> Card:
    return card_module(name).CARD


def available_cards() -> list[Card]:
    """Every discovered card, in the declared order (``Card.order``, then name). A card module that does not
    import is an error naming it, never a card silently missing from the book."""
    return sorted((card_module(name).CARD for name in card_names()), key=lambda c: (c.order, c.name))


def card_page_source(card) -> "Path | None":
    """The card's own page text, ``page.md`` in its package folder (used when the book has no
    ``book/cards/<card>.md``; the line ``<!-- leaderboard -->`` marks where the results go), or None."""
    from pathlib import Path

    name = card if isinstance(card, str) else card.name
    try:
        path = Path(card_module(name).__file__).parent / "page.md"
    except KeyError:  # a card made on the fly (tests) has no package
        return None
    return path if path.is_file() else None


def card_pages(card):
    """The ``pages`` module of ``card`` (a :class:`Card` or its name): the card's page content (facts quoted
    in prose as ``FACTS``: namespace -> provider, see :mod:`atlaslib.pages.facts`; the numbers its pages
    may type, ``CONSTANTS``), or None for a card without one."""
    name = card if isinstance(card, str) else card.name
    package = CARD_MODULES.get(name) or card_module(name).__name__
    try:
        return importlib.import_module(f"{package}.pages")
    except ModuleNotFoundError as exc:
        if exc.name != f"{package}.pages":
            raise
        return None


def scoring_of(card):
    """The :class:`~atlaslib.metrics.engine.Scoring` of ``card`` (a :class:`Card` or its name): how its
    predictions become numbers, declared in its package (``SCORING``)."""
    name = card if isinstance(card, str) else card.name
    module = card_module(name)
    scoring = getattr(module, "SCORING", None)
    if scoring is None:
        raise CardRegistryError(f"card {name!r} declares no SCORING (see CONTRIBUTING.md, 'Add a card')")
    return scoring


def counted(cell: dict):
    """The per-unit counts of an ok cell (:class:`~atlaslib.metrics.engine.UnitCounts`): the cell's own
    ``unit_counts`` when it keeps them, else its card's ``counts(cell)`` over its predictions (cells written
    before the counts were kept, and cells a test builds); computed once per cell object."""
    from ..metrics.engine import UnitCounts

    if "_unit_counts" not in cell:
        if cell.get("unit_counts") is not None:
            uc = UnitCounts.from_cell(cell["unit_counts"])
        else:
            uc = card_module(cell["card"]).counts(cell)
        cell["_unit_counts"] = uc
    return cell["_unit_counts"]


def seed_counted(cell: dict) -> list[tuple]:
    """``[(seed, UnitCounts)]`` of a row over several training seeds (``extra.seed_runs``, two or more): each
    seed's kept ``unit_counts``, else its card's ``counts`` over the cell's records with that seed's
    predictions; ``[]`` for a row of one model. Computed once per cell object."""
    from ..metrics.engine import UnitCounts

    runs = (cell.get("extra") or {}).get("seed_runs") or []
    if len(runs) < 2:
        return []
    if "_seed_counts" not in cell:
        own = {r["item_id"]: r for r in cell.get("predictions") or []}
        out = []
        for r in runs:
            if r.get("unit_counts") is not None:
                uc = UnitCounts.from_cell(r["unit_counts"])
            else:
                preds = [{**own[x["item_id"]], **x} for x in r.get("predictions") or []]
                uc = card_module(cell["card"]).counts({**cell, "predictions": preds})
            out.append((r["seed"], uc))
        cell["_seed_counts"] = out
    return cell["_seed_counts"]
