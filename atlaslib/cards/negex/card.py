"""The NegEx card's declaration, as data: the pinned kit files, the labels and the model input's marker,
GenNegEx 1.2's published figures on the kit, the split versions, the metrics, the fine-tune recipe,
``CARD`` and the capabilities a zero-shot run may use."""
from __future__ import annotations

from ...sources import PinnedFile
from ...variants import PromptSet, PromptVariant, Perturbation
from .. import Analysis, Card, Departure
from .perturbations import (DISTRACTORS, VERSION as PERTURBATION_VERSION, concept_lowercase, concept_typo,
                            header_removed, scope_distractor, sentence_lowercase)

SEED = 20261006
ROWS_EXPECTED = 2376
ITEMS_EXPECTED = 2365

KIT_URL_BASE = ("https://raw.githubusercontent.com/chapmanbe/negex/"
                "d136b972b5d214959807ad5de1881a3225541fe7/GeneralNegEx.Java.v.1.2.05092009/")
ANNOTATIONS = PinnedFile(
    "negex/Annotations-1-120-random.txt", KIT_URL_BASE + "Annotations-1-120-random.txt",
    "e2f652f663617ff661c7863c76075be9ae492c6ef5070d44d2d023bdf6d35b71",
)
TRIGGERS = PinnedFile(
    "negex/negex_triggers.txt", KIT_URL_BASE + "negex_triggers.txt",
    "78c268f6c753faa9b58d6a00b3bf948ad8f074082793cf9000369f883c171333",
)

MARK = "[entity]"
POSITIVE = "negated"
#: why a run's ROC-AUC is not reported when its answers carry no scores: true of a classifier's own assertion head,
#: a rule system and the majority baseline alike (the cell's reason named "a native assertion head" for all of them)
NO_SCORE_REASON = "the run's answers are labels without scores"
LABELS = ("affirmed", "negated")
ASSERTION_TO_DECISION = {"ABSENT": "negated", "PRESENT": "affirmed", "POSSIBLE": "affirmed"}
OPTION_PROMPT = 'Sentence: {sentence}\nQuestion: In this sentence, is "{concept}" negated (stated as absent)?\nAnswer:'
OPTIONS = (" yes", " no")  # " yes" = negated

# GenNegEx 1.2 on the whole kit (chapmanbe/negex TestSet.md): negated = positive class.
GENNEGEX = {"tp": 471, "tn": 1851, "fp": 34, "fn": 20,
            "sensitivity": 0.959, "specificity": 0.982, "precision": 0.933}

VERSIONS = ("atlas-n100-v1", "atlas-full-v1")
METRIC_BASES = ("macro_f1", "sensitivity", "specificity", "precision", "roc_auc")
#: The ``finetune`` protocol's recipe (atlaslib.protocols.finetune): the encoder and a new linear head over
#: LABELS on the mean-pooled marked sentence, trained on the 500 train items only, fixed epochs, no
#: validation split. max_length 256 truncates no NegEx item (the longest marked sentence is 255 sub-words
#: for all-MiniLM-L6-v2), so both [entity] markers are always seen.
#: Training seeds of the fine-tune recipe: one trained model per seed (the first is the split seed, the others
#: follow it), and the row is their mean.
FINETUNE_SEEDS = [SEED, SEED + 1, SEED + 2, SEED + 3, SEED + 4]
FINETUNE_RECIPE = {
    "optimizer": "torch.optim.AdamW", "learning_rate": 5e-5, "epochs": 3, "batch_size": 16, "length_grouping": 8,
    "max_length": 256, "warmup_ratio": 0.1, "weight_decay": 0.01, "adam_betas": [0.9, 0.999], "adam_eps": 1e-8,
    "max_grad_norm": 1.0,
    "head_dropout": 0.1, "seeds": FINETUNE_SEEDS, "torch_threads": 1, "eval_batch_size": 64,
    "validation": "none: fixed epochs, no early stopping; test items unseen until prediction",
}

#: Slices of the test items, as data: slice name -> record field and, for numbers, bands ``(low, high)``
#: (inclusive; ``None`` = open), for categories optionally ``top`` (the most frequent values, the rest pooled as
#: "other"). A record whose field is None falls in the ``missing`` group. The fields are
#: written by :func:`item_slices` into every prediction record.
SLICES = {
    "section header": {"field": "section", "missing": "no header before the target", "top": 8},
    "sentence length (words)": {"field": "sentence_words", "bands": ((1, 10), (11, 20), (21, 40), (41, None))},
    "concepts in the sentence": {"field": "n_concepts", "bands": ((1, 1), (2, 2), (3, 4), (5, None))},
    "nearest negation trigger": {"field": "trigger_side", "missing": "no trigger in the sentence"},
    "words between trigger and target": {"field": "trigger_gap", "bands": ((0, 0), (1, 3), (4, None)),
                                         "missing": "no trigger in the sentence"},
}

