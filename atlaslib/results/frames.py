"""Result cells as pandas tables: a (card, version)'s leaderboard frame and a cell's metrics for reading."""
from __future__ import annotations

import pandas as pd


def leaderboard(cells: list[dict], card: str, version: str, metrics: list[str]) -> pd.DataFrame:
    """One row per (model, protocol) of one card and one split version; per metric three columns
    (value, ci_low, ci_high) plus a status/reason column. Versions are never mixed."""
    rows = []
    for c in cells:
        if c["card"] != card or c["version"] != version:
            continue
        row = {"model": c["model"], "protocol": c["protocol"], "status": c["status"],
               "reason": c.get("reason"), "overlap": ", ".join(c.get("overlap") or []),
               "path": c.get("_path")}
        for m in metrics:
            e = c["metrics"].get(m)
            if e is None:
                row[m], row[f"{m}_low"], row[f"{m}_high"], row[f"{m}_reason"] = None, None, None, "not applicable"
            else:
                row[m], row[f"{m}_low"], row[f"{m}_high"] = e.get("value"), e.get("ci_low"), e.get("ci_high")
                row[f"{m}_reason"] = e.get("reason")
        rows.append(row)
    return pd.DataFrame(rows)


def metrics_frame(metrics: dict, digits: int = 3) -> pd.DataFrame:
    """A cell's metrics as a table for reading: value and 95 % interval rounded, the reason where a metric
    has no value."""
    rows = []
    for name, e in metrics.items():
        if e.get("value") is None:
            rows.append({"metric": name, "value": "n/a", "95 % CI": "", "note": e.get("reason") or ""})
        else:
            ci = "" if e.get("ci_low") is None else f"[{e['ci_low']:.{digits}f}, {e['ci_high']:.{digits}f}]"
            rows.append({"metric": name, "value": f"{e['value']:.{digits}f}", "95 % CI": ci, "note": ""})
    return pd.DataFrame(rows).set_index("metric")
