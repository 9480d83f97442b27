"""Predictors shown in the NLI negation card's book.

Every predictor follows the challenge's contract: calling it on ``(premise, hypothesis)`` returns
``"entailment"``, ``"neutral"``, ``"contradiction"`` or ``None`` (abstention); those that are
faster in bulk also have ``predict_batch(premises, hypotheses)``, which the challenge uses.

- :class:`ContextRulePredictor` (``medspacy-context-nli``): medspaCy ConText rules, no learning.
- :class:`EmbeddingSimilarityPredictor` (``minilm-similarity``): cosine of pooled sentence
  embeddings (all-MiniLM-L6-v2), entailment above a threshold, else neutral — deliberately naive:
  it never says contradiction, and negation barely moves a sentence embedding.
- :class:`NliAdapterPredictor`: any ``predict.nli`` adapter of :mod:`atlaslib.models` (a Hugging Face
  sequence-pair NLI head such as ``cross-encoder/nli-deberta-v3-xsmall``).
- :data:`always_entailment`, :data:`always_abstain`: the two trivial rows that show each gate at
  work (the first fails the safety ceiling, the second the accuracy floor).

:func:`build_predictor` maps a matrix model name to one of these.
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from atlaslib.phases import phase

from .corpus import FINDINGS
from .errors import NliNegationInputError

CONTEXT_PREDICTOR = "medspacy-context-nli"
SIMILARITY_PREDICTOR = "minilm-similarity"
ALWAYS_ENTAILMENT = "always-entailment"
ALWAYS_ABSTAIN = "always-abstain"
HUB_NLI_PROFILE = "cross-encoder/nli-deberta-v3-xsmall"
SIMILARITY_PROFILE = "all-minilm-l6-v2"
OFFLINE_PREDICTORS = (CONTEXT_PREDICTOR, SIMILARITY_PREDICTOR, ALWAYS_ENTAILMENT, ALWAYS_ABSTAIN)


class _Constant:
    """One answer to every case (``None``: abstain), named as the card's baseline."""

    def __init__(self, name: str, label: str | None):
        self.name, self._label = name, label
        self.info = {"profile": name, "source": "builtin", "capability": "predict.nli",
                     "adapter": f"{__name__}.{name.replace('-', '_')}"}

    def __call__(self, premise: str, hypothesis: str) -> str | None:
        return self._label


#: entailment to everything: fails the false-entailment ceiling on any case set with a contradiction or neutral case
always_entailment = _Constant(ALWAYS_ENTAILMENT, "entailment")
#: abstains on everything: never a false entailment, accuracy 0, so it fails the accuracy floor
always_abstain = _Constant(ALWAYS_ABSTAIN, None)


# ---------------------------------------------------------------------------------------------
# medspaCy ConText rule predictor


class ContextRulePredictor:
    """NLI by ConText assertion status of the finding the hypothesis names.

    Pipeline: spaCy blank English with medspaCy's tokenizer, spaCy's rule sentencizer, a
    ``TargetMatcher`` holding the finding lexicon (default: the corpus's :data:`FINDINGS`; the rule
    system has to be told what a finding is), ConText with medspaCy's default rules, and the
    sectionizer with its default rules. The same pipeline reads premise and hypothesis.

    Decision, for the first finding mention in the hypothesis (its polarity: negated by ConText or
    not; its section: the hypothesis's section header, if it has one):

    1. no finding in the hypothesis → ``None`` (abstain: the rule has nothing to judge);
    2. the premise's mentions of the same finding, restricted to that section when the hypothesis
       names one; none → ``neutral`` (not mentioned);
    3. the mentions disagree (some negated, some not) → ``neutral``;
    4. premise polarity equals hypothesis polarity → ``entailment``, otherwise ``contradiction``.

    It inherits ConText's blind spots on purpose (they are what the card measures): e.g. "was
    negative for x" is not negated by the default rules (medspaCy issue #232), a backward negation
    such as "x is not present" is missed, and stacked negations are read as one.
    """

    name = CONTEXT_PREDICTOR

    def __init__(self, findings: Sequence[str] = FINDINGS):
        if isinstance(findings, str) or not findings or not all(isinstance(f, str) and f.strip()
                                                                 for f in findings):
            raise NliNegationInputError("ContextRulePredictor: findings must be a non-empty list of strings")
        self.findings = tuple(dict.fromkeys(f.strip().lower() for f in findings))
        self._nlp = None

    @property
    def nlp(self):
        if self._nlp is None:
            import medspacy
            from medspacy.ner import TargetRule

            with phase("loading"):
                nlp = medspacy.load(medspacy_enable=["medspacy_tokenizer", "medspacy_target_matcher",
                                                     "medspacy_context", "medspacy_sectionizer"])
                nlp.add_pipe("sentencizer", first=True)
                nlp.get_pipe("medspacy_target_matcher").add([TargetRule(f, "FINDING") for f in self.findings])
            self._nlp = nlp
        return self._nlp

    @property
    def info(self) -> dict:
        from importlib import metadata

        return {"profile": self.name, "source": "builtin", "capability": "predict.nli",
                "adapter": f"{__name__}.ContextRulePredictor",
                "revision": f"medspacy=={metadata.version('medspacy')}; spacy=={metadata.version('spacy')}",
                "findings": list(self.findings), "context_rules": "medspaCy default",
                "section_rules": "medspaCy default"}

    @staticmethod
    def _decide(pdoc, hdoc) -> str | None:
        hents = list(hdoc.ents)
        if not hents:
            return None
        h = hents[0]
        finding = h.text.lower()
        hsec = h._.section_category
        mentions = [e for e in pdoc.ents
                    if e.text.lower() == finding and (hsec is None or e._.section_category == hsec)]
        if not mentions:
            return "neutral"
        polarity = {bool(e._.is_negated) for e in mentions}
        if len(polarity) > 1:
            return "neutral"
        return "entailment" if polarity.pop() == bool(h._.is_negated) else "contradiction"

    def predict_batch(self, premises: Sequence[str], hypotheses: Sequence[str]) -> list[str | None]:
        premises, hypotheses = list(premises), list(hypotheses)
        if len(premises) != len(hypotheses):
            raise NliNegationInputError(
                f"ContextRulePredictor: {len(premises)} premises but {len(hypotheses)} hypotheses")
        with warnings.catch_warnings():
            # spaCy W036: medspaCy's internal matchers warn when a rule set is empty; harmless here
            warnings.filterwarnings("ignore", message=r".*\[W036\]")
            pdocs = list(self.nlp.pipe(premises))
            hdocs = list(self.nlp.pipe(hypotheses))
        return [self._decide(p, h) for p, h in zip(pdocs, hdocs)]

    def __call__(self, premise: str, hypothesis: str) -> str | None:
        return self.predict_batch([premise], [hypothesis])[0]


