"""Text notebooks, the ground floor under runs, data stories and lessons: read, cut by tags, execute, digest.

Every notebook the atlas executes (a card notebook for one run, its data story, a course lesson) is a MyST
text notebook read with jupytext and executed with papermill, the same way; this module is that way, and it
imports nothing else of atlaslib but :mod:`atlaslib.syntax` (which imports none), so the runner,
:mod:`atlaslib.pages.datastory` and :mod:`atlaslib.pages.course` stand on it without standing on one another.

- :func:`read_text_notebook`: jupytext, refused (:class:`NotebookError`) without a code cell tagged
  ``parameters`` (papermill would only warn and run with the notebook's own defaults, papermill #245);
- the tags of a card notebook (:data:`STORY_TAG`, :data:`SHARED_TAG`, :data:`VERSION_PREFIX`) and the two
  cuts of one source, :func:`run_notebook` (what a run executes) and :func:`story_cells` (what a data story
  shows);
- :func:`execute`: papermill with the atlas's settings; :func:`source_cell_number` maps papermill's cell
  index back to the source notebook's numbering;
- :func:`source_digest`: the digest of atlaslib's source files (or of its code, comments aside), part of every
  cache key.
"""
from __future__ import annotations

import copy
import functools
import hashlib
import os
import re
import subprocess
from pathlib import Path

from atlaslib import syntax

#: the repository root: the kernel's working directory, and what notebook paths in cards are relative to
REPO = Path(__file__).resolve().parent.parent
ATLASLIB = Path(__file__).resolve().parent

PARAMETERS_TAG = "parameters"
#: only in the data story (never executed by a run)
STORY_TAG = "data-story"
#: needed by both the data story and the run (imports, items, the split): shown in the story, executed but
#: removed from run pages
SHARED_TAG = "shared"
#: ``version:<v>``: only in the data story of split version ``<v>``
VERSION_PREFIX = "version:"


class NotebookError(ValueError):
    """A notebook cannot be run as is (e.g. no cell tagged ``parameters``)."""


def tags(cell) -> list:
    """The cell's tags (a copy)."""
    return list(cell.get("metadata", {}).get("tags", []))


def parameters_index(nb) -> int:
    """Index of the cell tagged ``parameters`` (:class:`NotebookError` without one)."""
    for i, c in enumerate(nb.cells):
        if c.cell_type == "code" and PARAMETERS_TAG in tags(c):
            return i
    raise NotebookError("no code cell is tagged 'parameters'")


def read_text_notebook(path: str | os.PathLike):
    """Read a MyST/ipynb notebook with jupytext and refuse it without a ``parameters`` cell."""
    import jupytext

    path = Path(path)
    if not path.is_file():
        raise NotebookError(f"notebook {path} does not exist")
    nb = jupytext.read(path)
    try:
        parameters_index(nb)
    except NotebookError:
        raise NotebookError(
            f"{path}: no code cell is tagged 'parameters'; papermill would inject parameters at the top and "
            f"run with the notebook's own defaults. Tag the first code cell with ':tags: [parameters]'.") from None
    return nb


def declares_parameter(nb, name: str) -> bool:
    """Whether the notebook's ``parameters`` cell assigns ``name`` (so injecting it raises no warning)."""
    cell = nb.cells[parameters_index(nb)]
    return re.search(rf"(?m)^{re.escape(name)}\s*=", cell.source) is not None


# -- cutting a card notebook by its tags -------------------------------------------------------------------

def for_version(cell, version: str) -> bool:
    """False for a cell tagged ``version:<v>`` for other versions only."""
    wanted = [t[len(VERSION_PREFIX):] for t in tags(cell) if t.startswith(VERSION_PREFIX)]
    return not wanted or version in wanted


def has_story(nb) -> bool:
    return any(STORY_TAG in tags(c) for c in nb.cells)


def story_cells(nb, version: str) -> list:
    """The cells of ``version``'s data story, in the source's order: the parameters cell, then the ``shared``
    and ``data-story`` cells meant for this version (copies)."""
    out = []
    for c in nb.cells:
        t = tags(c)
        if PARAMETERS_TAG in t or ((SHARED_TAG in t or STORY_TAG in t) and for_version(c, version)):
            out.append(copy.deepcopy(c))
    return out


