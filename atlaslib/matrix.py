"""The build matrix's plain types: where a build writes (:class:`BuildPaths`, and :func:`output_dir`, the check
of an output folder argument), what a matrix run reports (:class:`MatrixReport`) and its per-run timing table
(:func:`print_timing`).

They live here, apart from :mod:`atlaslib.book` (which renders pages) and :mod:`atlaslib.executor` (which
runs the matrix), so that both import them and neither imports the other at module level:
``runner`` ← ``matrix`` ← ``executor`` ← ``book``.
"""
from __future__ import annotations

import os
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


def output_dir(value, flag: str) -> str:
    """``value`` (an output folder argument) made absolute, after checking it can be a folder: ValueError with
    one line when it, or the nearest part of it that exists, is a file, or when it is a symlink loop."""
    p = Path(value).expanduser()
    try:
        p = Path(os.path.abspath(p))
        for part in [p, *p.parents]:
            if os.path.lexists(part):
                os.stat(part)  # follows symlinks: ELOOP for a loop
                if not part.is_dir():
                    where = "is" if part == p else f"is inside {part}, which is"
                    raise ValueError(f"{flag} {value} {where} a file, not a folder; give a folder (it is created "
                                     f"when missing)")
                break
        return str(p.resolve())
    except (OSError, RuntimeError) as exc:  # ELOOP from stat, RuntimeError from resolve on some Pythons
        why = "a symlink loop" if "loop" in str(exc).lower() or getattr(exc, "errno", None) == 40 else \
            (getattr(exc, "strerror", None) or type(exc).__name__)
        raise ValueError(f"{flag} {value} cannot be used as a folder ({why})") from None


@dataclass
class MatrixReport:
    outcomes: list[RunOutcome] = field(default_factory=list)
    failures: list[RunFailed] = field(default_factory=list)
    seconds: float = 0.0
    stories: list = field(default_factory=list)  # data-story outcomes (atlaslib.pages.datastory), once per version


def print_timing(report: MatrixReport, log=print) -> None:
    """The per-run table: status, wall seconds and where they went (loading, training, prediction, side
    measurements: :mod:`atlaslib.phases`), peak memory, and the model calls the run made and was served from
    the model-call store (— for a run served whole from the run cache, which asks nothing); damaged store
    entries met (recomputed) are named under the table."""
    log("")
    log(f"{'run':70s} {'status':9s} {'wall s':>8s} {'load':>6s} {'train':>6s} {'predict':>7s} {'side':>6s} "
        f"{'peak MiB':>9s} {'calls made':>10s} {'served':>8s}")
    damaged = []
    for o in report.outcomes:
        peak = f"{o.peak_rss_mb:.0f}" if o.peak_rss_mb else "—"
        mc = (o.extra or {}).get("model_calls") or {}
        made, served = (f"{mc['made']:,}", f"{mc['served']:,}") if "made" in mc else ("—", "—")
        damaged += [(o.request.label, p) for p in mc.get("corrupt") or ()]
        ph = (o.extra or {}).get("phases") or {}
        parts = [f"{ph[k]:.0f}" if ph.get(k) is not None else "—" for k in ("loading", "training", "prediction", "side")]
        log(f"{o.request.label[:70]:70s} {o.status:9s} {o.seconds:8.1f} {parts[0]:>6s} {parts[1]:>6s} {parts[2]:>7s} "
            f"{parts[3]:>6s} {peak:>9s} {made:>10s} {served:>8s}")
    log(f"matrix wall time: {report.seconds:.1f} s")
    top = dominant_runs(report)
    if top:
        log("where the time went: " + "; ".join(f"{label} {s:,.0f} s ({share:.0%})" for label, s, share in top))
    for label, path in damaged:
        log(f"model-call store: a damaged entry was recomputed and replaced during {label}: {path}")


#: the executed runs :func:`dominant_runs` names: the longest, until they hold this share of all executed seconds
DOMINANT_SHARE = 0.8


def dominant_runs(report: MatrixReport, share: float = DOMINANT_SHARE) -> list[tuple[str, float, float]]:
    """The runs that dominate a build's time: ``(label, seconds, share of the executed runs' summed seconds)`` of
    the executed runs, longest first, as few as together hold ``share`` of the sum (a cold build's cost is in
    these; a cached run costs nothing). Empty when no run executed."""
    ran = sorted(((o.request.label, float(o.seconds)) for o in report.outcomes if o.status == "ran"),
                 key=lambda t: (-t[1], t[0]))
    total = sum(s for _, s in ran)
    out, held = [], 0.0
    for label, s in ran:
        if total <= 0 or held >= share * total:
            break
        out.append((label, s, s / total))
        held += s
    return out
