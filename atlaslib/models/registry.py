"""The model registry: capabilities, profiles (``profiles.yml``, user profile files, local folders and hub
ids), each source's profile schema, capability inference from a checkpoint's config, and the errors a card
turns into a not-run cell. See :mod:`atlaslib.models` for the whole story.

Below it sit only :mod:`.hub_cache` (local hub cache look-ups) and :mod:`.gguf` (where a GGUF file is and
its sha256); every other module of :mod:`atlaslib.models` imports from here, never the other way round.
"""
from __future__ import annotations

import copy
import hashlib
import os
import re
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from atlaslib import sources
from atlaslib.models import gguf as _gguf
from atlaslib.models.hub_cache import cached_hub_file

CAPABILITIES = (
    "predict.assertion",
    "score.options",
    "embed.text.pooled",
    "embed.text.tokens",
    "predict.ner",
    "predict.nli",
)
SOURCES = ("builtin", "hub", "pypi", "path", "openai-compatible", "gguf")
#: what a causal language model can do in the atlas (option scoring, NLI by option scoring over the labels,
#: and its last layer's states as features for the probes)
CAUSAL_LM_CAPABILITIES = ("score.options", "predict.nli", "embed.text.pooled", "embed.text.tokens")
ASSERTION_LABELS = ("PRESENT", "ABSENT", "POSSIBLE")
NLI_LABELS = ("entailment", "neutral", "contradiction")
PROFILES_FILE = Path(__file__).with_name("profiles.yml")
#: more profile files merged over the built-in registry (``os.pathsep``-separated; ``--profiles`` sets it, and
#: notebook kernels inherit it)
PROFILES_ENV = "ATLAS_PROFILES"
_PROFILE_KEYS = {"source", "location", "revision", "capabilities", "label_map", "trained_on", "description",
                 "options", "training_data"}
_REQUIRED_KEYS = _PROFILE_KEYS - {"options", "training_data"}
#: the kinds of training data a profile's ``training_data`` may name besides datasets by name: ``undisclosed``
#: (the maker does not say), ``web-crawl`` / ``code-crawl`` (crawled web pages or code repositories, which may
#: hold any public test set), ``none`` (nothing learnt: rules, baselines)
TRAINING_DATA_KINDS = ("undisclosed", "web-crawl", "code-crawl", "none")
#: options of an ``openai-compatible`` profile, and what such a model can offer
OPENAI_OPTIONS = {"model", "api_key_env", "endpoint", "max_tokens", "timeout", "max_retries", "backoff", "cache"}
OPENAI_CAPABILITIES = ("predict.assertion", "predict.nli", "score.options")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: the shape of ``org/name``; a hub id also has no ``.`` or ``..`` part (:func:`is_hub_id`)
HUB_ID_SHAPE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$", re.ASCII)  # the hub's ids are ASCII: no look-alikes


