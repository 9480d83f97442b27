"""Whether a run can happen and what it runs on, decided once: by the runner before a kernel starts, or by a
:class:`~atlaslib.cards.run.CardRun` made without the runner (a notebook run by hand, a script, a test).

:func:`decide` reads only the card's declaration (:class:`atlaslib.cards.Card`: its baselines and the registry
profile a baseline runs on, the capabilities each protocol asks of a model, the runs that need a notebook
parameter) and words every reason the same for every card. :func:`load` turns a decision into what the card's
prediction code is given (:class:`Loaded`: the adapter for the decided capability, loaded with the options the
card declares for the protocol, ``Card.adapter_options``), so no card resolves a profile or chooses a capability
itself."""
from __future__ import annotations

from dataclasses import dataclass, field

from . import NotRun


def unknown_model(card, model: str) -> ValueError:
    """The error for a model name that is neither a card baseline, a registry profile, a local folder nor a hub
    id, naming what the card accepts."""
    from ..models import load_profiles

    if not card.capabilities:  # a card that runs only its own baselines (TempEval)
        return ValueError(f"card {card.name} has no model {model!r}; expected one of "
                          f"{', '.join(sorted(card.baselines))}")
    names = sorted(card.baselines) + sorted(load_profiles())
    return ValueError(f"unknown model {model!r} for card {card.name}: not an existing local model "
                      f"folder, not a hub id 'org/name', and not one of {', '.join(names)}")


def decide(card, version: str, model: str, protocol: str, params: dict | None = None) -> dict:
    """Decide whether ``model`` can run on ``card`` (a :class:`~atlaslib.cards.Card`) under ``protocol``: a
    JSON-able dict, what a kernel receives (its notebook parameter ``decision``), the run key holds and a
    not-run cell records:

    - ``run``: whether the run can happen; ``reason``: why not (None when it can), the words its cell records;
    - ``profile``: the model's registry, local or hub profile, resolved here once (capabilities inferred from
      the cached config of a hub id outside the registry), as a dict; None for a card baseline that is no
      registry profile;
    - ``capability``: the first of the capabilities the card asks of a model under the protocol
      (``Card.capabilities``) that the profile has; None for a baseline or a protocol the card declares
      none for (the card's own code decides those);
    - ``baseline``: the model is one the card runs by itself (``Card.baselines``).

    ``params``: the notebook parameters the card's ``parameter_gates`` read. An unknown model or a baseline
    asked for a protocol it has not raises ValueError naming the valid ones."""
    from ..models import CapabilityMissing, ProfileError, WeightsUnavailable, check_weights, get_profile
    from ..models import with_capabilities
    from ..models.registry import ModelConfigError

    baselines = card.baselines
    decision = {"run": True, "reason": None, "profile": None, "capability": None, "baseline": model in baselines}

    def blocked(reason: str) -> dict:
        return dict(decision, run=False, reason=reason)

    if decision["baseline"] or not card.capabilities:  # the card's own models (or a card that names none)
        try:
            decision["profile"] = get_profile(model).to_dict()
        except Exception:  # a card baseline is no registry profile
            pass
    if not baselines and not card.capabilities:
        return decision  # a card that declares no models (a new or test card): its notebook decides
    if model in baselines and protocol not in baselines[model]:
        raise ValueError(f"card {card.name}: model {model!r} has no {protocol} run; its protocols: "
                         f"{', '.join(baselines[model])}")
    for gate in card.parameter_gates:
        if gate.blocks(version, model, protocol, dict(params or {})):
            return blocked(f"{model} {protocol} {gate.reason}")
    if model in baselines:
        if model in card.baseline_weights:
            try:
                check_weights(get_profile(card.baseline_weights[model][0]))
            except WeightsUnavailable as exc:
                return blocked(exc.short)
        return decision
    if not card.capabilities:
        raise unknown_model(card, model)
    if protocol not in card.capabilities and any(protocol in p for p in baselines.values()):
        fills = sorted(m for m, p in baselines.items() if protocol in p)
        raise ValueError(f"card {card.name}: protocol {protocol!r} is a baseline's own protocol, run only by "
                         f"{', '.join(fills)}; a model runs under "
                         f"{', '.join(sorted(card.capabilities))}")
    try:
        profile = get_profile(model)
    except ModelConfigError:  # the model is there, its config.json is not usable: said as it is
        raise
    except ProfileError:
        raise unknown_model(card, model) from None
    decision["profile"] = profile.to_dict()
    wanted = card.capabilities.get(protocol)
    if wanted is None:  # a protocol the card declares no capabilities for: its notebook decides
        return decision
    try:
        if profile.capabilities_known and not any(c in profile.capabilities for c in wanted):
            raise CapabilityMissing(protocol)
        check_weights(profile)
        device = _asked_device(profile)
        if device:
            decision["device"] = device  # an explicit request (never 'auto'): the run key holds it
        profile = with_capabilities(profile)  # a hub id outside the registry: from its cached config
        decision["profile"] = profile.to_dict()
        capability = next((c for c in wanted if c in profile.capabilities), None)
        if capability is None:
            raise CapabilityMissing(protocol)
    except WeightsUnavailable as exc:
        return blocked(exc.short)
    except CapabilityMissing:
        return blocked(f"capability missing: {protocol} needs one of {', '.join(wanted)}; "
                       f"{model} has {', '.join(profile.capabilities) or 'none'}")
    return dict(decision, capability=capability)


