"""One MACCROBAT run: the memorize baseline on the card's words, the registry models under ``zero_shot``,
``probe`` and ``finetune`` (:func:`run_protocol`), by the run's decision and load, and its :class:`Outcome`
(predictions as the contract's records, scored by a CardRun; per-type scores)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import pandas as pd

from ... import results as _results
from ...metrics.spans import tags_from_mentions
from ...splits import SplitManifest
from .card import (BASELINE_PROFILE, BOOTSTRAP_RESAMPLES, CARD, FINETUNE_RECIPE,
                   NER_LABEL_TABLE, SEED, SHA256SUMS_DIGEST, TAGS)


# ------------------------------------------------------------------------------------- protocols
def words_to_text(words: Sequence[str]) -> tuple[str, list[int], list[int]]:
    """Words joined by single spaces, with each word's start and end offset in that text."""
    starts, ends, pos = [], [], 0
    for w in words:
        starts.append(pos)
        ends.append(pos + len(w))
        pos += len(w) + 1
    return " ".join(words), starts, ends


def fit_memorizer(train: pd.DataFrame, casefold: bool = False):
    """The memorize baseline fit on the train sentences (words joined by spaces, mentions as character spans)."""
    from ...models.memorize import PhraseMemorizer

    docs = []
    for words, ms in zip(train["words"], train["mentions"]):
        text, st, en = words_to_text(words)
        docs.append((text, [(st[a], en[b], t) for t, a, b in ms]))
    return PhraseMemorizer(casefold=casefold).fit(docs)


def memorize_tags(train: pd.DataFrame, test: pd.DataFrame, casefold: bool = False,
                  mem=None) -> tuple[list[list[str]], object]:
    """The memorize baseline on the card's words: fit on train sentences (:func:`fit_memorizer`), predict test
    sentences, map matches back to words. ``mem``: a memorizer already fit (a variant run: it is not fit
    again)."""
    if mem is None:
        mem = fit_memorizer(train, casefold)
    out = []
    for words in test["words"]:
        text, st, en = words_to_text(words)
        first = {s: k for k, s in enumerate(st)}
        last = {e: k for k, e in enumerate(en)}
        spans = [(t, first[s], last[e]) for s, e, t in mem.predict(text) if s in first and e in last]
        out.append(tags_from_mentions(len(words), spans))
    return out, mem


@dataclass
class Outcome:
    """One run's outcome: predictions + metrics, or why it did not run."""
    model: str
    protocol: str
    version: str
    status: str                                    # "ok" | "not_run"
    reason: str | None = None
    capability: str | None = None                  # the capability the run loaded (None for the card's baseline)
    profile: dict = field(default_factory=dict)   # the model's profile as the run's load gave it
    item_ids: list = field(default_factory=list)
    documents: list = field(default_factory=list)
    gold: list = field(default_factory=list)
    pred: list = field(default_factory=list)
    native: list = field(default_factory=list)   # zero-shot heads: the adapter's own labels per word
    details: dict = field(default_factory=dict)
    seconds: float = 0.0
    llm: dict = field(default_factory=dict)        # a language model's contamination mark and memorisation probe
    # words of other sentences -> their IOB2 tags, with this run's model and whatever it trained (a variant run)
    predict: object = field(default=None, repr=False, compare=False)
    # a fine-tuned row: words -> [(seed, IOB2 tags)] with every training seed's model (its variant runs them all)
    predict_seeds: object = field(default=None, repr=False, compare=False)
    reads_text: bool = True
    seed_runs: list = field(default_factory=list)  # finetune: per training seed {seed, pred, details, metrics}
    seeded: dict = field(default_factory=dict)     # finetune: the row's metrics over its seeds (the cell's)
    n_resamples: int = BOOTSTRAP_RESAMPLES         # how its intervals resample (the card's seed unless given)
    bootstrap_seed: int = SEED

    def records(self, pred=None) -> list[dict]:
        """The run's predictions as the contract's records (:func:`atlaslib.cards.record`), one per test sentence:
        ``item_id``, ``gold`` and ``pred`` IOB2 tags (``pred``: these tags instead of the run's), ``score`` None,
        ``document`` (the case report): what the card's :func:`~.counting.counts` reads and the cell keeps."""
        from .. import record

        return [record(i, list(g), list(p), None, document=d)
                for i, d, g, p in zip(self.item_ids, self.documents, self.gold, self.pred if pred is None else pred)]

    def scored_records(self):
        """What the run's :meth:`~atlaslib.cards.run.CardRun.score` scores, the contract's ``predict`` and the
        notebook alike: :meth:`records`; a row over training seeds: ``{training seed: records}`` in the recipe's
        order."""
        if self.seed_runs:
            return {r["seed"]: self.records(r["pred"]) for r in self.seed_runs}
        return self.records()

    def metrics(self, run=None) -> dict:
        """Cell metrics ``entity_*_<protocol>``: :meth:`scored_records` through ``run`` (a variant's: its run's
        :class:`~atlaslib.cards.run.CardRun`), else a CardRun of this outcome (an outside system, a script): the
        card's scoring, the one engine; a row over training seeds: the mean over seeds with the
        two-level interval, each seed's metrics and unit counts kept in its ``seed_runs`` entry; null with the
        reason when not run."""
        from ..run import CardRun

        if self.status != "ok":
            return {name: _results.metric(None, reason=f"not run: {self.reason}")
                    for name in CARD.metric_names(self.protocol)}
        if self.seed_runs and self.seeded:
            return dict(self.seeded)
        run = run or CardRun(CARD.name, self.version, self.model, self.protocol,
                             parameters={"n_resamples": self.n_resamples})
        metrics = run.score(self.scored_records(), seed=self.bootstrap_seed, n_resamples=self.n_resamples)
        for r in self.seed_runs:
            r.update({k: run.seed_scores[r["seed"]][k] for k in ("metrics", "unit_counts")})
        if self.seed_runs:
            self.seeded = metrics
        return metrics

    def per_type(self) -> pd.DataFrame:
        """Per-type precision / recall / F1 with CIs and gold support."""
        if self.status != "ok":
            return pd.DataFrame({"status": [f"not run: {self.reason}"]})
        rows = []
        for t, e in self.per_type_scores().items():
            row = {"type": t, "support": e["support"]}
            for k in ("precision", "recall", "f1"):
                row[k], row[f"{k}_low"], row[f"{k}_high"] = e[k]["value"], e[k]["ci_low"], e[k]["ci_high"]
            rows.append(row)
        return pd.DataFrame(rows).set_index("type")

    def per_type_scores(self) -> dict:
        """Per entity type ``{support, precision, recall, f1}``, each ``{value, ci_low, ci_high}`` (null with its
        reason where undefined): the card's per-type scoring through the one engine
        (:func:`.counting.per_type_scores`), on the same case-report resamples as the cell's metrics; a resample
        where a type's metric is undefined leaves its interval."""
        from .counting import counts, per_type_scores

        return per_type_scores(counts({"predictions": self.records()}), n_resamples=self.n_resamples,
                               seed=self.bootstrap_seed)


