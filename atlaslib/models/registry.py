"""The model registry: capabilities, profiles (``profiles.yml``, user profile files, local folders and hub
ids), the table of model sources (:class:`Source`, registered with :func:`source`; the atlas's own are in
:mod:`.sources`), capability inference from a checkpoint's config, and the errors a card turns into a not-run
cell. See :mod:`atlaslib.models` for the whole story.

Below it sits only :mod:`.hub_cache` (local hub cache look-ups); every other module of :mod:`atlaslib.models`
imports from here, never the other way round. A source's class lives above (it loads weights and builds
adapters); the registry, the weight loader, the adapter factory and the contamination mark find it in
:data:`SOURCES` by the profile's ``source``.
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
from atlaslib.models.hub_cache import cached_hub_file
from atlaslib.registries import Registry

CAPABILITIES = (
    "predict.assertion",
    "score.options",
    "embed.text.pooled",
    "embed.text.tokens",
    "predict.ner",
    "predict.nli",
)
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
#: the numeric options a profile may set, checked where profiles are read (:func:`check_numeric_options`):
#: option -> (a whole number?, lowest, whether the lowest itself is allowed, highest, what it counts). The
#: bounds keep a value one that its adapter can use: no NaN, no infinity, no negative count, nothing so large
#: that a run would wait or allocate without end.
NUMERIC_OPTIONS = {
    "batch_size": (True, 1, True, 65_536, "rows per forward pass"),
    "max_length": (True, 1, True, 1_048_576, "tokens per input"),
    "torch_threads": (True, 1, True, 1_024, "CPU threads"),
    "max_tokens": (True, 1, True, 1_048_576, "tokens per reply"),
    "max_retries": (True, 0, True, 100, "further attempts after a failed request"),
    "timeout": (False, 0, False, 86_400, "seconds a request may take"),
    "backoff": (False, 0, True, 3_600, "seconds before the first retry, doubled at each"),
}
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


# ---------------------------------------------------------------------------------------------- sources

class Source:
    """A model source: one value of a profile's ``source`` key, and everything the atlas does differently for
    it, in one class registered with :func:`source` (``@source("gguf") class Gguf(Source)``). Each place asks
    the profile's source (:func:`source_of`) instead of comparing names: the registry (:meth:`validate`,
    :meth:`relative_location`, :meth:`pinned`), the weight loader (:meth:`check`, :meth:`weights`,
    :attr:`causal_lm`, :attr:`from_hub`), the adapter factory (:meth:`adapter`) and the contamination mark
    (:attr:`language_model`). The defaults are those of a source with nothing to check and no Hugging Face
    weights; a new source overrides what differs."""

    #: the ``source`` value it is registered under (set by :func:`source`)
    name: str = ""
    #: every model of this source is a language model (its undeclared training data count as undisclosed:
    #: :func:`atlaslib.models.contamination.may_have_seen`)
    language_model: bool = False
    #: every model of this source is a causal LM (no config is read to know it)
    causal_lm: bool = False
    #: weights missing from the local cache may be downloaded from the Hugging Face hub; the location is a hub
    #: repository id, which a model's identity in the model-call store holds beside its pinned commit
    from_hub: bool = False
    #: profile options the weight loader reads (never handed to an adapter), e.g. the wheel's archive name
    weight_options: tuple = ()
    #: packages whose versions change this source's numbers beyond the model code's (the call store's key)
    packages: tuple = ()

    def validate(self, name: str, entry: dict, where: str) -> None:
        """Check the source's own keys of the profile ``entry`` (its common keys are checked already);
        :class:`ProfileError` naming ``where``, the profile ``name`` and the key otherwise."""

    def relative_location(self, location: str) -> bool:
        """Whether ``location`` names a file or folder, relative to its profile file when not absolute."""
        return False

    def pinned(self, profile: Profile) -> Profile:
        """The registry profile with its revision resolved (when the source derives one from its files)."""
        return profile

    def check(self, profile: Profile) -> None:
        """Raise :class:`WeightsUnavailable` when the profile's weights are certainly not loadable here,
        without loading them (:func:`atlaslib.models.weights.check_weights`)."""

    def weights(self, profile: Profile) -> tuple[str, dict]:
        """``(location, from_pretrained kwargs)`` of the profile's Hugging Face weights."""
        raise ProfileError(f"model {profile.name!r} (source {profile.source}) has no Hugging Face weights")

    def adapter(self, profile: Profile, capability: str, options: dict, *, data_dir=None, prompt=None):
        """The adapter for ``capability`` (which the profile has) with ``options`` (see
        :func:`atlaslib.models.adapters.load_adapter`)."""
        raise ProfileError(f"model {profile.name!r} (source {profile.source}) has no adapters")


#: source name -> its registered :class:`Source` (one instance), in the order of registration
SOURCES: Registry[Source] = Registry("model source")


