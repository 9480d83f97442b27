"""What the atlas may delete in a build folder, and one build at a time in it.

``atlas book`` renders the site tree into ``<build>/site-src`` (``publish-src``), made afresh by every build
(a file whose bytes did not change gets its old time back: :func:`keep_unchanged`), and has Jupyter Book
write the HTML into ``<build>/site`` (``publish``): made afresh for a publish build, or when pages were added
or removed; otherwise kept, so that Sphinx reads again only the pages that changed. ``--build-dir`` may point
anywhere, so a folder of those names may be someone else's: the atlas deletes only a folder it made itself,
which carries its marker file :data:`MARKER` (written when it makes the folder). A folder without the marker
is used only when it is empty; otherwise the build stops before anything is deleted, naming the folder
(:class:`BuildDirError`). Folders made by an atlas from before the marker are recognised by their exact
contents (:func:`_made_before_markers`).

Two builds in one build folder would delete each other's trees: :func:`build_lock` holds an exclusive lock on
``<build>/.atlas-build.lock`` (``flock``: released by the system when the process ends, however it ends) for
the whole build, and a second build stops at once with :class:`BuildDirBusy`, naming the folder and the pid
that holds it. The lock file is made exclusively and never opened through a link (:func:`_open_lock`): a
symbolic or hard link, a folder, a FIFO or a device at its path stops the build, naming it, with nothing written. It stops rather than waits: a build takes minutes to hours, a wait that long would look like a
hang, and the second build would only redo what the first is doing; run it again when the first is done.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
from pathlib import Path

#: the file in each folder the atlas made and may delete
MARKER = ".atlas-made"
MARKER_TEXT = ("This folder was made by `atlas book` (Clinical NLP Evaluation Atlas). Every build deletes it and\n"
               "makes it again; the atlas deletes no folder without this file.\n")
#: the build lock, in the build folder
LOCK = ".atlas-build.lock"


class BuildDirError(ValueError):
    """A folder in the build folder that the atlas did not make and will not delete."""


class BuildDirBusy(BuildDirError):
    """Another build holds the build folder."""


def _made_before_markers(folder: Path, entries: set[str]) -> bool:
    """A folder an atlas from before the marker made: a site tree (``_config.yml``, ``_toc.yml`` and ``book/``
    holding its build report, nothing else) or a Jupyter Book output folder (only ``_build``, with the
    build's log beside it)."""
    if entries == {"_config.yml", "_toc.yml", "book"}:
        return (folder / "book" / "build_report.md").is_file()
    if entries == {"_build"}:
        return (folder.parent / f"{folder.name}-build.log").is_file()
    return False


def check_replaceable(folder: str | os.PathLike) -> None:
    """:class:`BuildDirError` naming ``folder`` when a build may not delete it: it exists and is not a folder the
    atlas made (its marker, or an atlas's from before the marker) nor an empty one."""
    folder = Path(folder)
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise BuildDirError(f"{folder} is {'a symbolic link' if folder.is_symlink() else 'a file'}, not a folder the "
                            f"atlas made; it is not replaced: move it away or give another --build-dir")
    if folder.is_dir():
        entries = set(os.listdir(folder))
        if entries and MARKER not in entries and not _made_before_markers(folder, entries):
            raise BuildDirError(f"{folder} is not empty and was not made by the atlas (it has no {MARKER} file); it "
                                f"is not deleted: move it away or give another --build-dir")


def fresh_folder(folder: str | os.PathLike) -> Path:
    """``folder`` made empty for a new build output, with the atlas's marker in it: deleted first when the atlas
    made it; :class:`BuildDirError` naming it otherwise, with nothing deleted (:func:`check_replaceable`)."""
    folder = Path(folder)
    check_replaceable(folder)
    if folder.is_dir():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / MARKER).write_text(MARKER_TEXT, encoding="utf-8")
    return folder


