"""Task families: the steps every card of a family shares, owned once, so that a card declares data and writes only
what is truly its own (loading, splitting, the scorer it wraps). In the way of MTEB's ``AbsTask`` (the task class
owns the evaluation; a concrete task is metadata).

A family is a subclass of :class:`TaskFamily`; a card of the family makes one instance in its package, with its
declaration, and exposes the family's functions as its contract (CONTRIBUTING.md, "Add a card")::

    FAMILY = LabelledItems(CARD, SCORING, load_items=load_items, split=split, labels=(0, 1),
                           baselines={"always-even": lambda row: 1})
    predict, counts, cell_parts = FAMILY.predict, FAMILY.counts, FAMILY.cell_parts

What an instance owns (the API, stable):

- **protocol dispatch**, :meth:`TaskFamily.predict`: a declared baseline (``baselines``: name -> function of one
  item row giving its prediction) under the protocols ``CARD.baselines`` lists; ``probe`` (a logistic head on the
  frozen ``embed.text.pooled`` features of the ``text`` column, two labels, seeded by the split's seed) and the
  family's fine-tune (the protocol named ``finetune``: :func:`atlaslib.protocols.finetune.finetune_sequence` on the
  ``text`` column and the label set, one set of records per training seed of ``recipe``, its weights keyed also by
  the sha256 of the declared ``data`` files); zero-shot by scored answer options (``prompt``, a format string over
  the row's fields, and ``options``, the positive label's first) for a model the run decided on ``score.options``,
  or by an assertion head (``assertion``: its labels -> the card's) on ``predict.assertion``; each of these is
  :meth:`TaskFamily.predictor`, which a card's own dispatch may call too; the model by the run's decision
  (:func:`atlaslib.cards.deciding.load_for`). Anything else raises :class:`~atlaslib.cards.NotRun`, naming what the
  card runs. A card with its own zero-shot passes ``predictors`` (protocol -> function like ``predict``);
- **counting**, :meth:`TaskFamily.counts`: the per-unit counts under the card's ``SCORING`` (labelled items:
  ``correct``, ``item``; binary items: ``tp, fp, tn, fn, positive`` with the scores, grouped by gold, the
  undefined rank metric's reason ``no_score``; spans: the card's ``counter`` over :meth:`Spans.count_spans`, the
  strict IOB2 mention counts per type, with the family's scoring, mention slices and per-type table; relations:
  the counter the card wraps its scorer in, ``counter``, which any family takes in place of its own), grouped too
  by the declared ``groups`` (group name -> record field, e.g. a cluster resampling's sentences);
- **cell parts**, :meth:`TaskFamily.cell_parts`: :func:`atlaslib.cards.run.contract_parts` (scored by
  :meth:`CardRun.score <atlaslib.cards.run.CardRun.score>`, the one engine; no card-level ``score``);
- **outside systems**, :meth:`TaskFamily.outside_split` and :meth:`TaskFamily.outside_cell_parts`: the test items'
  ``inputs`` columns as ``atlas export`` gives them, and a prediction file's answers made into records (with the
  declared ``fields`` of the items) and into the card's own ``cell_parts`` where it has one (else the family's),
  scored by a :class:`~atlaslib.cards.run.CardRun` through the family's counts;
- **variants**, :meth:`TaskFamily.variants`: each declared perturbation (``CARD.perturbations``) applied to the
  test items' ``text`` column, re-predicted by the run's own predictor and scored through
  :meth:`CardRun.score <atlaslib.cards.run.CardRun.score>` and :meth:`CardRun.variant
  <atlaslib.cards.run.CardRun.variant>`;
- **the analysis dispatch** (class attributes, read through :func:`family_of` by the "where models fail" modules and
  the methods chapter): ``unit`` (what two runs are compared on: ``item``, ``mention`` or ``relation``),
  ``slice_units`` and :meth:`TaskFamily.slice_note` (what a slice table reports), ``exact_slices`` (its slice
  intervals are exact already), ``slice_groups`` (where a slice's groups are: record ``fields``, the records'
  ``found`` slices, or none to pool) and ``seqeval`` (its runs' tags are scored both ways on the methods page).
  A family is registered under its ``kind`` (the card's ``Analysis.kind``), so a new family edits no generic module.
"""
from __future__ import annotations

