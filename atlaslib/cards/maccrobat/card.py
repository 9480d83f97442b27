"""The MACCROBAT card's declaration, as data: the pinned source (:data:`FILES`, listed with their sha256
in ``maccrobat_sha256.txt`` beside this module), the label set and its mapping from MACCROBAT's types, the
split versions, the metrics, the fine-tune recipe, the baselines, ``CARD`` and the models' caveats."""
from __future__ import annotations

from pathlib import Path

from ...sources import PinnedFile, read_sha256sums, sha256_bytes
from ...variants import Perturbation
from .. import Analysis, Card, Departure
from .perturbations import VERSION as PERTURBATION_VERSION, gold_cuts_removed, sentence_lowercase, word_typo

# --------------------------------------------------------------------------------------------- source
SOURCE_REPO = "Saieiei/NLP"
SOURCE_COMMIT = "f2b522984cc621d5c7e00fbce02ddeee2a5b8077"
URL_TEMPLATE = f"https://raw.githubusercontent.com/{SOURCE_REPO}/{SOURCE_COMMIT}/MACCROBAT2020/{{path}}"
DATA_PREFIX = "maccrobat/brat/"
_SUMS_PATH = Path(__file__).with_name("maccrobat_sha256.txt")
SHA256SUMS_TEXT = _SUMS_PATH.read_text(encoding="utf-8")
#: sha256 of the pinned list itself (= sha256 of the data directory's SHA256SUMS)
SHA256SUMS_DIGEST = sha256_bytes(SHA256SUMS_TEXT.encode("utf-8"))
FILES: list[PinnedFile] = read_sha256sums(SHA256SUMS_TEXT, DATA_PREFIX, URL_TEMPLATE)
PMIDS: list[str] = sorted({Path(f.name).stem for f in FILES})
REFERENCE = ("hf_dataset singh-aditya/MACCROBAT_biomedical_ner at revision "
             "1470ebf27c9fdf65850ceb841ccd757e4aa79aa5 (MACCROBAT2020-V2.json)")

# --------------------------------------------------------------------------------------------- labels
TYPE_MAP = {
    "Sign_symptom": "problem",
    "Disease_disorder": "problem",
    "Medication": "treatment",
    "Therapeutic_procedure": "treatment",
    "Diagnostic_procedure": "test",
}
TYPES = ("problem", "treatment", "test")
TAGS = ("O", "B-problem", "I-problem", "B-treatment", "I-treatment", "B-test", "I-test")
#: zero-shot mapping of native NER types: identity for i2b2-style heads, TYPE_MAP for MACCROBAT heads
NER_LABEL_TABLE = {**{t: t for t in TYPES}, **TYPE_MAP}
REFERENCE_COUNTS = {"sentences": 4541, "problem": 4656, "treatment": 2098, "test": 4574}

# --------------------------------------------------------------------------------------------- split
SEED = 20261006
VERSIONS = {"atlas-n100-v1": {"n_test": 100, "n_train": 500}}
BOOTSTRAP_RESAMPLES = 1000
METRIC_BASES = ("entity_f1", "entity_precision", "entity_recall", "entity_macro_f1")
#: The ``finetune`` protocol's recipe (atlaslib.protocols.finetune): the encoder and a new linear head over
#: the 7 TAGS, each word labelled on its first sub-word, trained on the 500 train sentences only, fixed
#: epochs, no early stopping; sentences over max_length sub-words are cut into chunks of whole words.
#: The learning rate was chosen once, with all-MiniLM-L6-v2, on the train sentences alone: the 101
#: sentences of 24 train case reports held out, the other 399 trained (3 epochs), entity F1 on the held-out
#: ones for 5e-5 / 1e-4 / 2e-4 / 3e-4 (batch 16) and 5e-5 (batch 8): 0.097 / 0.278 / 0.371 / 0.414 / 0.295.
#: Training seeds of the fine-tune recipe: one trained model per seed (the first is the split seed, the others
#: follow it), and the row is their mean.
FINETUNE_SEEDS = [SEED, SEED + 1, SEED + 2, SEED + 3, SEED + 4]
FINETUNE_RECIPE = {
    "optimizer": "torch.optim.AdamW", "learning_rate": 3e-4, "epochs": 3, "batch_size": 16, "length_grouping": 8,
    "max_length": 128, "warmup_ratio": 0.1, "weight_decay": 0.01, "adam_betas": [0.9, 0.999], "adam_eps": 1e-8,
    "max_grad_norm": 1.0,
    "head_dropout": 0.1, "seeds": FINETUNE_SEEDS, "torch_threads": 1, "eval_batch_size": 64,
    "validation": ("none while training (fixed epochs, no early stopping; test items unseen until prediction); "
                   "the learning rate was chosen once, among 5e-05, 1e-04, 2e-04 and 3e-04, on 101 sentences of "
                   "24 train case reports held out of the 500 train sentences, after a first recipe at 5e-05 "
                   "had already been scored on the test items"),
}
#: The mark on the fine-tuned row of the leaderboard (card data): the learning rate above was chosen after a first
#: recipe had been scored on the test items, which the protocols chapter tells in full. It stays until a choice
#: that never saw test replaces it.
FINETUNE_ROW_MARK = "recipe chosen after a test score; see the protocols chapter"
#: The profile a ``memorize`` cell records (it is no registry model).
BASELINE_PROFILE = {"name": "memorize", "source": "builtin", "location": "atlaslib.models.memorize.PhraseMemorizer",
                    "description": "card baseline, fit on the split's train sentences only"}

