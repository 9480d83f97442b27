"""NegEx test kit card: is the named clinical concept negated in its sentence?

Modules: :mod:`.card` (``CARD`` and the card's constants, as data), :mod:`.data` (reading the kit, cleaning
and marking sentences, items, audit), :mod:`.splitting` (the sentence-disjoint split versions), :mod:`.family` (the
card as a card of the binary-items family: its protocols and counts), :mod:`.runs` (one run per model and protocol,
through the family), :mod:`.cells` (the result cell: predictions with slice fields and rule evidence),
:mod:`.reproduction` (GenNegEx 1.2's published figures reproduced), :mod:`.errors` (error tables),
:mod:`.perturbations` and :mod:`.variants` (the card's perturbations and prompt set: variant runs), :mod:`.contract`
(the contract functions: the notebook's path), :mod:`.counting` (the scoring) and :mod:`.outside` (outside systems:
the split they see, their answers scored). Every name is re-exported here.
"""
from .card import (SLICES, ANNOTATIONS, ASSERTION_TO_DECISION, CARD, FINETUNE_RECIPE, GENNEGEX, ITEMS_EXPECTED,  # noqa: F401
                   LABELS, MARK, METRIC_BASES, NO_SCORE_REASON, OPTION_PROMPT, OPTIONS, POSITIVE, ROWS_EXPECTED, SEED,
                   TRIGGERS, VERSIONS)
from .data import (HEADER_RE, NegexDataError, audit, clean, find_target,  # noqa: F401
                   items_from_rows, load_rows, mark, read_rows, sentence_key)
from .splitting import class_balance_caveat, split_frames, split_summary  # noqa: F401
from .runs import NotRun, option_prompts, run_protocol  # noqa: F401
from .reproduction import reproduces, reproduction, reproduction_rows, rows_for_reproduction  # noqa: F401
from .cells import (item_slices, negation_triggers, predictions, rounded, scored_records,  # noqa: F401
                    seed_run_records)
from .errors import error_table, phrase_cases  # noqa: F401
from .contract import FAMILY, audit_items, cell_parts, counts, load_items, predict, split  # noqa: F401  (the contract)
from .card import PERTURBATIONS, PROMPT_SET  # noqa: F401  (variants of a run, as data)
from .variants import marked, perturbed_items, prompts_for, run_variants  # noqa: F401
from .outside import OUTSIDE_EXAMPLE, outside_cell_parts, outside_split  # noqa: F401  (outside systems)
from .counting import SCORING  # noqa: F401  (how predictions become numbers)
