"""A run of the NLI card by its one run path (:func:`atlaslib.cards.run.run`: the contract's ``predict`` and the
card's ``cell_parts``, scored by CardRun), as the tests read it: its cell, its labels and the report the card makes
of the cell (:func:`atlaslib.cards.nli_negation.counting.cell_report`)."""
from atlaslib.cards import nli_negation as nn
from atlaslib.cards.run import run


class Ran:
    """``model`` run on ``version`` (``options``: the contract's ``predict`` options, e.g. ``predictor=``)."""

    def __init__(self, model: str, version: str = nn.VERSION, *, parameters: dict | None = None, **options):
        self.model, self.cases = model, nn.version_cases(version)
        self._cell = run("nli_negation", version, model, nn.PROTOCOL, parameters=parameters, **options)
        self.status, self.reason, self.ok = self._cell["status"], self._cell.get("reason"), self._cell["status"] == "ok"
        self.profile = self._cell["spec"]["profile"]
        self.labels = [None if r["pred"] == nn.ABSTENTION else r["pred"] for r in self._cell["predictions"]]
        self.report = nn.counting.cell_report(self._cell) if self.ok else None

    def cell(self) -> dict:
        return self._cell
