"""The NegEx card's page content: the facts its page, the intro and the methods chapters quote
(``{{fact:negex.*}}`` from the kit and the split, ``{{fact:negex_runs.*}}`` from this build's result cells,
``{{fact:splits.*}}``: the splits chapter's worked example, drawn with this card's seed), and the tables of
errors by sentence length and of missed negations that the notebook shows.

Registered with :mod:`atlaslib.pages.facts` through :data:`FACTS` (see :func:`atlaslib.cards.card_pages`).
Cost: the kit is read once per build (0.2 s).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..facts import Fact, FactContext, join_and, missing
from .card import SEED

#: the parts of the metrics chapter this card's runs can show (:func:`atlaslib.pages.comparisons.fill_metrics_chapter`)
METRICS_CHAPTER = ("worked_example", "width")

#: Numbers this card's pages may type by hand, each with its source (tests/test_prose_numbers.py; all
#: cards' and the generic ones: :func:`atlaslib.pages.facts.constants`)
CONSTANTS = {
    str(SEED): "the card's split seed (SEED)",
    "300": "the sentence-length threshold of the NegEx audit (characters)",
    "1,442": "test items of the card's first draw of atlas-full-v1 (another ranking key), for comparison",
    "316": "negated test items of that first draw",
    "1,126": "affirmed test items of that first draw",
    "423": "excluded items of that first draw",
    "120": "reports in the NegEx kit (its file name: Annotations-1-120-random.txt)",
    "1.2": "GenNegEx version 1.2 (chapmanbe/negex)",
    "471": "GenNegEx 1.2 published TP (chapmanbe/negex TestSet.md)",
    "1,851": "GenNegEx 1.2 published TN (chapmanbe/negex TestSet.md)",
    "34": "GenNegEx 1.2 published FP (chapmanbe/negex TestSet.md)",
    "20": "GenNegEx 1.2 published FN (chapmanbe/negex TestSet.md)",
    "0.959": "GenNegEx 1.2 published sensitivity (chapmanbe/negex TestSet.md)",
    "0.982": "GenNegEx 1.2 published specificity (chapmanbe/negex TestSet.md)",
    "0.933": "GenNegEx 1.2 published PPV (chapmanbe/negex TestSet.md)",
    "232": "medspaCy GitHub issue number (#232)",
}


#: Sentence-length bands (characters) for the error rates by length.
LENGTH_BANDS = ((0, 100), (101, 300), (301, None))


def _negex_frames(ctx: FactContext):
    if "_negex" not in ctx._cache:
        from .. import negex

        rows = negex.load_rows(ctx.data_dir)
        items = negex.items_from_rows(rows)
        ctx._cache["_negex"] = (rows, items)
    return ctx._cache["_negex"]


def negex_split_facts(items: pd.DataFrame) -> dict:
    """Split balances of both NegEx versions and the subset check, from :func:`negex.split`."""
    from .. import negex

    n100, full = negex.split(items, "atlas-n100-v1"), negex.split(items, "atlas-full-v1")
    label = items.set_index("item_id")["label"]

    def side(ids):
        y = label.loc[list(ids)]
        return {"n": len(y), "negated": int(y.sum()), "affirmed": int(len(y) - y.sum()),
                "negated_share": float(y.mean()), "affirmed_share": float(1 - y.mean())}

    return {"pool": side(items["item_id"]), "n100_test": side(n100.test), "n100_train": side(n100.train),
            "full_test": side(full.test), "full_train": side(full.train), "full_excluded": len(full.excluded),
            "n100_excluded": len(n100.excluded),
            "n100_test_in_full_test": set(n100.test) <= set(full.test), "same_train": n100.train == full.train}


def length_band(n: int) -> str:
    for lo, hi in LENGTH_BANDS:
        if n >= lo and (hi is None or n <= hi):
            return f"{lo}–{hi}" if hi is not None else f"over {lo - 1}"
    raise ValueError(n)


def error_rates_by_length(items: pd.DataFrame, runs: dict[str, list[dict]]) -> pd.DataFrame:
    """Per run and sentence-length band (:data:`LENGTH_BANDS`, characters of the cleaned sentence): test
    items, errors (gold != pred) and error rate = errors / items (NaN for an empty band). ``runs``: run
    label -> per-item prediction records (``item_id``, ``gold``, ``pred``) of one split version."""
    length = items.set_index("item_id")["sentence"].str.len()
    rows = []
    for run, records in runs.items():
        preds = pd.DataFrame(records or [])
        if preds.empty:
            continue
        preds["band"] = [length_band(int(length.loc[i])) for i in preds["item_id"]]
        preds["error"] = preds["gold"] != preds["pred"]
        for lo, hi in LENGTH_BANDS:
            b = length_band(lo)
            sub = preds[preds["band"] == b]
            rows.append({"run": run, "band": b, "items": len(sub),
                         "errors": int(sub["error"].sum()),
                         "error_rate": float(sub["error"].mean()) if len(sub) else np.nan})
    return pd.DataFrame(rows, columns=["run", "band", "items", "errors", "error_rate"])


def length_band_markdown(frame: pd.DataFrame) -> str:
    """One row per run, one column per band: ``errors of items (rate)``."""
    if frame.empty:
        return "*No NegEx run on this version in this build.*"
    bands = [length_band(lo) for lo, _ in LENGTH_BANDS]
    head = ["run"] + [f"{b} characters" for b in bands]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * len(bands)]
    for run, g in frame.groupby("run", sort=False):
        g = g.set_index("band")
        vals = [f"{int(g.loc[b, 'errors']):,} of {int(g.loc[b, 'items']):,} ({g.loc[b, 'error_rate']:.3f})"
                if g.loc[b, "items"] else "—" for b in bands]
        lines.append("| " + " | ".join([run] + vals) + " |")
    return "\n".join(lines)


#: Kinds of false negatives, tried in order on the marked sentence (see :func:`negation_miss_kinds`).
_HEADER_NEG = re.compile(r"\b[A-Z][A-Z /&-]{2,}:\s*(?:no|none|negative)\b[^.:;]*\[entity\]", re.I)
_NEG_FOR = re.compile(r"negative for[^.:;]*\[entity\]", re.I)


def miss_kind(text: str) -> str:
    """What sits before the target of a missed negation: ``section header`` ("SKIN: No [entity] RASHES
    [entity]": an upper-case header, a colon, then "no"/"none"/"negative"), ``negative for`` (the
    phrase "negative for" before the target in the same clause) or ``other``. ``text`` is the marked
    model input; the header test is case-sensitive on the header (upper case), not on the cue."""
    m = _HEADER_NEG.search(text)
    if m and m.group(0).split(":")[0].strip() == m.group(0).split(":")[0].strip().upper():
        return "section header"
    if _NEG_FOR.search(text):
        return "negative for"
    return "other"


def negation_misses(items: pd.DataFrame, predictions: list[dict]) -> pd.DataFrame:
    """The false negatives of one NegEx run (gold negated, predicted affirmed; ``predictions`` are its
    per-item records) with their kind (:func:`miss_kind`) and marked text."""
    idx = items.set_index("item_id")
    preds = pd.DataFrame(predictions or [], columns=["item_id", "gold", "pred"])
    fn = preds[(preds["gold"] == "negated") & (preds["pred"] == "affirmed")]
    return pd.DataFrame({"item_id": fn["item_id"].tolist(),
                         "kind": [miss_kind(idx.loc[i, "text"]) for i in fn["item_id"]],
                         "text": [idx.loc[i, "text"] for i in fn["item_id"]]})


def _negex(ctx: FactContext) -> dict[str, Fact]:
    from .. import negex
    from ...metrics.classification import majority_macro_f1

    rows, items = _negex_frames(ctx)
    audit = negex.audit(rows, items)
    src = "atlaslib.cards.negex (loader, audit, split)"
    f: dict[str, Fact] = {}

    def put(key, value, kind="count"):
        f[f"negex.{key}"] = Fact(value, kind, src)

    put("rows", len(rows))
    put("rows_negated", int((rows["decision"] == "negated").sum()))
    put("rows_affirmed", int((rows["decision"] == "affirmed").sum()))
    put("dropped_rows", int((~rows["concept_found"]).sum()))
    put("items", len(items))
    put("distinct_sentences", audit["distinct_sentences"])
    put("long_items", audit["long_sentences"])
    put("max_sentence_length", int(items["sentence"].str.len().max()))
    put("header_items", audit["items_with_header_fragment"])
    nf = rows[rows["sentence"].map(negex.clean).str.contains("negative for", case=False, regex=False)]
    put("negative_for_rows", len(nf))
    s = negex_split_facts(items)
    for name in ("pool", "n100_test", "n100_train", "full_test", "full_train"):
        for k in ("n", "negated", "affirmed"):
            put(f"{name}.{k}", s[name][k])
        put(f"{name}.negated_share", s[name]["negated_share"], "percent")
        put(f"{name}.affirmed_share", s[name]["affirmed_share"], "percent")
    from ...splits import allocate

    exact = {k: 100 * s["pool"][k] / s["pool"]["n"] for k in ("negated", "affirmed")}
    seats = allocate(100, {k: s["pool"][k] for k in ("negated", "affirmed")})
    put("n100_seats_negated_exact", exact["negated"], "decimal2")
    put("n100_seats_affirmed_exact", exact["affirmed"], "decimal2")
    put("n100_seats_negated", seats["negated"])
    put("n100_seats_affirmed", seats["affirmed"])
    put("full_excluded", s["full_excluded"])
    put("n100_excluded", s["n100_excluded"])
    put("n100_in_full", ("Every test item of `atlas-n100-v1` is also a test item of `atlas-full-v1`."
                         if s["n100_test_in_full_test"] else
                         "Some test items of `atlas-n100-v1` are not test items of `atlas-full-v1`."), "text")
    put("full_test.majority_macro_f1", majority_macro_f1(s["full_test"]["negated"], s["full_test"]["affirmed"]),
        "rate")
    put("n100_test.majority_macro_f1", majority_macro_f1(s["n100_test"]["negated"], s["n100_test"]["affirmed"]),
        "rate")
    return f


def _negex_runs(ctx: FactContext) -> dict[str, Fact]:
    """Facts from the NegEx result cells: medspaCy ConText's misses on atlas-full-v1, error rates by
    sentence length."""
    _, items = _negex_frames(ctx)
    f: dict[str, Fact] = {}
    src = "NegEx result cells (per-item predictions) and atlaslib.cards.negex.pages.negation_misses"
    version = "atlas-full-v1"
    cell = ctx.cell("negex", version, "medspacy-context", "zero_shot")
    keys = ("fn", "fn_header", "fn_negative_for", "fn_other", "negative_for_items", "negative_for_negated",
            "header_examples", "fp")
    if cell is None:
        for k in keys:
            f[f"negex_runs.medspacy.{k}"] = missing(f"medspacy-context run on {version}")
    else:
        miss = negation_misses(items, cell["predictions"])
        kinds = miss["kind"].value_counts()
        f["negex_runs.medspacy.fn"] = Fact(len(miss), "count", src)
        f["negex_runs.medspacy.fn_header"] = Fact(int(kinds.get("section header", 0)), "count", src)
        f["negex_runs.medspacy.fn_negative_for"] = Fact(int(kinds.get("negative for", 0)), "count", src)
        f["negex_runs.medspacy.fn_other"] = Fact(int(kinds.get("other", 0)), "count", src)
        preds = pd.DataFrame(cell["predictions"]).set_index("item_id")
        test_items = items.set_index("item_id").loc[preds.index]
        nf = test_items["sentence"].str.contains("negative for", case=False, regex=False)
        nf_ids = nf[nf].index
        f["negex_runs.medspacy.negative_for_items"] = Fact(len(nf_ids), "count", src)
        f["negex_runs.medspacy.negative_for_negated"] = Fact(int((preds.loc[nf_ids, "pred"] == "negated").sum()),
                                                             "count", src)
        f["negex_runs.medspacy.fp"] = Fact(int(((preds["gold"] == "affirmed") & (preds["pred"] == "negated")).sum()),
                                           "count", src)
        ex = [re.sub(r"\s*\[entity\]\s*", " ", t).strip() for t in miss.loc[miss.kind == "section header", "text"]]
        short = [_header_snippet(t) for t in ex[:2]]
        f["negex_runs.medspacy.header_examples"] = Fact(
            join_and([f'"{s}"' for s in short]) if short else "none", "text", src)
    f.update(_negex_repro(ctx, version))
    frame = error_rates_by_length(items, {f"{c['model']} ({c['protocol']})": c.get("predictions")
                                          for c in ctx.ok_cells("negex", version) if c["model"] != "majority"})
    f["negex_runs.length_bands_full"] = Fact(length_band_markdown(frame), "markdown", src)
    long_ = frame[frame["band"] == length_band(LENGTH_BANDS[-1][0])]
    f["negex_runs.long_items_full"] = (Fact(int(long_["items"].iloc[0]), "count", src) if len(long_)
                                       else missing(f"NegEx run on {version}"))
    return f


#: Short fact names of the assertion systems whose atlas-full-v1 cells carry the whole-kit reproduction.
REPRO_SYSTEMS = {"medspacy": "medspacy-context", "negspacy": "negspacy-negex-kit"}


def _negex_repro(ctx: FactContext, version: str) -> dict[str, Fact]:
    """Whole-kit reproduction of each assertion system (its cell's ``extra.reproduction``, row "2,376
    rows") beside GenNegEx 1.2's published figures: counts, rates, and the gaps published − ours."""
    from .card import GENNEGEX

    f: dict[str, Fact] = {}
    rates = ("sensitivity", "specificity", "precision")
    for short, model in REPRO_SYSTEMS.items():
        cell = ctx.cell("negex", version, model, "zero_shot")
        rows = {r.get("system"): r for r in ((cell or {}).get("extra") or {}).get("reproduction") or []}
        row = next((r for k, r in rows.items() if str(k).endswith("rows") and "GenNegEx" not in str(k)), None)
        keys = [*("tp", "tn", "fp", "fn"), *rates, *(f"{r}_gap" for r in rates), "max_rate_gap"]
        if row is None:
            for k in keys:
                f[f"negex_runs.repro.{short}.{k}"] = missing(f"{model} run on {version}")
            continue
        src = f"{model} result cell (extra.reproduction), GenNegEx 1.2 figures of chapmanbe/negex TestSet.md"
        for k in ("tp", "tn", "fp", "fn"):
            f[f"negex_runs.repro.{short}.{k}"] = Fact(row[k], "count", src)
        for r in rates:
            f[f"negex_runs.repro.{short}.{r}"] = Fact(row[r], "rate", src)
            f[f"negex_runs.repro.{short}.{r}_gap"] = Fact(GENNEGEX[r] - row[r], "rate", src)
        f[f"negex_runs.repro.{short}.max_rate_gap"] = Fact(max(abs(GENNEGEX[r] - row[r]) for r in rates), "rate", src)
    return f


def _header_snippet(sentence: str) -> str:
    """The header, its colon and the words after it up to the target's end: ``SKIN: No RASHES``."""
    m = re.search(r"\b[A-Z][A-Z /&-]{2,}:\s*(?:no|none|negative)\b[^.:;]{0,40}", sentence, re.I)
    return m.group(0).strip().rstrip(",") if m else sentence[:40]


def _splits(ctx: FactContext) -> dict[str, Fact]:
    """The worked example of the splits chapter, computed by :mod:`atlaslib.splits`: five NegEx item ids
    drawn with the card's split seed."""
    from ...splits import rank, seed_hash
    from .card import SEED

    seed, ids = SEED, [f"negex-{i:04d}" for i in range(1, 6)]
    order = rank(ids, seed)
    lines = ["| item | key (first 12 hex digits) | rank |", "|---|---|---|"]
    lines += [f"| `{i}` | `{seed_hash(seed, i)[:12]}` | {order.index(i) + 1} |" for i in ids]
    src = "atlaslib.splits.seed_hash / rank"
    without = rank([i for i in ids if i != ids[3]], seed)
    return {"splits.example_table": Fact("\n".join(lines), "markdown", src),
            "splits.example_draw": Fact(" and ".join(f"`{i}`" for i in order[:2]), "text", src),
            "splits.example_removed": Fact(f"`{ids[3]}`", "text", src),
            "splits.example_draw_same": Fact("the same" if without[:2] == order[:2] else "different", "text", src)}


#: fact namespace -> provider (:func:`atlaslib.pages.facts.register_provider`)
FACTS = {"negex": _negex, "negex_runs": _negex_runs, "splits": _splits}


def perturbation_samples(version: str, perturbation, n: int, data_dir=None) -> pd.DataFrame:
    """The first ``n`` test items of ``version`` by seed-hash rank that ``perturbation`` applies to: the
    model's input before and after it (the marked sentence) and the gold decision (the robustness page's
    sample, :mod:`atlaslib.pages.robustness`)."""
    from ...variants import sample
    from .contract import load_items, split, split_frames
    from .variants import perturbed_items

    items = load_items(data_dir)
    _, test = split_frames(items, split(items, version))
    frame = perturbed_items(test, perturbation, version)
    keep = sample(frame["item_id"].tolist(), n, perturbation.seed)
    frame = frame.set_index("item_id").loc[keep].reset_index()
    before = dict(zip(test["item_id"], test["text"]))
    return pd.DataFrame({"item_id": frame["item_id"], "input": [before[i] for i in frame["item_id"]],
                         "perturbed input": frame["text"], "gold": frame["decision"]})
