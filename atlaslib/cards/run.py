"""One run of any card: the frozen run spec, its timing, the decision, the model, the scoring and the cell.

Every card notebook runs through a :class:`CardRun` (and so do scored predictions files and the contract's
:func:`run`). It is made from the notebook's parameters, the runner's ``decision`` included (made before the
kernel started; without the runner it decides by the same rule, :mod:`.deciding`); it loads the model the
decision chose (:meth:`CardRun.load`, handed to the card's prediction code as ``load``); it scores the card's
records through the card's ``counts`` and ``SCORING`` and the one engine (:meth:`CardRun.score`, a row over
training seeds included), keeping the resamples for the page's plots; and :meth:`CardRun.finish` alone builds,
validates and writes the cell: a notebook's, a run the runner decided cannot happen (:meth:`CardRun.finish_decided`,
its stub without a kernel) and a scored predictions file's (``seal``: with its content digest) alike, so no other
code writes a default cell. So the spec is fixed before anything runs, the wall time covers the whole run,
a run that cannot happen becomes a not-run cell carrying the card's declared metric names, and every card's
run is the same few calls::

    card_run = CardRun(card, version, model, protocol, parameters={"n_resamples": n_resamples, "run_key": run_key},
                       result_path=result_path, decision=decision)
    records = None
    with card_run.attempt():              # NotRun inside: recorded, shown once, the page goes on
        records = mod.predict(items, manifest, model, protocol, data_dir=data_dir, load=card_run.load)
    cell = card_run.finish(**mod.cell_parts(card_run, records, manifest))   # scored here: CardRun.score

(``{training seed: records}`` for a fine-tuned row; :func:`run` makes the same calls without a notebook.)
"""
from __future__ import annotations

import copy
import weakref
from contextlib import contextmanager

from .. import results
from . import NotRun, get_card