def is_hub_id(name: str) -> bool:
    """Whether ``name`` is a Hugging Face hub id ``org/name``: of that shape, and no part ``.`` or ``..``
    (``a/..`` is a path that leaves its folder, never a repository)."""
    return HUB_ID_SHAPE.match(name) is not None and not any(p in (".", "..") for p in name.split("/"))


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
    #: what the model learnt from, as its maker declares it (:data:`TRAINING_DATA_KINDS` and datasets by
    #: name); [] = not declared. Read by :func:`atlaslib.models.contamination.may_have_seen`.
    training_data: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The profile as it is recorded and shown (a run's decision and cache key, a result cell's spec): its
        ``location`` made public (:func:`atlaslib.escape.public_location`: a URL without user name, password
        and query string). The profile itself keeps the whole location for its requests; copy a profile with
        :func:`dataclasses.replace`, not through this."""
        from atlaslib.escape import public_location

        return {**asdict(self), "location": public_location(self.location)}

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
    for key, typ in (("label_map", dict), ("trained_on", list), ("options", dict), ("training_data", list)):
        if key in entry and entry[key] is not None and not isinstance(entry[key], typ):
            raise ProfileError(f"{where}: profile {name!r} key {key!r} must be a {typ.__name__}")
    for t in entry.get("training_data") or []:
        if not isinstance(t, str) or not t.strip():
            raise ProfileError(f"{where}: profile {name!r} key 'training_data' must list strings (one of "
                               f"{', '.join(TRAINING_DATA_KINDS)} or a dataset's name), got {t!r}")
    if entry["source"] == "openai-compatible":
        _check_openai_entry(name, entry, where)
    if entry["source"] == "gguf":
        _check_gguf_entry(name, entry, where)
    if entry["source"] in ("hub", "pypi") and not entry.get("revision"):
        raise ProfileError(f"{where}: profile {name!r} (source {entry['source']}) needs a pinned 'revision'")
    return Profile(
        name=name, source=entry["source"], location=str(entry["location"]),
        revision=None if entry["revision"] is None else str(entry["revision"]),
        capabilities=list(caps), label_map=dict(entry.get("label_map") or {}),
        trained_on=[str(t) for t in entry.get("trained_on") or []],
        description=" ".join(str(entry.get("description") or "").split()),
        options=dict(entry.get("options") or {}),
        training_data=[str(t).strip() for t in entry.get("training_data") or []],
    )


def _check_openai_entry(name: str, entry: dict, where: str) -> None:
    """The schema of a ``source: openai-compatible`` profile (see :mod:`atlaslib.models.openai_compat`)."""
    loc = str(entry.get("location") or "")
    if not re.match(r"^https?://[^\s/]+", loc):
        from atlaslib.escape import public_location

        raise ProfileError(f"{where}: profile {name!r} key 'location' must be the API's base URL "
                           f"(http://host:port/v1), got {public_location(loc)!r}")
    opts = entry.get("options") or {}
    if not isinstance(opts, dict):
        raise ProfileError(f"{where}: profile {name!r} key 'options' must be a mapping")
    keyish = [k for k in opts if "key" in k.lower() and k != "api_key_env"] + \
             [k for k in opts if k.lower() in ("token", "secret", "password", "authorization")]
    if keyish:
        raise ProfileError(f"{where}: profile {name!r} option {keyish[0]!r}: never write a key into a file; put the "
                           f"NAME of the environment variable that holds it in 'api_key_env'")
    unknown = set(opts) - OPENAI_OPTIONS
    if unknown:
        raise ProfileError(f"{where}: profile {name!r} has unknown option(s) {sorted(unknown)}; allowed for "
                           f"openai-compatible: {sorted(OPENAI_OPTIONS)}")
    if not isinstance(opts.get("model"), str) or not opts["model"].strip():
        raise ProfileError(f"{where}: profile {name!r} needs options.model: the model name the server expects")
    env = opts.get("api_key_env")
    if env is not None and (not isinstance(env, str) or not _ENV_NAME.match(env)):
        raise ProfileError(f"{where}: profile {name!r} option 'api_key_env' must be an environment variable name")
    if opts.get("endpoint", "chat") not in ("chat", "completions"):
        raise ProfileError(f"{where}: profile {name!r} option 'endpoint' must be chat or completions")
    bad = [c for c in entry.get("capabilities") or [] if c not in OPENAI_CAPABILITIES]
    if bad:
        raise ProfileError(f"{where}: profile {name!r}: an openai-compatible model offers {list(OPENAI_CAPABILITIES)}, "
                           f"not {bad}")


def _check_gguf_entry(name: str, entry: dict, where: str) -> None:
    """The schema of a ``source: gguf`` profile (see :mod:`atlaslib.models.gguf`): a location that is a path
    or ``package:MODULE/FILE``, a revision that is null or a sha256, capabilities of a causal LM."""
    loc = entry.get("location")
    if not isinstance(loc, str) or not loc.strip():
        raise ProfileError(f"{where}: profile {name!r} key 'location' must be the path of a .gguf file or "
                           f"package:MODULE/FILE")
    if _gguf.is_package_location(loc):
        module, _, rel = loc[len(_gguf.PACKAGE_PREFIX):].partition("/")
        if not module or not rel:
            raise ProfileError(f"{where}: profile {name!r} key 'location' is {loc!r}; expected package:MODULE/FILE")
    rev = entry.get("revision")
    if rev is not None and not (isinstance(rev, str) and re.fullmatch(r"[0-9a-f]{64}", rev)):
        raise ProfileError(f"{where}: profile {name!r} key 'revision' must be null or the file's sha256 "
                           f"(64 lower-case hex digits), got {rev!r}")
    bad = [c for c in entry.get("capabilities") or [] if c not in CAUSAL_LM_CAPABILITIES]
    if bad:
        raise ProfileError(f"{where}: profile {name!r}: a GGUF model (loaded as a causal LM) offers "
                           f"{list(CAUSAL_LM_CAPABILITIES)}, not {bad}")


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
    from atlaslib.names import NameRefused, check_name

    out, origin = dict(base), {k: f"the built-in registry ({PROFILES_FILE.name})" for k in base}
    for f in files:
        for name, prof in _load_one(f).items():
            try:  # a name reaches pages: visible text without placeholders, no look-alike of a name before it
                check_name(name, f"{f}: profile name", kind="a profile name",
                           taken={k: f"a profile of {where}" for k, where in origin.items()})
            except NameRefused as exc:
                raise ProfileError(str(exc)) from None
            relative = prof.source in ("path", "gguf") and not _gguf.is_package_location(prof.location)
            if relative and not os.path.isabs(os.path.expanduser(prof.location)):
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
    return {k: copy.deepcopy(v) for k, v in _load_profiles_cached(p, stamp).items()}


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


class ModelConfigError(ProfileError):
    """A checkpoint's ``config.json`` (a local folder's, or a hub model's in the local cache) cannot be read
    or has a field of the wrong shape: one line naming the file and the field."""


#: the fields of a ``config.json`` that the atlas reads, and the shape each must have when given (not null)
CONFIG_FIELDS = {
    "architectures": ("a list of model class names (text)",
                      lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v)),
    "id2label": ("an object of label id -> label name (text)",
                 lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values())),
    "label2id": ("an object of label name -> label id", lambda v: isinstance(v, dict)),
    "is_encoder_decoder": ("true or false", lambda v: isinstance(v, bool)),
}


def check_config(config, where: str = "config.json") -> dict:
    """``config`` (a checkpoint's ``config.json`` contents) when it is an object whose fields the atlas reads
    (:data:`CONFIG_FIELDS`) have their shape; :class:`ModelConfigError` naming ``where`` (the file), the field
    and what was expected otherwise."""
    from atlaslib.jsonio import describe

    if not isinstance(config, dict):
        raise ModelConfigError(f"{where}: {describe(config)}; expected a JSON object (a Hugging Face model config, "
                               f"as save_pretrained writes it)")
    for key, (what, ok) in CONFIG_FIELDS.items():
        value = config.get(key)
        if value is not None and not ok(value):
            got = describe(value)
            if key == "architectures" and isinstance(value, list):
                got = f"a list holding {describe(next(a for a in value if not isinstance(a, str)))}"
            elif key == "id2label" and isinstance(value, dict):
                got = f"an object holding {describe(next(x for x in value.values() if not isinstance(x, str)))}"
            raise ModelConfigError(f"{where}: field {key!r} must be {what}, got {got}")
    return config


def read_config(path: str | os.PathLike) -> dict:
    """A checkpoint's ``config.json`` read (:func:`atlaslib.jsonio.load`) and checked (:func:`check_config`)."""
    from atlaslib import jsonio

    return check_config(jsonio.load(path, what="a model config (config.json)", error=ModelConfigError,
                                    max_bytes=16 * 2 ** 20), str(path))


def capabilities_from_config(config: dict, where: str = "config.json") -> list[str]:
    """Capabilities of a Hugging Face checkpoint, inferred from its ``config.json`` contents: a sequence
    classifier's by its label names, a token classifier -> predict.ner, a causal LM ->
    :data:`CAUSAL_LM_CAPABILITIES`, any other encoder -> the two embeddings. A config of another shape raises
    :class:`ModelConfigError` naming ``where`` and the field."""
    check_config(config, where)
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
        caps += CAUSAL_LM_CAPABILITIES
    elif archs and not config.get("is_encoder_decoder", False):
        caps += ["embed.text.pooled", "embed.text.tokens"]
    return list(dict.fromkeys(caps))


def with_config_capabilities(profile: Profile, config: dict | None, where: str = "config.json") -> Profile:
    """``profile`` with the capabilities its checkpoint's config implies (:func:`capabilities_from_config`),
    marked known; unchanged when ``config`` is None (not cached: they stay to be inferred at load time).
    The one place a hub id's capabilities are inferred, from the cached config (:func:`get_profile`) or
    from the config loaded with the weights (:func:`atlaslib.models.weights.with_capabilities`)."""
    if config is None:
        return profile
    caps = capabilities_from_config(config, where)
    options = {k: v for k, v in profile.options.items() if k != "_capabilities_unknown"}
    return replace(copy.deepcopy(profile), capabilities=caps, options=options)


def _with_gguf_revision(profile: Profile) -> Profile:
    """A ``gguf`` profile without a pinned revision gets the sha256 of the file it names (when the file is
    there; otherwise it stays None and the weight check says why)."""
    if profile.source != "gguf" or profile.revision:
        return profile
    try:
        path = _gguf.resolve_file(profile.location)
    except (OSError, ValueError):
        return profile
    profile.revision = _gguf.file_sha256(path)
    return profile


def get_profile(name: str | os.PathLike, capabilities: list[str] | None = None) -> Profile:
    """The profile for a registry name, a local model directory, or a hub id ``org/name``."""
    if isinstance(name, Profile):
        return name
    key = str(name)
    registry = load_profiles()
    if key in registry:
        return _with_gguf_revision(registry[key])
    p = Path(key).expanduser()
    if p.is_dir():
        cfg_file = p / "config.json"
        if not cfg_file.exists():
            raise ProfileError(f"model directory {p} has no config.json: expected a Hugging Face checkpoint "
                               "saved with save_pretrained")
        cfg = read_config(cfg_file)
        caps = list(capabilities) if capabilities else capabilities_from_config(cfg, str(cfg_file))
        return Profile(name=key, source="path", location=str(p.resolve()), revision=_dir_revision(p),
                       capabilities=caps, label_map={}, trained_on=[],
                       description=f"local checkpoint ({', '.join(cfg.get('architectures') or ['?'])})")
    if is_hub_id(key) and not os.path.exists(key):
        caps = list(capabilities or [])
        bad = [c for c in caps if c not in CAPABILITIES]
        if bad:
            raise ProfileError(f"model {key!r}: unknown capability {bad}; known: {list(CAPABILITIES)}")
        prof = Profile(name=key, source="hub", location=key, revision=None, capabilities=caps,
                       description="hub model not in the registry",
                       options={} if caps else {"_capabilities_unknown": True})
        # without given capabilities: inferred from the config in the local Hugging Face cache, when it is there
        cached = None if caps else cached_hub_file(key, "config.json")
        return prof if cached is None else with_config_capabilities(prof, read_config(cached), str(cached))
    raise ProfileError(
        f"unknown model {key!r}: not a registry name ({', '.join(sorted(registry))}), not an existing "
        "directory, and not a hub id of the form 'org/name'"
    )
