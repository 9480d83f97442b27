"""Hand-built result cells for the analysis tests."""
from __future__ import annotations


def cell(card, model, preds, protocol="zero_shot", version="v1", status="ok", metrics=None, seeds=None):
    return {"card": card, "version": version, "model": model, "protocol": protocol, "status": status,
            "spec": {"model": model, "protocol": protocol}, "metrics": metrics or {},
            "seeds": seeds or {"bootstrap": 7}, "predictions": preds}


def negex_cell(model, gold, pred, score=None, **fields):
    recs = []
    for i, (g, p) in enumerate(zip(gold, pred)):
        r = {"item_id": f"i{i:02d}", "gold": g, "pred": p, "score": None if score is None else score[i]}
        for k, v in fields.items():
            r[k] = v[i]
        recs.append(r)
    return cell("negex", model, recs, protocol="probe" if score is not None else "zero_shot")
