"""The model registry: capabilities, profiles (``profiles.yml``, user profile files, local folders and hub
ids) and the errors a card turns into a not-run cell. See :mod:`atlaslib.models` for the whole story.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

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
    from atlaslib import yamlio

    data = yamlio.load(path, what="profiles file", entries=Profile, error=ProfileError)
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
            from atlaslib.models.weights import cached_hub_config

            cfg = cached_hub_config(key)
            caps = capabilities_from_config(cfg) if cfg is not None else []
        return Profile(name=key, source="hub", location=key, revision=None, capabilities=caps,
                       description="hub model not in the registry",
                       options={} if caps else {"_capabilities_unknown": True})
    raise ProfileError(
        f"unknown model {key!r}: not a registry name ({', '.join(sorted(registry))}), not an existing "
        "directory, and not a hub id of the form 'org/name'"
    )