#: Slices, as data: slice name -> field and, for numbers, inclusive bands ``(low, high)`` (``None`` = open).
#: ``unit: "mention"`` slices are properties of each mention ``(type, first word, last word)`` read off the
#: gold and the predicted tags (``type``; ``length`` = words), scored on the mentions that fall in the slice
#: (recall over gold, precision over predicted mentions); the other slices are fields of the prediction
#: record (:func:`report_positions`), scored on the sentences that fall in them.
SLICES = {
    "entity type": {"unit": "mention", "field": "type"},
    "mention length (words)": {"unit": "mention", "field": "length", "bands": ((1, 1), (2, 2), (3, 4), (5, None))},
    "sentence position in the case report": {"field": "report_position",
                                             "order": ("first third", "middle third", "last third")},
}

#: The sentences the card's specification shows as its training examples.
SPEC_EXAMPLES = ("maccrobat-d002-s005", "maccrobat-d002-s016", "maccrobat-d000-s005")

DEPARTURES = (
    Departure("protocols", "zero-shot (a native NER head) and a token probe",
              "adds `train_lookup` (the `memorize` floor: phrases seen as mentions in the train sentences) and "
              "`finetune` (the encoder and a token head trained on the 500 train sentences)",
              "a floor that needs no model, and what training on the card's own sentences buys; both learn from "
              "the card's train items, unlike the zero-shot rows"),
    Departure("the specification's example sentences",
              f"{', '.join(SPEC_EXAMPLES)} are shown as training sentences",
              "`atlas-n100-v1`: {{fact:departures.maccrobat.examples.atlas-n100-v1}}",
              "the split ranks every sentence by seed hash and closes whole reports; the examples are not "
              "placed by hand"),
)

#: The card's perturbations (atlaslib.variants): each function's docstring says why the gold mentions stay.
#: Every test sentence they apply to is read (the test set has 100 sentences).
PERTURBATIONS = (
    Perturbation("sentence-lowercase", PERTURBATION_VERSION, sentence_lowercase, seed=SEED),
    Perturbation("word-typo", PERTURBATION_VERSION, word_typo, {"min_letters": 5}, seed=SEED),
    Perturbation("gold-cuts-removed", PERTURBATION_VERSION, gold_cuts_removed, seed=SEED),
)


def _per_type(cell: dict) -> dict:
    """The cell's per-type table (:func:`.counting.per_type`, looked up through the card registry: the counting
    module reads this one's constants)."""
    from .. import card_module

    return card_module(cell["card"]).per_type(cell)


def _gold_cut_leakage(cell: dict) -> dict | None:
    """The cell's gold-cut leakage scored from its unit counts (:func:`.gold_cuts.leakage_of_cell`, looked up as
    :func:`_per_type` is)."""
    from .. import card_module

    return card_module(cell["card"]).leakage_of_cell(cell)


