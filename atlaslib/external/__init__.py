"""Evaluate any system without touching the package: export a card's items, score a predictions file.

- :func:`export` (``atlas export``): the items an outside system needs (JSONL: item id plus the card's
  input fields; MACCROBAT also CoNLL; TempEval also the document list and an Anafora layout), the label
  set and the split manifest hash, written to a folder.
- :func:`score` (``atlas score --card``): reads a predictions file (JSONL or CSV; MACCROBAT IOB2 tags per
  word or CoNLL; TempEval an Anafora folder), checks it against the split, computes the card's metrics and
  intervals with the card's own code and writes a result cell marked "external predictions".
- :func:`evaluate`: the same from Python, with a function in place of a file.

A bad predictions file raises :class:`PredictionsError` (the CLI's exit code 2), naming the file, row and
item id of each problem and never echoing input text.
"""
from .tasks import EXTERNAL, PredictionsError, is_external  # noqa: F401
from .export import export  # noqa: F401
from .score import evaluate, score  # noqa: F401

__all__ = ["EXTERNAL", "PredictionsError", "is_external", "export", "score", "evaluate"]
