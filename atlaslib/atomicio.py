"""Files the atlas writes and reads back itself: written atomically (a killed process leaves the old file or
the new one, never a partial one), and build cache entries read back as a miss when damaged.

Stands on :mod:`atlaslib.fsio` only: result cells (:mod:`atlaslib.results.store`), pages and caches write
through it.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def current_umask() -> int:
    """The process umask (read from /proc when possible, else by setting and restoring it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` via a temp file in the same folder + fsync + rename: a killed
    process leaves either the old file or the new one, never a partial file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~current_umask())  # mkstemp makes 0600; give the mode open() would
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def read_cache_json(path: str | os.PathLike, fits=lambda value: True, log=print):
    """A build cache entry written with :func:`atomic_write_text`: its JSON value, or None when there is none or it
    is damaged (unreadable, not JSON, or a shape ``fits`` refuses). A damaged entry is a miss: the caller
    computes it again, and the build's log says so, naming the file."""
    from . import fsio

    path = Path(path)
    if not path.exists():
        return None
    try:
        value = json.loads(fsio.read_text(path))
        problem = None if fits(value) else "not the shape it is written in"
    except fsio.NotAFile as exc:
        problem = f"{exc.what}, not a file"
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem is None:
        return value
    log(f"build cache {path} is damaged ({' '.join(problem.split())[:120]}); computing it again")
    try:  # a folder, a pipe or a link where the entry goes would fail the write of the new one: removed
        fsio.remove_unless_regular(path)
    except OSError:
        pass
    return None
