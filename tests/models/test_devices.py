"""``device: auto``: where a Hugging Face model computes, asked for by ``--device``, ``ATLAS_DEVICE`` or a
profile's option, checked against the machine, with rows per pass declared per device."""
from __future__ import annotations

import pytest

from atlaslib.cards import deciding
from atlaslib.cards.negex.card import CARD as NEGEX
from atlaslib.models import devices, load_adapter
from tests import tiny_models as tm


@pytest.fixture(autouse=True)
def _no_request(monkeypatch):
    monkeypatch.delenv(devices.VARIABLE, raising=False)


def test_auto_picks_the_cpu_on_a_machine_without_cuda(tmp_path):
    import torch

    assert not torch.cuda.is_available()  # this suite's machines (and CI) have no GPU
    adapter = load_adapter(str(tm.tiny_encoder(tmp_path)), "embed.text.pooled", progress=False)
    assert adapter.device == "cpu" and adapter.info["device"] == "cpu"
    assert adapter.batch_size == 8  # the CPU keeps the adapter's own rows per pass
    assert devices.place({}, "m") == {"device": "cpu"}


def test_cuda_rows_per_pass_unless_the_profile_sets_them(monkeypatch):
    monkeypatch.setattr(devices, "cuda_count", lambda: 1)
    assert devices.place({}, "m") == {"device": "cuda", "batch_size": devices.ROWS_PER_PASS["cuda"]}
    assert devices.place({"batch_size": 4}, "m") == {"device": "cuda", "batch_size": 4}
    assert devices.place({"device": "cpu"}, "m") == {"device": "cpu"}  # the profile's own choice
    monkeypatch.setenv(devices.VARIABLE, "cpu")  # the flag / variable overrides the profile
    assert devices.place({"device": "cuda"}, "m") == {"device": "cpu"}
    monkeypatch.setenv(devices.VARIABLE, "cuda:1")
    with pytest.raises(devices.DeviceUnavailable, match=r"ATLAS_DEVICE asks for 'cuda:1'.*it sees 1 CUDA device"):
        devices.place({}, "m")


@pytest.mark.parametrize("how", ["variable", "profile"])
def test_a_cuda_request_without_cuda_is_a_one_line_not_run_reason(monkeypatch, how):
    if how == "variable":
        monkeypatch.setenv(devices.VARIABLE, "cuda")
        who = "ATLAS_DEVICE"
    else:
        import dataclasses

        import atlaslib.models as M

        real = M.get_profile
        asked = dataclasses.replace(real("all-minilm-l6-v2"), options={**real("all-minilm-l6-v2").options,
                                                                          "device": "cuda"})
        monkeypatch.setattr(M, "get_profile", lambda name, *a, **k: asked if name == asked.name else real(name, *a, **k))
        who = "profile 'all-minilm-l6-v2' option 'device'"
    decision = deciding.decide(NEGEX, "atlas-n100-v1", "all-minilm-l6-v2", "probe")
    assert decision["run"] is False
    assert decision["reason"] == (f"device unavailable: {who} asks for 'cuda', but torch on this machine cannot "
                                  f"use it (it sees no CUDA device); ask for 'auto' or 'cpu'")
    assert "\n" not in decision["reason"]


def test_an_explicit_device_is_in_the_decision_and_auto_is_not(monkeypatch):
    assert "device" not in deciding.decide(NEGEX, "atlas-n100-v1", "all-minilm-l6-v2", "probe")
    monkeypatch.setenv(devices.VARIABLE, "cpu")
    assert deciding.decide(NEGEX, "atlas-n100-v1", "all-minilm-l6-v2", "probe")["device"] == "cpu"
    # rules compute on no torch device: nothing to ask of the machine
    monkeypatch.setenv(devices.VARIABLE, "cuda")
    assert deciding.decide(NEGEX, "atlas-n100-v1", "medspacy-context", "zero_shot")["run"] is True


@pytest.mark.parametrize("value, message", [
    ("cuda", "atlas run: device unavailable: --device asks for 'cuda', but torch on this machine cannot use it"),
    ("gpu", "atlas run: --device: device 'gpu' is not one of auto, cpu, cuda or cuda:N"),
])
def test_the_device_flag_is_checked_before_anything_runs(capsys, tmp_path, value, message):
    from atlaslib import cli

    code = cli.main(["run", "--card", "negex", "--model", "all-minilm-l6-v2", "--protocol", "probe", "--version",
                     "atlas-n100-v1", "--results-dir", str(tmp_path / "r"), "--runs-dir", str(tmp_path / "n"),
                     "--device", value])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(message) and err.count("\n") == 1
    assert not (tmp_path / "r").exists()


def test_a_fine_tune_trains_from_a_cpu_copy_of_the_encoder(tmp_path):
    from atlaslib.protocols.finetune import _cpu_copy

    adapter = load_adapter(str(tm.tiny_encoder(tmp_path)), "embed.text.pooled", progress=False)
    copy = _cpu_copy(adapter.model)
    assert copy is not adapter.model and {p.device.type for p in copy.parameters()} == {"cpu"}
