"""NLI negation challenge card (issue 4): see :mod:`.corpus`, :mod:`.challenge`, :mod:`.predictors`."""
from .challenge import (CONFIDENCE_LEVEL, DEFAULT_MAX_FALSE_ENTAILMENT_RATE, DEFAULT_MINIMUM_AGGREGATE_ACCURACY,
                        REPORT_SCHEMA_VERSION, GateDecision, NliNegationReport, PatternScores, RateEstimate,
                        assert_false_entailment_gate, assert_nli_negation_gate, clopper_pearson,
                        collect_predictions, normalise_label, predictions_sha256, run_nli_negation_challenge,
                        score_predictions)
from .corpus import (ABSTENTION, ADMISSIBLE_LABELS, FINDINGS, LABELS, PATTERNS, SECTIONS, VERSION, NliNegationCase,
                     case_set_sha256, default_nli_negation_cases, load_nli_negation_cases, validate_cases)
from .errors import (FalseEntailmentGateError, NliNegationError, NliNegationGateError, NliNegationInputError,
                     NliNegationPredictorError)
from .predictors import (ALWAYS_ABSTAIN, ALWAYS_ENTAILMENT, CONTEXT_PREDICTOR, HUB_NLI_PROFILE, OFFLINE_PREDICTORS,
                         SIMILARITY_PREDICTOR, ContextRulePredictor, EmbeddingSimilarityPredictor,
                         NliAdapterPredictor, always_abstain, always_entailment, build_predictor)
from .card import (CARD, METRICS, PROTOCOL, NliNegationRun, audit_table, depth_table, example_cases,
                   false_entailment_cases, gate_table, pattern_frame, plot_pattern_rates, run_card)
