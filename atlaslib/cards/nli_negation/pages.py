"""The NLI negation card's page content: the facts its page quotes (``{{fact:nli.*}}``, from the built-in
corpus (ms) and this build's result cells; ``{{fact:nli_openmed.*}}``, the card held against openmed).
Registered through :data:`FACTS`."""
from __future__ import annotations

from ...escape import md_code
from ...pages.facts import Fact, FactContext, join_and, missing

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
    for c in ctx.ok_cells("nli_negation", "builtin-v1"):
        for p in (c.get("extra", {}).get("report") or {}).get("patterns", []):
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
        rsrc = "NLI negation result cells (extra.report)"
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


#: fact namespace -> provider (:func:`atlaslib.pages.facts.register_provider`)
FACTS = {"nli": _nli, "nli_openmed": _nli_openmed}
