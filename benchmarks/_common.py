"""Shared bits of the benchmark scripts: where the data is, and what machine ran them."""
from __future__ import annotations

import datetime as _dt
import os
import platform
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def use_data_dir(explicit: str | None = None) -> str | None:
    """``--data-dir``, else ``$ATLAS_DATA_DIR``, else ``../shared/data`` beside the checkout (as the
    tests and the Makefile do); exported as ``ATLAS_DATA_DIR`` so card loaders find it. None lets the
    loaders fall back to their verified download cache."""
    d = explicit or os.environ.get("ATLAS_DATA_DIR")
    if not d and (REPO.parent / "shared" / "data").is_dir():
        d = str(REPO.parent / "shared" / "data")
    if d:
        os.environ["ATLAS_DATA_DIR"] = d
    return d


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict:
    """Date (UTC), host OS, logical CPUs, CPU model, torch threads and library versions."""
    import numpy
    import torch

    out = {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "nproc": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu": cpu_model(),
        "torch_threads": torch.get_num_threads(),
        "loadavg_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        "torch": torch.__version__,
        "numpy": numpy.__version__,
    }
    for name in ("transformers", "sentence_transformers", "sklearn", "seqeval"):
        try:
            out[name] = __import__(name).__version__
        except Exception:
            pass
    return out


def print_machine(info: dict | None = None) -> None:
    info = info or machine()
    print("machine: " + "; ".join(f"{k}={v}" for k, v in info.items()))
