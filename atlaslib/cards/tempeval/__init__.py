"""Clinical TempEval 2015 card (SemEval-2015 Task 6; Bethard et al. 2015) on the THYME colon-cancer notes.

Modules: :mod:`.card` (``CARD`` and the card's constants, as data: the pinned THYME files, expected counts,
metrics, the paper's anchors), :mod:`.anafora_io` (XML read/write, schema), :mod:`.scoring`
(anaforatools wrapper), :mod:`.audit` (counts, distributions, distances, closure), :mod:`.baselines`
(closest, majority DocTimeRel, memorize adapter), :mod:`.synthetic` (demo corpus), :mod:`.runs` (one
call per run), :mod:`.counting` (per-document counts and the declared scoring every metric is made from,
through the one engine), :mod:`.contract` (the contract: the card's ``FAMILY``, of the scorer-based relations family
(:class:`atlaslib.cards.families.ScoredRelations`), gives ``predict``, ``counts`` and ``cell_parts``, the notebook's
and ``cards.run.run``'s calls) and :mod:`.outside` (outside systems: the
documents they see, their Anafora folders scored). The names of :mod:`.card`, the contract and
:mod:`.outside` are re-exported here, and the official scorer's command line as ``score_command``
(``atlas score tempeval``).
"""
from .card import (CARD, EXPECTED_COUNTS, EXPECTED_RAW, METRICS, PAPER_ANCHORS, SOURCES_FILE,  # noqa: F401
                   SPLITS, THYME_COMMIT, THYME_FILES, THYME_URL, data_sha256, thyme_dir)
from .contract import FAMILY, audit_items, cell_parts, counts, load_items, predict, split  # noqa: F401
from .outside import OUTSIDE_EXAMPLE, outside_cell_parts, outside_split, write_outside_files  # noqa: F401
from .scoring import SCORE_COMMAND, main as score_command  # noqa: F401  (`atlas score tempeval -r REF -p PRED`)
from .counting import SCORING, slice_counts  # noqa: F401  (how predictions become numbers)
