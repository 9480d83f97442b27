"""The report of imported runs: the book's statistics on a :class:`~atlaslib.harness.pairing.Pairing`.

:func:`build` returns a plain dict (written as ``report.json``) with

- ``runs``: each run's harness, version, model, task, settings and files;
- ``prompt_drift``: the documents whose prompt hash differs between runs (stated before any test);
- ``leaderboard``: per run and metric the value and its interval under the declared unit
  (:func:`atlaslib.metrics.engine.evaluate`), the exact Clopper–Pearson interval beside it for a proportion;
- ``comparisons``: per metric and pair the paired difference and interval, the paired-bootstrap p-value, exact
  McNemar (b, c, p) on binary metrics, Holm over each metric's pairs
  (:func:`atlaslib.metrics.compare.compare_paired`);
- ``ranks``: on the primary metric, each run's rank interval, P(rank 1) and whether it is distinguishable from
  the best (the tie group "top");
- ``detectable_difference``: the minimum detectable difference of the primary metric;
- ``calibration``: where the logs hold option log-likelihoods (lm-eval multiple-choice ``resps``), the top option's
  softmax probability against whether it is the gold option: Brier score and ECE
  (:mod:`atlaslib.analysis.calibration`);
- ``items``: per document each run's metric values.

:func:`write` puts the report in a folder as ``report.json``, ``report.md`` and CSV files.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..metrics import bootstrap, engine
from ..metrics.compare import compare_paired
from .pairing import PROTOCOL, Pairing, paired_data

FILES = ("report.json", "report.md", "leaderboard.csv", "comparisons.csv", "ranks.csv", "items.csv")


def _clean(x):
    if isinstance(x, (np.floating, float)):
        return None if not math.isfinite(float(x)) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def _records(df: pd.DataFrame) -> list:
    return [_clean(r) for r in df.to_dict(orient="records")] if not df.empty else []


def calibration(p: Pairing) -> list:
    """Top-option calibration of each run whose documents all hold option log-likelihoods and a gold index."""
    from ..analysis.calibration import brier, ece

    out = []
    for lab, docs in p.docs.items():
        if not docs or any(d.options is None or d.gold is None for d in docs):
            continue
        s, y = [], []
        for d in docs:
            ll = np.asarray(d.options, dtype=float)
            prob = np.exp(ll - ll.max())
            prob /= prob.sum()
            top = int(np.argmax(ll))
            s.append(float(prob[top]))
            y.append(1.0 if top == d.gold else 0.0)
        out.append({"run": lab, "n": len(s), "brier": float(brier(y, s)), "ece": float(ece(y, s)),
                    "mean_confidence": float(np.mean(s)), "accuracy": float(np.mean(y))})
    return out


def build(p: Pairing, seed: int = bootstrap.DEFAULT_SEED, n_resamples: int = bootstrap.DEFAULT_RESAMPLES) -> dict:
    """The report of the pairing (see the module docstring)."""
    data = paired_data(p, seed, n_resamples)
    board = []
    for lab in data.labels:
        uc = data.counts[lab]
        cell = engine.evaluate(data.scoring, uc, PROTOCOL, seed=seed, n_resamples=n_resamples)
        for m in data.scoring.metrics:
            v = cell[f"{m.name}_{PROTOCOL}"]
            row = {"run": lab, "metric": m.name, "value": v.get("value"), "ci_low": v.get("ci_low"),
                   "ci_high": v.get("ci_high"), "interval": f"bootstrap over {p.unit}s, {n_resamples} resamples",
                   "n_units": uc.n}
            ex = engine.exact_interval(m, uc.total())
            if ex is not None:
                row["exact_low"], row["exact_high"] = ex
            board.append(row)
    comp = compare_paired(data)
    items = []
    for k, u in enumerate(p.units):
        first = next(iter(p.docs.values()))[k]
        row = {"unit": u, "doc_id": first.doc_id}
        for lab, docs in p.docs.items():
            for m in p.metrics:
                row[f"{lab} | {m}"] = docs[k].metrics[m]
        items.append(row)
    return _clean({
        "task": p.task, "unit": p.unit, "n_units": len(p.units), "primary": p.metrics[0], "seed": seed,
        "n_resamples": n_resamples, "metrics": [{"name": m, "binary": p.binary[m],
                                                 "higher_is_better": p.higher_is_better[m]} for m in p.metrics],
        "runs": [r.summary() for r in p.runs.values()], "notes": list(p.notes),
        "prompt_drift": p.prompt_drift, "leaderboard": board, "comparisons": _records(comp.pairs),
        "ranks": _records(comp.ranks), "detectable_difference": comp.mdd, "calibration": calibration(p),
        "items": items})


def _fmt(x, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def drift_line(report: dict) -> str | None:
    """The sentence that names prompt drift, or None."""
    d = report["prompt_drift"]
    if not d:
        return None
    shown = ", ".join(str(x["document"]) for x in d[:10]) + (" …" if len(d) > 10 else "")
    return (f"prompt differs between runs on {len(d)} of {report['n_units']} documents (doc {shown}): the runs did "
            "not see the same prompts there; read the comparisons with that in mind")


def markdown(report: dict, title: bool = True) -> str:
    """The report as MyST Markdown (the same numbers as report.json; every name from the logs written as text,
    :func:`atlaslib.escape.md`)."""
    from ..escape import md

    lines = [f"# Imported evaluations: {md(report['task'])}", ""] if title else []
    drift = drift_line(report)
    if drift:
        lines += [f"**Prompt drift:** {md(drift)}.", ""]
    for n in report["notes"]:
        lines += [f"Note: {md(n)}.", ""]
    lines += ["## Runs", "", "| run | harness | version | model | documents |", "|---|---|---|---|---|"]
    for r in report["runs"]:
        lines.append(f"| {md(r['label'])} | {r['harness']} | {md(r['harness_version'])} | {md(r['model'])} | "
                     f"{r['n_documents']} |")
    lines += ["", f"## Leaderboard (unit: {md(report['unit'])}; {report['n_units']} units)", "",
              "| run | metric | value | 95 % interval |", "|---|---|---|---|"]
    for r in report["leaderboard"]:
        lines.append(f"| {md(r['run'])} | {md(r['metric'])} | {_fmt(r['value'])} | [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}] |")
    if report["ranks"]:
        lines += ["", f"## Ranks on {md(report['primary'])}", "",
                  "| run | value | rank | rank interval | P(rank 1) | not distinguishable from the best |",
                  "|---|---|---|---|---|---|"]
        for r in report["ranks"]:
            lines.append(f"| {md(r['model'])} | {_fmt(r['value'])} | {r['rank']} | {r['rank_low']}–{r['rank_high']} | "
                         f"{_fmt(r['p_rank1'], 2)} | {'yes' if r['tie_group'] == 'top' else 'no'} |")
    if report["comparisons"]:
        lines += ["", "## Paired comparisons", "",
                  "| metric | A | B | A − B | 95 % interval | test | p | p (Holm) |", "|---|---|---|---|---|---|---|---|"]
        for r in report["comparisons"]:
            lines.append(f"| {md(r['metric'])} | {md(r['model_a'])} | {md(r['model_b'])} | {_fmt(r['difference'])} | "
                         f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}] | {r['test']} | {_fmt(r['p'], 4)} | "
                         f"{_fmt(r['p_holm'], 4)} |")
    mdd = report["detectable_difference"]
    if mdd.get("mdd_bootstrap") is not None:
        lines += ["", f"Minimum detectable difference of {md(mdd['metric'])} (80 % power, 5 % two-sided): "
                      f"{_fmt(mdd['mdd_bootstrap'])} (paired bootstrap)"
                      + (f", {_fmt(mdd['mdd_mcnemar'])} (McNemar)" if mdd.get("mdd_mcnemar") is not None else "")]
    if report["calibration"]:
        lines += ["", "## Calibration (top option)", "", "| run | n | Brier | ECE |", "|---|---|---|---|"]
        for r in report["calibration"]:
            lines.append(f"| {md(r['run'])} | {r['n']} | {_fmt(r['brier'])} | {_fmt(r['ece'])} |")
    return "\n".join(lines) + "\n"


def write(report: dict, out) -> list[str]:
    """``report`` in the folder ``out`` (created): :data:`FILES`. Each file written whole (temporary name,
    then renamed), so an interrupted write leaves no half file."""
    import os
    import tempfile

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    texts = {
        "report.json": json.dumps(report, indent=1, ensure_ascii=False) + "\n",
        "report.md": markdown(report),
        "leaderboard.csv": pd.DataFrame(report["leaderboard"]).to_csv(index=False),
        "comparisons.csv": pd.DataFrame(report["comparisons"]).to_csv(index=False),
        "ranks.csv": pd.DataFrame(report["ranks"]).to_csv(index=False),
        "items.csv": pd.DataFrame(report["items"]).to_csv(index=False),
    }
    written = []
    for name, text in texts.items():
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=out)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, out / name)
        written.append(str(out / name))
    return written
