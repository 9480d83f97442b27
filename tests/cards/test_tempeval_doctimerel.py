"""What the card's phase-2 ``doctimerel_accuracy`` is: the official scorer's F1 of the ``EVENT:DocTimeRel`` view
(2PR / (P + R) over its item sets, :func:`atlaslib.cards.tempeval.scoring.f1_from_counts`), which equals an accuracy
over the gold events only where the prediction holds as many DocTimeRel items as the reference. THYME Dev's
ID165_clinic_485 has one span with two gold DocTimeRels (AFTER and BEFORE): a system that gives each given EVENT one
value (every phase-2 baseline) predicts one item fewer there, and F1 and accuracy differ. Hand-computed from the
scorer's counts on that one document."""
from __future__ import annotations

import shutil
from fractions import Fraction

import numpy as np

from atlaslib.cards.tempeval import baselines, thyme_dir
from atlaslib.cards.tempeval.anafora_io import read_corpus, write_corpus
from atlaslib.cards.tempeval.counting import SCORING
from atlaslib.cards.tempeval.scoring import f1_from_counts, score_directories


def test_phase2_doctimerel_accuracy_is_the_scorers_f1_not_correct_over_gold(tmp_path, data_dir):
    dev = thyme_dir("Dev", data_dir) / "ID165_clinic_485"
    ref = tmp_path / "ref"
    shutil.copytree(dev, ref / dev.name)
    [gold] = read_corpus(ref)
    spans = [e.properties["DocTimeRel"] for e in gold.of_type("EVENT") if e.spans == ((1426, 1439),)]
    assert sorted(spans) == ["AFTER", "BEFORE"]
    write_corpus([baselines.with_doctimerel(baselines.phase2_input(gold), lambda e: "OVERLAP")], tmp_path / "pred")
    row = next(r for r in score_directories(ref, tmp_path / "pred")["rows"] if r["row"] == "doctimerel")
    assert row["predicted"] == row["reference"] - 1
    p, r = Fraction(row["correct"], row["predicted"]), Fraction(row["correct"], row["reference"])
    f1 = 2 * p * r / (p + r)
    assert abs(row["f1"] - float(f1)) < 1e-15
    # the card's metric is this F1, made from the scorer's four counts
    metric = next(m for m in SCORING.metrics if m.name == "doctimerel_accuracy")
    got = metric.formula({"doctimerel_accuracy:" + k: np.array([v]) for k, v in
                     (("reference", row["reference"]), ("predicted", row["predicted"]),
                      ("precision_correct", row["correct"]), ("recall_correct", row["correct"]))})
    assert abs(float(got[0]) - float(f1)) < 1e-15
    assert f1 != r   # not correct gold events / gold events
    assert float(f1_from_counts(row["reference"], row["predicted"], row["correct"], row["correct"])[2]) == row["f1"]