class CardRun:
    """A run of ``card`` on ``version`` with ``model`` under ``protocol``; see the module docstring.

    ``card`` is a registered card's name or a card module (its ``CARD`` and contract functions: a card not
    registered, e.g. the tests' toy card). ``parameters`` are frozen into the spec now (a copy: later changes to
    the caller's dict do not reach it); ``result_path``, when given, is where :meth:`finish` writes the cell;
    ``decision``: the runner's (the notebook parameter), which :meth:`load` loads the model by (None: decided
    there by the same rule); ``seal``: the cell is written with its content digest
    (:func:`atlaslib.results.sealed`: a cell with no executed notebook beside it, a scored predictions file's,
    which the score cache serves only unedited)."""

    _finished = staticmethod(lambda: None)   # a weak reference to the last run finished in this process

    def __init__(self, card, version: str, model: str, protocol: str, *, parameters: dict | None = None,
                 result_path=None, decision: dict | None = None, seal: bool = False):
        self.module = card_module(card)
        self.card = self.module.CARD
        if version not in self.card.versions:
            raise ValueError(f"card {self.card.name} has no version {version!r}; expected one of "
                             f"{', '.join(self.card.versions)}")
        if protocol not in self.card.protocols:
            raise ValueError(f"card {self.card.name} has no protocol {protocol!r}; expected one of "
                             f"{', '.join(self.card.protocols)}")
        self.spec = results.RunSpec(card=self.card.name, version=version, model=model, protocol=protocol,
                                    parameters=copy.deepcopy(dict(parameters or {})))
        self.result_path = result_path
        self.seal = seal
        self.decision = decision      # the runner's (the notebook parameter); None: decided here when loading
        self.loaded = None            # what :meth:`load` loaded (adapter, capability, profile)
        self.seed_scores: dict = {}   # training seed -> its metrics and unit counts (a seeded :meth:`score`)
        self.sampled_metrics: dict = {}   # the metrics :meth:`samples` belongs to
        self.sampled_label = ""           # "": the run's own; else which training seed they are
        self.variant_cells: list = []     # the cells of this run's variant runs (:meth:`variant`)
        self.not_run_reason: str | None = None
        self.cell: dict | None = None
        self._timer = results.Timer().__enter__()  # wall time, memory and the model calls of this run
        self._no_time = False                      # a run decided not to happen before any kernel (finish_decided)

    @property
    def ok(self) -> bool:
        """False once the run was found unable to happen (:meth:`not_run` or a :class:`NotRun` caught)."""
        return self.not_run_reason is None

    def not_run(self, reason: str) -> None:
        """Record that the run cannot happen here (weights unavailable, capability missing, text under a
        data use agreement); :meth:`finish` then writes a not-run cell with ``reason``."""
        if not str(reason or "").strip():
            raise ValueError("CardRun.not_run: a not-run cell needs its reason")
        self.not_run_reason = str(reason)

    @contextmanager
    def attempt(self, show=None):
        """Run the card's prediction inside: a :class:`atlaslib.cards.NotRun` (every card's not-run errors
        derive from it) is recorded as the not-run reason and shown once as Markdown, the reason escaped (it may
        name the user's model or folder): ``show`` (default: displayed in a notebook, else printed); any other
        error propagates (a failed run is not a not-run)."""
        from ..escape import md

        try:
            yield self
        except NotRun as exc:
            self.not_run(str(exc))
            (show or _show)(f"**Not run:** {md(self.not_run_reason)}")

    def load(self, *, data_dir=None, **options):
        """The model this run runs on, by the run's decision: the runner's (``decision``, made before the kernel
        started) or, without the runner, one made now by the same rule (:func:`.deciding.decide`). Returns a
        :class:`~.deciding.Loaded`: the adapter for the decided capability, loaded with the card's declared
        options for the protocol (``Card.adapter_options``) and ``options`` (None for a card baseline, which the
        card runs itself), the capability and the profile. A run that cannot happen raises :class:`NotRun`
        (inside :meth:`attempt`: the not-run cell). It stays on :attr:`loaded`. A card's prediction code takes
        this method as its ``load`` argument."""
        from . import deciding

        if self.decision is None:
            s = self.spec
            self.decision = deciding.decide(self.card, s.version, s.model, s.protocol, s.parameters)
        self.loaded = deciding.load(self.card, self.spec.model, self.spec.protocol, self.decision,
                                    data_dir=data_dir, **options)
        return self.loaded

    def score(self, records, *, reasons: dict | None = None, seed: int | None = None,
              n_resamples: int | None = None, cell: dict | None = None) -> dict:
        """The cell metrics of ``records`` (the card's prediction records, the cell's shape): the card's
        ``counts`` under its declared ``SCORING`` through the one engine (:func:`atlaslib.metrics.engine.evaluate`).
        ``cell``: further fields the card's counts read (e.g. a scorer's per-document table); ``reasons``: why
        a metric is not reported (e.g. labels without scores).

        A row over training seeds is ``{training seed: records}`` (the recipe's order): each seed's records
        counted and scored with the same unit resamples, the row's metrics the mean over seeds with the two-level
        interval (:func:`atlaslib.metrics.seeds.score_seeds`); each seed's metrics and unit counts are kept on
        :attr:`seed_scores`, and :meth:`samples` gives the first seed's resamples."""
        if isinstance(records, dict):
            from ..metrics import seeds

            if not records or not all(isinstance(v, list) for v in records.values()):
                raise ValueError(f"card {self.card.name}, predict of {self.spec.model} under {self.spec.protocol}: "
                                 f"a row over training seeds is {{training seed: list of records}}, at least one "
                                 f"seed; got {records!r:.200}")
            first = next(iter(records))
            self._score_one(records[first], reasons=reasons, seed=seed, n_resamples=n_resamples, cell=cell)
            self.sampled_label = f"training seed {first} (the first of {len(records)})"
            metrics, per = seeds.score_seeds(self.module, list(records.values()), list(records), self.spec.protocol,
                                             cell=cell, reasons=reasons, seed=seed,
                                             n_resamples=n_resamples or self.spec.parameters.get("n_resamples"))
            self.seed_scores = {p["seed"]: p for p in per}
            return metrics
        return self._score_one(records, reasons=reasons, seed=seed, n_resamples=n_resamples, cell=cell)

    def _score_one(self, records: list, *, reasons=None, seed=None, n_resamples=None, cell=None) -> dict:
        from ..metrics import engine

        self.sampled_label = ""

        uc = self.module.counts({**(cell or {}), "predictions": list(records), "card": self.card.name,
                                 "model": self.spec.model, "protocol": self.spec.protocol})
        n = n_resamples or self.spec.parameters.get("n_resamples")
        self._scored = (uc, seed, n, {})
        self.sampled_metrics = engine.evaluate(self.module.SCORING, uc, self.spec.protocol, seed=seed,
                                               n_resamples=n, reasons=reasons, keep=self._scored[3],
                                               parameters=self.spec.parameters)
        return self.sampled_metrics

    def samples(self) -> dict:
        """The resampled values behind the last :meth:`score`'s intervals (the same resamples, drawn once), for
        plots, beside :attr:`sampled_metrics` (their point values and intervals). For a row over training seeds
        these are its first seed's (:attr:`sampled_label` says so): the row's own interval is two-level."""
        from ..metrics import engine

        uc, seed, n, kept = self._scored
        return engine.samples(self.module.SCORING, uc, self.spec.protocol, seed=seed, n_resamples=n, kept=kept)

    @property
    def timing(self) -> dict:
        """Wall seconds and peak memory since construction, and the model calls made and served from the
        model-call store (:mod:`atlaslib.models.calls`) in that time, with any damaged entry met. A run decided
        not to happen before any kernel (:meth:`finish_decided`) spent none: 0 s, no memory measured."""
        if self._no_time:
            return {"wall_seconds": 0.0, "peak_rss_mb": None}
        return self._timer.timing

    def finish(self, *, metrics: dict | None = None, predictions: list | None = None, split: dict | None = None,
               data_sha256: dict | None = None, seeds: dict | None = None, extra: dict | None = None,
               overlap: list | None = None, profile: dict | None = None, capability: str | None = None,
               details: dict | None = None, parameters: dict | None = None, env: dict | None = None,
               timing: dict | None = None, reason: str | None = None) -> dict:
        """The run's result cell, written to ``result_path`` when one was given. A run still ok needs its
        ``metrics``; a not-run run gets every declared metric of the card for this protocol as null with the
        reason. ``profile`` / ``capability`` / ``details`` (what the adapter turned out to be) and extra
        ``parameters`` complete the spec (never replace what it froze). ``timing`` is for a run that was
        timed by its own code before this object existed (default: from construction to now). ``reason``: the
        card's own code found the run cannot happen (a card whose run returns a status instead of raising
        :class:`NotRun`): recorded as :meth:`not_run` unless a reason is already there.

        What every run has is filled here when the card's parts do not give it: the profile and capability of
        the model :meth:`load` loaded, and the overlap marker by the card's one rule (:meth:`Card.overlap
        <atlaslib.cards.Card.overlap>` of the profile's ``trained_on``)."""
        if reason and self.ok:
            self.not_run(reason)
        self._timer.__exit__(None, None, None)
        spec = copy.deepcopy(self.spec)
        if profile is None and self.loaded is not None and self.loaded.profile is not None:
            profile = self.loaded.profile
        if capability is None and self.loaded is not None:
            capability = self.loaded.capability
        if overlap is None and profile is not None:
            overlap = self.card.overlap(profile.get("trained_on"))
        if profile is not None:
            spec.profile, spec.revision = dict(profile), profile.get("revision")
        if capability is not None:
            spec.capability = capability
        for k, v in (parameters or {}).items():
            spec.parameters.setdefault(k, v)
        if details is not None:
            spec.parameters["details"] = details
        timing = {"model_calls": self.timing["model_calls"], **timing} if timing and not self._no_time \
            else self.timing
        common = dict(split=split, data_sha256=data_sha256, seeds=seeds, timing=timing, overlap=overlap, env=env)
        if self.ok:
            if metrics is None:
                raise ValueError(f"CardRun.finish ({spec.card} {spec.model} {spec.protocol}): an ok run needs "
                                 f"its metrics")
            cell = results.make_cell(spec, metrics=metrics, predictions=list(predictions or []), extra=extra,
                                     **common)
        else:
            cell = results.not_run_cell(spec, self.not_run_reason, self.card.metric_names(spec.protocol),
                                        extra=extra, **common)
        seed_runs = ((cell.get("extra") or {}).get("seed_runs") or []) if self.ok else []
        for r in seed_runs:   # each seed as this run's score() scored it
            scored = self.seed_scores.get(r.get("seed"))
            if scored is not None:
                r.update(metrics=scored["metrics"], unit_counts=scored["unit_counts"])
        if self.ok and cell.get("predictions") and hasattr(self.module, "counts"):
            # the per-unit counts every page, comparison and slice reads (atlaslib.metrics.engine): the very
            # counts this run's metrics were scored from (:meth:`score`; e.g. scores at full precision where the
            # cell's predictions show six digits), else counted from the cell's predictions
            scored = getattr(self, "_scored", None)
            same_units = scored is not None and list(scored[0].ids) == [p.get("item_id") for p in cell["predictions"]]
            cell["unit_counts"] = (scored[0] if same_units else self.module.counts(cell)).to_cell()
        if self.ok and self.card.scored_extra:   # what the card's scoring makes of the cell, made anew each time:
            # first in extra where the cell does not hold it yet, else in its place; None: the cell has none
            made = {k: f(cell) for k, f in self.card.scored_extra.items()}
            extra = {k: v for k, v in made.items() if v is not None and k not in cell["extra"]}
            for k, v in cell["extra"].items():   # in its place: kept, or made anew, or (made None) left out
                if k not in made or made[k] is not None:
                    extra[k] = made.get(k, v)
            cell["extra"] = extra
        if spec.parameters.get("run_key"):  # the runner's cache key, handed to the notebook: the cell carries it
            cell["run_key"] = spec.parameters["run_key"]
        results.validate_cell(cell, f"{spec.card} {spec.version} {spec.model} {spec.protocol}")
        if self.seal:
            cell = results.sealed(cell)  # its content digest: a cache serves it only unedited
        if self.result_path:
            from .. import interrupts

            interrupts.check()  # Ctrl-C that a library swallowed: nothing is written
            results.write_cell(cell, self.result_path)
        self.cell = cell
        CardRun._finished = weakref.ref(self)   # of_cell(cell) in this process: this run, its resamples drawn once
        return cell

    def finish_decided(self) -> dict:
        """The not-run cell of a run its ``decision`` says cannot happen, made before any kernel (the runner's
        stub): the decision's reason and profile (else the model's name), the overlap marker by the card's rule,
        no time spent, ``extra.decided_before_run``, the environment without torch (none was loaded); written
        to ``result_path`` as :meth:`finish` writes every cell."""
        d = self.decision or {}
        if d.get("run", True):
            s = self.spec
            raise ValueError(f"CardRun.finish_decided ({s.card} {s.version} {s.model} {s.protocol}): its decision "
                             f"says the run can happen; finish it with its metrics instead")
        self.not_run(d.get("reason") or "not run")
        self._no_time = True
        return self.finish(profile=d.get("profile") or {"name": self.spec.model},
                           extra={"decided_before_run": True}, env=results.environment(torch_info=False))

    # -- variant runs: the same model on the card's perturbations or prompt variants, after the run ------------

    @classmethod
    def of_cell(cls, cell: dict, *, result_path=None) -> "CardRun":
        """The finished run whose result cell is ``cell`` (read back, e.g. to make its variant runs outside its
        notebook: a benchmark, a test); ``result_path``: where its variant cells go beside it. An ok cell's
        per-unit counts give :meth:`samples` and :attr:`sampled_metrics` as its run's score left them (a row over
        training seeds: its first seed's), so a page cell drawn from the cell alone shows the same resamples. The cell
        the last :meth:`finish` of this process made (a notebook's cell read back in its own kernel) is that run's:
        its resamples are not drawn again."""
        live = cls._finished() if result_path is None else None
        if live is not None and live.cell is cell:
            return live
        run = cls(cell["card"], cell["version"], cell["model"], cell["protocol"],
                  parameters=(cell.get("spec") or {}).get("parameters"), result_path=result_path)
        run._timer.__exit__(None, None, None)
        run.cell = cell
        seed_runs = (cell.get("extra") or {}).get("seed_runs") or []
        scored = seed_runs[0] if seed_runs else cell
        if cell.get("status") == "ok" and scored.get("unit_counts"):
            from ..metrics.engine import UnitCounts

            run._scored = (UnitCounts.from_cell(scored["unit_counts"]), None,
                           run.spec.parameters.get("n_resamples"), {})
            run.sampled_metrics = scored["metrics"]
            run.sampled_label = f"training seed {scored['seed']} (the first of {len(seed_runs)})" if seed_runs else ""
        return run

    def variant(self, variant: dict, *, metrics: dict, predictions: list, inputs_digest: str, n_items: int,
                n_applicable: int | None = None, timing: dict | None = None, extra: dict | None = None,
                scored: list | None = None) -> dict:
        """The cell of a variant run of this finished run (a perturbation's or a prompt variant's, ``variant``
        its spec: :meth:`atlaslib.variants.Perturbation.spec`), made by :func:`atlaslib.variants.variant_cell`
        from this run's cell, with its metrics (scored as this run's are), ``predictions`` over the items it
        read and the sha256 of its inputs; kept for :meth:`write_variants`. Its per-unit counts are the card's
        ``counts`` of ``scored``, the records its metrics were scored on (scores at full precision where the
        cell's predictions show six digits; default: ``predictions``), as :meth:`finish` keeps a run's. A run
        that did not finish, or did not happen, has no variant."""
        from ..variants import variant_cell

        if self.cell is None or self.cell.get("status") != "ok":
            s = self.spec
            raise ValueError(f"CardRun.variant ({s.card} {s.version} {s.model} {s.protocol}): a variant run "
                             f"needs its run finished and ok; finish it first")
        cell = variant_cell(self.cell, variant, metrics=metrics, predictions=predictions, inputs_digest=inputs_digest,
                            n_items=n_items, n_applicable=n_applicable, timing=timing, extra=extra)
        if predictions and hasattr(self.module, "counts"):
            cell["unit_counts"] = self.module.counts(dict(cell, predictions=list(scored or predictions))).to_cell()
        self.variant_cells.append(cell)
        return cell

    def write_variants(self) -> list:
        """Write the variant cells made (:meth:`variant`) beside this run's cell, when it has a ``result_path``
        (a notebook run by hand writes nothing); a variant file of this protocol that none of them names is
        removed (:func:`atlaslib.variants.write_variant_cells`). Returns the paths written."""
        from ..variants import write_variant_cells

        return write_variant_cells(self.variant_cells, self.result_path, self.spec.protocol)


