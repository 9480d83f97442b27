"""The NLI negation card's page content: the facts its page quotes (``{{fact:nli.*}}``, from the built-in
corpus (ms) and this build's result cells; ``{{fact:nli_openmed.*}}``, the card held against openmed).
Registered through :data:`FACTS`."""
from __future__ import annotations

import pandas as pd

from ...escape import md, md_code
from ...metrics import intervals
from ..facts import Fact, FactContext, join_and, missing

#: the parts of the metrics chapter this card's runs can show (:func:`atlaslib.pages.comparisons.fill_metrics_chapter`)
METRICS_CHAPTER = ("worked_example",)

#: Numbers this card's pages may type by hand, each with its source (tests/test_prose_numbers.py; all
#: cards' and the generic ones: :func:`atlaslib.pages.facts.constants`)
CONSTANTS = {
    "0.5": "the NLI accuracy floor default (atlaslib.cards.nli_negation.challenge)",
}


def _nli(ctx: FactContext) -> dict[str, Fact]:
    from .corpus import LABELS, PATTERNS, default_nli_negation_cases

    cases = default_nli_negation_cases()
    src = "atlaslib.cards.nli_negation.corpus (builtin-v1)"
    f = {"nli.cases": Fact(len(cases), "count", src)}
    non_ent = [c for c in cases if c.gold_label != "entailment"]
    f["nli.non_entailment_cases"] = Fact(len(non_ent), "count", src)
    for p in PATTERNS:
        pc = [c for c in cases if c.pattern == p]
        f[f"nli.{p}.cases"] = Fact(len(pc), "count", src)
        f[f"nli.{p}.non_entailment"] = Fact(sum(c.gold_label != "entailment" for c in pc), "count", src)
        for lab in LABELS:
            f[f"nli.{p}.{lab}"] = Fact(sum(c.gold_label == lab for c in pc), "count", src)
    counts = {lab: sum(c.gold_label == lab for c in cases) for lab in LABELS}
    top = max(counts, key=counts.get)
    f["nli.most_common_label_cases"] = Fact(counts[top], "count", src)
    f["nli.most_common_label_share"] = Fact(counts[top] / len(cases), "rate", src)
    f["nli.most_common_label_percent"] = Fact(counts[top] / len(cases), "percent", src)
    f["nli.non_entailment_by_pattern"] = Fact(
        join_and([f"{sum(c.pattern == p and c.gold_label != 'entailment' for c in cases):,} ({p})"
                  for p in PATTERNS]), "text", src)
    sizes = [sum(c.pattern == p for c in cases) for p in PATTERNS]
    f["nli.pattern_cases_min"], f["nli.pattern_cases_max"] = Fact(min(sizes)), Fact(max(sizes))
    # the widest per-pattern false-entailment interval among this build's runs
    widest = None
    from .counting import report_of_cell

    for c in ctx.ok_cells("nli_negation", "builtin-v1"):
        for p in report_of_cell(c)["patterns"]:   # the cell's unit counts through the engine
            r = p.get("false_entailment_rate") or {}
            if r.get("ci_low") is None or r.get("ci_high") is None:
                continue
            w = r["ci_high"] - r["ci_low"]
            if widest is None or w > widest[0]:
                widest = (w, c["model"], p.get("pattern"), r)
    if widest is None:
        for k in ("widest_interval", "widest_interval_run", "widest_interval_pattern", "widest_interval_counts"):
            f[f"nli.{k}"] = missing("NLI negation run")
    else:
        w, model, pattern, r = widest
        rsrc = "NLI negation result cells (unit counts per pattern)"
        f["nli.widest_interval"] = Fact((r["ci_low"], r["ci_high"]), "interval", rsrc)
        f["nli.widest_interval_run"] = Fact(md_code(model), "text", rsrc)  # a user's name, maybe: text
        f["nli.widest_interval_pattern"] = Fact(f"`{pattern}`", "text", rsrc)
        f["nli.widest_interval_counts"] = Fact(f"{r.get('successes'):,} of {r.get('trials'):,}", "text", rsrc)
    return f


def _nli_openmed(ctx: FactContext) -> dict[str, Fact]:
    """The NLI card held against openmed, both ways (:func:`atlaslib.cards.nli_negation.anchor.page_facts`:
    the agreement is computed while the book builds)."""
    from .anchor import page_facts

    return {k: Fact(*v) for k, v in page_facts().items()}


def leaderboard_notes(rows: list[dict]) -> str:
    """Under the card's leaderboard, per pattern: the cases (accuracy's denominator), the non-entailing cases (the
    false-entailment rate's denominator) and the premise templates (the clusters), from the first ok run's records."""
    ok = [c for c in rows if c["status"] == "ok" and c.get("predictions")]
    if not ok or "pattern" not in ok[0]["predictions"][0]:
        return ""
    frame = pd.DataFrame(ok[0]["predictions"])
    frame["non_entailing"] = frame["gold"] != "entailment"
    has_t = "template" in frame
    g = frame.groupby("pattern", sort=False)
    table = pd.DataFrame({"cases": g.size(), "non-entailing cases": g["non_entailing"].sum()})
    if has_t:
        table["templates"] = g["template"].nunique()
    lines = ["| pattern | " + " | ".join(table.columns) + " |", "|---|" + "---:|" * len(table.columns)]
    for pat, r in table.iterrows():
        lines.append(f"| {md(pat)} | " + " | ".join(f"{int(v):,}" for v in r) + " |")
    total = [len(frame), int(frame["non_entailing"].sum())] + ([frame["template"].nunique()] if has_t else [])
    lines.append("| all | " + " | ".join(f"{v:,}" for v in total) + " |")
    n_ne = int(frame["non_entailing"].sum())
    bound = intervals.clopper_pearson_upper(0, n_ne) if n_ne else float("nan")
    certify = (f"\n**What a clean run certifies.** Zero false entailments among the {n_ne:,} non-entailing cases "
               f"certify only a false-entailment rate below {bound:.3f} (exact one-sided 95 % upper bound); "
               "`run_nli_negation_challenge(..., certify=True)` passes the safety gate only when a run's bound is "
               "under the ceiling.\n")
    return ("**Denominators per pattern.** Accuracy is over the cases, the false-entailment rate over the "
            "non-entailing cases; the template-cluster intervals resample the premise templates.\n\n"
            + "\n".join(lines) + "\n" + certify)


#: fact namespace -> provider (:func:`atlaslib.pages.facts.register_provider`)
FACTS = {"nli": _nli, "nli_openmed": _nli_openmed}
