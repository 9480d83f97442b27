"""The tiny model builders other tests rely on: complete checkpoints, byte-identical across builds."""
from __future__ import annotations

import json

import pytest

from atlaslib.models import get_profile
from atlaslib.sources import sha256_file
from tests import tiny_models as tm


@pytest.mark.parametrize("builder,arch,labels", [
    (tm.tiny_encoder, "BertModel", None),
    (tm.tiny_assertion_classifier, "BertForSequenceClassification", tm.ASSERTION_LABELS),
    (tm.tiny_nli_classifier, "BertForSequenceClassification", tm.NLI_LABELS),
    (tm.tiny_token_classifier, "BertForTokenClassification", tm.I2B2_LABELS),
    (tm.tiny_causal_lm, "GPT2LMHeadModel", None),
])
def test_builders_write_identical_complete_checkpoints(tmp_path, builder, arch, labels):
    a, b = builder(tmp_path / "a"), builder(tmp_path / "b")
    cfg = json.loads((a / "config.json").read_text())
    assert cfg["architectures"] == [arch]
    if labels:
        assert [cfg["id2label"][str(i)] for i in range(len(labels))] == list(labels)
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert sha256_file(a / name) == sha256_file(b / name), name
    assert get_profile(str(a)).revision == get_profile(str(b)).revision


def test_label_sets():
    assert tm.I2B2_LABELS[0] == "O" and len(tm.I2B2_LABELS) == 7
    assert {"B-Sign_symptom", "B-Disease_disorder", "B-Medication", "B-Therapeutic_procedure",
            "B-Diagnostic_procedure", "B-Lab_value"} <= set(tm.MACCROBAT_LABELS)
    assert all(x == "O" or x[:2] in ("B-", "I-") for x in tm.MACCROBAT_LABELS)
