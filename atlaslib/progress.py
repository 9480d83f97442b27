"""Progress a person can watch: a bar per model call (:func:`progress_bar`) that behaves in a terminal, in a live
notebook and in a log.

- a normal tqdm bar in a terminal, the widget bar in a live notebook with ipywidgets, otherwise (logs, CI,
  papermill kernels without widgets) a plain ASCII bar that refreshes at most every 30 s, because tqdm writes a
  line per refresh there (tqdm #765). The environment variable ``ATLAS_PROGRESS`` = ``off`` | ``plain`` |
  ``auto`` overrides (a runner executing notebooks with papermill sets ``plain``: widget state is not saved in
  executed notebooks).
"""
from __future__ import annotations

import os
import sys


def plain_mode() -> bool:
    """True where progress goes to a log (papermill kernels, CI, a pipe): ``ATLAS_PROGRESS=plain``, or neither a
    terminal nor a notebook kernel."""
    mode = os.environ.get("ATLAS_PROGRESS", "auto").strip().lower()
    return mode == "plain" or not (sys.stderr.isatty() or "ipykernel" in sys.modules)


def progress_bar(total: int, desc: str, enabled: bool = True):
    """A tqdm bar that behaves in terminals, notebooks and logs (see module docstring)."""
    from tqdm import std

    mode = os.environ.get("ATLAS_PROGRESS", "auto").strip().lower()
    if not enabled or mode in ("0", "off", "false", "no", "none"):
        return std.tqdm(total=total, desc=desc, disable=True)
    in_kernel = "ipykernel" in sys.modules
    if mode == "plain" or not (sys.stderr.isatty() or in_kernel):
        return std.tqdm(total=total, desc=desc, mininterval=30.0, maxinterval=300.0, ascii=True,
                        file=sys.stderr, dynamic_ncols=False, ncols=80)
    if in_kernel:
        try:
            import ipywidgets  # noqa: F401
            from tqdm.notebook import tqdm as nb_tqdm
        except ImportError:  # no widgets: a plain bar, without tqdm.auto's IProgress warning
            return std.tqdm(total=total, desc=desc, mininterval=30.0, ascii=True, file=sys.stderr, ncols=80)
        return nb_tqdm(total=total, desc=desc)
    return std.tqdm(total=total, desc=desc, file=sys.stderr)
