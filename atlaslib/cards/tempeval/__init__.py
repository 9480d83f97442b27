"""Clinical TempEval 2015 card (SemEval-2015 Task 6; Bethard et al. 2015) on the THYME colon-cancer notes.

:mod:`.card` declares it (data: the pinned THYME files, metrics, gates, the paper's anchors); :mod:`.contract` makes
it a card of the scorer-based relations family (:class:`atlaslib.cards.families.ScoredRelations`) over the card's own
run (:mod:`.runs`: Anafora XML in and out, :mod:`.anafora_io`; the baselines, :mod:`.baselines`; the official
scorer it wraps, :mod:`.scoring`; its counts, :mod:`.counting`). Besides: the annotation audit (:mod:`.audit`), the
synthetic corpus (:mod:`.synthetic`), outside systems' Anafora folders (:mod:`.outside`) and the page's facts
(:mod:`.pages`). ``score_command`` is ``atlas score tempeval``.
"""
from .card import CARD, METRICS, PAPER_ANCHORS, SPLITS, THYME_FILES, data_sha256, thyme_dir  # noqa: F401
from .contract import FAMILY, audit_items, cell_parts, counts, load_items, predict, split  # noqa: F401
from .outside import OUTSIDE_EXAMPLE, outside_cell_parts, outside_split, write_outside_files  # noqa: F401
from .scoring import SCORE_COMMAND, main as score_command  # noqa: F401  (`atlas score tempeval -r REF -p PRED`)
from .counting import SCORING, slice_counts  # noqa: F401  (how predictions become numbers)