from typing import Callable, ClassVar

import numpy as np

from . import NotRun, record

#: kind (``Analysis.kind``) -> the family class (filled as each family is defined)
FAMILIES: dict[str, type] = {}


def family_of(card) -> type:
    """The family class of ``card`` (a :class:`~atlaslib.cards.Card`, an :class:`~atlaslib.cards.Analysis` or a
    kind): the one its ``analysis.kind`` names. ValueError naming the known kinds otherwise."""
    kind = getattr(getattr(card, "analysis", card), "kind", card)
    if kind not in FAMILIES:
        raise ValueError(f"no task family of kind {kind!r}; known kinds: {', '.join(sorted(FAMILIES))}")
    return FAMILIES[kind]


class TaskFamily:
    """The steps a family owns (see the module docstring); an instance holds one card's declaration."""

    kind: ClassVar[str] = ""
    unit: ClassVar[str] = "item"              # what the disagreement and the explorer compare
    slice_units: ClassVar[str] = "items"      # what a slice's n counts
    exact_slices: ClassVar[bool] = False      # the slice intervals are exact: no exact interval beside them
    slice_groups: ClassVar[str | None] = "fields"   # "fields" of a record, "found" slices, None: not pooled
    seqeval: ClassVar[bool] = False           # the methods chapter scores its runs' tags both ways
    columns: ClassVar[tuple] = ()

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.__dict__.get("kind"):
            FAMILIES[cls.kind] = cls

    @classmethod
    def slice_note(cls, card) -> str:
        """What a slice table of ``card`` reports per slice (the sentence's middle)."""
        return f"the card's primary metric with its interval (resampling unit: {card.resampling_unit})"

    def __init__(self, card, scoring, *, load_items: Callable | None = None, split: Callable | None = None,
                 baselines: dict | None = None, labels: tuple = (), label_names: tuple | None = None,
                 text: str = "text", gold: str = "gold", fields: tuple = (), inputs: tuple = (),
                 recipe: dict | None = None, finetune: str = "finetune", predictors: dict | None = None,
                 counter: Callable | None = None, answer: str = "", abstain=None, groups: dict | None = None,
                 no_score: str = "labels only: no scores", prompt: str | None = None, options: tuple = (),
                 assertion: dict | None = None, data: tuple = ()):
        if card.analysis.kind != self.kind:
            raise ValueError(f"card {card.name}: its analysis kind is {card.analysis.kind!r}, not the "
                             f"{type(self).__name__} family's {self.kind!r}")
        undeclared = sorted(set(baselines or {}) - set(card.baselines))
        if undeclared:
            raise ValueError(f"card {card.name}: baselines {', '.join(undeclared)} have a function but are not in "
                             f"CARD.baselines ({', '.join(card.baselines) or 'none'})")
        self.card, self.scoring = card, scoring
        self.load_items, self.split = load_items, split
        self.baselines = dict(baselines or {})
        self.labels, self.label_names = tuple(labels), tuple(label_names or (str(x) for x in labels))
        self.text, self.gold, self.fields, self.inputs = text, gold, tuple(fields), tuple(inputs)
        self.recipe, self.finetune, self.predictors = recipe, finetune, dict(predictors or {})
        self.counter, self.answer, self.abstain = counter, answer, abstain
        self.groups, self.no_score = dict(groups or {}), no_score
        self.prompt, self.options = prompt, tuple(options)
        self.assertion, self.data = dict(assertion or {}), tuple(data)
        self._last: tuple = (None, None)   # ((version, model, protocol), predictor) of the last run: its variants

    # -- protocol dispatch ------------------------------------------------------------------------------------
    def predict(self, items, manifest, model: str, protocol: str, *, data_dir=None, load=None, **options):
        """One record per test item (``gold``, ``pred``, ``score``, the declared ``fields``); a fine-tune gives
        ``{training seed: records}``. A run that cannot happen raises :class:`NotRun`."""
        from . import deciding

        frame = items.set_index("item_id")
        test = frame.loc[manifest.test]
        if protocol in self.card.baselines.get(model, ()) and model in self.baselines:
            fn = self.baselines[model]
            predictor = lambda rows: ([fn(r) for _, r in rows.iterrows()], None)  # noqa: E731
        elif protocol in self.predictors:
            return self.predictors[protocol](items, manifest, model, protocol, data_dir=data_dir, load=load,
                                             **options)
        elif protocol in self.card.capabilities and (protocol in ("probe", self.finetune) or self.prompt
                                                     or self.assertion):
            loaded = deciding.load_for(self.card, manifest.version, model, protocol, load, data_dir=data_dir)
            predictor = self.predictor(loaded, frame.loc[manifest.train], protocol, seed=manifest.seed,
                                       retrain=options.get("retrain", False))
        else:
            runs = [b for b, ps in self.card.baselines.items() if protocol in ps]
            raise NotRun(f"card {self.card.name} runs only {', '.join(runs) or 'no baseline'} under {protocol}")
        self._last = ((manifest.version, model, protocol), predictor)   # only the last: a model is not kept longer
        return self._records(test, predictor(test))

    def predictor(self, loaded, train, protocol: str, *, seed: int = 0, retrain: bool = False):
        """The run's model (``loaded``: :class:`~atlaslib.cards.deciding.Loaded`) as a function of item rows giving
        ``(pred, score, out)`` (``out``: the protocol's whole answer, its ``details`` included) or, for a fine-tune,
        ``{training seed: (pred, score, out)}``; whatever the run trains (on ``train``, the train items by id) is
        trained once, at the first call: ``probe`` (its head seeded by ``seed``), the fine-tune (``retrain``: not
        served from the weight cache), zero-shot by answer options or by an assertion head."""
        if protocol == "probe":
            return self._probe(loaded.adapter, train, seed)
        if protocol == self.finetune:
            return self._finetuned(loaded.adapter, train, retrain)
        if loaded.capability == "score.options" and self.prompt:
            return self._options(loaded.adapter)
        if loaded.capability == "predict.assertion" and self.assertion:
            return self._assertion(loaded.adapter)
        raise NotRun(f"card {self.card.name}: {(loaded.profile or {}).get('name', 'the model')} "
                     f"answers through {loaded.capability}, which the {type(self).__name__} family does not run "
                     f"under {protocol}")

    def _records(self, test, answers):
        """Records of ``test`` rows from ``(pred, score[, out])`` or, for a row over seeds, ``{seed: (pred, score[,
        out])}``."""
        if isinstance(answers, dict):
            return {s: self._records(test, a) for s, a in answers.items()}
        pred, score = answers[:2]
        return [record(iid, _plain(row[self.gold]), _plain(p), None if score is None else float(score[i]),
                       **{f: _plain(row[f]) for f in self.fields})
                for i, ((iid, row), p) in enumerate(zip(test.iterrows(), pred))]

    def _two_labels(self, what: str) -> None:
        if len(self.labels) != 2:
            raise NotRun(f"card {self.card.name}: the family's {what} scores two labels; the card has "
                         f"{len(self.labels)}")

    def _probe(self, adapter, train, seed: int):
        """A logistic head (seeded by ``seed``) on the frozen features of the train texts (class 1: the second
        label)."""
        from ..protocols import items as P

        self._two_labels("probe")
        y = [self.labels.index(g) for g in train[self.gold]]
        fitted = {}

        def predictor(rows):
            if "head" not in fitted:
                out = P.probe(adapter, train[self.text].tolist(), y, rows[self.text].tolist(), seed=seed)
                fitted["head"] = out["head"]
            else:
                out = P.probe_predict(adapter, fitted["head"], rows[self.text].tolist())
            return [self.labels[int(k)] for k in out["pred"]], out["score"], out
        return predictor

    def _options(self, adapter):
        """Zero-shot by scored answer options: the declared ``prompt`` (a format string over the row's fields) and
        ``options`` (the positive, second label's option first); predicted positive when its option is the likelier,
        the score its softmax probability (:func:`atlaslib.protocols.items.zero_shot_options`)."""
        from ..protocols import items as P

        self._two_labels("zero-shot by answer options")

        def predictor(rows, prompts=None, options=None):   # other prompts or options: a prompt variant's
            prompts = [self.prompt.format(**r) for _, r in rows.iterrows()] if prompts is None else prompts
            out = P.zero_shot_options(adapter, prompts, options or self.options)
            return [self.labels[int(k)] for k in out["pred"]], out["score"], out
        return predictor

    def _assertion(self, adapter):
        """Zero-shot by an assertion head: its labels mapped to the card's by the declared ``assertion``; an
        unparseable answer counts as wrong (:func:`atlaslib.protocols.items.zero_shot_assertion`), no score."""
        from ..protocols import items as P

        label_map = {k: self.labels.index(v) for k, v in self.assertion.items()}

        def predictor(rows):
            out = P.zero_shot_assertion(adapter, rows[self.text].tolist(), label_map,
                                        gold=[self.labels.index(g) for g in rows[self.gold]])
            return [self.labels[int(k)] for k in out["pred"]], None, out
        return predictor

    def _finetuned(self, adapter, train, retrain: bool = False):
        """The adapter's encoder fine-tuned once per seed of ``recipe`` on the train texts (the weight cache keyed
        by the declared ``data`` files' sha256 too; ``retrain``: trained even when cached); the score: the second
        label's probability (two labels), else none. The predictor's ``details``: the fine-tune's."""
        from ..protocols import finetune as FT

        if self.recipe is None:
            raise NotRun(f"card {self.card.name} declares no fine-tune recipe")
        names = [self.label_names[self.labels.index(g)] for g in train[self.gold]]
        kept = {}

        def answers(r):
            return [self.labels[int(c)] for c in r["pred"]], (r["proba"][:, 1] if len(self.labels) == 2 else None), r

        def predictor(rows):
            if not kept:
                res = FT.finetune_sequence(adapter, train.index.tolist(), train[self.text].tolist(), names,
                                           rows[self.text].tolist(), self.label_names, self.recipe,
                                           data_sha256={f.name: f.sha256 for f in self.data}, retrain=retrain)
                kept.update(dict(res["models"]))
                predictor.details = res["details"]
                return {r["seed"]: answers(r) for r in res["seed_runs"]}
            out = {}
            for seed, model in kept.items():
                proba = FT.predict_sequence(adapter, model, rows[self.text].tolist(), self.recipe)
                out[seed] = answers({"seed": seed, "pred": proba.argmax(axis=1), "proba": proba, "details": {}})
            return out
        return predictor

    # -- counting and the cell ----------------------------------------------------------------------------------
    def _groups(self, recs) -> dict:
        """The declared groupings (group name -> record field: a cluster resampling's, e.g. sentences) that every
        record carries."""
        return {g: [r[f] for r in recs] for g, f in self.groups.items() if recs and all(f in r for r in recs)}

    def counts(self, cell: dict):
        """The per-unit counts of ``cell``'s predictions under the card's ``SCORING`` (the card's ``counter``)."""
        if self.counter is None:
            raise NotImplementedError(f"{type(self).__name__}: card {self.card.name} declares no counter")
        return self.counter(cell)

    def cell_parts(self, card_run, records, manifest) -> dict:
        """:meth:`CardRun.finish <atlaslib.cards.run.CardRun.finish>`'s arguments: the split, and for a run that
        happened its records and metrics scored by the run (:func:`atlaslib.cards.run.contract_parts`)."""
        from .run import contract_parts

        return contract_parts(card_run, records, manifest)

    # -- outside systems -------------------------------------------------------------------------------------
    def outside_split(self, version: str, split: str, data_dir=None, protocol: str | None = None):
        """The ``split`` ("test" or "train") items of ``version`` as an outside system sees them: ``item_id`` and
        the declared ``inputs`` columns (the train split also its ``label``)."""
        from ..splits import Split

        items = self.load_items(data_dir)
        manifest = self.split(items, version)
        frame = items.set_index("item_id").loc[manifest.test if split == "test" else manifest.train]
        records = [{"item_id": iid, **{f: _plain(row[f]) for f in self.inputs},
                    **({"label": _plain(row[self.gold])} if split == "train" else {})} for iid, row in frame.iterrows()]
        return Split(self.card.name, version, split, frame.index.tolist(), records, list(self.labels), manifest.hash,
                     answer=self.answer or f"label ({' | '.join(map(str, self.labels))})",
                     context={"items": items, "manifest": manifest})

    def outside_cell_parts(self, s, preds, profile: dict, protocol: str, key: str, n_resamples: int,
                           data_dir=None) -> dict:
        """The cell parts of checked answers ``preds`` on split ``s``: records in the test order, scored by a
        :class:`~atlaslib.cards.run.CardRun` through the family's counts (the outside system's own row)."""
        from ..results import EXTERNAL
        from .run import CardRun

        by = {p.item_id: p for p in preds}
        test = s.context["items"].set_index("item_id").loc[s.context["manifest"].test]
        answers = ([by[i].label for i in test.index], None if any(by[i].score is None for i in test.index)
                   else np.array([float(by[i].score) for i in test.index]))
        run = CardRun(self.card.name, s.version, profile["name"], protocol, parameters={"n_resamples": n_resamples})
        # the card's cell parts where it has its own (as cards.run.run calls them), else the family's
        parts = getattr(run.module, "cell_parts", self.cell_parts)(run, self._records(test, answers),
                                                                   s.context["manifest"])
        return dict(parts, profile=profile, capability=EXTERNAL, parameters={"n_resamples": n_resamples},
                    overlap=self.card.overlap(profile.get("trained_on")),
                    details={"source": EXTERNAL, "predictions_sha256": profile.get("revision")})

    # -- variants ----------------------------------------------------------------------------------------------
    def variants(self, card_run, items, manifest) -> list[dict]:
        """The variant cells of ``card_run`` (finished, the family's last run; none for another): each declared
        perturbation applied to the test items' ``text`` column (the items it applies to, sampled as it declares),
        re-predicted by the run's own predictor (nothing trained again), scored as the run is
        (:meth:`CardRun.score`) and made by :meth:`CardRun.variant`."""
        from ..variants import NOT_APPLICABLE, inputs_sha256, sample
        from .run import CardRun

        s = card_run.spec
        key, predictor = self._last
        if key != (s.version, s.model, s.protocol) or card_run.cell is None or card_run.cell.get("status") != "ok":
            return []
        test = items.set_index("item_id").loc[manifest.test]
        out = []
        for p in self.card.perturbations:
            changed = {}
            for iid, row in test.iterrows():
                got = p.apply({"item_id": iid, **row.to_dict()})
                if got is not NOT_APPLICABLE:
                    changed[iid] = got
            ids = sample(list(changed), p.max_items, p.seed, s.version)
            if not ids:
                continue
            frame = test.loc[ids].copy()
            frame[self.text] = [changed[i][self.text] for i in ids]
            records = self._records(frame, predictor(frame))
            # scored as the run's metrics are, by a run of its own (the finished run's resamples stay its own)
            metrics = CardRun(card_run.module, s.version, s.model, s.protocol, parameters=s.parameters).score(records)
            first = records[next(iter(records))] if isinstance(records, dict) else records
            out.append(card_run.variant(p.spec(), metrics=metrics, predictions=first, n_items=len(test),
                                        n_applicable=len(changed),
                                        inputs_digest=inputs_sha256(frame[self.text].tolist())))
        return out


