"""Where a model computes: ``device: auto`` for every Hugging Face adapter, and the rows per pass each device is
declared to take.

What is asked, first found wins: the ``--device`` flag of ``atlas run`` / ``atlas book`` (which sets
:data:`VARIABLE` for the kernels and workers it starts), the environment variable ``ATLAS_DEVICE``, a profile's
``device`` option, else ``auto``. ``auto`` is CUDA when torch sees a CUDA device, else the CPU; ``cpu``, ``cuda``
and ``cuda:N`` are taken as they are. A request for CUDA on a machine without it is one line
(:class:`DeviceUnavailable`: a run's "not run" reason, or the flag's error), never a traceback.

Rows per pass (how many inputs one forward pass holds) are declared per device: on the CPU each adapter keeps its
own (the option scorer one prompt per pass, the embedders 8 rows: measured fastest on one core), on CUDA
:data:`ROWS_PER_PASS` unless a profile sets ``batch_size``. The device type is part of a model's identity in the
model-call store (:mod:`atlaslib.models.calls`), so answers computed on one device are never served for another.
"""
from __future__ import annotations

import os

from .registry import WeightsUnavailable

#: the environment variable that asks for a device (set by ``--device``; read by every adapter's loader)
VARIABLE = "ATLAS_DEVICE"
#: the device names a request may use (``cuda:N`` too)
CHOICES = ("auto", "cpu", "cuda")
#: rows per forward pass on a device, when the profile sets no ``batch_size`` (the CPU keeps each adapter's own):
#: on an NVIDIA H200, SmolLM2's option scoring of the 1,432 NegEx items took 37.8 items/s at one prompt per pass
#: and 525 items/s at 32, with all 1,432 decisions equal to the CPU's and log-likelihoods within 2.9e-6
ROWS_PER_PASS = {"cuda": 32}


class DeviceUnavailable(WeightsUnavailable):
    """A device was asked for that this machine does not have (a run's not-run reason, worded once here)."""


def check_name(value, who: str) -> str:
    """``value`` as a device name, or ValueError naming ``who`` (the flag, variable or profile) and the choices."""
    text = value.strip().lower() if isinstance(value, str) else value
    if isinstance(text, str) and (text in CHOICES or (text.startswith("cuda:") and text[5:].isdigit())):
        return text
    raise ValueError(f"{who}: device {value!r} is not one of {', '.join(CHOICES)} or cuda:N (N a device number)")


def requested(profile_options: dict | None = None, profile_name: str | None = None) -> tuple[str, str]:
    """``(device name, who asked)``: the environment's request, else the profile's ``device`` option, else
    ``auto``; a name that is no device is a ValueError naming who gave it."""
    env = os.environ.get(VARIABLE, "").strip()
    if env:
        return check_name(env, VARIABLE), VARIABLE
    opt = (profile_options or {}).get("device")
    if opt is not None:
        who = f"profile {profile_name!r} option 'device'" if profile_name else "the profile's option 'device'"
        return check_name(opt, who), who
    return "auto", "auto"


def cuda_count() -> int:
    """CUDA devices torch sees here (0 without torch's CUDA build or a driver)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve(name: str, who: str = "the request", model: str | None = None) -> str:
    """The device ``name`` runs on here: ``auto`` -> ``cuda`` when torch sees one, else ``cpu``; ``cuda`` or
    ``cuda:N`` checked against the devices torch sees (:class:`DeviceUnavailable` otherwise)."""
    if name == "cpu":
        return "cpu"
    n = cuda_count()
    if name == "auto":
        return "cuda" if n else "cpu"
    index = int(name[5:]) if name.startswith("cuda:") else 0
    if index >= n:
        have = f"it sees {n} CUDA device(s)" if n else "it sees no CUDA device"
        raise DeviceUnavailable(f"device unavailable: {who} asks for {name!r}, but torch on this machine cannot use "
                                f"it ({have}); ask for 'auto' or 'cpu'", model=model)
    return name


def check(profile_options: dict | None = None, profile_name: str | None = None) -> str | None:
    """Before a run: the device it will run on when it was asked for explicitly (:class:`DeviceUnavailable`
    when the machine lacks it), None for ``auto`` (decided by the kernel's own machine, which may be another
    one: a Dask worker). Imports torch only for an explicit CUDA request."""
    name, who = requested(profile_options, profile_name)
    if name == "auto":
        return None
    return resolve(name, who, model=profile_name)


def place(options: dict, profile_name: str | None = None) -> dict:
    """An HF adapter's ``options`` (the profile's merged with the caller's) with its device resolved
    (``device``: the environment's request first, then the option) and, on a device with declared rows per pass,
    ``batch_size`` set unless given. ``options`` itself is not changed."""
    out = dict(options)
    name, who = requested(out, profile_name)
    out["device"] = resolve(name, who, model=profile_name)
    if out["device"].startswith("cuda"):
        deterministic_cuda()
    rows = ROWS_PER_PASS.get(out["device"].split(":")[0])
    if rows and out.get("batch_size") is None:
        out["batch_size"] = rows
    return out


#: cuBLAS's workspace setting for deterministic matrix products (CUDA's rule for torch's deterministic algorithms,
#: which the fine-tunes train under): the variable, the values CUDA accepts (the first one set here); it must be in
#: the environment before CUDA starts in the process
CUBLAS_VARIABLE, CUBLAS_VALUES = "CUBLAS_WORKSPACE_CONFIG", (":4096:8", ":16:8")


def deterministic_cuda() -> None:
    """Set ``CUBLAS_WORKSPACE_CONFIG`` (unless the user set a value of their own) before a model goes to CUDA, so
    that a fine-tune on that device can train with deterministic algorithms."""
    os.environ.setdefault(CUBLAS_VARIABLE, CUBLAS_VALUES[0])


def cublas_deterministic() -> bool:
    """Whether cuBLAS's workspace setting is one that makes its matrix products deterministic."""
    return os.environ.get(CUBLAS_VARIABLE) in CUBLAS_VALUES