#: The card specification's own figures for atlas-full-v1 (its first draw, keyed differently) and the items it
#: shows as training examples.
SPEC_FULL_TEST = {"n": 1442, "negated": 316, "affirmed": 1126, "excluded": 423}
SPEC_EXAMPLES = ("negex-0003", "negex-1663", "negex-0002")

DEPARTURES = (
    Departure("`atlas-full-v1` test set",
              f"{SPEC_FULL_TEST['n']:,} test items ({SPEC_FULL_TEST['negated']:,} negated, "
              f"{SPEC_FULL_TEST['affirmed']:,} affirmed); {SPEC_FULL_TEST['excluded']:,} items share a sentence with "
              "a train item and are excluded",
              "{{fact:negex.full_test.n}} test items ({{fact:negex.full_test.negated}} negated, "
              "{{fact:negex.full_test.affirmed}} affirmed); {{fact:negex.full_excluded}} excluded",
              "the same rule on another draw of the train sentences (the specification's draw was keyed "
              "differently); every result cell records the hash of the manifest it was scored on"),
    Departure("the specification's example items",
              f"{', '.join(SPEC_EXAMPLES)} are shown as training items",
              "`atlas-full-v1`: {{fact:departures.negex.examples.atlas-full-v1}}; `atlas-n100-v1`: "
              "{{fact:departures.negex.examples.atlas-n100-v1}}",
              "the split is drawn by seed-hash rank over all items, not from the examples; an example in the test "
              "set is scored like any other item"),
    Departure("protocols", "zero-shot and probe",
              "adds `finetune`: the encoder and a new head trained on the 500 train items",
              "what training on the kit's own items buys; its rows learn from the card's train items, unlike the "
              "zero-shot and rule rows"),
)

#: Each variant run reads at most this many test items of a version (by seed-hash rank among those it applies
#: to), so that the variants of every run add at most half of the default book's time (benchmarks/bench_variants.py)
PERTURBED_ITEMS = {"atlas-n100-v1": 50, "atlas-full-v1": 100}
#: The card's perturbations (atlaslib.variants): each function's docstring says why the gold decision stays.
PERTURBATIONS = (
    Perturbation("concept-lowercase", PERTURBATION_VERSION, concept_lowercase,
                 seed=SEED, max_items=PERTURBED_ITEMS),
    Perturbation("sentence-lowercase", PERTURBATION_VERSION, sentence_lowercase,
                 seed=SEED, max_items=PERTURBED_ITEMS),
    Perturbation("header-removed", PERTURBATION_VERSION, header_removed,
                 seed=SEED, max_items=PERTURBED_ITEMS),
    Perturbation("concept-typo", PERTURBATION_VERSION, concept_typo, {"min_letters": 5},
                 seed=SEED, max_items=PERTURBED_ITEMS),
    Perturbation("scope-distractor", PERTURBATION_VERSION, scope_distractor,
                 {"template": "No {concept}.", "concepts": DISTRACTORS}, seed=SEED, max_items=PERTURBED_ITEMS),
)

#: The versioned prompt set of the score.options runs: paraphrases of OPTION_PROMPT's question, the options
#: capitalised, and 4 in-context examples from the train items (stratified by decision, seeded), on the leaderboard
#: version only (each variant scores its items once more: a language model's run is the book's slowest). The
#: card's own prompt (OPTION_PROMPT with OPTIONS) stays the leaderboard's.
PROMPT_SET = PromptSet("prompts-v1", seed=SEED, max_items=50, versions=("atlas-full-v1",),
                       variants=(
    PromptVariant("absent", 'Sentence: {sentence}\nQuestion: Does this sentence say that "{concept}" is '
                            'absent?\nAnswer:'),
    PromptVariant("ruled-out", 'Sentence: {sentence}\nQuestion: Is "{concept}" denied or ruled out in this '
                               'sentence?\nAnswer:'),
    PromptVariant("note", 'Clinical note: {sentence}\nQuestion: Is the finding "{concept}" negated in this '
                          'note?\nAnswer:'),
    PromptVariant("instruction", 'Answer yes or no.\nSentence: {sentence}\nQuestion: Is "{concept}" negated '
                                 'here?\nAnswer:'),
    PromptVariant("options-capitalised", options=(" Yes", " No"), note="the card's prompt, options capitalised"),
    PromptVariant("four-shot", k_shot=4, note="the card's prompt after 4 answered train items (2 negated, "
                                              "2 affirmed, by seed-hash rank)"),
))

