"""One MACCROBAT run (:func:`run_protocol`): the memorize baseline on the card's words, or a registry model
under ``zero_shot``, ``probe`` or ``finetune`` by the run's decision and load, and its :class:`Outcome`
(predictions as the contract's records, scored by a CardRun)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Sequence

import pandas as pd

from ... import results as _results
from ...metrics.spans import tags_from_mentions
from ...splits import SplitManifest
from .card import (BASELINE_PROFILE, BOOTSTRAP_RESAMPLES, CARD, FINETUNE_RECIPE, NER_LABEL_TABLE, SHA256SUMS_DIGEST,
                   TAGS, TYPES)


def words_to_text(words: Sequence[str]) -> tuple[str, list[int], list[int]]:
    """Words joined by single spaces, with each word's start and end offset in that text."""
    starts = list(accumulate((len(w) + 1 for w in words[:-1]), initial=0)) if words else []
    return " ".join(words), starts, [s + len(w) for s, w in zip(starts, words)]


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
    """The memorize baseline on the card's words: fit on train sentences (:func:`fit_memorizer`; ``mem``: one
    already fit), predict test sentences, map matches back to words."""
    mem = mem or fit_memorizer(train, casefold)
    out = []
    for words in test["words"]:
        text, st, en = words_to_text(words)
        first, last = {s: k for k, s in enumerate(st)}, {e: k for k, e in enumerate(en)}
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
    # words of other sentences -> [(training seed or None, IOB2 tags)], with this run's model and whatever it
    # trained, never fit again (a variant run; a fine-tuned row: every seed's model)
    predict_seeds: object = field(default=None, repr=False, compare=False)
    seed_runs: list = field(default_factory=list)  # finetune: per training seed {seed, pred, details, metrics}
    n_resamples: int = BOOTSTRAP_RESAMPLES         # how its intervals resample

    def records(self, pred=None) -> list[dict]:
        """The run's predictions as the contract's records (:func:`atlaslib.cards.record`), one per test sentence:
        ``item_id``, ``gold`` and ``pred`` IOB2 tags (``pred``: these tags instead of the run's), ``score`` None,
        ``document`` (the case report): what the card's :func:`~.counting.counts` reads and the cell keeps."""
        from .. import record

        return [record(i, list(g), list(p), None, document=d)
                for i, d, g, p in zip(self.item_ids, self.documents, self.gold, self.pred if pred is None else pred)]

    def scored_records(self):
        """What the run's :meth:`~atlaslib.cards.run.CardRun.score` scores: :meth:`records`; a row over training
        seeds: ``{training seed: records}`` in the recipe's order."""
        return {r["seed"]: self.records(r["pred"]) for r in self.seed_runs} if self.seed_runs else self.records()

    def metrics(self, run=None) -> dict:
        """Cell metrics ``entity_*_<protocol>``: :meth:`scored_records` scored by ``run`` (its
        :class:`~atlaslib.cards.run.CardRun`; default: one of this outcome), the one engine; a row over training
        seeds: the mean over seeds with the two-level interval, each seed's metrics and unit counts kept in its
        ``seed_runs`` entry."""
        from ..run import CardRun

        run = run or CardRun(CARD.name, self.version, self.model, self.protocol,
                             parameters={"n_resamples": self.n_resamples})
        metrics = run.score(self.scored_records(), n_resamples=self.n_resamples)
        for r in self.seed_runs:
            r.update({k: run.seed_scores[r["seed"]][k] for k in ("metrics", "unit_counts")})
        return metrics


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
                 n_resamples: int = BOOTSTRAP_RESAMPLES, retrain: bool = False, load=None) -> Outcome:
    """Run one (model, protocol) on the split: ``memorize`` is the card's own baseline (protocol ``train_lookup``:
    it looks up phrases memorised from the train sentences); any other model runs on what ``load`` gives (the
    run's :meth:`CardRun.load <atlaslib.cards.run.CardRun.load>`), else is decided and loaded here by the same
    rule (:func:`atlaslib.cards.deciding.load_for`: the card's declared capabilities and adapter options). A run
    that cannot happen gives an Outcome with status ``not_run``, the reason as the decision words it.
    ``finetune`` trains the encoder with a new token head (:data:`FINETUNE_RECIPE`; ``retrain`` ignores cached
    weights)."""
    from ...protocols import tokens as tok
    from .. import NotRun, deciding

    if protocol not in CARD.protocols or (model == "memorize") != (protocol == "train_lookup"):
        raise ValueError(f"maccrobat: {model!r} under protocol {protocol!r}: the memorize baseline runs under "
                         f"'train_lookup' only, and only it does (it learns phrases from the train sentences); a model "
                         f"runs under {', '.join(CARD.capabilities)}")
    t0 = time.perf_counter()
    idx = items.set_index("item_id")
    missing = [i for i in manifest.train + manifest.test if i not in idx.index]
    if missing:
        raise ValueError(f"maccrobat: split {manifest.version} names {len(missing)} items absent from the "
                         f"items frame, e.g. {missing[:3]}")
    train, test = idx.loc[manifest.train], idx.loc[manifest.test]
    out = Outcome(model=model, protocol=protocol, version=manifest.version, status="ok",
                  item_ids=list(manifest.test), documents=test["document"].tolist(),
                  gold=[list(t) for t in test["tags"]], n_resamples=n_resamples)
    if model == "memorize":
        from ...phases import phase

        with phase("training"):
            mem = fit_memorizer(train)
        with phase("prediction", items=len(test)):
            res = {"tags": memorize_tags(train, test, mem=mem)[0]}
        out.predict_seeds = lambda words: [(None, memorize_tags(train, pd.DataFrame({"words": list(words)}),
                                                                mem=mem)[0])]
        out.profile = dict(BASELINE_PROFILE)
        out.details = {"baseline": "atlaslib.models.memorize.PhraseMemorizer", "casefold": False,
                       "threshold": "annotated in > 1/2 of occurrences", "match": "longest first, word boundaries",
                       "n_phrases": len(mem.phrases), "n_candidate_phrases": len(mem.stats)}
    else:
        try:
            loaded = deciding.load_for(CARD, manifest.version, model, protocol, load)
        except NotRun as exc:   # decided not to run: the decision's profile (its cell's overlap mark)
            out.status, out.reason = "not_run", str(exc)
            out.profile = dict((getattr(exc, "decision", None) or {}).get("profile") or {})
            out.seconds = time.perf_counter() - t0
            return out
        adapter, out.capability, out.profile = loaded.adapter, loaded.capability, dict(loaded.profile or {})
        words = [test["words"].tolist(), train["words"].tolist(), train["tags"].tolist()]
        if protocol == "zero_shot":
            res = tok.zero_shot_ner(adapter, words[0], NER_LABEL_TABLE)
        elif protocol == "finetune":
            from ...protocols import finetune as FT

            res = FT.finetune_tokens(adapter, list(manifest.train), words[1], words[2], words[0], TAGS,
                                     FINETUNE_RECIPE, retrain=retrain,
                                     data_sha256={"maccrobat/SHA256SUMS (400 brat files)": SHA256SUMS_DIGEST})
        else:
            res = tok.probe_ner(adapter, words[1], words[2], words[0])
        out.details, out.native = res["details"], res.get("native", [])
        out.predict_seeds = _predictor(adapter, protocol, res)
        from ..llm import llm_row_extra

        out.llm = llm_row_extra(adapter, out.profile, CARD, test["text"].tolist())
    out.pred = [list(p) for p in res["tags"]]
    if len(res.get("seed_runs") or []) > 1:   # a fine-tuned row over its training seeds, scored by the run's CardRun
        out.seed_runs = [{"seed": r["seed"], "pred": [list(p) for p in r["tags"]], "details": r["details"]}
                         for r in res["seed_runs"]]
    out.seconds = time.perf_counter() - t0
    return out


def _predictor(adapter, protocol: str, res: dict):
    """Words of other sentences -> ``[(training seed or None, IOB2 tags)]`` with this run's adapter and what it
    trained: the zero-shot head, the probe's classifier or each training seed's fine-tuned encoder and head."""
    from ...protocols import finetune as FT
    from ...protocols import tokens as tok

    def predict(words):
        words = [list(w) for w in words]
        if protocol == "zero_shot":
            return [(None, tok.zero_shot_ner(adapter, words, NER_LABEL_TABLE)["tags"])]
        if protocol == "probe":
            bs = int(tok.PROBE_SETTINGS.get("batch_size", 32))
            return [(None, tok.predict_probe(res["classifier"], tok.word_vectors(adapter, words, bs)))]
        models = res.get("models") or [(None, res["model"])]
        return [(seed, FT.predict_tokens(adapter, model, words, TAGS, FINETUNE_RECIPE)) for seed, model in models]

    return predict
