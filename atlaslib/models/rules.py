"""Rule-based ``predict.assertion`` adapters: medspaCy ConText and negspacy NegEx.

Both read the atlas' marked input (``Denies stridor or [entity] AIR HUNGER [entity].``): the two markers
are removed (:func:`split_marked`), the text between them becomes the target span, which is put on the
spaCy ``Doc`` as its only entity (label ``TARGET``) before the rule component runs. Sentences are split
first, because both algorithms limit a trigger's scope to its sentence, and the kit's rows often hold
a report header or several sentences; a trigger in one sentence must not reach a concept in the next.

ConText (:class:`ConTextAssertion`)
    medspaCy 1.3.1 as ``medspacy.load`` builds it by default, minus the components not needed here:
    medspaCy's tokenizer, its PyRuSH sentence splitter, and ConText with the packaged default rules.
    Mapping: ``is_negated`` -> ABSENT; else ``is_uncertain`` (POSSIBLE_EXISTENCE) or ``is_hypothetical``
    (HYPOTHETICAL) -> POSSIBLE; else PRESENT (historical and family modifiers do not change existence).
    PyRuSH logs every sentence at DEBUG level through loguru; that logger is disabled here.

negspacy (:class:`NegspacyAssertion`)
    negspacy 1.0.4 ``negex`` with the trigger file of the NegEx kit itself (GenNegEx 1.2
    ``negex_triggers.txt``, a pinned file resolved through :mod:`atlaslib.sources`), spaCy's blank English
    tokenizer and its rule-based ``sentencizer``. The file's lines are ``phrase<TAB><TAB>[TAG]``; the tags
    map to negspacy's termset as

    ========  ======================================  ===============================
    tag       GenNegEx meaning                        negspacy termset key
    ========  ======================================  ===============================
    [PREN]    negation before the concept             preceding_negations
    [POST]    negation after the concept              following_negations
    [PSEU]    pseudo-negation (looks like, is not)    pseudo_negations
    [CONJ]    conjunction ending a trigger's scope    termination
    [PREP]    "possible" before the concept           termination (see below)
    [POSP]    "possible" after the concept            termination (see below)
    ========  ======================================  ===============================

    GenNegEx also stops a negation's scope at a possibility trigger, so [PREP]/[POSP] phrases are
    termination terms of the negation pass. A second negex pass (extension ``negex_possible``) uses
    [PREP] as preceding and [POSP] as following triggers, [PSEU] as pseudo and [CONJ]/[PREN]/[POST] as
    termination, which mirrors GenNegEx's "possible" tag. Output: negated -> ABSENT, else possible ->
    POSSIBLE, else PRESENT. (The NegEx card counts POSSIBLE as affirmed, as GenNegEx's evaluation does.)

Evidence
    After each :meth:`~_RuleAssertion.predict_assertion` call, ``adapter.last_evidence`` holds per item the
    trigger that made the decision: ``{"trigger": text, "category": ..., "span": [start, end]}`` with the
    span in characters of the unmarked sentence the rule system saw (``sentence[start:end] == trigger``),
    or None when the label is PRESENT (no trigger in scope). ConText reads it from medspaCy's modifiers;
    negspacy does not keep it and it is recovered with negspacy's own matcher and scope rule (see
    :meth:`NegspacyAssertion.evidence`).
"""
from __future__ import annotations

from atlaslib import sources
from atlaslib.models.registry import Profile

MARKER = "[entity]"

NEGEX_TRIGGERS = sources.PinnedFile(
    name="negex/negex_triggers.txt",
    url="https://raw.githubusercontent.com/chapmanbe/negex/d136b972b5d214959807ad5de1881a3225541fe7/"
        "GeneralNegEx.Java.v.1.2.05092009/negex_triggers.txt",
    sha256="78c268f6c753faa9b58d6a00b3bf948ad8f074082793cf9000369f883c171333",
)
TRIGGER_TAGS = ("[PREN]", "[POST]", "[PSEU]", "[CONJ]", "[PREP]", "[POSP]")


def split_marked(text: str, index: int | None = None) -> tuple[str, int, int]:
    """``"No [entity] WEAKNESS [entity]."`` -> ``("No WEAKNESS.", 3, 11)``: the unmarked sentence and the
    character offsets of the target. The marker convention puts one space inside each marker
    (``[entity] X [entity]``); the target is the text between the markers, stripped."""
    where = f"marked_texts[{index}]" if index is not None else "marked text"
    if not isinstance(text, str):
        raise TypeError(f"{where}: expected a string, got {type(text).__name__}")
    n = text.count(MARKER)
    if n != 2:
        raise ValueError(f"{where}: expected exactly two {MARKER!r} markers around the target, found {n}: "
                         f"{text[:120]!r}")
    pre, mid, post = text.split(MARKER)
    core = mid.strip()
    if not core:
        raise ValueError(f"{where}: the target between the {MARKER!r} markers is empty: {text[:120]!r}")
    return pre + core + post, len(pre), len(pre) + len(core)