def card_module(card):
    """The module of ``card``: a registered card's name (:data:`atlaslib.cards.CARD_MODULES`), or a module
    that has a ``CARD`` and the contract functions, returned as it is."""
    import importlib

    from . import CARD_MODULES

    if hasattr(card, "CARD"):
        return card
    get_card(card)  # an unknown name: the registry's error, naming the known cards
    return importlib.import_module(CARD_MODULES[card])


def _show(text: str) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:  # pragma: no cover - IPython ships with the notebook stack
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        display(Markdown(text))
    else:
        print(text)


def shard_of(manifest, shard: int, n_shards: int):
    """``manifest`` with only the ``shard``-th of ``n_shards`` fixed slices of its test items (contiguous, in the
    manifest's sorted order, sizes differing by at most one): what a preparation task asks the model for."""
    import dataclasses

    if not (isinstance(shard, int) and isinstance(n_shards, int) and 0 <= shard < n_shards):
        raise ValueError(f"test shard {shard!r} of {n_shards!r}: expected 0 <= shard < n_shards")
    k, extra = divmod(len(manifest.test), n_shards)
    start = shard * k + min(shard, extra)
    return dataclasses.replace(manifest, test=manifest.test[start:start + k + (shard < extra)])


def run(card, version: str, model: str, protocol: str, *, data_dir=None, parameters: dict | None = None,
        result_path=None, test_shard: tuple[int, int] | None = None, **options) -> dict:
    """A run through the card contract alone (no notebook): load the items, split the version, predict with
    ``model`` under ``protocol``, score; the cell is :class:`CardRun`'s, its parts :func:`contract_parts`'s (a
    row over training seeds is the book's: the mean over seeds with the two-level interval, every seed's
    predictions in ``extra.seed_runs``). The pages' run-specific sections need the notebook; this gives the
    same metrics (``tests/test_card_run.py``) for any card, including a new one that has only its contract.
    ``test_shard=(k, n)`` runs on the k-th of n fixed slices of the test items only (:func:`shard_of`: a
    preparation task's, whose model calls fill the store the whole run then reads)."""
    mod = card_module(card)
    r = CardRun(mod, version, model, protocol, parameters=parameters, result_path=result_path)
    items = mod.load_items(data_dir)
    manifest = mod.split(items, version)
    if test_shard is not None:
        manifest = shard_of(manifest, *test_shard)
    records = None
    with r.attempt(show=lambda text: None):
        records = mod.predict(items, manifest, model, protocol, data_dir=data_dir, load=r.load, **options)
    parts = getattr(mod, "cell_parts", contract_parts)   # the card's (its family's), as its notebook calls it
    return r.finish(**parts(r, records, manifest))


