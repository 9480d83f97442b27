"""Execute a card notebook for one (card, version, model, protocol): papermill, cached, atomic.

A run reads ``notebooks/<card>.md`` (MyST text, via jupytext), refuses it unless a code cell is tagged
``parameters`` (papermill would only warn, papermill #245), injects the parameters and executes it with
papermill. The executed notebook goes to ``book/runs/<card>/<version>/<model-slug>/<protocol>.ipynb`` and
the notebook's result cell to ``results/<card>/<version>/<model-slug>/<protocol>.json``. Both are first
written to temporary files and renamed into place only when the whole notebook succeeded, so a failed or
killed run never leaves a partial file nor replaces a good one; a failed notebook is kept for reading in
``_build/failed/`` and the failure names the notebook and the cell.

Before any kernel starts, the run is decided once (:func:`decide`): card, version, protocol and model (a
registry profile, a card baseline, a local folder or a hub id) must exist, or a ValueError names the bad value
and the valid ones; the model's profile is resolved and the capability the protocol will use is chosen; a run
that cannot happen (capability missing, weights not available here, text under a data use agreement) gets
its not-run result cell and a short stub notebook at once, without a kernel, and a run that can receives the
decision as its notebook parameter ``decision``. Every path is made absolute against the caller's working
directory first (the kernel runs in the repository).

Outputs: the executed notebook and the cell replace the old pair together or not at all; a failed or
interrupted run leaves no work folder and no empty output folder; a work folder left by a killed run is
removed by the next run of the same request.

Cache key (:func:`run_key`): ``<prediction key>.<scoring key>``. The prediction key is sha256 over the notebook
text, the parameters, the sha256 of every pinned data file of the card, the atlaslib version, the digest of
atlaslib's prediction code and the decision (with the model profile and its revision); the scoring key is sha256
over the atlaslib version and the digest of its scoring code (which module is which: :data:`RUN_KEY_PARTS`). The
notebook receives the key (``run_key``) and its result cell, written once by the notebook, carries it. A run
whose stored cell carries the same key and whose executed notebook exists is not executed again; one whose cell
carries the same prediction key and another scoring key is re-scored from its stored predictions without a
kernel where its page allows (:func:`rescore`: the notebook's cells tagged ``from-cell`` re-rendered
from the new cell), else executed; ``force=True`` ignores the cache.

Why one module of this size: one run from request to files (decide, key, execute, write atomically), each
step small and in the order it happens.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import notebook, phases
from . import rescore as rescoring
from .cards import get_card
from .notebook import ATLASLIB, REPO, NotebookError, declares_parameter, read_text_notebook  # noqa: F401
from .results import atomic_write_text, cell_as_recorded, cell_path, read_cell, record_path, slug
from .version import __version__

#: papermill with the atlas's settings (:func:`atlaslib.notebook.execute`), under the name callers know
execute_notebook = notebook.execute


class RunFailed(RuntimeError):
    """A notebook raised while executing; names the notebook and the cell."""

    def __init__(self, request: "RunRequest", notebook: str, cell: int | None, error: str, kept: str | None,
                 message: str | None = None):
        self.request, self.notebook, self.cell, self.error, self.kept = request, notebook, cell, error, kept
        where = f"cell {cell}" if cell is not None else "an unknown cell"
        super().__init__(message or (f"{request.label}: {notebook} failed in {where}: {error}"
                                     + (f" (executed notebook kept at {kept})" if kept else "")))


#: the errors of a write that found no room: disk full, file too large (RLIMIT_FSIZE, the file system's
#: limit), quota exceeded
NO_ROOM = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
_ERRNO_TEXT = re.compile(r"^\[Errno (\d+)\] ([^:]+)(?:: '(.*)')?")


def no_room(request: "RunRequest", notebook: str, exc: BaseException | None = None, *, evalue: str = "",
            writing=None) -> RunFailed | None:
    """The run's failure when ``exc`` (or a kernel's ``OSError`` with text ``evalue``) is a write that found no
    room (:data:`NO_ROOM`), naming the file being written (``writing`` when the error names none); None for
    any other error. Such a run keeps no failed notebook: the one being written is cut short."""
    if exc is not None:
        code, why, path = getattr(exc, "errno", None), getattr(exc, "strerror", None), getattr(exc, "filename", None)
    else:
        m = _ERRNO_TEXT.match(evalue or "")
        code, why, path = (int(m.group(1)), m.group(2), m.group(3)) if m else (None, None, None)
    if code not in NO_ROOM:
        return None
    error = f"disk full / file too large while writing {path or writing} ({why or os.strerror(code)})"
    return RunFailed(request, notebook, None, error, None,
                     message=f"{request.label}: {error}; no failed notebook was kept, and the previous notebook and "
                             f"cell are kept")


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
    status: str  # "ran" | "cached" | "re-scored" | "failed"
    seconds: float = 0.0
    peak_rss_mb: float | None = None
    cell_status: str | None = None
    error: str | None = None
    notebook: str | None = None
    result: str | None = None
    extra: dict = field(default_factory=dict)


def _card_data_pins(card_name: str) -> list:
    """``[name, sha256]`` of the pinned files the card declares (``Card.data_pins``); [] for an unknown card
    (refused by :func:`run`; its key only has to be stable)."""
    try:
        return get_card(card_name).data_pins()
    except KeyError:
        return []


#: The run key's two parts, declared by module (paths under atlaslib/, ``*`` one name, ``**`` any depth), in one
#: place: ``prediction`` code makes a run's predictions (loading, splitting, deciding, models, protocols, the
#: card's predicting and page code, everything a run page shows beside its scores); ``scoring`` code turns stored
#: predictions into the cell's numbers (:meth:`CardRun.score <atlaslib.cards.run.CardRun.score>`'s counting and
#: the engine); ``both``: a module that does both (a change re-keys both parts, so the run executes). The first
#: pattern a file matches decides its part; a file none matches is counted in both parts (so it re-executes
#: every run) and ``tests/test_run_key_split.py`` fails until it is declared here.
RUN_KEY_PARTS = (
    # scoring only: what CardRun.score and finish compute from the stored predictions
    ("metrics/**", "scoring"),
    ("cards/*/counting.py", "scoring"),
    # both: the run's own object (load and score), the cell's schema and tables, a card's declaration (data and
    # SCORING together) and its re-exports
    ("cards/run.py", "both"),
    ("results/**", "both"),
    ("atomicio.py", "both"),   # the cell writer's atomic write, once in results.py
    ("variants.py", "both"),
    ("cards/__init__.py", "both"),
    ("cards/*/__init__.py", "both"),
    ("cards/*/card.py", "both"),
    ("cards/families.py", "both"),   # the task families: protocol dispatch and counting together
    ("version.py", "both"),
    # prediction: everything else a run executes or shows
    ("cards/*/**", "prediction"),
    ("cards/deciding.py", "prediction"),
    ("cards/facts.py", "prediction"),
    ("cards/llm.py", "prediction"),
    ("analysis/**", "prediction"),
    ("external/**", "prediction"),
    ("harness/**", "prediction"),
    ("models/**", "prediction"),
    ("pages/**", "prediction"),
    ("protocols/**", "prediction"),
    *((f"{name}.py", "prediction") for name in (
        "__init__", "background", "book", "builddir", "calltally", "cli", "course", "display", "escape", "executor",
        "fsio", "interrupts", "jsonio", "linkcheck", "matrix", "names", "notebook", "phases", "plots", "predfiles",
        "progress", "registries", "rescore", "runner", "sources", "splits", "streams", "syntax", "userfile", "yamlio")),
    ("run_times_reference.json", "prediction"),
)


def _pattern(glob: str):
    return re.compile("^" + "".join(".*" if part == "**" else "[^/]*" if part == "*" else re.escape(part)
                                    for part in re.split(r"(\*\*|\*)", glob)) + "$")


_PARTS = [(_pattern(g), part) for g, part in RUN_KEY_PARTS]


def key_part(rel: str) -> str | None:
    """The run-key part (``prediction``, ``scoring`` or ``both``) of the atlaslib file ``rel`` (its path under
    atlaslib/, with ``/``), by :data:`RUN_KEY_PARTS`; None for a file no declaration names (counted in both)."""
    return next((part for rx, part in _PARTS if rx.match(rel)), None)


def _in_prediction(rel: str) -> bool:
    return key_part(rel) != "scoring"


def _in_scoring(rel: str) -> bool:
    return key_part(rel) != "prediction"


def source_digest(root: Path = ATLASLIB, part: str | None = None) -> str:
    """The atlaslib digest in a run key: its code as Python parses it and its data files' bytes
    (:func:`atlaslib.notebook.source_digest` with ``code_only``). A statement, a docstring or a profile edit
    re-keys; a comment or a layout change re-keys none (it cannot change a run's output). ``part``:
    ``"prediction"`` or ``"scoring"``, only the files of that part of the run key (:data:`RUN_KEY_PARTS`);
    None: every file."""
    keep = {None: None, "prediction": _in_prediction, "scoring": _in_scoring}[part]
    return notebook.source_digest(root, code_only=True, keep=keep)


def prediction_key(request: RunRequest, notebook_text: str, decision: dict | None = None) -> str:
    """What makes the run's predictions: sha256 over the notebook text, the parameters, the card's data pins,
    atlaslib's version, the digest of atlaslib's prediction code (:data:`RUN_KEY_PARTS`) and the run's
    :func:`decide` decision (the model's profile with its revision; a not-run decided before the kernel is
    re-decided when the weights arrive). ``decision``: one already made for this request (else made here)."""
    if decision is None:
        try:
            decision = decide(request)
        except Exception as exc:  # an invalid request is refused by run(); its key only has to be stable
            decision = {"invalid": type(exc).__name__}
    payload = {
        "notebook_sha256": hashlib.sha256(notebook_text.encode()).hexdigest(),
        "parameters": request.parameters(),
        "data": _card_data_pins(request.card),
        "atlaslib_version": __version__,
        "atlaslib_source": source_digest(part="prediction"),
        "decision": decision,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def scoring_key() -> str:
    """What scores a run's stored predictions: sha256 over atlaslib's version and the digest of its scoring code
    (:data:`RUN_KEY_PARTS`: the engine and metrics, each card's counting module and declared ``SCORING``, the
    run's scoring and cell code). The scoring parameters (``n_resamples``) are the run's parameters, in its
    prediction key."""
    payload = {"atlaslib_version": __version__, "atlaslib_source": source_digest(part="scoring")}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def run_key(request: RunRequest, notebook_text: str, decision: dict | None = None) -> str:
    """The run's cache key, ``<prediction key>.<scoring key>`` (:func:`prediction_key`, :func:`scoring_key`): a
    stored cell with the same key is served; one with the same prediction key and another scoring key is
    re-scored from its stored predictions where its run page allows (:func:`rescore`); any other runs again."""
    return prediction_key(request, notebook_text, decision) + rescoring.KEY_SEPARATOR + scoring_key()


def output_paths(request: RunRequest, results_dir: Path, runs_dir: Path) -> tuple[Path, Path]:
    nb = Path(runs_dir) / request.card / request.version / slug(request.model) / f"{request.protocol}.ipynb"
    return nb, cell_path(results_dir, request.card, request.version, request.model, request.protocol)


def is_current(request: RunRequest, key: str, results_dir: Path, runs_dir: Path) -> bool:
    nb_path, res_path = output_paths(request, results_dir, runs_dir)
    if not (nb_path.is_file() and res_path.is_file()):
        return False
    try:
        return read_cell(res_path).get("run_key") == key and cell_as_recorded(nb_path, res_path) is True
    except Exception:
        return False


def edited_note(request: RunRequest, key: str, results_dir: Path, runs_dir: Path) -> str | None:
    """What to say when the cell in place carries the current key but not the bytes the run recorded."""
    nb_path, res_path = output_paths(request, results_dir, runs_dir)
    try:
        if read_cell(res_path).get("run_key") == key and cell_as_recorded(nb_path, res_path) is False:
            return (f"{res_path} was changed after the run wrote it (its sha256 differs from the one the run "
                    f"recorded); not served from the cache, run again")
    except Exception:
        pass
    return None


def check_request(request: RunRequest):
    """The request's card, after checking it has the request's split version and protocol (ValueError
    naming what was expected otherwise; KeyError for an unknown card)."""
    card = get_card(request.card)
    check_model_name(request.model)
    if request.version not in card.versions:
        raise ValueError(f"card {card.name} has no split version {request.version!r}; "
                         f"expected one of {', '.join(card.versions)}")
    if request.protocol not in card.protocols:
        raise ValueError(f"card {card.name} has no protocol {request.protocol!r}; "
                         f"expected one of {', '.join(card.protocols)}")
    return card


# --------------------------------------------------------------------------------------------- before a kernel

def resolve_model(model: str) -> str:
    """A model named by an existing local folder (relative to the caller's working directory, or with
    ``~``) becomes its absolute path; registry names, card baselines and hub ids are returned as given."""
    from .models import load_profiles

    s = check_model_name(model)
    if s in load_profiles():
        return s
    p = Path(s).expanduser()
    if p.is_dir() and (os.sep in s or s.startswith((".", "~")) or not _looks_like_hub_id(s)):
        return str(p.resolve())
    return s


def _looks_like_hub_id(s: str) -> bool:
    from .models.registry import is_hub_id

    return is_hub_id(s)


def resolve_request(request: RunRequest) -> RunRequest:
    """The request with a local model folder made absolute (see :func:`resolve_model`)."""
    from dataclasses import replace

    model = resolve_model(request.model)
    return request if model == request.model else replace(request, model=model)


# The models a card knows by itself (``Card.baselines``: baseline -> protocols) and the capabilities each
# protocol asks of a registry, local or hub model (``Card.capabilities``) are declared on the card.


def atlas_names(user_profiles: bool = True) -> dict[str, str]:
    """The names of the atlas's own models -> what each is: registry profiles (without ``user_profiles``, the
    built-in registry's only), the cards' baselines and the default matrix's models. A name that looks like
    one of them without being it is refused (:func:`atlaslib.names.check_name`)."""
    from .cards import available_cards
    from .models import load_profiles
    from .models.registry import PROFILES_FILE

    out = {n: "a registry profile" for n in (load_profiles() if user_profiles else load_profiles(PROFILES_FILE))}
    for c in available_cards():
        for m in c.baselines:
            out.setdefault(m, f"a baseline of the {c.name} card")
        for _, m, _ in c.default_matrix:
            out.setdefault(m, "a model of the default matrix")
    return out


def check_model_name(model, what: str = "--model") -> str:
    """``model`` stripped, after refusing what cannot name a model (ValueError naming it and saying why): an
    empty name (it would be read as the current folder); an ``org/name`` with a ``.`` or ``..`` part that is no
    existing folder (a hub id has none: such a name is a path that leaves its folder); and a name that may reach
    a page but should not (:func:`atlaslib.names.check_name`): a local folder's path with ``{{``, control or
    filler characters, or any other name (a profile of a profiles file, a hub id) looking like one of the atlas's
    own names (:func:`atlas_names`) without being it (:class:`atlaslib.names.NameRefused`)."""
    from .models.registry import HUB_ID_SHAPE
    from .names import check_name
    from .results import is_local_model

    s = str(model).strip()
    if not s:
        raise ValueError(f"the model name is empty ({str(model)!r}); expected a registry name (atlas list), a card "
                         f"baseline, a local model folder or a hub id 'org/name'")
    if HUB_ID_SHAPE.match(s) and not _looks_like_hub_id(s) and not Path(s).expanduser().is_dir():
        raise ValueError(f"model {s!r} is not a hub id: a hub id is 'org/name' with no '.' or '..' part, and no "
                         f"folder {s!r} exists")
    if is_local_model(s):  # named by its absolute path, as the run will know it
        check_name(os.path.abspath(os.path.expanduser(s)), "model folder", path=True, kind="a model folder's path")
        return s
    own = atlas_names(user_profiles=False)
    return s if s in own else check_name(s, what, taken=own, kind="a model name")


def decide(request: RunRequest) -> dict:
    """Decide, without a kernel, whether ``request`` can run, once: the decision its kernel receives (the
    notebook parameter ``decision``, which the notebook's :class:`~atlaslib.cards.run.CardRun` loads its model
    by), its cache key holds and a not-run cell records (:func:`atlaslib.cards.deciding.decide`, which says
    what the dict holds). An invalid card, version, protocol or model raises ValueError (KeyError for an
    unknown card) naming the bad value and the valid ones."""
    from .cards import deciding

    declared = check_request(request)
    check_model_name(request.model)  # before anything of it is resolved, run or written
    return deciding.decide(declared, request.version, request.model, request.protocol, dict(request.params))


def preflight(request: RunRequest) -> str | None:
    """The not-run reason of :func:`decide` (None when the run can happen)."""
    return decide(request)["reason"]


def stub_notebook(request: RunRequest, reason: str):
    """A short notebook (not executed) for a run that cannot happen: title, reason, link to the card page."""
    import nbformat

    from .escape import md

    card = get_card(request.card)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell(f"# {card.title.split(':')[0]} run: {md(request.model)} · {request.protocol} · "
                                      f"{request.version}"),
        nbformat.v4.new_markdown_cell(
            f"**Not run:** {md(reason)}\n\nThis run was decided before any code ran: the atlas checked the model "
            f"against what the `{request.protocol}` protocol needs and found it cannot run here. Its result cell "
            f"records the reason, and the leaderboard shows it as not run.\n\n"
            f"[Back to the card page](../../../../cards/{card.name}.md)"),
    ]
    return nb


def _prune_empty(folder: Path, root: Path) -> None:
    """Remove ``folder`` and its parents up to (not including) ``root`` while they are empty."""
    folder, root = Path(folder), Path(root)
    while folder != root and root in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def _check_writable(folder: Path, what: str) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create the {what} folder {folder} ({exc.strerror or type(exc).__name__})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"the {what} folder {folder} is not writable; nothing was run or replaced")


class OutputError(OSError):
    """An output folder cannot be created or written: the run did not start and nothing was replaced."""


def _replace_pair(new_nb: Path, new_cell: Path, nb_out: Path, res_out: Path, backup: Path,
                  variants: tuple[Path, Path] | None = None) -> None:
    """Move the new notebook and cell into place together. The old notebook is copied aside first and the
    old cell is only ever replaced by the last rename, so when either rename fails the old pair (or none)
    is what stays: notebook and cell never disagree. ``variants``: (the run's staged variant folder, its place
    beside the cell): the folder replaces the one in place (or removes it, when the run staged none) just
    before the cell, and the old one comes back when the cell cannot be moved in."""
    from . import interrupts

    interrupts.check()  # Ctrl-C that a library swallowed late in the run: nothing is moved into place
    from .sources import sha256_file

    digest = sha256_file(new_cell)  # the run cache's record of the cell it moves in (see is_current)
    backup.mkdir(exist_ok=True)
    old_nb = backup / "old.ipynb"
    had_nb = nb_out.is_file()
    try:
        if had_nb:
            shutil.copy2(nb_out, old_nb)
        os.replace(new_nb, nb_out)
    except OSError as exc:
        raise OutputError(f"could not write {nb_out} ({exc.strerror or type(exc).__name__}); the previous "
                          f"notebook and cell are kept") from None
    undo = None
    try:
        if variants is not None:
            undo = _swap_folder(*variants, new_cell.parent / "old-variants")
        os.replace(new_cell, res_out)
    except BaseException as exc:
        try:
            if undo is not None:
                undo()
        except OSError:
            pass
        try:
            os.replace(old_nb, nb_out) if had_nb else nb_out.unlink(missing_ok=True)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise OutputError(f"could not write {res_out} ({exc.strerror or type(exc).__name__}); the previous "
                              f"notebook and cell are kept") from None
        raise
    try:
        atomic_write_text(record_path(nb_out), digest + "\n")
    except OSError:  # no record: the next run is not served from the cache, which is safe
        record_path(nb_out).unlink(missing_ok=True)


def _swap_folder(new: Path, out: Path, aside: Path):
    """Put the folder ``new`` where ``out`` is (the old one moved to ``aside``, on the same file system); no
    ``new``: ``out`` goes. Returns a function that puts the old folder back (undoing the swap); a swap that
    fails or is interrupted undoes itself."""
    had = out.is_dir()

    def undo() -> None:
        if out.is_dir() and (aside.is_dir() or not had):  # the new folder is in place: it goes
            shutil.rmtree(out)
        if aside.is_dir():
            os.rename(aside, out)
        _prune_empty(out.parent, out.parent.parent)  # no empty variants folder either

    try:
        if had:
            os.rename(out, aside)
        if new.is_dir():
            out.parent.mkdir(parents=True, exist_ok=True)
            os.rename(new, out)
        else:
            _prune_empty(out.parent, out.parent.parent)
    except BaseException:
        undo()
        raise
    return undo


def _write_stub(request: RunRequest, decision: dict, key: str, nb_out: Path, res_out: Path, work: Path) -> dict:
    """A run decided not to happen: its not-run cell, made and written by the run's
    :class:`~atlaslib.cards.run.CardRun` (:meth:`~atlaslib.cards.run.CardRun.finish_decided`, as every cell is),
    and the stub notebook, moved into place together."""
    from types import SimpleNamespace

    import nbformat

    from .cards.run import CardRun

    nbformat.write(stub_notebook(request, decision["reason"]), work / "out.ipynb")
    tmp_cell = Path(tempfile.mkstemp(dir=res_out.parent, prefix=f".{res_out.name}.", suffix=".tmp")[1])
    try:
        # the declared card is all a not-run cell reads (its metric names, its overlap rule): no contract code
        card_run = CardRun(SimpleNamespace(CARD=get_card(request.card)), request.version, request.model,
                           request.protocol,
                           parameters={**dict(request.params), "run_key": key}, result_path=tmp_cell,
                           decision=decision)
        cell = card_run.finish_decided()
        _replace_pair(work / "out.ipynb", tmp_cell, nb_out, res_out, work / "backup")
    finally:
        tmp_cell.unlink(missing_ok=True)
    return cell


def run(request: RunRequest, *, results_dir: str | os.PathLike = REPO / "results",
        runs_dir: str | os.PathLike = REPO / "book" / "runs", data_dir: str | os.PathLike | None = None,
        failed_dir: str | os.PathLike = REPO / "_build" / "failed", force: bool = False,
        kernel_name: str = "python3", timeout: int | None = 3600, execute: bool = True) -> RunOutcome | None:
    """Run one notebook (or reuse its current outputs); raise :class:`RunFailed` when it fails.

    The run is decided once, here, before any kernel (:func:`decide`: the profile resolved, the capability
    chosen): a run that cannot happen writes its not-run cell and a stub notebook without a kernel (status
    "ran", ``extra["preflight"]`` True); a run that can gets the decision as its notebook parameter
    ``decision``. An invalid request raises ValueError / KeyError before anything is written; an output
    folder that cannot be written raises :class:`OutputError`. ``execute=False``: only what needs no kernel nor
    stub, a run served from the cache or re-scored (:func:`rescore`); None, with nothing written, for any other."""
    request = resolve_request(request)
    card = check_request(request)
    decision = decide(request)
    nb_src = REPO / card.notebook
    nb = read_text_notebook(nb_src)
    key = run_key(request, nb_src.read_text(encoding="utf-8"), decision)
    results_dir, runs_dir = Path(results_dir).expanduser().resolve(), Path(runs_dir).expanduser().resolve()
    failed_dir = Path(failed_dir).expanduser().resolve()
    data_dir = str(Path(data_dir).expanduser().resolve()) if data_dir not in (None, "") else None
    nb_out, res_out = output_paths(request, results_dir, runs_dir)
    if not force and is_current(request, key, results_dir, runs_dir):
        cell = read_cell(res_out)
        return RunOutcome(request, "cached", cell_status=cell["status"], notebook=str(nb_out), result=str(res_out),
                          peak_rss_mb=cell.get("timing", {}).get("peak_rss_mb"),
                          seconds=0.0)
    _refuse_clash(request, res_out)
    note = None if force else edited_note(request, key, results_dir, runs_dir)

    if nb_out.parent.is_dir():  # work folders of killed runs go first: they are no output
        notebook.remove_stale_work_dirs(nb_out.parent, "atlas-run-*")
    if res_out.parent.is_dir():  # as do the staging folders they left beside the cells (no work folder now)
        for d in res_out.parent.glob(f"{STAGE_PREFIX}atlas-run-*"):
            if d.is_dir() and not (nb_out.parent / d.name[len(STAGE_PREFIX):]).is_dir():
                shutil.rmtree(d, ignore_errors=True)
    # a folder this run makes, or one a killed run left empty, is removed again when this run writes nothing
    made = [d for d in (nb_out.parent, res_out.parent) if not d.exists() or (d.is_dir() and not any(d.iterdir()))]
    work = None
    try:
        _check_writable(nb_out.parent, "executed-notebook")
        _check_writable(res_out.parent, "result-cell")
        work = notebook.make_work_dir(nb_out.parent, f"atlas-run-{request.protocol}-")
        start = time.perf_counter()
        rescored = rescore(request, key, nb_out, res_out, work) if decision["run"] and not force else None
        if rescored is not None:  # same predictions, other scoring code: scored again without a kernel
            made = []
            if note:
                rescored.extra["note"] = note
            return rescored
        if not execute:
            return None
        if not decision["run"]:
            _write_stub(request, decision, key, nb_out, res_out, work)
            made = []
            return RunOutcome(request, "ran", seconds=round(time.perf_counter() - start, 3), cell_status="not_run",
                              notebook=str(nb_out), result=str(res_out),
                              extra={"preflight": True, **({"note": note} if note else {})})
        from .models.openai_compat import refreshing_requests  # `--force`: no LLM reply from the request cache

        with refreshing_requests(force):
            outcome = _execute(request, card, nb, key, decision, work, nb_out, res_out, data_dir, failed_dir,
                               kernel_name, timeout, start, retrain=force and declares_parameter(nb, "retrain"))
        made = []
        if note:
            outcome.extra["note"] = note
        return outcome
    finally:
        if work is not None:
            notebook.remove_work_dir(work)
        for d in made:  # a run that wrote nothing leaves no empty folders behind
            _prune_empty(d, runs_dir if d == nb_out.parent else results_dir)


# --------------------------------------------------------------------------------- re-scoring without a kernel

def rescore(request: RunRequest, key: str, nb_out: Path, res_out: Path, work: Path) -> RunOutcome | None:
    """Re-score a run whose stored cell carries this run's prediction key and another scoring key, without a kernel
    (:mod:`atlaslib.rescore`: :func:`~atlaslib.rescore.rescorable` decides, :func:`~atlaslib.rescore.rescored_page`
    makes the new cell, variant cells and page); all replace the old ones together (status ``"re-scored"``). None
    (the run executes as before) when the stored run cannot be re-scored."""
    import nbformat

    stored = rescoring.rescorable(get_card(request.card), request.protocol, key, nb_out, res_out)
    if stored is None:
        return None
    start = time.perf_counter()
    # the new cell and variant cells staged beside the old (one file system), moved in with the page, as a run's
    stage = res_out.parent / f"{STAGE_PREFIX}{work.name}"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    tmp_cell = stage / res_out.name
    try:
        done = rescoring.rescored_page(stored, key, tmp_cell)
        if done is None:
            return None
        nb, cell = done
        nbformat.write(nb, work / "out.ipynb")
        where = Path("variants", request.protocol)
        folders = (stage.joinpath(where), res_out.parent.joinpath(where)) if stored.variants else None
        _replace_pair(work / "out.ipynb", tmp_cell, nb_out, res_out, work / "backup", variants=folders)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return RunOutcome(request, "re-scored", seconds=round(time.perf_counter() - start, 3),
                      cell_status=cell["status"], peak_rss_mb=cell.get("timing", {}).get("peak_rss_mb"),
                      notebook=str(nb_out), result=str(res_out))


def _refuse_clash(request: RunRequest, res_out: Path) -> None:
    """Two models must never share a cell: refuse when the cell in place belongs to another model."""
    from .results import folder_owner

    clash = folder_owner(res_out.parent, request.model, external=False)
    if clash is not None:
        path, other, external = clash
        raise OutputError(f"{path} holds the result of {'external predictions named' if external else 'model'} "
                          f"{other!r}, not model {request.model!r}; it is not replaced (rename one of the two "
                          f"model folders, or score the predictions under another --name)")


#: the prefix of a run's staging folder beside its cell (its cell and variant cells until they are moved in),
#: followed by the name of the run's work folder: a staging folder whose work folder is gone is a killed run's
STAGE_PREFIX = ".atlas-stage-"


def _execute(request, card, nb, key, decision, work: Path, nb_out: Path, res_out: Path, data_dir, failed_dir: Path,
             kernel_name, timeout, start, retrain: bool = False) -> RunOutcome:
    """Execute the run's notebook. Its result cell is written once, by the notebook (``result_path``: a file
    in a staging folder beside the cell's place, :data:`STAGE_PREFIX`; nothing in it but what the notebook
    writes) and carrying ``run_key``; it is moved into place with the executed notebook, never rewritten (a cell
    without the run's key fails the run: its notebook's CardRun was not handed ``run_key``). The
    variant cells the notebook writes beside its cell (``variants/<protocol>/``) are staged with it and replace
    the run's old ones in the same step, so a failed or interrupted run leaves the previous cell, notebook and
    variants as they were."""
    import nbformat
    from papermill.exceptions import PapermillExecutionError

    src_ipynb, out_ipynb = work / "in.ipynb", work / "out.ipynb"
    run_nb = notebook.run_notebook(nb, request.version)  # the data story runs once per version, not here
    nbformat.write(run_nb, src_ipynb)
    stage = res_out.parent / f"{STAGE_PREFIX}{work.name}"  # the run's while its work folder lives
    shutil.rmtree(stage, ignore_errors=True)  # (one of that name is a killed run's: its work folder is new)
    stage.mkdir()
    staged = stage / res_out.name  # the notebook writes it (and its variant cells beside it)
    params = {**request.parameters(), "data_dir": data_dir, "result_path": str(staged), "run_key": key,
              "decision": decision}
    if retrain:  # `--force` also retrains cached fine-tuned weights (not part of the cache key)
        params["retrain"] = True
    try:
        try:
            execute_notebook(src_ipynb, out_ipynb, params, kernel_name=kernel_name, timeout=timeout)
        except PapermillExecutionError as exc:
            full = no_room(request, card.notebook, evalue=exc.evalue) if exc.ename == "OSError" else None
            if full is not None:  # the kernel found no room to write: not the notebook's fault
                raise full from None
            kept = _keep_failed(out_ipynb, request, failed_dir)
            cell_no = notebook.source_cell_number(run_nb, exc.cell_index)
            if cell_no is not None:  # back to the numbering of the source notebook
                cell_no = notebook.run_cell_indices(nb, request.version)[cell_no - 1] + 1
            raise RunFailed(request, card.notebook, cell_no, f"{exc.ename}: {exc.evalue}", kept) from None
        except Exception as exc:
            full = no_room(request, card.notebook, exc, writing=out_ipynb)
            if full is not None:  # papermill could not write the executed notebook: it is cut short, not kept
                raise full from None
            kept = _keep_failed(out_ipynb, request, failed_dir)
            raise RunFailed(request, card.notebook, None, f"{type(exc).__name__}: {exc}", kept) from None
        seconds = time.perf_counter() - start
        if not staged.is_file():
            kept = _keep_failed(out_ipynb, request, failed_dir)
            raise RunFailed(request, card.notebook, None,
                            "the notebook finished without writing its result cell (result_path)", kept)
        cell = read_cell(staged)
        if cell.get("run_key") != key:  # a notebook whose CardRun was not handed the run key: never rewritten here
            kept = _keep_failed(out_ipynb, request, failed_dir)
            raise RunFailed(request, card.notebook, None,
                            f"the notebook's result cell carries run key {cell.get('run_key')!r}, not this run's; "
                            f"hand its CardRun the notebook parameter run_key (parameters={{'run_key': run_key, "
                            f"...}})", kept)
        variants = Path("variants", request.protocol)  # where the notebook wrote its variant cells, and their place
        _replace_pair(out_ipynb, staged, nb_out, res_out, work / "backup",
                      variants=(stage / variants, res_out.parent / variants))
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return RunOutcome(request, "ran", seconds=round(seconds, 2), cell_status=cell["status"],
                      peak_rss_mb=cell.get("timing", {}).get("peak_rss_mb"),
                      notebook=str(nb_out), result=str(res_out),
                      extra={"model_calls": run_model_calls(cell, res_out, request.protocol),
                             "phases": phases.seconds(cell.get("timing"))})


def run_model_calls(cell: dict, res_out: Path, protocol: str) -> dict | None:
    """The model calls a run's notebook made and was served: its cell's and those of the variant cells it wrote
    beside it (``variants/PROTOCOL/``; :func:`atlaslib.variants.parents` decides which belong to it). None when its
    cell counts none."""
    from .calltally import Tally
    from .variants import parents

    own = (cell.get("timing") or {}).get("model_calls")
    if not own:
        return None
    parts = [own]
    for path in sorted((Path(res_out).parent / "variants" / protocol).glob("*.json")):
        try:
            v = read_cell(path)
        except (OSError, ValueError):  # a variant file that cannot be read costs its count, never the run
            continue
        if parents([v], [cell]) and (v.get("timing") or {}).get("model_calls"):
            parts.append(v["timing"]["model_calls"])
    return Tally.total(parts)


def _keep_failed(executed: Path, request: RunRequest, failed_dir: Path) -> str | None:
    from . import interrupts

    interrupts.check()  # an interrupted run keeps no failed notebook either
    if not executed.is_file():
        return None
    target = failed_dir / request.card / request.version / slug(request.model) / f"{request.protocol}.ipynb"
    try:  # whole or not at all: a copy cut short (a full disk) is never left where a reader looks
        atomic_write_text(target, executed.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None
    return str(target)