#: (version, model, protocol) -> (its :class:`Outcome`, the items) of the card's last run in this process (one
#: entry: an outcome holds its model): what the run's cell parts and variant runs read (:func:`last_outcome`)
LAST_OUTCOMES: dict = {}


def last_outcome(card_run) -> tuple:
    """``(Outcome, items)`` of the run ``card_run`` predicted (the contract's ``predict``); KeyError naming the run
    when it has not predicted in this process."""
    s = card_run.spec
    try:
        return LAST_OUTCOMES[(s.version, s.model, s.protocol)]
    except KeyError:
        raise KeyError(f"maccrobat: no outcome of {s.model} {s.protocol} on {s.version}: call predict first") from None


def run_protocol(items: pd.DataFrame, manifest: SplitManifest, model: str, protocol: str,
                 n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = SEED, adapter=None,
                 retrain: bool = False, load=None) -> Outcome:
    """Run one (model, protocol) on the split: ``memorize`` is the card's own baseline (protocol
    ``train_lookup``: it looks up phrases memorised from the train sentences); any other model runs on what
    ``load`` gives (the run's :meth:`CardRun.load <atlaslib.cards.run.CardRun.load>`: the model by the run's
    decision), or on ``adapter`` (tests), else is decided and loaded here by the same rule
    (:mod:`atlaslib.cards.deciding`): the capability, the profile and the adapter's options are the card's
    declared data (``CARD.capabilities``, ``CARD.adapter_options``), never chosen here. A run that cannot happen gives an Outcome with status
    ``not_run`` and the reason as the decision words it (never an exception). ``finetune`` trains the encoder
    with a new token head (:data:`FINETUNE_RECIPE`; ``retrain`` ignores cached weights)."""
    import time

    if protocol not in CARD.protocols:
        raise ValueError(f"maccrobat: protocol {protocol!r} unknown; expected one of {CARD.protocols}")
    if model not in CARD.baselines and any(protocol in ps for ps in CARD.baselines.values()):
        raise ValueError(f"maccrobat: protocol {protocol!r} is the memorize baseline's; model {model!r} runs "
                         f"under {', '.join(CARD.capabilities)}")
    t0 = time.perf_counter()
    idx = items.set_index("item_id")
    missing = [i for i in manifest.train + manifest.test if i not in idx.index]
    if missing:
        raise ValueError(f"maccrobat: split {manifest.version} names {len(missing)} items absent from the "
                         f"items frame, e.g. {missing[:3]}")
    train, test = idx.loc[manifest.train], idx.loc[manifest.test]
    out = Outcome(model=model, protocol=protocol, version=manifest.version, status="ok",
                  item_ids=list(manifest.test), documents=test["document"].tolist(),
                  gold=[list(t) for t in test["tags"]], n_resamples=n_resamples, bootstrap_seed=seed)
    if model == "memorize":
        if protocol not in CARD.baselines[model]:
            raise ValueError(f"maccrobat: the memorize baseline runs under protocol 'train_lookup' only (it "
                             f"learns phrases from the train sentences; it has no head or features), got {protocol!r}")
        from ...phases import phase

        with phase("training"):
            mem = fit_memorizer(train)
        with phase("prediction", items=len(test)):
            pred, _ = memorize_tags(train, test, mem=mem)
        out.predict = lambda words: memorize_tags(train, pd.DataFrame({"words": list(words)}), mem=mem)[0]
        out.profile = dict(BASELINE_PROFILE)
        out.details = {"baseline": "atlaslib.models.memorize.PhraseMemorizer", "casefold": False,
                       "threshold": "annotated in > 1/2 of occurrences", "match": "longest first, word boundaries",
                       "n_phrases": len(mem.phrases), "n_candidate_phrases": len(mem.stats)}
    else:
        from ...protocols import tokens as tok

        if adapter is None:
            from .. import NotRun, deciding

            try:
                loaded = deciding.load_for(CARD, manifest.version, model, protocol, load)
            except NotRun as exc:   # decided not to run: the decision's profile (its cell's overlap mark)
                out.status, out.reason = "not_run", str(exc)
                out.profile = dict((getattr(exc, "decision", None) or {}).get("profile") or {})
                out.seconds = time.perf_counter() - t0
                return out
            adapter, out.capability, out.profile = loaded.adapter, loaded.capability, dict(loaded.profile or {})
        else:  # a test's adapter: the protocol's first declared capability
            out.capability = CARD.capabilities[protocol][0]
        if protocol == "zero_shot":
            res = tok.zero_shot_ner(adapter, test["words"].tolist(), NER_LABEL_TABLE)
        elif protocol == "finetune":
            from ...protocols import finetune as FT

            res = FT.finetune_tokens(adapter, list(manifest.train), train["words"].tolist(), train["tags"].tolist(),
                                     test["words"].tolist(), TAGS, FINETUNE_RECIPE, retrain=retrain,
                                     data_sha256={"maccrobat/SHA256SUMS (400 brat files)": SHA256SUMS_DIGEST})
        else:
            res = tok.probe_ner(adapter, train["words"].tolist(), train["tags"].tolist(), test["words"].tolist())
        pred, out.details = res["tags"], res["details"]
        out.predict = _predictor(adapter, protocol, res)
        if protocol == "finetune" and len(res.get("models") or []) > 1:
            out.predict_seeds = _seed_predictor(adapter, res["models"])
        out.native = res.get("native", [])
        from ..llm import llm_row_extra

        out.llm = llm_row_extra(adapter, out.profile, CARD, test["text"].tolist())
    out.pred = [list(p) for p in pred]
    if protocol == "finetune" and len(res.get("seed_runs") or []) > 1:
        seeded(out, res["seed_runs"], score=False)  # scored once, by the run's CardRun or Outcome.metrics
    out.seconds = time.perf_counter() - t0
    return out