class LabelledItems(TaskFamily):
    """Labelled items (one label per item, an abstention allowed and counted wrong): one unit per item, the
    columns ``correct`` (prediction == gold) and ``item``; accuracy per slice with its exact interval."""

    kind = "labels"
    exact_slices = True
    columns = ("correct", "item")

    @classmethod
    def slice_note(cls, card) -> str:
        return "accuracy with its exact (Clopper–Pearson) interval"

    @staticmethod
    def accuracy(seed: int, *, name: str = "accuracy", unit: str = "items", min_units: int = 10):
        """The family's usual ``SCORING``: accuracy = correct / items with its exact Clopper–Pearson interval, the
        items resampled as rows (paired comparisons), per slice exact too (slices under ``min_units`` pooled)."""
        from ..metrics.engine import Metric, Resampling, Scoring, SliceRule, ratio

        acc = Metric(name, lambda t: ratio(t["correct"], t["item"]), decision="correct", exact_test=True,
                     proportion=lambda t: (t["correct"], t["item"]))
        return Scoring(columns=LabelledItems.columns, metrics=(acc,), primary=name,
                       resampling=Resampling("rows", unit, seed), decisions={"correct": lambda c: c["correct"] == 1},
                       slices=SliceRule({name: acc}, support=lambda t: t["item"], min_units=min_units, exact=True),
                       interval="exact")

    def counts(self, cell: dict):
        """One unit per item: ``correct`` and ``item`` (1); gold checked against the labels, predictions against
        the labels and the abstention."""
        from ..metrics.engine import UnitCounts, check_labels

        if self.counter is not None:
            return self.counter(cell)
        recs = cell.get("predictions") or []
        gold = check_labels([r["gold"] for r in recs], self.labels, "gold")
        valid = self.labels + ((self.abstain,) if self.abstain is not None else ())
        pred = check_labels([r["pred"] for r in recs], valid, "pred")
        return UnitCounts([r["item_id"] for r in recs], self.columns,
                          np.stack([gold == pred, np.ones(len(recs), bool)], axis=1).astype(np.int64).reshape(-1, 2),
                          self._groups(recs))


