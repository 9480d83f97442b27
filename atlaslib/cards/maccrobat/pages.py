"""The MACCROBAT card's page content: the facts its page quotes (``{{fact:maccrobat.*}}``), the corpus
counts (the 400 pinned files, about a second: kept on disk between builds, keyed by the pinned checksums
and the card package's sources: :func:`facts_key`) and the gold-cut leakage measured by this build's probe
run. Registered through :data:`FACTS`."""
from __future__ import annotations

from pathlib import Path

from ...escape import md_code
from ..facts import Fact, FactContext, missing
from .card import SEED, SHA256SUMS_TEXT as SUMS_TEXT

#: Numbers this card's pages may type by hand, each with its source (tests/test_prose_numbers.py; all
#: cards' and the generic ones: :func:`atlaslib.pages.facts.constants`)
CONSTANTS = {
    str(SEED): "the card's split seed (SEED)",
    "36": "MACCROBAT types mapped to O (41 types, 5 kept)",
    "41": "MACCROBAT entity types (Caufield et al. 2019)",
    "7": "IOB2 tags over three types (O + 2 × 3)",
    "200": "MACCROBAT2020 case reports (Caufield et al.)",
    "400": "MACCROBAT brat files (200 reports × .txt/.ann)",
}


def maccrobat_data_numbers(data_dir=None) -> dict:
    """Counts of the MACCROBAT corpus and its split that the card page quotes (loads the 400 pinned files,
    about a second; :func:`_maccrobat` caches the result on disk under :func:`facts_key`)."""
    from .. import maccrobat as M

    corpus = M.load_corpus(data_dir)
    items, ents = corpus.items, corpus.entities
    manifest = M.split(items, "atlas-n100-v1")
    summ = M.split_summary(items, manifest)
    groups = M.group_counts(ents, items)
    cut = M.gold_cut_mentions(items)
    cut_test = M.gold_cut_mentions(items.set_index("item_id").loc[manifest.test].reset_index())
    return {
        "reports": int(items["document"].nunique()), "sentences": len(items),
        **{t: int(groups.loc[t, "in_tags"]) for t in M.TYPES},
        "discontinuous_dropped": int(groups["discontinuous_dropped"].sum()),
        "test_sentences": int(summ.loc["test", "sentences"]), "test_reports": int(summ.loc["test", "reports"]),
        "train_sentences": int(summ.loc["train", "sentences"]), "train_reports": int(summ.loc["train", "reports"]),
        "test_mentions": int(sum(summ.loc["test", t] for t in M.TYPES)),
        "mentions": cut["mentions"], "cut_inside_word": cut["cut_inside_word"],
        "test_cut_inside_word": cut_test["cut_inside_word"],
    }


def facts_key(data_dir=None, package: Path = Path(__file__).parent) -> str:
    """The facts cache's key: the sha256 of every module of the card's package (the converter, the split, the
    gold cuts and this module), the pinned checksums and the data folder."""
    from ...sources import sha256_file

    return "".join([*(sha256_file(f) for f in sorted(package.glob("*.py"))), SUMS_TEXT, str(data_dir or "")])


def _maccrobat(ctx: FactContext) -> dict[str, Fact]:
    import json

    from ...results import atomic_write_text, read_cache_json

    key = facts_key(ctx.data_dir)
    cache = Path(ctx.cache_dir) / "facts-maccrobat.json" if ctx.cache_dir else None
    nums = None
    if cache is not None:  # a damaged entry is computed again (read_cache_json says so in the build's log)
        stored = read_cache_json(cache, lambda v: isinstance(v, dict) and isinstance(v.get("numbers"), dict) and all(
            isinstance(n, (int, float)) for n in v["numbers"].values()) and {"mentions", "cut_inside_word"} <= set(
            v["numbers"]))
        nums = stored["numbers"] if stored is not None and stored.get("key") == key else None
    if nums is None:
        nums = maccrobat_data_numbers(ctx.data_dir)
        if cache is not None:
            atomic_write_text(cache, json.dumps({"key": key, "numbers": nums}))
    src = "atlaslib.cards.maccrobat (converter, split, gold_cut_mentions)"
    f = {f"maccrobat.{k}": Fact(v, "count", src) for k, v in nums.items()}
    f["maccrobat.cut_inside_word_share"] = Fact(nums["cut_inside_word"] / nums["mentions"], "percent", src)
    # the leakage measured on the probe, when a probe run in this build carries it
    leak = next((c["extra"]["gold_cut_leakage"] for c in ctx.ok_cells("maccrobat")
                 if (c.get("extra") or {}).get("gold_cut_leakage")), None)
    lsrc = "MACCROBAT probe result cell (extra.gold_cut_leakage, maccrobat.probe_without_gold_cuts)"
    if leak is None:
        for k in ("probe_f1_with_cuts", "probe_f1_without_cuts", "probe_f1_difference", "probe_run"):
            f[f"maccrobat.{k}"] = missing("MACCROBAT probe run measuring the gold cuts")
    else:
        f["maccrobat.probe_f1_with_cuts"] = Fact(leak["with_gold_cuts"]["f1"], "rate", lsrc)
        f["maccrobat.probe_f1_without_cuts"] = Fact(leak["without_gold_cuts"]["f1"], "rate", lsrc)
        f["maccrobat.probe_f1_difference"] = Fact(leak["f1_difference"], "rate", lsrc)
        f["maccrobat.probe_run"] = Fact(md_code(leak.get('model', 'probe')), "text", lsrc)  # a name: text
    return f


#: fact namespace -> provider (:func:`atlaslib.pages.facts.register_provider`)
FACTS = {"maccrobat": _maccrobat}


def perturbation_samples(version: str, perturbation, n: int, data_dir=None):
    """The first ``n`` test sentences of ``version`` by seed-hash rank that ``perturbation`` applies to: the
    words before and after it (joined by spaces) and the gold mentions on the perturbed words (the
    robustness page's sample, :mod:`atlaslib.pages.robustness`)."""
    import pandas as pd

    from ...metrics.spans import mentions
    from ...variants import sample
    from .contract import load_items, split
    from .perturbations import perturbed_items

    items = load_items(data_dir)
    test = items.set_index("item_id").loc[split(items, version).test].reset_index()
    frame = perturbed_items(test, perturbation, version)
    keep = sample(frame["item_id"].tolist(), n, perturbation.seed)
    frame = frame.set_index("item_id").loc[keep].reset_index()
    before = dict(zip(test["item_id"], test["words"]))

    def shown(words, tags):
        return "; ".join(f"{t}: {' '.join(words[a:b + 1])}" for t, a, b in mentions(list(tags)))

    return pd.DataFrame({"item_id": frame["item_id"], "words": [" ".join(before[i]) for i in frame["item_id"]],
                         "perturbed words": [" ".join(w) for w in frame["words"]],
                         "gold mentions (perturbed words)": [shown(w, t) for w, t in zip(frame["words"], frame["tags"])]})
