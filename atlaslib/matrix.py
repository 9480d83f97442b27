"""The build matrix's plain types: where a build writes (:class:`BuildPaths`), what a matrix run reports
(:class:`MatrixReport`) and its per-run timing table (:func:`print_timing`).

They live here, apart from :mod:`atlaslib.book` (which renders pages) and :mod:`atlaslib.executor` (which
runs the matrix), so that both import them and neither imports the other at module level:
``runner`` ← ``matrix`` ← ``executor`` ← ``book``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .runner import REPO, RunFailed, RunOutcome


@dataclass
class BuildPaths:
    repo: Path = REPO
    results: Path = REPO / "results"
    runs: Path = REPO / "book" / "runs"
    build: Path = REPO / "_build"

    def src(self, publish: bool) -> Path:
        return self.build / ("publish-src" if publish else "site-src")

    def html_out(self, publish: bool) -> Path:
        return self.build / ("publish" if publish else "site")


@dataclass
class MatrixReport:
    outcomes: list[RunOutcome] = field(default_factory=list)
    failures: list[RunFailed] = field(default_factory=list)
    seconds: float = 0.0
    stories: list = field(default_factory=list)  # data-story outcomes (atlaslib.pages.datastory), once per version


def print_timing(report: MatrixReport, log=print) -> None:
    log("")
    log(f"{'run':70s} {'status':8s} {'wall s':>8s} {'peak MiB':>9s}")
    for o in report.outcomes:
        peak = f"{o.peak_rss_mb:.0f}" if o.peak_rss_mb else "—"
        log(f"{o.request.label[:70]:70s} {o.status:8s} {o.seconds:8.1f} {peak:>9s}")
    log(f"matrix wall time: {report.seconds:.1f} s")