def snapshot(folder: str | os.PathLike) -> dict:
    """relative path -> (size, sha256, mtime_ns) of every file under ``folder`` ({} when there is none)."""
    folder = Path(folder)
    if not folder.is_dir():
        return {}
    found = {str(p.relative_to(folder)): snapshot_one(p) for p in folder.rglob("*") if not p.is_symlink()}
    return {rel: v for rel, v in found.items() if v is not None}


def keep_unchanged(folder: str | os.PathLike, before: dict) -> int:
    """Give every file under ``folder`` whose bytes equal those it had in ``before`` (:func:`snapshot` of the
    last build's tree) its old modification time back, so that Sphinx, which decides what to read again by
    the files' times, rebuilds only the pages that changed. Returns how many files kept their time."""
    folder, kept = Path(folder), 0
    for rel, (size, digest, mtime_ns) in before.items():
        now = snapshot_one(folder / rel)
        if now is not None and now[:2] == (size, digest) and now[2] != mtime_ns:
            os.utime(folder / rel, ns=(mtime_ns, mtime_ns))
            kept += 1
    return kept


def snapshot_one(path: Path):
    """(size, sha256, mtime_ns) of a regular file; None for anything else or a file that cannot be read. A
    notebook's digest leaves out its cells' ``id`` fields: nbformat gives every cell a build inserts (a note, a
    download link) a random one, which changes no page."""
    import hashlib
    import json

    try:
        if not path.is_file():
            return None
        st, data = path.stat(), path.read_bytes()
        if path.suffix == ".ipynb":
            try:
                nb = json.loads(data)
                for cell in nb.get("cells") or []:
                    cell.pop("id", None)
                return -1, hashlib.sha256(json.dumps(nb, sort_keys=True).encode()).hexdigest(), st.st_mtime_ns
            except (ValueError, AttributeError, TypeError):
                pass
        return st.st_size, hashlib.sha256(data).hexdigest(), st.st_mtime_ns
    except OSError:
        return None


def _open_lock(path: Path) -> int:
    """A descriptor of the lock file ``path``, never of what a link there points to: made exclusively
    (``O_CREAT | O_EXCL``) when there is none; else opened without following a symbolic link (``O_NOFOLLOW``) and
    without waiting (``O_NONBLOCK``, a FIFO), and used only when it is a regular file with no other name (a hard
    link's other name would be written too). Anything else is :class:`BuildDirError` naming it, with nothing
    written."""
    import stat

    flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    advice = "the atlas writes its pid there; remove it, or give another --build-dir"
    try:
        return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        pass
    if path.is_symlink():
        raise BuildDirError(f"{path} is a symbolic link, not the build lock; the lock is never opened through a "
                            f"link ({advice})")
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise BuildDirError(f"{path}: the build lock cannot be opened ({exc.strerror}); expected a regular file "
                            f"({advice})") from None
    st = os.fstat(fd)
    what = (None if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 else
            f"a file with {st.st_nlink} names (a hard link)" if stat.S_ISREG(st.st_mode) else
            "a folder" if stat.S_ISDIR(st.st_mode) else "a named pipe" if stat.S_ISFIFO(st.st_mode) else
            "a socket" if stat.S_ISSOCK(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) or
            stat.S_ISBLK(st.st_mode) else "not a regular file")
    if what is not None:
        os.close(fd)
        raise BuildDirError(f"{path} is {what}, not the build lock; expected a regular file the atlas made "
                            f"({advice})")
    return fd


@contextlib.contextmanager
def build_lock(build: str | os.PathLike):
    """Hold the build folder for one build (module docstring); :class:`BuildDirBusy` when another holds it."""
    import fcntl

    build = Path(build)
    build.mkdir(parents=True, exist_ok=True)
    path = build / LOCK
    fd = _open_lock(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").split()
            who = (f"pid {holder[1]} on {holder[0]}" if len(holder) == 2 and holder[1].isdigit()
                   else "a process that has not said its pid yet")
            raise BuildDirBusy(f"another atlas book ({who}) is building in {build} (it holds {path}); wait for it "
                               f"to finish, or give another --build-dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{socket.gethostname()} {os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # the lock goes with the descriptor