def parse_negex_triggers(text: str, source: str = "negex_triggers.txt") -> dict[str, list[str]]:
    """Trigger phrases by tag from the GenNegEx file format (``phrase<TAB><TAB>[TAG]`` per line)."""
    out: dict[str, list[str]] = {t: [] for t in TRIGGER_TAGS}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip("\r\n")
        if not line.strip():
            continue
        parts = [p for p in line.split("\t") if p.strip()]
        if len(parts) != 2 or parts[1].strip() not in out:
            raise ValueError(f"{source} line {lineno}: expected 'phrase<TAB><TAB>[TAG]' with TAG in "
                             f"{TRIGGER_TAGS}, got {raw!r}")
        phrase = " ".join(parts[0].split())
        if phrase not in out[parts[1].strip()]:
            out[parts[1].strip()].append(phrase)
    return out


def negex_termsets(triggers: dict[str, list[str]]) -> tuple[dict, dict]:
    """negspacy termsets ``(negation, possible)`` from parsed GenNegEx triggers (mapping in the module
    docstring)."""
    negation = {
        "pseudo_negations": list(triggers["[PSEU]"]),
        "preceding_negations": list(triggers["[PREN]"]),
        "following_negations": list(triggers["[POST]"]),
        "termination": list(triggers["[CONJ]"]) + list(triggers["[PREP]"]) + list(triggers["[POSP]"]),
    }
    possible = {
        "pseudo_negations": list(triggers["[PSEU]"]),
        "preceding_negations": list(triggers["[PREP]"]),
        "following_negations": list(triggers["[POSP]"]),
        "termination": list(triggers["[CONJ]"]) + list(triggers["[PREN]"]) + list(triggers["[POST]"]),
    }
    return negation, possible


class _RuleAssertion:
    """Shared driver. Besides the labels, every call of :meth:`predict_assertion` leaves the evidence per item
    in ``last_evidence`` (and in ``evidence_by_text``, keyed by marked text): ``{"trigger", "category",
    "span"}`` for the trigger that made an ABSENT or POSSIBLE decision (``span`` = character offsets in the
    unmarked sentence, :func:`split_marked`'s first value, which is the text the rule system saw), or None
    for PRESENT: no trigger in scope."""

    capability = "predict.assertion"

    def __init__(self, profile: Profile, progress: bool = True):
        self.profile = profile
        self.progress = progress
        self.last_evidence: list | None = None
        self.evidence_by_text: dict = {}   # marked text -> evidence, over every call (same text, same evidence)

    def _docs(self, marked_texts, positions=None):
        """The target entity of each marked text, after the rule pipeline ran; ``positions``: the texts' places
        in the caller's list (named in errors; default 0, 1, ...)."""
        from atlaslib.progress import progress_bar

        if isinstance(marked_texts, str) or not hasattr(marked_texts, "__iter__"):
            raise TypeError(f"marked_texts: expected a list of strings, got {type(marked_texts).__name__}")
        texts = list(marked_texts)
        positions = list(range(len(texts))) if positions is None else list(positions)
        parsed = [split_marked(t, i) for i, t in zip(positions, texts)]
        bar = progress_bar(len(parsed), self.profile.name, self.progress)
        for i, (sentence, start, end) in zip(positions, parsed):
            doc = self.nlp.make_doc(sentence)
            for name, pipe in self.nlp.pipeline:
                if name == self._first_rule_pipe:
                    span = doc.char_span(start, end, label="TARGET", alignment_mode="expand")
                    if span is None or len(span) == 0:
                        raise ValueError(f"marked_texts[{i}]: target {sentence[start:end]!r} does not align "
                                         "with any token")
                    doc.ents = [span]
                doc = pipe(doc)
            bar.update(1)
            yield doc.ents[0]
        bar.close()

    def predict_assertion(self, marked_texts) -> list[str]:
        """Labels per marked text; :attr:`last_evidence` then holds, per text, the trigger behind the label
        (:meth:`evidence`). Each text's label and evidence are a model call of the store
        (:mod:`atlaslib.models.calls`; the stored evidence is the trigger's category and span, never its text,
        which is read back from the sentence)."""
        if isinstance(marked_texts, str) or not hasattr(marked_texts, "__iter__"):
            raise TypeError(f"marked_texts: expected a list of strings, got {type(marked_texts).__name__}")
        texts = list(marked_texts)
        parsed = [split_marked(t, i) for i, t in enumerate(texts)]

        def compute(positions):
            out = []
            for ent in self._docs([texts[i] for i in positions], positions):
                label = self._label(ent)
                ev = self.evidence(ent, label)
                out.append({"label": label, "evidence": None if ev is None else
                            {"category": ev["category"], "span": list(ev["span"])}})
            return out

        values = self.calls.answer(texts, compute)
        labels, evidence = [], []
        for (sentence, _, _), v in zip(parsed, values):
            labels.append(str(v["label"]))
            ev = v["evidence"]
            evidence.append(None if ev is None else {"trigger": sentence[ev["span"][0]:ev["span"][1]],
                                                     "category": ev["category"], "span": list(ev["span"])})
        self.last_evidence = evidence
        self.evidence_by_text.update(zip(texts, evidence))
        return labels

    @property
    def calls(self):
        """The store's space of this rule system's calls: its identity is its class, this module's code, the
        profile's revision, its options and the versions of spaCy and the rule packages."""
        from atlaslib.models import calls

        if getattr(self, "_calls", None) is None:
            identity = {"adapter": type(self).__name__, "code": calls.code_digest(__file__),
                        "revision": self.profile.revision, "options": self._options(),
                        "versions": calls.package_versions(("spacy", "medspacy", "negspacy", "PyRuSH"))}
            self._calls = calls.CallSpace(identity, self.capability)
        return self._calls

    def _options(self) -> dict:
        return {}

    @staticmethod
    def _trigger(doc, start: int, end: int, category: str) -> dict:
        span = doc[start:end]
        return {"trigger": span.text, "category": category, "span": [span.start_char, span.end_char]}

    @property
    def info(self) -> dict:
        return {"profile": self.profile.name, "source": self.profile.source, "revision": self.profile.revision,
                "capability": self.capability, "adapter": f"atlaslib.models.rules.{type(self).__name__}",
                "pipeline": list(self.nlp.pipe_names), "tokenizer": self._tokenizer_name,
                "batch_size": 1, "device": "cpu", "dtype": None, "max_length": None, "pooling": None,
                "torch_threads": None, "model_calls": {self.capability: self.calls.spec}}


