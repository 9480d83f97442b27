"""A variant run's unit counts are the ones its metrics were scored from (scores at full precision), as a default
run's are: never recounted from the six-digit scores its cell shows."""
from sklearn.metrics import roc_auc_score

from atlaslib.cards.run import CardRun


def test_a_variants_unit_counts_read_its_scores_at_full_precision():
    """A negated item scored 0.1000004 ranks above an affirmed one at 0.1000001: ROC-AUC 0.75 (scikit-learn);
    the six-digit scores tie at 0.1 and give 0.625. The variant's metrics read the full scores, and so must the
    unit counts every comparison and slice of it reads."""
    from atlaslib.cards import negex
    from atlaslib.metrics import engine

    scores = [0.1000004, 0.9, 0.1000001, 0.2]
    gold = ["negated", "negated", "affirmed", "affirmed"]
    full = [{"item_id": f"i{k}", "gold": g, "pred": "negated" if s > 0.5 else "affirmed", "score": s}
            for k, (g, s) in enumerate(zip(gold, scores))]
    y = [g == "negated" for g in gold]
    assert roc_auc_score(y, scores) == 0.75 and roc_auc_score(y, [round(s, 6) for s in scores]) == 0.625
    run = CardRun("negex", "atlas-n100-v1", "m", "zero_shot", parameters={"n_resamples": 50})
    run.finish(metrics=run.score(full), predictions=negex.rounded(full))
    metrics = CardRun("negex", "atlas-n100-v1", "m", "zero_shot").score(full, n_resamples=50)
    v = run.variant({"key": "concept-lowercase", "kind": "perturbation"}, metrics=metrics,
                    predictions=negex.rounded(full), inputs_digest="x", n_items=4, scored=full)
    assert [p["score"] for p in v["predictions"]] == [0.1, 0.9, 0.1, 0.2]
    uc = engine.UnitCounts.from_cell(v["unit_counts"])
    assert engine.point(negex.SCORING, uc, "roc_auc") == v["metrics"]["roc_auc_zero_shot"]["value"] == 0.75