# ---------------------------------------------------------------------------------------------
# Embedding-similarity predictor

#: Findings used only to calibrate the similarity threshold; disjoint from :data:`FINDINGS`.
CALIBRATION_FINDINGS = ("fatigue", "back pain", "wheezing", "vomiting", "palpitations", "sore throat",
                        "joint pain", "night sweats")
#: Same-finding paraphrase pairs and different-finding pairs, all affirmative (no negation at all).
_PARAPHRASES = (("The patient has {f}.", "The patient is experiencing {f}."),
                ("The patient presents with {f}.", "{F} was noted in the patient."))
_DIFFERENT = (("The patient has {f}.", "The patient has {g}."),
              ("The patient presents with {f}.", "{G} was noted in the patient."))


def calibration_pairs() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(same-finding paraphrase pairs, different-finding pairs) over :data:`CALIBRATION_FINDINGS`;
    the g of each pair is the next calibration finding."""
    same, diff = [], []
    n = len(CALIBRATION_FINDINGS)
    for i, f in enumerate(CALIBRATION_FINDINGS):
        g = CALIBRATION_FINDINGS[(i + 1) % n]
        kw = dict(f=f, F=f[0].upper() + f[1:], g=g, G=g[0].upper() + g[1:])
        same += [(a.format(**kw), b.format(**kw)) for a, b in _PARAPHRASES]
        diff += [(a.format(**kw), b.format(**kw)) for a, b in _DIFFERENT]
    return same, diff


class EmbeddingSimilarityPredictor:
    """Entailment when cos(embed(premise), embed(hypothesis)) > threshold, else neutral.

    ``adapter`` is an ``embed.text.pooled`` adapter (``embed(texts, batch_size=...) -> (n, d)``).
    Threshold rule when none is given (:meth:`calibrate`): the midpoint between the mean cosine of
    same-finding paraphrase pairs and the mean cosine of different-finding pairs, both built from
    :data:`CALIBRATION_FINDINGS`, which share no finding with the challenge corpus. No challenge
    case, and no gold label, enters the threshold. The predictor is negation-blind by design: the
    naive "similar means entailed" reading the challenge exists to catch.
    """

    name = SIMILARITY_PREDICTOR

    def __init__(self, adapter, threshold: float | None = None, batch_size: int = 32):
        if not callable(getattr(adapter, "embed", None)):
            raise NliNegationInputError("EmbeddingSimilarityPredictor: adapter must have embed(texts)")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise NliNegationInputError("EmbeddingSimilarityPredictor: batch_size must be a positive integer")
        self.adapter = adapter
        self.batch_size = batch_size
        self.calibration: dict | None = None
        if threshold is None:
            with phase("training"):   # the threshold is fit on calibration pairs, never on the cases
                threshold = self.calibrate()
        elif isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
                or not -1.0 <= float(threshold) <= 1.0:
            raise NliNegationInputError("EmbeddingSimilarityPredictor: threshold must be a number in [-1, 1]")
        self.threshold = float(threshold)

    def similarities(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        premises, hypotheses = list(premises), list(hypotheses)
        if len(premises) != len(hypotheses):
            raise NliNegationInputError(
                f"EmbeddingSimilarityPredictor: {len(premises)} premises but {len(hypotheses)} hypotheses")
        if not premises:
            return np.zeros(0)
        texts = list(dict.fromkeys(premises + hypotheses))          # each distinct text embedded once
        emb = np.asarray(self.adapter.embed(texts, batch_size=self.batch_size))
        if emb.ndim != 2 or emb.shape[0] != len(texts):
            raise NliNegationInputError("EmbeddingSimilarityPredictor: the adapter returned a wrongly shaped array")
        row = {t: i for i, t in enumerate(texts)}
        a, b = (np.asarray(emb[[row[t] for t in ts]], dtype=np.float64) for ts in (premises, hypotheses))
        den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)    # row-wise cosine; a zero row gives 0
        return np.where(den > 0, (a * b).sum(1) / np.where(den > 0, den, 1.0), 0.0)

    def calibrate(self) -> float:
        same, diff = calibration_pairs()
        s_same = self.similarities([a for a, _ in same], [b for _, b in same])
        s_diff = self.similarities([a for a, _ in diff], [b for _, b in diff])
        m_same, m_diff = float(s_same.mean()), float(s_diff.mean())
        self.calibration = {"rule": "midpoint of mean cosine: same-finding paraphrases vs different findings",
                            "findings": list(CALIBRATION_FINDINGS), "n_same": len(same), "n_diff": len(diff),
                            "mean_cos_same": m_same, "mean_cos_diff": m_diff}
        return (m_same + m_diff) / 2

    @property
    def info(self) -> dict:
        base = dict(getattr(self.adapter, "info", {}) or {})
        return {**base, "predictor": self.name, "adapter": f"{__name__}.EmbeddingSimilarityPredictor",
                "embedding_capability": "embed.text.pooled", "threshold": self.threshold,
                "calibration": self.calibration}

    def predict_batch(self, premises: Sequence[str], hypotheses: Sequence[str]) -> list[str]:
        sims = self.similarities(premises, hypotheses)
        return ["entailment" if s > self.threshold else "neutral" for s in sims]

    def __call__(self, premise: str, hypothesis: str) -> str:
        return self.predict_batch([premise], [hypothesis])[0]


# ---------------------------------------------------------------------------------------------
# predict.nli adapters


class NliAdapterPredictor:
    """Wraps a ``predict.nli`` adapter (``predict_nli(premises, hypotheses) -> labels``).

    When the adapter tells its label probabilities (``last_label_probabilities()``: a causal LM's softmax over
    its scored label options, an NLI head's softmax), :attr:`last_scores` keeps them per case of the last batch
    (``{label: probability}``), recorded in the result cell beside each answer; otherwise it is None. They never
    change an answer: the labels are the adapter's."""

    def __init__(self, adapter, name: str | None = None):
        if not callable(getattr(adapter, "predict_nli", None)):
            raise NliNegationInputError("NliAdapterPredictor: adapter must have predict_nli(premises, hypotheses)")
        self.adapter = adapter
        self.name = name or (getattr(adapter, "info", {}) or {}).get("profile", "predict.nli")
        self.last_scores: list[dict] | None = None

    @property
    def info(self) -> dict:
        return dict(getattr(self.adapter, "info", {}) or {})

    def predict_batch(self, premises, hypotheses) -> list[str]:
        self.last_scores = None
        labels = list(self.adapter.predict_nli(list(premises), list(hypotheses)))
        proba = getattr(self.adapter, "last_label_probabilities", None)
        scores = proba() if callable(proba) else None
        if scores is not None:
            scores = [dict(s) for s in scores]
            if len(scores) != len(labels):
                raise NliNegationInputError(f"NliAdapterPredictor: the adapter gave {len(scores)} label "
                                            f"probabilities for {len(labels)} answers")
            self.last_scores = scores
        return labels

    def __call__(self, premise: str, hypothesis: str) -> str:
        return self.predict_batch([premise], [hypothesis])[0]


def build_predictor(model: str, *, adapter=None, **options):
    """The predictor of one of the card's baselines: ``medspacy-context-nli``, ``minilm-similarity`` (on
    ``adapter``, the ``embed.text.pooled`` adapter of the weights the card declares for it, loaded by the run's
    decision, :func:`atlaslib.cards.deciding.load`; ``threshold=`` may override), ``always-entailment``,
    ``always-abstain``. A model is no baseline: the run loads its ``predict.nli`` adapter
    (:class:`NliAdapterPredictor`). Every returned object has ``.name`` and ``.info``."""
    if not isinstance(model, str) or not model.strip():
        raise NliNegationInputError("parameter model must be a non-empty string")
    if model in (ALWAYS_ENTAILMENT, ALWAYS_ABSTAIN):
        return always_entailment if model == ALWAYS_ENTAILMENT else always_abstain
    if model == CONTEXT_PREDICTOR:
        return ContextRulePredictor(**options)
    if model == SIMILARITY_PREDICTOR:
        if adapter is None:
            raise NliNegationInputError(f"parameter adapter: {model} needs the embed.text.pooled adapter of its "
                                        "weights (loaded by the run's decision)")
        return EmbeddingSimilarityPredictor(adapter, threshold=options.pop("threshold", None))
    raise NliNegationInputError(f"parameter model: {model!r} is not one of the card's baselines "
                                f"({', '.join(OFFLINE_PREDICTORS)}); a model runs on its predict.nli adapter")
