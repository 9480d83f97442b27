"""Pinned data sources: a local data directory first, else a sha256-verified download into a cache.

Every data file the atlas reads is a :class:`PinnedFile`: a path relative to the data directory, the
URL of the exact upstream revision, and its sha256. :func:`resolve` returns a verified local path:

1. ``data_dir`` argument, else the ``ATLAS_DATA_DIR`` environment variable: if ``<dir>/<name>`` exists
   it is used after its sha256 is checked;
2. otherwise the cache (``ATLAS_CACHE_DIR``, default ``~/.cache/clinical-nlp-atlas``): a cached copy is
   used after its sha256 is checked;
3. otherwise the file is downloaded from ``url`` into the cache (temp file + rename), and checked.

Any failure (wrong sha256, no network) raises :class:`DataSourceError` with one message naming the
file, the URL, the expected and actual sha256, and how to place the file by hand.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from . import fsio

ENV_DATA_DIR = "ATLAS_DATA_DIR"
ENV_CACHE_DIR = "ATLAS_CACHE_DIR"


class DataSourceError(RuntimeError):
    """A pinned data file could not be found, fetched or verified."""


@dataclass(frozen=True)
class PinnedFile:
    """One upstream file, pinned by URL (at a fixed commit) and sha256.

    ``name`` is the path relative to the data directory, e.g. ``negex/Annotations-1-120-random.txt``.
    """

    name: str
    url: str
    sha256: str


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 of a regular file (:class:`atlaslib.fsio.NotAFile` for a pipe, device or folder: never read)."""
    h = hashlib.sha256()
    with fsio.open_regular(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def data_dir(explicit: str | os.PathLike | None = None) -> Path | None:
    """The local data directory: the explicit argument, else ``$ATLAS_DATA_DIR``, else None."""
    value = explicit if explicit not in (None, "") else os.environ.get(ENV_DATA_DIR)
    return Path(value).expanduser().resolve() if value else None


def cache_dir() -> Path:
    return Path(os.environ.get(ENV_CACHE_DIR, "~/.cache/clinical-nlp-atlas")).expanduser()


def _manual_hint(pf: PinnedFile) -> str:
    return (
        f"To place it by hand, download {pf.url} and save it as "
        f"<data dir>/{pf.name} (point {ENV_DATA_DIR} at <data dir>) or as {cache_dir() / pf.name}."
    )


def _present(pf: PinnedFile, path: Path, where: str) -> bool:
    """Whether ``path`` is there to be checked: a regular file. Something else in its place (a named pipe, a
    device, a folder, a symbolic link that loops or leads nowhere, a path that cannot be looked at) is refused
    as such, never taken for a missing file (which would be downloaded)."""
    what = fsio.kind(path)
    if what is not None:
        raise DataSourceError(f"{where} file {path} for {pf.name} is {what}, not a file; expected the pinned file "
                              f"(sha256 {pf.sha256}). {_manual_hint(pf)}")
    try:
        os.stat(path)
    except FileNotFoundError:
        if not os.path.islink(path):
            return False
        raise DataSourceError(f"{where} file {path} for {pf.name} is a symbolic link to {os.readlink(path)!r}, "
                              f"which does not exist; expected the pinned file (sha256 {pf.sha256}): point the link "
                              f"at it or remove the link. {_manual_hint(pf)}") from None
    except OSError as exc:
        import errno

        why = ("a symbolic link that loops (it leads back to itself)" if exc.errno == errno.ELOOP else
               f"not readable ({exc.strerror or type(exc).__name__})")
        raise DataSourceError(f"{where} file {path} for {pf.name} is {why}; expected the pinned file (sha256 "
                              f"{pf.sha256}): replace it with the file or remove it. {_manual_hint(pf)}") from None
    return True


def _check(pf: PinnedFile, path: Path, where: str) -> Path:
    actual = sha256_file(path)
    if actual != pf.sha256:
        raise DataSourceError(
            f"{where} file {path} for {pf.name} has sha256 {actual}, expected {pf.sha256} "
            f"(pinned source {pf.url}). {_manual_hint(pf)}"
        )
    return path


def _download(pf: PinnedFile, target: Path, timeout: float = 60.0) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(pf.url, timeout=timeout) as resp:
            while block := resp.read(1 << 20):
                out.write(block)
        actual = sha256_file(tmp)
        if actual != pf.sha256:
            raise DataSourceError(
                f"downloaded {pf.url} for {pf.name} has sha256 {actual}, expected {pf.sha256}. "
                f"{_manual_hint(pf)}"
            )
        os.replace(tmp, target)
    except DataSourceError:
        raise
    except Exception as exc:  # network errors of every flavour
        raise DataSourceError(
            f"could not download {pf.name} from {pf.url} ({type(exc).__name__}: {exc}); expected sha256 "
            f"{pf.sha256}, actual: none (no file). {_manual_hint(pf)}"
        ) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def resolve(pf: PinnedFile, data_dir_: str | os.PathLike | None = None, *, download: bool = True) -> Path:
    """Return a local, sha256-verified path for ``pf`` (see module docstring for the order)."""
    local = data_dir(data_dir_)
    if local is not None and _present(pf, local / pf.name, "local"):
        return _check(pf, local / pf.name, "local")
    cached = cache_dir() / pf.name
    if _present(pf, cached, "cached"):
        return _check(pf, cached, "cached")
    looked = (f"{pf.name} was not found in the data folder (looked for {local / pf.name})" if local is not None
              else f"{pf.name} was not found: no data folder is set ({ENV_DATA_DIR} or --data-dir)")
    looked += f" nor in the download cache ({cached})"
    if not download:
        raise DataSourceError(f"{looked}; expected sha256 {pf.sha256}. {_manual_hint(pf)}")
    try:
        _download(pf, cached)
    except DataSourceError as exc:
        raise DataSourceError(f"{looked}; then {exc}") from None
    return cached


def read_sha256sums(text: str, prefix: str, url_template: str) -> list[PinnedFile]:
    """PinnedFiles from ``sha256sum`` output: ``<sha256>  <relative path>`` per line.

    ``prefix`` is prepended to each name (e.g. ``maccrobat/brat/``); ``url_template`` is formatted
    with ``path=<relative path>``.
    """
    files = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or len(parts[0]) != 64:
            raise DataSourceError(f"sha256 list line {lineno}: expected '<sha256>  <path>', got {line!r}")
        digest, rel = parts[0], parts[1].lstrip("*").strip()
        files.append(PinnedFile(prefix + rel, url_template.format(path=rel), digest))
    return files
