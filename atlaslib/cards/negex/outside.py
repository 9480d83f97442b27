"""Outside systems on the NegEx card (``atlas export``, ``atlas score``, :func:`atlaslib.evaluate`), the family's
(:meth:`~atlaslib.cards.families.TaskFamily.outside_split`, :meth:`~atlaslib.cards.families.TaskFamily.outside_cell_parts`):
the split as an outside system sees it (item id, concept, sentence and marked text; the train split also the gold
decision), and its answers made into the family's records (the items carry the card's slice fields:
:func:`.family.items_with_slices`) and the card's cell parts as a model run's are (:func:`.contract.cell_parts`)."""
from __future__ import annotations

from .contract import FAMILY

#: one line of a predictions file, as ``atlas export`` shows it in task.json
OUTSIDE_EXAMPLE = '{"item_id": "...", "label": "negated", "score": 0.93}'

outside_split, outside_cell_parts = FAMILY.outside_split, FAMILY.outside_cell_parts