CARD = Card(
    name="maccrobat",
    title="Clinical entity recognition (MACCROBAT)",
    notebook="notebooks/maccrobat.md",
    versions=("atlas-n100-v1",),
    protocols=("zero_shot", "probe", "train_lookup", "finetune"),
    metrics=METRIC_BASES,
    default_matrix=(
        ("atlas-n100-v1", "memorize", "train_lookup"),
        ("atlas-n100-v1", "all-minilm-l6-v2", "probe"),
        ("atlas-n100-v1", "all-minilm-l6-v2", "finetune"),
        ("atlas-n100-v1", "samrawal/bert-base-uncased_clinical-ner", "zero_shot"),
        ("atlas-n100-v1", "d4data/biomedical-ner-all", "zero_shot"),
        ("atlas-n100-v1", "smollm2-135m-instruct", "probe"),
    ),
    higher_is_better={m: True for m in METRIC_BASES},
    # published under the licence its catalogued copy declares; where each statement comes from is the note
    licence_confirmed=True,
    licence_note=("Where each licence statement comes from: MIT is declared by the dataset's catalogued copy, the "
                  "Hugging Face conversion singh-aditya/MACCROBAT_biomedical_ner (its dataset card, 'License: mit', "
                  "at the revision the card's catalogue pins, 1470ebf), whose counts this card reproduces; CC BY 4.0 "
                  "is how the figshare original (Caufield et al., MACCROBAT2018, doi:10.6084/m9.figshare.9764942) "
                  "is usually cited, a record not consulted here; the GitHub copy of the files pinned here "
                  "(Saieiei/NLP, folder MACCROBAT2020) states no licence and has no licence file (the data "
                  "folder's maccrobat/PROVENANCE.md). Both MIT and CC BY 4.0 allow publishing results with "
                  "attribution: cite Caufield et al."),
    task="entity recognition with exact word boundaries (problem / treatment / test), IOB2 over words",
    data="MACCROBAT2020, 200 case reports, {{fact:maccrobat.sentences}} sentences (brat standoff)",
    licence=("MIT (declared by the catalogued copy, the HF conversion singh-aditya/MACCROBAT_biomedical_ner; the "
             "figshare original is cited as CC BY 4.0; the pinned GitHub copy states none)"),
    test_sizes={v: s["n_test"] for v, s in VERSIONS.items()},
    pinned_files=tuple(FILES),
    resampling_unit="document (case report)",
    caveats=(
        ("d4data/biomedical-ner-all: trained on MACCROBAT",
         "Its zero-shot numbers are on its own training data: an upper bound, not transfer; its cells carry the "
         "overlap marker (†)."),
        ("samrawal/bert-base-uncased_clinical-ner: the i2b2/VA 2010 guideline",
         "i2b2 marks one problem span ('abdominal pain') where MACCROBAT splits anatomy + 'pain'; strict F1 "
         "counts such spans as errors, so it understates concept recall."),
        ("memorize: sees only the train sentences",
         "A floor: exact phrases seen as mentions; no generalisation."),
        ("Every model: gold word cuts",
         "Words are cut at gold mention boundaries, so a boundary inside a run of letters is given away by the "
         "word list: leakage, counted above (and measured on the probe)."),
        ("all-minilm-l6-v2 (probe): independent word tags",
         "A sentence-embedding model, no sequence model: B/I consistency comes only from the conlleval repair."),
    ),
    # the card's baseline and its protocol: ``train_lookup`` = look up phrases memorised from the train sentences
    # (it learns from the train split, so it is not zero-shot, and it has no features to probe)
    baselines={"memorize": ("train_lookup",)},
    capabilities={"zero_shot": ("predict.ner",), "probe": ("embed.text.tokens",),
                  "finetune": ("embed.text.tokens",)},
    # a fine-tune trains the encoder itself: its length is the recipe's, and no embedding is stored
    adapter_options={"finetune": {"max_length": FINETUNE_RECIPE["max_length"], "embed_cache": False}},
    prediction_format="tags",
    analysis=Analysis(kind="spans", slices=SLICES, inputs=("words",)),
    departures=DEPARTURES,
    spec_examples=SPEC_EXAMPLES,
    overlap_marks=("maccrobat",),  # a profile trained on MACCROBAT (trained_on) marks its cells
    order=20,  # the book's card order
    short_name="MACCROBAT",
    test_set_exposure="public",
    test_set_note="MACCROBAT's case reports are published on figshare (2018), with copies on GitHub and Hugging Face",
    training_protocols=("probe", "finetune", "train_lookup"),   # each learns from the train sentences
    equivalence_margin=0.03,
    chosen_after_test={"finetune": "its learning rate was chosen after a first recipe had been scored on the test "
                                   "items; see the protocols chapter"},
    margin_note=("smaller than what a change of annotation guideline moves strict span F1 by; a smaller gap would "
                 "not change which tagger a reader picks"),
    perturbations=PERTURBATIONS,
    # what a cell's extra holds that no scoring code makes (a re-score keeps it as stored): a language model's
    # probes, the corpus audit's reproduction rows, the fine-tuned row's mark
    prediction_extra=("contamination", "memorisation", "memorisation_reason", "reproduction_rows", "row_marks"),
    # what the card's scoring makes of every finished ok cell, a re-score's included (first in extra, in this order,
    # where the cell does not hold it yet): the per-type table (:func:`.counting.per_type`), how the intervals
    # resample, and the probe's gold-cut leakage scored from the unit counts it keeps
    # (:func:`.gold_cuts.leakage_of_cell`)
    scored_extra={"per_type": _per_type, "bootstrap": lambda cell: "cluster by document (case report)",
                  "gold_cut_leakage": _gold_cut_leakage},
)