def _asked_device(profile) -> str | None:
    """The device a model's run was asked to compute on (``--device``, ``ATLAS_DEVICE`` or the profile's option),
    checked against this machine (:class:`atlaslib.models.devices.DeviceUnavailable`, a not-run reason); None for
    ``auto`` or a source that computes on no torch device."""
    from ..models import devices, source_of

    if not getattr(source_of(profile), "on_device", False):
        return None
    return devices.check(profile.options, profile.name)


@dataclass
class Loaded:
    """What a decided run runs on: ``adapter`` (None for a card baseline, which the card runs by itself), the
    decided ``capability`` and the model's ``profile`` as a dict (the decision's), and the ``decision``."""

    adapter: object | None
    capability: str | None
    profile: dict | None
    decision: dict = field(default_factory=dict)

    @property
    def baseline(self) -> bool:
        return bool(self.decision.get("baseline"))


def load(card, model: str, protocol: str, decision: dict, *, data_dir=None, **options) -> Loaded:
    """The adapter ``decision`` (from :func:`decide`) asks for: the model's full profile (credentials
    included, which a decision does not carry) loaded for the decided capability with the card's declared
    options for ``protocol`` (``Card.adapter_options``) and ``options``. A decision that the run cannot happen,
    weights found absent or a capability found missing while loading raise :class:`NotRun` with the reason
    (worded as :func:`decide` words it); a baseline on a registry model's weights (``Card.baseline_weights``) loads
    that profile for its declared capability; any other baseline, or a protocol the card declares no capability
    for, loads nothing (``adapter`` None)."""
    from ..models import CapabilityMissing, WeightsUnavailable, get_profile, load_adapter, with_capabilities

    if not decision.get("run", True):
        exc = NotRun(decision.get("reason") or "not run")
        exc.decision = decision  # its profile stays known to the not-run cell (e.g. its overlap marker)
        raise exc
    capability = decision.get("capability")
    if decision.get("baseline") and model in card.baseline_weights:   # a baseline on a registry model's weights
        name, capability = card.baseline_weights[model]                  # (profile, capability), declared
        try:
            adapter = load_adapter(with_capabilities(get_profile(name)), capability, data_dir=data_dir, **options)
        except WeightsUnavailable as exc:
            raise NotRun(exc.short) from None
        return Loaded(adapter, capability, decision.get("profile"), decision)
    if decision.get("baseline") or capability is None:
        return Loaded(None, capability, decision.get("profile"), decision)
    kwargs = {**dict(card.adapter_options.get(protocol) or {}), **options}
    try:
        profile = with_capabilities(get_profile(model))
        adapter = load_adapter(profile, capability, data_dir=data_dir, **kwargs)
    except WeightsUnavailable as exc:
        raise NotRun(exc.short) from None  # the reason without the loader's low-level cause
    except CapabilityMissing as exc:
        raise NotRun(str(exc)) from None
    return Loaded(adapter, capability, profile.to_dict(), decision)


def load_for(card, version: str, model: str, protocol: str, run_load=None, *, data_dir=None) -> Loaded:
    """What a card's prediction code runs on: ``run_load()`` when its run handed one (a
    :meth:`CardRun.load <atlaslib.cards.run.CardRun.load>`, by the run's decision), else decided and loaded here
    by the same rule (:func:`decide`, :func:`load`: a test or script calling the card directly)."""
    if run_load is not None:
        return run_load(data_dir=data_dir)
    return load(card, model, protocol, decide(card, version, model, protocol), data_dir=data_dir)
