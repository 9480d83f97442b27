"""The build report and the timing table name the executed runs that dominate a build's time."""
from __future__ import annotations

from atlaslib.matrix import MatrixReport, dominant_runs, print_timing
from atlaslib.runner import RunOutcome, RunRequest


def _report():
    runs = [("a", "ran", 600.0), ("b", "ran", 250.0), ("c", "cached", 900.0), ("d", "ran", 100.0), ("e", "ran", 50.0)]
    return MatrixReport(outcomes=[RunOutcome(RunRequest("negex", "v", m, "p"), status, seconds)
                                  for m, status, seconds in runs], seconds=700.0)


def test_the_longest_executed_runs_until_they_hold_the_share():
    # executed seconds 1,000: 600 (60 %) < 80 %, + 250 = 85 % >= 80 %: two runs; the cached run costs nothing
    assert dominant_runs(_report()) == [("negex/v/a/p", 600.0, 0.6), ("negex/v/b/p", 250.0, 0.25)]
    assert dominant_runs(_report(), share=0.5) == [("negex/v/a/p", 600.0, 0.6)]
    assert dominant_runs(MatrixReport()) == []


def test_the_timing_table_and_the_report_page_say_it(tmp_path):
    from atlaslib.pages.site import render_build_report

    lines = []
    print_timing(_report(), log=lines.append)
    assert "where the time went: negex/v/a/p 600 s (60%); negex/v/b/p 250 s (25%)" in lines
    (tmp_path / "book").mkdir()
    render_build_report(tmp_path, _report())
    page = (tmp_path / "book" / "build_report.md").read_text()
    assert "these executed runs hold 85% of the executed runs' summed seconds" in page
    assert "| `negex/v/a/p` | 600.0 | 60.0% |" in page and "negex/v/c/p` | 900.0 | 90" not in page
