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
    import os

    monkeypatch.delenv(devices.VARIABLE, raising=False)
    # placing on a (pretended) CUDA device sets cuBLAS's setting for the process: put back what was there
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", os.environ.get("CUBLAS_WORKSPACE_CONFIG", ""))
    if not os.environ["CUBLAS_WORKSPACE_CONFIG"]:
        monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG")


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


def test_a_fine_tune_trains_and_predicts_where_its_encoder_is_and_its_weight_key_holds_the_device(tmp_path,
                                                                                                   monkeypatch):
    """The fine-tune trains on the device its encoder was placed on (here the CPU: auto), records it, and its
    weight cache key names the device type; the same fields on CUDA give another key (weights trained on one device
    are never served for another)."""
    import torch

    from atlaslib.protocols import finetune as ft
    from atlaslib.protocols import finetune_cache as ft_cache
    from tests.protocols.test_finetune import RECIPE, toy_items

    monkeypatch.setenv(ft_cache.CACHE_ENV, str(tmp_path / "ftcache"))
    monkeypatch.setenv("ATLAS_PROGRESS", "off")
    adapter = load_adapter(str(tm.tiny_encoder(tmp_path)), "embed.text.pooled", embed_cache=False, progress=False)
    ids, texts, labels = toy_items(16)
    out = ft.finetune_sequence(adapter, ids, texts, labels, texts[:4], ("affirmed", "negated"), RECIPE)
    assert ft.device_of(adapter) == "cpu" and out["details"]["device"] == "cpu"
    assert {p.device.type for p in out["model"].parameters()} == {"cpu"}
    assert out["model"].encoder is not adapter.model   # a copy: the adapter's own encoder is never trained
    key = out["details"]["weight_cache"]["key"]
    fields = ft_cache.key_fields(adapter, "sequence", ft.seed_recipe(RECIPE, 7), ["affirmed", "negated"], ids,
                                 texts, [["affirmed", "negated"].index(y) for y in labels],
                                 None)
    assert fields["device"] == "cpu" and ft_cache.WeightCache(fields).key == key
    on_cuda = ft_cache.key_fields(adapter, "sequence", ft.seed_recipe(RECIPE, 7), ["affirmed", "negated"], ids,
                                  texts, [["affirmed", "negated"].index(y) for y in labels], None, "cuda:1")
    assert on_cuda["device"] == "cuda" and ft_cache.WeightCache(on_cuda).key != key
    assert not torch.are_deterministic_algorithms_enabled()   # the training's deterministic mode is restored


def test_cuda_training_needs_cublas_determinism_and_placing_on_cuda_sets_it(monkeypatch):
    """On CUDA, deterministic training needs cuBLAS's workspace setting before CUDA starts: placing a model on CUDA
    sets it (a user's own value is kept); a fine-tune on CUDA without it is one error saying so, before anything
    is trained (checked here without a GPU: the check comes before any CUDA call)."""
    from atlaslib.protocols.finetune_training import FinetuneError, deterministic

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    with pytest.raises(FinetuneError, match=r"CUBLAS_WORKSPACE_CONFIG=:4096:8 set before CUDA starts") as err:
        with deterministic(1, "cuda"):
            pytest.fail("entered without the cuBLAS setting")
    assert "\n" not in str(err.value)
    monkeypatch.setattr(devices, "cuda_count", lambda: 1)
    assert devices.place({}, "m")["device"] == "cuda"
    import os

    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    with deterministic(1, "cuda"):   # now allowed (nothing here touches CUDA)
        pass
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    devices.place({}, "m")
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    with deterministic(1, "cpu"):   # the CPU needs no setting
        pass