def _predictor(adapter, protocol: str, res: dict):
    """Words of other sentences -> IOB2 tags with this run's adapter and what it trained: the zero-shot head,
    the probe's classifier or the fine-tuned encoder and head, never fit again."""
    from ...protocols import tokens as tok

    def predict(words):
        words = [list(w) for w in words]
        if protocol == "zero_shot":
            return tok.zero_shot_ner(adapter, words, NER_LABEL_TABLE)["tags"]
        if protocol == "finetune":
            from ...protocols import finetune as FT

            return FT.predict_tokens(adapter, res["model"], words, TAGS, FINETUNE_RECIPE)
        bs = int(tok.PROBE_SETTINGS.get("batch_size", 32))
        return tok.predict_probe(res["classifier"], tok.word_vectors(adapter, words, bs))

    return predict


def _seed_predictor(adapter, models):
    """Words of other sentences -> ``[(seed, IOB2 tags)]``, one per training seed's fine-tuned model, never trained
    again (a fine-tuned row's variant run is a row over the same seeds)."""
    from ...protocols import finetune as FT

    def predict(words):
        words = [list(w) for w in words]
        return [(seed, FT.predict_tokens(adapter, model, words, TAGS, FINETUNE_RECIPE)) for seed, model in models]

    return predict


def seeded(out: Outcome, seed_runs: list[dict], score: bool = True) -> None:
    """Make ``out`` a fine-tuned row over its training seeds (``seed_runs``: ``{seed, tags, details}`` each):
    every seed's tags into ``out.seed_runs``; with ``score``, every seed's records scored now
    (:meth:`Outcome.metrics`)."""
    out.seed_runs = [{"seed": r["seed"], "pred": [list(p) for p in r["tags"]], "details": r["details"]}
                     for r in seed_runs]
    out.seeded = {}
    if score:
        out.metrics()
