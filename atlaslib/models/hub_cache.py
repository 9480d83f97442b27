"""Look-ups in the local Hugging Face hub cache and the hub's reachability, without loading a model.

The registry (capabilities of a hub id outside ``profiles.yml``) and weight fetching (is a pinned revision
here? may a download be tried?) both need these; they live here, below both, so neither imports the other
for them. Nothing here touches the network except :func:`hub_reachable` (one TCP connect, cached per
process).
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache as the environment names it now (``HF_HUB_CACHE``, else
    ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``), read at call time."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def cached_hub_file(repo: str, filename: str, revision: str | None = None) -> Path | None:
    """The path of ``filename`` of hub repo ``repo`` at ``revision`` (default: main) in the local cache,
    or None; no network."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo, filename, cache_dir=str(hf_cache_dir()), revision=revision)
    except Exception:  # a malformed repo id or cache folder: not cached
        return None
    return Path(found) if isinstance(found, str) and os.path.isfile(found) else None


def cached_hub_config(repo: str, revision: str | None = None) -> dict | None:
    """The ``config.json`` of a hub model in the local cache as a dict, or None when it is not cached."""
    path = cached_hub_file(repo, "config.json", revision)
    if path is None:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) switches the hub off."""
    val = os.environ.get("HF_HUB_OFFLINE", "") or os.environ.get("TRANSFORMERS_OFFLINE", "")
    return val.strip().lower() in ("1", "true", "yes", "on")


@lru_cache(maxsize=4)
def hub_reachable(endpoint: str | None = None, timeout: float = 3.0) -> bool:
    """One quick TCP connect to the hub endpoint (cached per process), so that a machine without
    network fails in seconds instead of waiting through the hub client's retries."""
    import socket
    from urllib.parse import urlparse

    if endpoint is None:
        try:
            from huggingface_hub import constants
            endpoint = constants.ENDPOINT
        except Exception:
            endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    u = urlparse(endpoint)
    try:
        with socket.create_connection((u.hostname, u.port or (443 if u.scheme == "https" else 80)), timeout):
            return True
    except OSError:
        return False
