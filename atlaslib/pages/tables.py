"""Tables on run pages that a reader can trust to be whole: a first few rows with "k of N" said plainly,
every row and every character available one click away (no silent cut, no "…" inside a cell).
"""
from __future__ import annotations

import html

import pandas as pd


class WholeTable:
    """Display object: the first ``n`` rows of ``frame`` under a caption "Showing k of N <what>.", then,
    when rows were left out, a collapsed ``<details>`` block holding all ``N`` rows. Cell text is never
    truncated (pandas' ``max_colwidth`` is lifted for the rendering)."""

    def __init__(self, frame: pd.DataFrame, n: int = 10, what: str = "rows"):
        if n < 1:
            raise ValueError(f"WholeTable: n must be at least 1, got {n}")
        self.frame, self.n, self.what = frame, n, what

    @property
    def caption(self) -> str:
        total, shown = len(self.frame), min(self.n, len(self.frame))
        if total == 0:
            return f"No {self.what}."
        return f"Showing {shown:,} of {total:,} {self.what}" + ("." if shown == total else
                                                                  "; all of them are in the list below the table.")

    def _html(self, frame: pd.DataFrame) -> str:
        with pd.option_context("display.max_colwidth", None):
            return frame.to_html(escape=True, border=0, index=False, classes="atlas-whole-table")

    def _repr_html_(self) -> str:
        parts = [f"<p>{html.escape(self.caption)}</p>"]
        if len(self.frame):
            parts.append(self._html(self.frame.head(self.n)))
        if len(self.frame) > self.n:
            parts.append(f"<details><summary>All {len(self.frame):,} {html.escape(self.what)}</summary>"
                         f"{self._html(self.frame)}</details>")
        return "\n".join(parts)

    def __repr__(self) -> str:
        with pd.option_context("display.max_colwidth", None, "display.max_rows", None):
            return self.caption + ("\n" + self.frame.to_string(index=False) if len(self.frame) else "")


def whole_table(frame: pd.DataFrame, n: int = 10, what: str = "rows") -> WholeTable:
    """See :class:`WholeTable`."""
    return WholeTable(frame.reset_index(drop=True), n, what)


def nli_report_table(report) -> pd.DataFrame:
    """The NLI negation report's per-pattern table as a frame (a real table on the run page): cases,
    abstentions, accuracy and false-entailment rate with their exact intervals and counts."""
    def rate(r) -> str:
        if r.value is None:
            return "n/a (0 of 0)"
        return f"{r.value:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}] ({r.successes:,} of {r.trials:,})"

    rows = [{"pattern": p.pattern, "cases": p.n_cases, "abstentions": p.n_abstentions,
             "accuracy [95 % CI]": rate(p.aggregate_accuracy),
             "false-entailment rate [95 % CI]": rate(p.false_entailment_rate)} for p in report.patterns]
    rows.append({"pattern": "all", "cases": report.n_cases, "abstentions": report.n_abstentions,
                 "accuracy [95 % CI]": rate(report.aggregate_accuracy),
                 "false-entailment rate [95 % CI]": rate(report.false_entailment_rate)})
    return pd.DataFrame(rows).set_index("pattern")


def nli_report_digests(report) -> str:
    """The report's interval method, schema and the two digests, as one Markdown paragraph (no table)."""
    return (f"Intervals: exact Clopper-Pearson, {report.confidence_level:.0%}. Schema: `{report.schema_version}`. "
            f"Case set sha256: `{report.case_set_sha256}`. Predictions sha256: `{report.predictions_sha256}`.")
