"""Other harnesses' runs in the atlas: lm-evaluation-harness and Inspect logs read, paired and compared with the
book's statistics (``atlas import``).

- :mod:`.logs`: the readers (lm-eval ``--log_samples`` JSONL by its documented fields, Inspect ``.eval`` logs
  through ``inspect_ai.log``) into :class:`~.logs.ImportedRun` records; :class:`~.logs.LogError` for bad input;
- :mod:`.pairing`: runs paired on the documents they share (content hash), prompt drift named, the imported
  metrics declared as an engine ``Scoring`` and counted per unit;
- :mod:`.report`: leaderboard, paired comparisons, ranks, detectable difference, calibration: a dict, written as
  JSON, Markdown and CSV;
- :mod:`.cli`: ``atlas import``.
"""
from .logs import ImportedRun, LogError, read_inspect, read_lm_eval  # noqa: F401
from .pairing import pair  # noqa: F401
from .report import build  # noqa: F401

__all__ = ["ImportedRun", "LogError", "read_inspect", "read_lm_eval", "pair", "build"]
