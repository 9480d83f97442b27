"""The Clinical TempEval card's page content: the facts its page quotes (``{{fact:tempeval.*}}``), from the
THYME audit its data story stores and the official scorer's tables in this build's result cells (no corpus
load, no audit at render time). Registered through :data:`FACTS`."""
from __future__ import annotations

from ..facts import Fact, FactContext, missing
from .runs import BOOTSTRAP

#: Numbers this card's pages may type by hand, each with its source (tests/test_prose_numbers.py; all
#: cards' and the generic ones: :func:`atlaslib.pages.facts.constants`)
CONSTANTS = {
    str(BOOTSTRAP["seed"]): "the card's bootstrap seed (runs.BOOTSTRAP)",
    "440": "THYME colon-cancer annotation files pinned (stylerw/thymedata)",
    "293": "THYME Train documents (Bethard et al. 2015)",
    "147": "THYME Dev documents (Bethard et al. 2015)",
    "6": "SemEval-2015 Task 6 / six TIMEX3 classes",
    "0.875": "Bethard et al. 2015: BluLab EVENT span F1",
    "0.743": "Bethard et al. 2015: memorize TIMEX3 span P",
    "0.372": "Bethard et al. 2015: memorize TIMEX3 span R",
    "0.01": "Bethard et al. 2015: gap to annotator agreement (events, degree, polarity)",
    "0.03": "Bethard et al. 2015: gap to annotator agreement (modality, type)",
    "0.05": "Bethard et al. 2015: gap to annotator agreement (times, DocTimeRel)",
    "0.40": "Bethard et al. 2015: gap to annotator agreement (CONTAINS)",
    "6/7": "anaforatools' closure test case, expected precision",
    "4/9": "anaforatools' closure test case, expected recall",
    "1.2.0": "anaforatools version",
    "1.0": "an F1 of 1 by construction (gold spans given in phase 2)",
    "20": "the 20-character window of the TempEval gated-output test (tests/cards/test_tempeval_gated.py)",
}


def tempeval_audit_numbers(thyme: dict) -> dict:
    """The THYME audit numbers the card page quotes, flat, from :func:`tempeval.audit.thyme_audit`'s
    result; the notebook stores them in the cell (``extra["thyme_audit"]``) so the page never re-runs the
    audit (minutes) to quote them."""
    t1, dup, con = thyme["table1"], thyme["duplicates"], thyme["contains"]
    out = {}
    for split in ("Train", "Dev"):
        for what in ("documents", "EVENT", "TIMEX3", "CONTAINS"):
            out[f"{split}.scorer.{what}"] = int(t1.loc[(split, what), "official scorer"])
            out[f"{split}.file.{what}"] = int(t1.loc[(split, what), "elements in file"])
            out[f"{split}.annotations.{what}"] = int(t1.loc[(split, what), "elements in <annotations>"])
        out[f"{split}.event_exact_duplicates"] = int(dup.loc["EVENT_exact_duplicates", split])
        out[f"{split}.contains_duplicate_pairs"] = int(dup.loc["CONTAINS_duplicate_pairs", split])
        out[f"{split}.contains_added_by_closure"] = int(con.loc["CONTAINS_added_by_closure", split])
        out[f"{split}.event_outside_annotations"] = out[f"{split}.file.EVENT"] - out[f"{split}.annotations.EVENT"]
        # Table 1's EVENT items are (span, every attribute); a span annotated with two attribute sets is two of
        # them but one item of the span-only score, whose reference holds the distinct spans
        out[f"{split}.event_spans_with_two_attribute_sets"] = int(dup.loc["EVENT_spans_with_two_attribute_sets",
                                                                          split])
        out[f"{split}.scorer.EVENT_spans"] = (out[f"{split}.scorer.EVENT"]
                                              - out[f"{split}.event_spans_with_two_attribute_sets"])
    return out


def _tempeval(ctx: FactContext) -> dict[str, Fact]:
    f: dict[str, Fact] = {}
    audit = next((c["extra"]["thyme_audit"] for c in ctx.ok_cells("tempeval")
                  if (c.get("extra") or {}).get("thyme_audit")), None)
    asrc = "THYME audit stored by the TempEval notebook (extra.thyme_audit, tempeval.audit.thyme_audit)"
    keys = [f"{s}.{k}" for s in ("Train", "Dev") for k in (
        *(f"{w}.{x}" for w in ("scorer", "file", "annotations") for x in ("documents", "EVENT", "TIMEX3", "CONTAINS")),
        "event_exact_duplicates", "contains_duplicate_pairs", "contains_added_by_closure", "event_outside_annotations",
        "event_spans_with_two_attribute_sets", "scorer.EVENT_spans")]
    for k in keys:   # the audit's numbers and its reproduction rows are stored together (the notebook's story)
        f[f"tempeval.{k}"] = Fact(audit[k], "count", asrc) if k in (audit or {}) else missing("audited TempEval run")
    rsrc = "TempEval result cells (extra.scorer_table, official scorer)"
    cell = ctx.cell("tempeval", "thyme-dev-2015", "closest", "phase2")
    rows = {r.get("row"): r for r in (((cell or {}).get("extra") or {}).get("scorer_table") or {}).get("rows", [])}
    for k, kind, row, col in (("contains_correct", "count", "contains", "correct"),
                              ("contains_reference", "count", "contains", "reference"),
                              ("contains_predicted", "count", "contains", "predicted"),
                              ("contains_precision", "rate", "contains", "precision"),
                              ("contains_recall", "rate", "contains", "recall"),
                              ("contains_f1", "rate", "contains", "f1"),
                              ("closure_precision", "rate", "contains_closure", "precision"),
                              ("closure_f1", "rate", "contains_closure", "f1")):
        r = rows.get(row) or {}
        f[f"tempeval.closest.{k}"] = (Fact(r[col], kind, rsrc) if col in r
                                      else missing("closest phase-2 run on thyme-dev-2015"))
    syn = next((c for c in ctx.ok_cells("tempeval", "synthetic-v1")), None)
    ssrc = "synthetic-v1 result cells (extra.n_train_documents / n_test_documents)"
    if syn is None:
        for k in ("train_documents", "test_documents", "documents"):
            f[f"tempeval.synthetic.{k}"] = missing("synthetic-v1 run")
    else:
        ntr, nte = syn["extra"]["n_train_documents"], syn["extra"]["n_test_documents"]
        f["tempeval.synthetic.train_documents"] = Fact(ntr, "count", ssrc)
        f["tempeval.synthetic.test_documents"] = Fact(nte, "count", ssrc)
        f["tempeval.synthetic.documents"] = Fact(ntr + nte, "count", ssrc)
    maj = ctx.cell("tempeval", "thyme-dev-2015", "majority-doctimerel", "phase2")
    mv = (maj["metrics"].get("doctimerel_accuracy_phase2") or {}).get("value") if maj else None
    f["tempeval.majority_doctimerel_accuracy"] = (Fact(mv, "rate", rsrc) if mv is not None
                                                  else missing("majority-doctimerel run on thyme-dev-2015"))
    return f


#: fact namespace -> provider (:func:`atlaslib.pages.facts.register_provider`)
FACTS = {"tempeval": _tempeval}