class ConTextAssertion(_RuleAssertion):
    """medspaCy ConText with its default rules (see module docstring)."""

    _first_rule_pipe = "medspacy_context"
    _tokenizer_name = "medspacy_tokenizer"

    def __init__(self, profile: Profile, *, sentences: str = "pyrush", progress: bool = True, **unknown):
        if unknown:
            raise TypeError(f"ConTextAssertion ({profile.name}): unknown option(s) {sorted(unknown)}; "
                            "allowed: sentences ('pyrush' | 'sentencizer'), progress")
        if sentences not in ("pyrush", "sentencizer"):
            raise ValueError(f"{profile.name}: sentences must be 'pyrush' or 'sentencizer', got {sentences!r}")
        super().__init__(profile, progress)
        import medspacy
        from loguru import logger

        logger.disable("PyRuSH")
        enable = ["medspacy_tokenizer", "medspacy_context"]
        if sentences == "pyrush":
            enable.append("medspacy_pyrush")
        self.nlp = medspacy.load(medspacy_enable=enable)
        if sentences == "sentencizer":
            self.nlp.add_pipe("sentencizer", before="medspacy_context")
        self.sentences = sentences
        self.medspacy_version = medspacy.__version__

    def _options(self) -> dict:
        return {"sentences": self.sentences}

    @staticmethod
    def _label(ent) -> str:
        if ent._.is_negated:
            return "ABSENT"
        if ent._.is_uncertain or ent._.is_hypothetical:
            return "POSSIBLE"
        return "PRESENT"

    _DECIDING = {"ABSENT": ("NEGATED_EXISTENCE",), "POSSIBLE": ("POSSIBLE_EXISTENCE", "HYPOTHETICAL")}

    def evidence(self, ent, label: str) -> dict | None:
        """The ConText modifier behind the label, read from medspaCy's own record (``ent._.modifiers``): among
        the modifiers of the label's categories, the one nearest the target; None for PRESENT."""
        if label not in self._DECIDING:
            return None
        mods = [m for m in ent._.modifiers if m.category in self._DECIDING[label]]
        if not mods:
            raise RuntimeError(f"ConText labelled {ent.text!r} {label} but holds no modifier of "
                               f"{self._DECIDING[label]}")

        def distance(m):
            a, b = m.modifier_span
            return ent.start - b if b <= ent.start else a - ent.end if a >= ent.end else 0

        best = min(mods, key=lambda m: (distance(m), m.modifier_span))
        return self._trigger(ent.doc, *best.modifier_span, best.category)

    @property
    def info(self) -> dict:
        return {**super().info, "medspacy": self.medspacy_version, "rules": "medspacy default ConText rules",
                "sentence_splitter": self.sentences,
                "label_rule": "negated->ABSENT; uncertain|hypothetical->POSSIBLE; else PRESENT"}


