"""Execute a card notebook for one (card, version, model, protocol): papermill, cached, atomic.

A run reads ``notebooks/<card>.md`` (MyST text, via jupytext), refuses it unless a code cell is tagged
``parameters`` (papermill would only warn, papermill #245), injects the parameters and executes it with
papermill. The executed notebook goes to ``book/runs/<card>/<version>/<model-slug>/<protocol>.ipynb`` and
the notebook's result cell to ``results/<card>/<version>/<model-slug>/<protocol>.json``. Both are first
written to temporary files and renamed into place only when the whole notebook succeeded, so a failed or
killed run never leaves a partial file nor replaces a good one; a failed notebook is kept for reading in
``_build/failed/`` and the failure names the notebook and the cell.

Cache key (:func:`run_key`): sha256 over the notebook text, the parameters, the sha256 of every pinned data
file of the card, the atlaslib version and the digest of atlaslib's source files, and the model profile
(incl. its revision). A run whose stored cell carries the same key and whose executed notebook exists is
not executed again (``force=True`` ignores the cache).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .cards import get_card
from .results import cell_path, read_cell, slug, write_cell

REPO = Path(__file__).resolve().parent.parent
ATLASLIB = Path(__file__).resolve().parent


class NotebookError(ValueError):
    """A card notebook cannot be run as is (e.g. no cell tagged ``parameters``)."""


class RunFailed(RuntimeError):
    """A notebook raised while executing; names the notebook and the cell."""

    def __init__(self, request: "RunRequest", notebook: str, cell: int | None, error: str, kept: str | None):
        self.request, self.notebook, self.cell, self.error, self.kept = request, notebook, cell, error, kept
        where = f"cell {cell}" if cell is not None else "an unknown cell"
        super().__init__(f"{request.label}: {notebook} failed in {where}: {error}"
                         + (f" (executed notebook kept at {kept})" if kept else ""))


@dataclass(frozen=True)
class RunRequest:
    card: str
    version: str
    model: str
    protocol: str
    params: tuple = ()  # extra notebook parameters as sorted (name, value) pairs

    @property
    def label(self) -> str:
        return f"{self.card}/{self.version}/{self.model}/{self.protocol}"

    def parameters(self) -> dict:
        return {"model": self.model, "protocol": self.protocol, "version": self.version, **dict(self.params)}


@dataclass
class RunOutcome:
    request: RunRequest
    status: str  # "ran" | "cached" | "failed"
    seconds: float = 0.0
    peak_rss_mb: float | None = None
    cell_status: str | None = None
    error: str | None = None
    notebook: str | None = None
    result: str | None = None
    extra: dict = field(default_factory=dict)


def read_text_notebook(path: str | os.PathLike):
    """Read a MyST/ipynb notebook with jupytext and refuse it without a ``parameters`` cell."""
    import jupytext

    path = Path(path)
    if not path.is_file():
        raise NotebookError(f"notebook {path} does not exist")
    nb = jupytext.read(path)
    if not any(c.cell_type == "code" and "parameters" in c.get("metadata", {}).get("tags", [])
               for c in nb.cells):
        raise NotebookError(
            f"{path}: no code cell is tagged 'parameters'; papermill would inject parameters at the top and "
            f"run with the notebook's own defaults. Tag the first code cell with ':tags: [parameters]'.")
    return nb


def source_digest(root: Path = ATLASLIB) -> str:
    """sha256 over atlaslib's .py/.yml/.txt files (path + content), so any code change re-keys runs."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in {".py", ".yml", ".yaml", ".txt", ".json"} and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def _card_data_pins(card_name: str) -> list:
    import importlib
    import inspect

    from .cards import CARD_MODULES
    from .sources import PinnedFile

    if card_name not in CARD_MODULES:
        return []
    mod = importlib.import_module(CARD_MODULES[card_name])
    if hasattr(mod, "PINNED_FILES"):  # a card may list its pinned files explicitly (packages do)
        return sorted([pf.name, pf.sha256] for pf in mod.PINNED_FILES)
    pins = []
    for _, obj in inspect.getmembers(mod):
        if isinstance(obj, PinnedFile):
            pins.append([obj.name, obj.sha256])
        elif isinstance(obj, (list, tuple)) and obj and all(isinstance(o, PinnedFile) for o in obj):
            pins.extend([o.name, o.sha256] for o in obj)
    return sorted(pins)


def _profile_dict(model: str) -> dict:
    try:
        from .models import get_profile

        return get_profile(model).to_dict()
    except Exception as exc:  # card-level baselines are not registry profiles
        return {"name": model, "note": f"no registry profile ({type(exc).__name__})"}


