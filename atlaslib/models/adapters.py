"""The adapter factory: :func:`load_adapter` returns the object a protocol calls for one capability of a
profile, built by the profile's source (:mod:`.sources`: builtin rules and baselines, OpenAI-compatible
servers, Hugging Face checkpoints and GGUF files).
"""
from __future__ import annotations

from atlaslib.models.registry import CAPABILITIES, CapabilityMissing, Profile, get_profile, source_of
from atlaslib.models.weights import infer_capabilities


def load_adapter(profile_or_name, capability: str, *, data_dir=None, prompt=None, **options):
    """The adapter for ``capability`` of a profile (or name / directory / hub id), its time a run's loading
    (:mod:`atlaslib.phases`).

    Raises :class:`CapabilityMissing` when the profile lacks the capability and
    :class:`WeightsUnavailable` when its weights cannot be loaded offline. ``options`` override the
    profile's defaults (``batch_size``, ``max_length``, ``torch_threads``, ``progress``, ...); an
    option the adapter does not know raises TypeError naming it. ``data_dir`` is the atlas data
    directory (as the card loaders take it): adapters that read a pinned data file (negspacy's trigger
    list) resolve it there, the others ignore it, so callers can always pass it. ``prompt`` is the card's
    :class:`atlaslib.models.prompts.OptionPrompt` (or ``PromptSet``) for adapters that answer by scoring a
    prompt's options (a causal LM's ``predict.nli``); adapters with their own head, and the
    openai-compatible adapter (which asks in words, :mod:`.openai_compat`), do not use it, so callers can
    always pass it.
    """
    from atlaslib.phases import phase

    with phase("loading"):
        return _load(profile_or_name, capability, data_dir=data_dir, prompt=prompt, **options)


def _load(profile_or_name, capability: str, *, data_dir=None, prompt=None, **options):
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown capability {capability!r}; known: {list(CAPABILITIES)}")
    profile = profile_or_name if isinstance(profile_or_name, Profile) else get_profile(profile_or_name)
    source = source_of(profile)
    profile = infer_capabilities(profile)
    if capability not in profile.capabilities:
        raise CapabilityMissing(
            f"model {profile.name!r} has no capability {capability!r} "
            f"(it has: {', '.join(profile.capabilities) or 'none'})")
    opts = {k: v for k, v in profile.options.items() if not k.startswith("_") and k not in source.weight_options}
    opts.update(options)
    return source.adapter(profile, capability, opts, data_dir=data_dir, prompt=prompt)