def run_cell_indices(nb, version: str | None = None) -> list[int]:
    """Indices (in the source notebook) of the cells a run executes, in order."""
    return [i for i, c in enumerate(nb.cells)
            if STORY_TAG not in tags(c) and (version is None or for_version(c, version))]


def run_notebook(nb, version: str | None = None):
    """The run's notebook: without the ``data-story`` cells (and cells of another version); ``shared`` cells
    stay, executed but removed from the page (tag ``remove-cell``)."""
    out = copy.deepcopy(nb)
    kept = set(run_cell_indices(nb, version))
    keep = []
    for i, c in enumerate(out.cells):
        if i not in kept:
            continue
        t = tags(c)
        if SHARED_TAG in t and "remove-cell" not in t:
            c.setdefault("metadata", {})["tags"] = t + ["remove-cell"]
        keep.append(c)
    out.cells = keep
    return out


# -- executing ------------------------------------------------------------------------------------------

def execute(src, out, params: dict, *, kernel_name: str = "python3", timeout: int | None = 3600) -> None:
    """papermill with the atlas's settings, for runs, data stories and lessons alike: working directory the
    repository, no progress bar or log echo, the execution timeout, plain progress bars in the kernel
    (widgets are not saved in executed notebooks), and the kernel's own start-up chatter (e.g. its note
    that the loopback channel is unencrypted) silenced; errors inside the notebook are still raised
    (``PapermillExecutionError``) and the executed notebook kept at ``out``."""
    import papermill

    for attempt in range(KERNEL_STARTS):
        try:
            papermill.execute_notebook(str(src), str(out), parameters=params, kernel_name=kernel_name, cwd=str(REPO),
                                       progress_bar=False, log_output=False, execution_timeout=timeout,
                                       extra_arguments=["--IPKernelApp.log_level=ERROR"],
                                       kernel_manager_class=quiet_shutdown_manager())
            return
        except RuntimeError as exc:
            if not str(exc).startswith(KERNEL_DIED_AT_START) or attempt == KERNEL_STARTS - 1:
                raise


#: how many times a kernel is started for one execution when it dies before it answers (no cell has run). Its
#: ports are chosen free by jupyter_client, then released, then bound by the kernel: another process may take one
#: in between (seen as ``ZMQError: Address already in use`` in a test suite starting kernels, Dask workers and
#: servers at once); a new start chooses new ports.
KERNEL_STARTS = 3
#: jupyter_client's words for a kernel that died before replying to its first request
KERNEL_DIED_AT_START = "Kernel died before replying to kernel_info"


@functools.cache
def quiet_shutdown_manager():
    """nbclient's kernel manager (jupyter_client's ``AsyncKernelManager``) without the interrupt it sends
    before every shutdown. A kernel that gets it while handling the shutdown request logs
    ``[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel.`` on the terminal after a run that went
    well. The notebook has finished when papermill shuts its kernel down; a kernel still busy (a timed-out
    cell) is terminated by the manager after its graceful wait, as before. The kernel's environment gets
    ``ATLAS_PROGRESS=plain`` unless the caller's sets it (progress bars in a log): the kernel's alone, never this
    process's. The kernel process's own stderr goes nowhere: what a cell writes there reaches the executed notebook
    (ipykernel captures it), and the kernel's loggers (e.g. tornado's traceback of a ZMQ socket closed under a
    shutdown, seen after a failed run on a loaded machine) are not the atlas's output, whose stderr is one line."""
    from jupyter_client.manager import AsyncKernelManager

    class QuietShutdownKernelManager(AsyncKernelManager):
        async def _async_pre_start_kernel(self, **kw):
            cmd, kw = await super()._async_pre_start_kernel(**kw)
            env = kw["env"] = dict(kw.get("env") or os.environ)   # the launch's own copy
            env.setdefault("ATLAS_PROGRESS", "plain")
            kw.setdefault("stderr", subprocess.DEVNULL)
            return cmd, kw

        async def _async_interrupt_kernel(self) -> None:
            if self.shutting_down:
                return
            await super()._async_interrupt_kernel()

    return QuietShutdownKernelManager