def _same_class(old: Source, new: Source) -> bool:
    """Whether ``new`` is an instance of ``old``'s class re-created by a module imported again (the same
    qualified name)."""
    def qualified(obj):
        return f"{type(obj).__module__}.{type(obj).__qualname__}"
    return qualified(old) == qualified(new)


def source(name: str):
    """Class decorator: register a :class:`Source` subclass under ``name``, the value of a profile's ``source``
    key. A name is registered once; a second class under it is an error (the same class imported again
    replaces its instance)."""
    def register(cls: type[Source]) -> type[Source]:
        if not (isinstance(cls, type) and issubclass(cls, Source)):
            raise TypeError(f"@source({name!r}): expected a subclass of Source, got {cls!r}")
        SOURCES.add(name, cls(), same=_same_class)
        cls.name = name
        return cls
    return register


def source_of(profile: Profile | str, who: str | None = None) -> Source:
    """The registered source of a profile (or of a ``source`` value); an unknown one is a
    :class:`ProfileError` naming the profile (``who``), the key and the known sources."""
    name = profile.source if isinstance(profile, Profile) else profile
    if not (isinstance(name, str) and name in SOURCES):
        who = who or (f"profile {profile.name!r}" if isinstance(profile, Profile) else "a profile")
        raise ProfileError(f"{who} key 'source' is {name!r}; expected one of {tuple(SOURCES)}")
    return SOURCES[name]


# --------------------------------------------------------------------------------------------- registry

def check_numeric_options(name: str, options, where: str) -> None:
    """Every option of :data:`NUMERIC_OPTIONS` that ``options`` sets (null: the adapter's default) is a finite
    number in its range, a whole number where one is meant; :class:`ProfileError` otherwise, one line naming
    ``where`` (the profiles file, with the line when known), the profile ``name``, the option, its value and
    what was expected."""
    import math

    from atlaslib import yamlio
    from atlaslib.jsonio import describe

    if not isinstance(options, dict):
        return
    for key, (whole, low, low_ok, high, counts) in NUMERIC_OPTIONS.items():
        value = options.get(key)
        if value is None:
            continue
        ok = (isinstance(value, int) if whole else isinstance(value, (int, float))) and not isinstance(value, bool)
        if ok and isinstance(value, float):
            ok = math.isfinite(value)
        if ok:
            ok = (low <= value if low_ok else low < value) and value <= high
        if ok:
            continue
        line = yamlio.line_of(options, key)
        got = f"the text {value[:40]!r}" if isinstance(value, str) else describe(value)
        kind = "a whole number" if whole else "a finite number"
        rng = f"from {low:,}" if low_ok else f"above {low:,}"
        raise ProfileError(f"{where}{f', line {line}' if line else ''}: profile {name!r} option {key!r} is {got}; "
                           f"expected {kind} {rng} to {high:,} ({counts})")


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
    src = source_of(entry["source"], f"{where}: profile {name!r}")
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
    check_numeric_options(name, entry.get("options"), where)
    src.validate(name, entry, where)
    return Profile(
        name=name, source=entry["source"], location=str(entry["location"]),
        revision=None if entry["revision"] is None else str(entry["revision"]),
        capabilities=list(caps), label_map=dict(entry.get("label_map") or {}),
        trained_on=[str(t) for t in entry.get("trained_on") or []],
        description=" ".join(str(entry.get("description") or "").split()),
        options=dict(entry.get("options") or {}),
        training_data=[str(t).strip() for t in entry.get("training_data") or []],
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
    from atlaslib.names import NameRefused, check_name

    out, origin = dict(base), {k: f"the built-in registry ({PROFILES_FILE.name})" for k in base}
    for f in files:
        for name, prof in _load_one(f).items():
            try:  # a name reaches pages: visible text without placeholders, no look-alike of a name before it
                check_name(name, f"{f}: profile name", kind="a profile name",
                           taken={k: f"a profile of {where}" for k, where in origin.items()})
            except NameRefused as exc:
                raise ProfileError(str(exc)) from None
            relative = source_of(prof).relative_location(prof.location)
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
    for name in data:
        if not isinstance(name, str):  # YAML reads yes/no/on/off/true/false, null, numbers and dates as such
            line = getattr(data, "key_lines", {}).get(name)
            raise ProfileError(f"{path}{f', line {line}' if line else ''}: a profile name must be text, got "
                               f"{yamlio.describe(name)} (YAML reads yes, no, on, off, true, false, null, numbers "
                               f"and dates as such); put the name in quotes")
    return {name: _validate(name, entry, path) for name, entry in data.items()}


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


def get_profile(name: str | os.PathLike, capabilities: list[str] | None = None) -> Profile:
    """The profile for a registry name, a local model directory, or a hub id ``org/name``."""
    if isinstance(name, Profile):
        return name
    key = str(name)
    registry = load_profiles()
    if key in registry:
        return source_of(registry[key]).pinned(registry[key])
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