def contract_parts(card_run: CardRun, records, manifest) -> dict:
    """:meth:`CardRun.finish`'s arguments for what the contract's ``predict`` gave (``records``; None: the run
    did not happen) on ``manifest``'s split.

    ``records`` is a list of :func:`atlaslib.cards.record` for a run of one model, scored by the run
    (:meth:`CardRun.score`: the card's ``counts`` under its ``SCORING``, the one engine); or, for a row over
    training seeds (a fine-tune), ``{training seed: records}`` in the recipe's order, made into the book's seeded
    row: each seed's records counted by the card's ``counts`` and scored under its ``SCORING`` with the same item
    resamples (:func:`atlaslib.metrics.seeds.score_seeds`), the metrics the mean over seeds with the two-level
    interval, the first seed's records the cell's ``predictions``, every seed's metrics, unit counts and answers in
    ``extra.seed_runs``, and the seeds in ``seeds`` (``split``, ``bootstrap``, and the training seeds under the
    protocol's name)."""
    mod, protocol = card_run.module, card_run.spec.protocol
    parts = {"split": manifest.cell()}
    if records is None:
        return parts
    if not isinstance(records, dict):
        return dict(parts, predictions=records, metrics=card_run.score(records))
    seed_list = list(records)
    metrics = card_run.score(records)
    seed_runs = [{**p, "predictions": [{k: x[k] for k in ("item_id", "pred", "score")} for x in records[s]]}
                 for s, p in card_run.seed_scores.items()]
    return dict(parts, predictions=records[seed_list[0]], metrics=metrics, extra={"seed_runs": seed_runs},
                seeds={"split": manifest.seed, "bootstrap": mod.SCORING.resampling.seed, protocol: seed_list})