def run_key(request: RunRequest, notebook_text: str) -> str:
    payload = {
        "notebook_sha256": hashlib.sha256(notebook_text.encode()).hexdigest(),
        "parameters": request.parameters(),
        "data": _card_data_pins(request.card),
        "atlaslib_version": __version__,
        "atlaslib_source": source_digest(),
        "profile": _profile_dict(request.model),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def output_paths(request: RunRequest, results_dir: Path, runs_dir: Path) -> tuple[Path, Path]:
    nb = Path(runs_dir) / request.card / request.version / slug(request.model) / f"{request.protocol}.ipynb"
    return nb, cell_path(results_dir, request.card, request.version, request.model, request.protocol)


def is_current(request: RunRequest, key: str, results_dir: Path, runs_dir: Path) -> bool:
    nb_path, res_path = output_paths(request, results_dir, runs_dir)
    if not (nb_path.is_file() and res_path.is_file()):
        return False
    try:
        return read_cell(res_path).get("run_key") == key
    except Exception:
        return False


def check_request(request: RunRequest):
    """The request's card, after checking it has the request's split version and protocol (ValueError
    naming what was expected otherwise; KeyError for an unknown card)."""
    card = get_card(request.card)
    if request.version not in card.versions:
        raise ValueError(f"card {card.name} has no split version {request.version!r}; "
                         f"expected one of {', '.join(card.versions)}")
    if request.protocol not in card.protocols:
        raise ValueError(f"card {card.name} has no protocol {request.protocol!r}; "
                         f"expected one of {', '.join(card.protocols)}")
    return card


def run(request: RunRequest, *, results_dir: str | os.PathLike = REPO / "results",
        runs_dir: str | os.PathLike = REPO / "book" / "runs", data_dir: str | os.PathLike | None = None,
        failed_dir: str | os.PathLike = REPO / "_build" / "failed", force: bool = False,
        kernel_name: str = "python3", timeout: int | None = 3600) -> RunOutcome:
    """Run one notebook (or reuse its current outputs); raise :class:`RunFailed` when it fails."""
    import nbformat
    import papermill
    from papermill.exceptions import PapermillExecutionError

    card = check_request(request)
    nb_src = REPO / card.notebook
    nb = read_text_notebook(nb_src)
    key = run_key(request, nb_src.read_text(encoding="utf-8"))
    results_dir, runs_dir = Path(results_dir), Path(runs_dir)
    nb_out, res_out = output_paths(request, results_dir, runs_dir)
    if not force and is_current(request, key, results_dir, runs_dir):
        cell = read_cell(res_out)
        return RunOutcome(request, "cached", cell_status=cell["status"], notebook=str(nb_out), result=str(res_out),
                          peak_rss_mb=cell.get("timing", {}).get("peak_rss_mb"),
                          seconds=0.0)

    nb_out.parent.mkdir(parents=True, exist_ok=True)
    res_out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="atlas-run-", dir=nb_out.parent))
    try:
        src_ipynb, out_ipynb, tmp_cell = work / "in.ipynb", work / "out.ipynb", work / "cell.json"
        nbformat.write(nb, src_ipynb)
        params = {**request.parameters(), "data_dir": str(data_dir) if data_dir else None,
                  "result_path": str(tmp_cell), "run_key": key}
        # Widgets are not saved in executed notebooks: kernels draw plain progress bars.
        os.environ.setdefault("ATLAS_PROGRESS", "plain")
        start = time.perf_counter()
        try:
            papermill.execute_notebook(str(src_ipynb), str(out_ipynb), parameters=params, kernel_name=kernel_name,
                                       cwd=str(REPO), progress_bar=False, log_output=False,
                                       execution_timeout=timeout,
                                       # the kernel's own start-up chatter (e.g. its note that the local
                                       # loopback channel is unencrypted) is not the run's business;
                                       # errors inside the notebook are still raised and kept
                                       extra_arguments=["--IPKernelApp.log_level=ERROR"])
        except PapermillExecutionError as exc:
            kept = _keep_failed(out_ipynb, request, Path(failed_dir))
            cell_no = _source_cell_number(nb, exc.cell_index)
            raise RunFailed(request, card.notebook, cell_no, f"{exc.ename}: {exc.evalue}", kept) from None
        except Exception as exc:
            kept = _keep_failed(out_ipynb, request, Path(failed_dir))
            raise RunFailed(request, card.notebook, None, f"{type(exc).__name__}: {exc}", kept) from None
        seconds = time.perf_counter() - start
        if not tmp_cell.is_file():
            kept = _keep_failed(out_ipynb, request, Path(failed_dir))
            raise RunFailed(request, card.notebook, None,
                            "the notebook finished without writing its result cell (result_path)", kept)
        cell = read_cell(tmp_cell)
        cell.pop("_path", None)
        cell["run_key"] = key  # the runner owns the cache key, whatever the notebook recorded
        write_cell(cell, tmp_cell)
        os.replace(out_ipynb, nb_out)
        os.replace(tmp_cell, res_out)
        return RunOutcome(request, "ran", seconds=round(seconds, 2), cell_status=cell["status"],
                          peak_rss_mb=cell.get("timing", {}).get("peak_rss_mb"),
                          notebook=str(nb_out), result=str(res_out))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _keep_failed(executed: Path, request: RunRequest, failed_dir: Path) -> str | None:
    if not executed.is_file():
        return None
    target = failed_dir / request.card / request.version / slug(request.model) / f"{request.protocol}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(executed, target)
    return str(target)


def _source_cell_number(nb, executed_index: int | None) -> int | None:
    """papermill's cell index counts its injected-parameters cell; map it back to the source notebook
    (1-based code-cell-agnostic cell number in the .md file)."""
    if executed_index is None:
        return None
    param_pos = next(i for i, c in enumerate(nb.cells)
                     if "parameters" in c.get("metadata", {}).get("tags", []))
    idx = executed_index - 1 if executed_index > param_pos else executed_index
    return idx + 1
