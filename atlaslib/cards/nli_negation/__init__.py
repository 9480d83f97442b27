"""NLI negation challenge card.

Modules: :mod:`.card` (``CARD`` and the card's constants, as data: its case sets, one run per model, tables
and plots), :mod:`.corpus` (the built-in case set), :mod:`.exchange` (openmed's fixture format, both ways),
:mod:`.challenge` (gates, the report's types, labels checked), :mod:`.report` (the challenge as a library
call: labels or a predictor in, its report out), :mod:`.predictors`
(the offline baselines and the hub NLI adapter), :mod:`.errors` (the card's exceptions) and
:mod:`.contract` (the five contract functions) and :mod:`.outside` (outside systems: the case set they see,
their labels scored). Every name is re-exported here.
"""
from .challenge import (CONFIDENCE_LEVEL, DEFAULT_MAX_FALSE_ENTAILMENT_RATE, DEFAULT_MINIMUM_AGGREGATE_ACCURACY,
                        REPORT_SCHEMA_VERSION, GateDecision, NliNegationReport, PatternScores, RateEstimate,
                        collect_predictions, decide_gates, normalise_label, predictions_sha256)
from .corpus import (ABSTENTION, ADMISSIBLE_LABELS, FINDINGS, LABELS, PATTERNS, SECTIONS, VERSION, NliNegationCase,
                     case_set_sha256, default_nli_negation_cases, load_nli_negation_cases, validate_cases)
from .errors import NliNegationError, NliNegationInputError, NliNegationPredictorError
from .predictors import (ALWAYS_ABSTAIN, ALWAYS_ENTAILMENT, CONTEXT_PREDICTOR, HUB_NLI_PROFILE, OFFLINE_PREDICTORS,
                         SIMILARITY_PREDICTOR, ContextRulePredictor, EmbeddingSimilarityPredictor,
                         NliAdapterPredictor, always_abstain, always_entailment, build_predictor)
from .exchange import load_openmed_fixtures, write_openmed_fixtures
from .card import (CARD, CASE_SETS, LLM_PROFILE, METRICS, NLI_PROMPTS, OPENMED_VERSION, PROTOCOL, CaseSet,
                   audit_table, case_frame, depth_table, example_cases, false_entailment_cases, gate_table,
                   memorisation_sentences, most_common_label_text, pattern_frame, plot_pattern_rates, predict_cases,
                   records_of, show_gates, show_patterns, show_report, version_cases)
from .contract import FAMILY, audit_items, cell_parts, counts, load_items, predict, split  # noqa: F401  (contract)
from .outside import OUTSIDE_EXAMPLE, outside_cell_parts, outside_split, write_outside_files  # noqa: F401
from .report import run_nli_negation_challenge, score_predictions  # noqa: F401
from .scoring import SCORE_COMMAND, main as score_command  # noqa: F401  (`atlas score nli_negation ...`)
from .counting import SCORING  # noqa: F401  (how predictions become numbers)
