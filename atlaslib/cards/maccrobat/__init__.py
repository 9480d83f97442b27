"""MACCROBAT card: problems, treatments and tests in sentences of clinical case reports.

Modules: :mod:`.card` (``CARD`` and the card's constants, as data, its perturbations included), :mod:`.data`
(brat parsing, the conversion to sentences and IOB2 tags, the corpus, items and audit), :mod:`.splitting` (the
report-disjoint split), :mod:`.runs` (one run per model and protocol, its :class:`Outcome`), :mod:`.cells` (the
result cell), :mod:`.variants` (the run under each perturbation), :mod:`.errors` (error tables and kinds),
:mod:`.gold_cuts` (the gold word cuts' leakage), :mod:`.counting` (the spans family's counts and scoring over the
card's types), :mod:`.contract` (the contract functions; ``FAMILY``: the card as a card of the spans family,
:class:`atlaslib.cards.families.Spans`) and :mod:`.outside` (outside systems: the sentences they see, their tags
scored). The names a notebook, page or test reads are re-exported here.
"""
from .card import (SLICES, BASELINE_PROFILE, BOOTSTRAP_RESAMPLES, CARD, DATA_PREFIX, FILES,  # noqa: F401
                   FINETUNE_RECIPE, METRIC_BASES, NER_LABEL_TABLE, PERTURBATIONS, PMIDS, REFERENCE, REFERENCE_COUNTS,
                   SEED, SHA256SUMS_DIGEST, SHA256SUMS_TEXT, SOURCE_COMMIT, SOURCE_REPO, TAGS, TYPE_MAP, TYPES,
                   URL_TEMPLATE, VERSIONS)
from .data import (Corpus, Entity, MaccrobatFormatError, audit, convert_document, group_counts,  # noqa: F401
                   load_corpus, mention_lengths, parse_ann, plot_sentences_per_report, remove_overlaps,
                   reproduction_rows, type_counts, words_of)
from .splitting import split_summary  # noqa: F401
from .runs import Outcome, last_outcome, run_protocol  # noqa: F401
from .cells import cell_parts, outcome_parts, per_type_table, report_positions  # noqa: F401
from .errors import error_kinds, error_table, false_positive_sources, guideline_examples  # noqa: F401
from .gold_cuts import (CHAR_SPANS, char_mentions, char_span_f1, gold_cut_mentions, leakage_of_cell,  # noqa: F401
                        leakage_of_run, natural_word_spans, probe_without_gold_cuts, uncut_tags)
from .variants import run_variants  # noqa: F401
from .contract import FAMILY, audit_items, load_items, predict, split  # noqa: F401  (the card contract)
from .outside import OUTSIDE_EXAMPLE, outside_cell_parts, outside_split  # noqa: F401  (outside systems)
from .counting import SCORING, counts, per_type, slice_counts  # noqa: F401  (how predictions become numbers)