def source_cell_number(nb, executed_index: int | None) -> int | None:
    """The 1-based number, in ``nb`` (the notebook handed to :func:`execute`), of the cell papermill reports
    by ``executed_index``: papermill's index counts the cell it injects right after the parameters cell."""
    if executed_index is None:
        return None
    at = parameters_index(nb)
    return (executed_index - 1 if executed_index > at else executed_index) + 1


# -- work folders ------------------------------------------------------------------------------------------

#: the work folders this process is using (removed by :func:`remove_live_work_dirs` when the command is stopped)
_LIVE: set = set()


def make_work_dir(parent, prefix: str) -> Path:
    """A new work folder ``<parent>/<prefix>XXXX`` (a run's or a data story's), with an ``owner`` file naming this
    host and process, so that a later command can tell one left by a killed process
    (:func:`remove_stale_work_dirs`). Remove it with :func:`remove_work_dir`."""
    import socket
    import tempfile

    work = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    _LIVE.add(work)
    (work / "owner").write_text(f"{socket.gethostname()} {os.getpid()}\n")
    return work


def remove_work_dir(work) -> None:
    import shutil

    _LIVE.discard(Path(work))
    shutil.rmtree(work, ignore_errors=True)


def remove_live_work_dirs() -> None:
    """Remove every work folder this process is still using: the command was stopped (Ctrl-C, SIGTERM) while
    work went on beside it (a data story in a background thread), and nothing of it is kept."""
    for work in list(_LIVE):
        remove_work_dir(work)


def remove_stale_work_dirs(folder, pattern: str) -> list[Path]:
    """Remove the work folders matching ``pattern`` in ``folder`` whose process is gone (killed): their ``owner``
    file names a host and pid that no longer runs, or, without one, they are over 2 minutes old. Returns them."""
    import shutil
    import socket
    import time

    stale = []
    for d in Path(folder).glob(pattern):
        if not d.is_dir() or d in _LIVE:
            continue
        try:
            host, pid = (d / "owner").read_text().split()
            alive = host == socket.gethostname() and _pid_alive(int(pid))
        except (OSError, ValueError):  # no owner yet (just made) or an older runner's folder: go by age
            try:
                alive = time.time() - d.stat().st_mtime < 120
            except OSError:
                alive = True
        if not alive:
            shutil.rmtree(d, ignore_errors=True)
            stale.append(d)
    return stale


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- what cache keys hold ----------------------------------------------------------------------------------

_DIGESTS: dict = {}  # root -> (the files' stat signature, their digest)


def source_digest(root: Path = ATLASLIB, code_only: bool = False, keep=None) -> str:
    """sha256 over atlaslib's .py/.yml/.txt/.json files (path + content), so any code change re-keys what holds
    it. ``code_only``: each .py file as Python parses it (:func:`atlaslib.syntax.dump`: comments, blank lines and layout
    leave it unchanged; a docstring or any statement changes it), the other files as they are: the digest of
    the run and data-story keys, whose outputs a comment cannot change. The byte digest is the lessons' and
    the site's, which show atlaslib's source. Within a process it is computed again only when a file's path,
    size, modification time or inode changed (a build of 32 runs read the files 70 times). ``keep``: a function of
    a file's path under ``root`` (with ``/``) saying whether it counts (the run key's parts); None: every file."""
    root = Path(root)
    files = [p for p in sorted(root.rglob("*")) if p.suffix in {".py", ".yml", ".yaml", ".txt", ".json"}
             and "__pycache__" not in p.parts and p.is_file()
             and (keep is None or keep(p.relative_to(root).as_posix()))]
    signature = []
    for p in files:
        st = p.stat()
        signature.append((str(p.relative_to(root)), st.st_size, st.st_mtime_ns, st.st_ino))
    signature = tuple(signature)
    known = _DIGESTS.get((root, code_only, keep))
    if known is not None and known[0] == signature:
        return known[1]
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(root)).encode())
        data = p.read_bytes()
        if code_only and p.suffix == ".py":
            try:
                data = syntax.dump(data, filename=str(p)).encode()
            except (SyntaxError, ValueError):
                pass  # not parseable: its bytes, as they are
        h.update(data)
    _DIGESTS[(root, code_only, keep)] = (signature, h.hexdigest())
    return _DIGESTS[(root, code_only, keep)][1]