class BinaryItems(TaskFamily):
    """Binary items (the second of the two labels positive): one unit per item, the confusion columns ``tp, fp,
    tn, fn`` (one of them 1) and ``positive`` (gold positive), grouped by gold (stratified resampling), with the
    scores when every record has one; macro F1 per slice with the stratified bootstrap."""

    kind = "binary"
    columns = ("tp", "fp", "tn", "fn", "positive")

    @classmethod
    def slice_note(cls, card) -> str:
        return "macro F1 with its stratified bootstrap interval"

    def counts(self, cell: dict):
        from ..metrics.engine import UnitCounts, check_labels

        if self.counter is not None:
            return self.counter(cell)
        recs = cell.get("predictions") or []
        gold = check_labels([r["gold"] for r in recs], self.labels, "gold")
        pred = check_labels([r["pred"] for r in recs], self.labels, "pred")
        t, p = gold == self.labels[1], pred == self.labels[1]
        c = np.stack([t & p, ~t & p, ~t & ~p, t & ~p, t], axis=1).astype(np.int64).reshape(-1, 5)
        scores = [r.get("score") for r in recs]
        none = not recs or any(x is None for x in scores)
        return UnitCounts([r["item_id"] for r in recs], self.columns, c,
                          {"gold": t.astype(int).tolist(), **self._groups(recs)},
                          None if none else np.asarray(scores, dtype=float), {"roc_auc": self.no_score} if none else {})