class NegspacyAssertion(_RuleAssertion):
    """negspacy Negex with the NegEx kit's trigger file (see module docstring for the tag mapping)."""

    _first_rule_pipe = "negex"
    _tokenizer_name = "spacy.blank('en')"

    def __init__(self, profile: Profile, *, data_dir=None, triggers_path=None, progress: bool = True,
                 **unknown):
        if unknown:
            raise TypeError(f"NegspacyAssertion ({profile.name}): unknown option(s) {sorted(unknown)}; "
                            "allowed: data_dir, triggers_path, progress")
        super().__init__(profile, progress)
        import negspacy.negation  # noqa: F401  (registers the "negex" factory)
        import spacy

        if triggers_path is None:
            triggers_path = sources.resolve(NEGEX_TRIGGERS, data_dir)
            self.triggers_sha256 = NEGEX_TRIGGERS.sha256
        else:
            self.triggers_sha256 = sources.sha256_file(triggers_path)
        self.triggers_path = str(triggers_path)
        with open(triggers_path, encoding="utf-8", newline="") as fh:
            self.triggers = parse_negex_triggers(fh.read(), str(triggers_path))
        negation, possible = negex_termsets(self.triggers)
        self.nlp = spacy.blank("en")
        self.nlp.add_pipe("sentencizer")
        self.nlp.add_pipe("negex", name="negex", config={"neg_termset": negation, "ent_types": [],
                                                         "extension_name": "negex", "chunk_prefix": []})
        self.nlp.add_pipe("negex", name="negex_possible",
                          config={"neg_termset": possible, "ent_types": [], "extension_name": "negex_possible",
                                  "chunk_prefix": []})
        from importlib.metadata import version

        self.negspacy_version = version("negspacy")

    def _options(self) -> dict:
        return {"triggers_sha256": self.triggers_sha256}

    @staticmethod
    def _label(ent) -> str:
        if ent._.negex:
            return "ABSENT"
        if ent._.negex_possible:
            return "POSSIBLE"
        return "PRESENT"

    _PASSES = {"ABSENT": ("negex", "[PREN]", "[POST]"), "POSSIBLE": ("negex_possible", "[PREP]", "[POSP]")}

    def evidence(self, ent, label: str) -> dict | None:
        """The trigger behind the label. negspacy 1.0.4 sets only a boolean (``ent._.negex``) and does not
        keep the phrase that fired, so it is recovered here with the pass's own component: its
        ``process_negations`` (the same PhraseMatcher, pseudo-negation filter and termsets) and
        ``termination_boundaries``, then negspacy's rule: within the entity's scope (between termination
        boundaries), a preceding trigger starting before the entity or a following trigger ending after it
        (negspacy checks preceding ones first). Among those that qualify, the one nearest the entity is
        reported. Category = the GenNegEx tag of the phrase ([PREN]/[POST] for ABSENT, [PREP]/[POSP] for
        POSSIBLE). None for PRESENT."""
        if label not in self._PASSES:
            return None
        name, pre_tag, post_tag = self._PASSES[label]
        pipe = self.nlp.get_pipe(name)
        doc = ent.doc
        preceding, following, terminating = pipe.process_negations(doc)
        for b0, b1 in pipe.termination_boundaries(doc, terminating):
            if not (b0 <= ent.start and ent.end <= b1):
                continue
            pre = [(s, e) for _, s, e in preceding if b0 <= s < b1 and s < ent.start]
            if pre:
                return self._trigger(doc, *max(pre), pre_tag)
            post = [(s, e) for _, s, e in following if b0 <= s < b1 and e > ent.end]
            if post:
                return self._trigger(doc, *min(post), post_tag)
        raise RuntimeError(f"negspacy labelled {ent.text!r} {label} but no {pre_tag}/{post_tag} trigger of its "
                           "scope qualifies")

    @property
    def info(self) -> dict:
        return {**super().info, "negspacy": self.negspacy_version, "triggers": NEGEX_TRIGGERS.name,
                "triggers_sha256": self.triggers_sha256, "triggers_url": NEGEX_TRIGGERS.url,
                "trigger_counts": {k: len(v) for k, v in self.triggers.items()},
                "sentence_splitter": "spacy sentencizer",
                "label_rule": "negex->ABSENT; negex_possible->POSSIBLE; else PRESENT"}