CARD = Card(
    name="negex",
    title="NegEx test kit: is the concept negated?",
    notebook="notebooks/negex.md",
    versions=VERSIONS,
    protocols=("zero_shot", "probe", "finetune"),
    metrics=METRIC_BASES,
    default_matrix=tuple(
        (v, m, p) for v in VERSIONS for m, p in (
            ("majority", "zero_shot"), ("medspacy-context", "zero_shot"), ("negspacy-negex-kit", "zero_shot"),
            ("all-minilm-l6-v2", "probe"), ("all-minilm-l6-v2", "finetune"),
            ("bvanaken/clinical-assertion-negation-bert", "zero_shot"),
            ("smollm2-135m-instruct", "zero_shot"), ("smollm2-135m-instruct", "probe"),
        )
    ),
    licence_confirmed=False,
    licence_note=("The kit's Apache-2.0 is declared only by the package README beside the file; the repository "
                  "has no licence file. Local evaluation only until the terms are confirmed."),
    task="binary assertion: negated vs affirmed concept",
    data=("NegEx test kit: {{fact:negex.rows}} rows ({{fact:negex.distinct_sentences}} distinct sentences) "
          "from 120 de-identified reports"),
    licence="Apache-2.0 (declared by the kit's package README only; no licence file)",
    test_sizes={"atlas-n100-v1": 100, "atlas-full-v1": 1432},
    pinned_files=(ANNOTATIONS, TRIGGERS),
    resampling_unit="item (sentence, concept)",
    caveats=(
        ("Licence", "Apache-2.0 is declared only by the package README; results stay local until confirmed."),
        ("Kit built for NegEx", "Rule systems in the NegEx family were tuned on these reports; expect them near the "
                                "top. GenNegEx was developed on them: its reproduction is not a held-out evaluation."),
        ("Sentences, not items", "Some sentences carry several annotated concepts; items of one sentence are kept on "
                                 "one side of the split, but the percentile intervals resample items, not sentences."),
        ("Long fragments", "Some 'sentences' are report fragments of several hundred characters with section "
                           "headers."),
        ("Training overlap", "bvanaken/clinical-assertion-negation-bert learned i2b2 2010 assertions, not this kit; "
                             "a model whose training data name the NegEx kit or its triggers is marked as "
                             "overlapping (†)."),
        ("Comparing splits", "Compare splits by manifest hash, not by size: another seed or ranking key gives "
                             "other counts."),
    ),
    capabilities={"zero_shot": ("predict.assertion", "score.options"), "probe": ("embed.text.pooled",),
                  "finetune": ("embed.text.pooled",)},
    # a fine-tune trains the encoder itself: its length is the recipe's, and no embedding is stored
    adapter_options={"finetune": {"max_length": FINETUNE_RECIPE["max_length"], "embed_cache": False}},
    prediction_format="label",
    analysis=Analysis(kind="binary", slices=SLICES, positive=POSITIVE, rule_evidence=True, inputs=("concept", "text")),
    departures=DEPARTURES,
    spec_examples=SPEC_EXAMPLES,
    leaderboard_version="atlas-full-v1",
    order=10,  # the book's card order
    short_name="NegEx",
    overlap_marks=("negex",),  # a profile trained on the kit or its triggers (trained_on: negex-...) marks its cells
    test_set_exposure="public",
    test_set_note="the kit's annotated sentences have been on GitHub (chapmanbe/negex) since 2009",
    training_protocols=("probe", "finetune"),   # a logistic head or the whole encoder learns the 500 train items
    equivalence_margin=0.02,
    margin_note="a gap in macro F1 a reader choosing a negation detector would not act on",
    perturbations=PERTURBATIONS,
    prompt_set=PROMPT_SET,
    # a language model's contamination mark and memorisation probe (atlaslib.cards.llm.llm_row_extra): its
    # answers, not scores; a prompt variant's answer options and their token ids (its tokenizer's); the
    # reproduction table is counted by the card's scoring code, so not among them
    prediction_extra=("contamination", "memorisation", "memorisation_reason", "options", "option_token_ids"),
)