class Spans(TaskFamily):
    """Tagged spans (IOB2 tags per word): gold mentions found by all / some / no runs; strict entity F1 per slice
    with the cluster bootstrap over documents. What any span card counts and scores, given its entity types and
    groupings: :meth:`count_spans` (one unit per record, per type the strict IOB2 mention counts ``<type>:tp``,
    ``<type>:fp``, ``<type>:fn``), :meth:`mention_slices` (the same counts per group of a mention property),
    :meth:`strict_f1` (the usual ``SCORING``) and :meth:`per_type_scores` (the per-type table); the card's
    ``counter`` calls them."""

    kind = "spans"
    unit = "mention"
    slice_units = "gold items"
    slice_groups = None
    seqeval = True
    parts: ClassVar[tuple] = ("tp", "fp", "fn")

    @classmethod
    def slice_note(cls, card) -> str:
        return (f"strict entity F1 with its cluster bootstrap interval (resampling unit: {card.resampling_unit}; "
                f"mention slices score the mentions of the slice: recall over gold, precision over predicted ones)")

    @staticmethod
    def columns_of(types) -> tuple:
        """The count columns of ``types``: ``<type>:tp``, ``<type>:fp``, ``<type>:fn`` per type, in order."""
        return tuple(f"{t}:{x}" for t in types for x in Spans.parts)

    @staticmethod
    def scores(t) -> dict:
        """The strict span scores (:func:`atlaslib.metrics.spans.scores_from_totals`: micro, macro and per type) of
        engine totals ``t`` over :meth:`columns_of` columns."""
        from ..metrics.spans import scores_from_totals

        return scores_from_totals(Spans._by_type(t))

    @staticmethod
    def pooled(t, part: str):
        """``part`` (``tp``, ``fp`` or ``fn``) of engine totals ``t`` summed over the types."""
        return Spans._by_type(t)[..., Spans.parts.index(part)].sum(-1)

    @staticmethod
    def _by_type(t):
        """Engine totals ``t`` over :meth:`columns_of` columns as ``(..., type, part)``."""
        return t.array.reshape(t.array.shape[:-1] + (-1, len(Spans.parts)))

    @staticmethod
    def strict_f1(types, seed: int, *, by: str = "document", unit: str = "documents", min_units: int = 20):
        """The family's usual ``SCORING``: strict entity F1, precision, recall and macro F1 over ``types`` (NaN
        where a denominator is 0, with the reason of :data:`atlaslib.metrics.spans.UNDEFINED_REASONS`), the units
        resampled in clusters of their ``by`` group (``unit``: what a cluster is); per slice F1, precision and
        recall, slices under ``min_units`` gold mentions pooled."""
        from ..metrics.engine import Metric, Resampling, Scoring, SliceRule
        from ..metrics.spans import UNDEFINED_REASONS

        def metric(name, key, other=None):   # other: fp (precision) or fn (recall), the proportion's denominator
            found = None if other is None else (lambda t: (Spans.pooled(t, "tp"),
                                                           Spans.pooled(t, "tp") + Spans.pooled(t, other)))
            return Metric(name, lambda t: Spans.scores(t)[key], proportion=found,
                          undefined_reason=UNDEFINED_REASONS[key])

        f1, p, r = metric("entity_f1", "f1"), metric("entity_precision", "precision", "fp"), \
            metric("entity_recall", "recall", "fn")
        return Scoring(columns=Spans.columns_of(types), metrics=(f1, p, r, metric("entity_macro_f1", "macro_f1")),
                       primary="entity_f1", resampling=Resampling("clusters", unit, seed, by=by),
                       slices=SliceRule({m.name: m for m in (f1, p, r)}, min_units=min_units, unit="gold mentions",
                                        support=lambda t: Spans.pooled(t, "tp") + Spans.pooled(t, "fn")))

    @staticmethod
    def per_type_scores(uc, scoring, types, *, n_resamples: int | None = None) -> dict:
        """Per entity type ``{support, precision, recall, f1}`` of span counts ``uc`` over ``types``, each ``{value,
        ci_low, ci_high}`` (null with its reason where undefined), on ``scoring``'s resamples (the cell metrics'); a
        resample where a type's metric is undefined (no mention of it predicted, or in gold) leaves that interval."""
        from ..metrics import engine
        from ..metrics.engine import Metric, Scoring
        from ..metrics.spans import UNDEFINED_REASONS

        def metric(k: int, t: str, key: str) -> Metric:
            return Metric(f"{t}:{key}", lambda tot: Spans.scores(tot)[f"type_{key}"][..., k],
                          undefined_reason=UNDEFINED_REASONS[f"type_{key}"].format(type=t))
        keys = ("precision", "recall", "f1")
        per_type = Scoring(columns=scoring.columns, primary=f"{types[0]}:f1", resampling=scoring.resampling,
                           metrics=tuple(metric(k, t, key) for k, t in enumerate(types) for key in keys))
        m = engine.evaluate(per_type, uc, "type", n_resamples=n_resamples)
        support = Spans.scores(uc.total())["type_support"]
        return {t: {"support": int(support[k]), **{key: m[f"{t}:{key}_type"] for key in keys}}
                for k, t in enumerate(types)}

    @staticmethod
    def count_spans(cell: dict, types, groups: dict, *, records=None, per_item=None):
        """The per-record span counts of ``cell``'s predictions (``gold`` and ``pred`` IOB2 tags, checked by
        :func:`atlaslib.metrics.spans.span_counts`) over ``types``, grouped by ``groups`` (group name -> record
        field). ``per_item`` with its ``types``: counts made already (a slice's), for ``records``."""
        from ..metrics.engine import UnitCounts
        from ..metrics.spans import span_counts

        recs = (cell.get("predictions") or []) if records is None else records
        if per_item is None:
            per_item, types = span_counts([r["gold"] for r in recs], [r["pred"] for r in recs], types)
        return UnitCounts([r["item_id"] for r in recs], Spans.columns_of(types), per_item.reshape(len(recs), -1),
                          {g: [r[f] for r in recs] for g, f in groups.items()})

    @staticmethod
    def mention_slices(cell: dict, spec: dict, group_of, group_order, groups: dict):
        """Per-mention slices (``spec["unit"] == "mention"``: a property of each mention ``(type, first word, last
        word)`` read off the gold and the predicted tags): ``[(group, UnitCounts)]``, the counts of the mentions in
        each group, every record a unit (each mention's type relabelled by its group); None for a slice over record
        fields."""
        from ..metrics.spans import mention_value, mentions, span_counts, tags_from_mentions

        if spec.get("unit") != "mention":
            return None
        recs = cell.get("predictions") or []
        gm, pm = [mentions(r["gold"]) for r in recs], [mentions(r["pred"]) for r in recs]
        order = group_order(spec, [group_of(mention_value(m, spec), spec) for ms in gm + pm for m in ms])
        code = {g: k for k, g in enumerate(order)}

        def relabel(ms, n):
            return tags_from_mentions(n, [(f"{t}__{code[group_of(mention_value((t, a, b), spec), spec)]}", a, b)
                                          for t, a, b in ms])
        per_item, types = span_counts([relabel(ms, len(r["gold"])) for ms, r in zip(gm, recs)],
                                      [relabel(ms, len(r["pred"])) for ms, r in zip(pm, recs)])
        cols = {g: [k for k, t in enumerate(types) if t.endswith(f"__{code[g]}")] for g in order}
        return [(g, Spans.count_spans(cell, [types[k] for k in cols[g]], groups, records=recs,
                                      per_item=per_item[:, cols[g], :])) for g in order]


class ScoredRelations(TaskFamily):
    """Relations scored by an official scorer the card wraps (its ``counter``): per gold item of each kind the
    records' ``found`` bits (found by all / some / no runs); the scorer's F1 per slice with the bootstrap over
    documents."""

    kind = "temporal"
    unit = "relation"
    slice_units = "gold items"
    slice_groups = "found"

    @classmethod
    def slice_note(cls, card) -> str:
        return f"the scorer's F1 with its bootstrap interval (resampling unit: {card.resampling_unit})"

    def cell_parts(self, card_run, result, manifest) -> dict:
        """A scorer's run: ``predict`` gives the run's result, whose ``cell_parts(card_run)`` are its records, the
        scorer's table and the rest, scored by ``card_run`` (:meth:`CardRun.score` of the records with the scorer's
        per-document counts); None (the run did not happen): the split only."""
        parts = super().cell_parts(card_run, None, manifest)
        return parts if result is None else dict(parts, **result.cell_parts(card_run))


def _plain(x):
    """A numpy scalar as the Python value (records are JSON)."""
    return x.item() if isinstance(x, np.generic) else x
