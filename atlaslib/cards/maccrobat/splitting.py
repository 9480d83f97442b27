"""The MACCROBAT split: report-disjoint, drawn by seed-hash rank (:func:`split`), and its summary per side."""
from __future__ import annotations

import pandas as pd

from ...splits import SplitManifest, group_disjoint_check, rank
from .card import SEED, TYPES, VERSIONS

# ------------------------------------------------------------------------------------------- split
def split(items: pd.DataFrame, version: str = "atlas-n100-v1") -> SplitManifest:
    """Report-disjoint split (see ``atlaslib.splits``): the first ``n_test`` sentences by seed-hash rank
    over all sentences are the test set; every sentence of a report holding a test sentence leaves
    the train pool; the first ``n_train`` sentences of the remaining pool by the same rank train."""
    if version not in VERSIONS:
        raise ValueError(f"maccrobat: unknown split version {version!r}; known: {', '.join(VERSIONS)}")
    for col in ("item_id", "document"):
        if col not in items.columns:
            raise ValueError(f"maccrobat.split: items frame lacks column {col!r}")
    n_test, n_train = VERSIONS[version]["n_test"], VERSIONS[version]["n_train"]
    order = rank(items["item_id"].tolist(), SEED)
    if len(order) < n_test:
        raise ValueError(f"maccrobat.split: {len(order)} items, fewer than the {n_test} test items of {version}")
    test = order[:n_test]
    doc = items.set_index("item_id")["document"]
    test_docs = set(doc.loc[test])
    pool = [i for i in order if doc.loc[i] not in test_docs]
    if len(pool) < n_train:
        raise ValueError(f"maccrobat.split: only {len(pool)} sentences outside the test reports, "
                         f"{n_train} needed for {version}")
    train = pool[:n_train]
    chosen = set(test) | set(train)
    excluded = [i for i in items["item_id"] if i not in chosen]
    return SplitManifest(
        card="maccrobat", version=version, seed=SEED, train=train, test=test, excluded=excluded,
        rules=(f"test: first {n_test} sentences by seed-hash rank (seed {SEED}) over all sentences; "
               f"train pool: sentences of reports without a test sentence ({len(pool)}); train: first "
               f"{n_train} of the pool by the same rank; excluded: all other sentences."))


def split_summary(items: pd.DataFrame, manifest: SplitManifest) -> pd.DataFrame:
    """Per side: sentences, reports, words, mentions per type; last row: reports on both sides."""
    idx = items.set_index("item_id")
    rows = []
    for side in ("train", "test", "excluded"):
        sub = idx.loc[getattr(manifest, side)]
        row = {"side": side, "sentences": len(sub), "reports": sub["document"].nunique(),
               "words": int(sub["words"].map(len).sum())}
        for t in TYPES:
            row[t] = int(sum(1 for ms in sub["mentions"] for m in ms if m[0] == t))
        rows.append(row)
    out = pd.DataFrame(rows).set_index("side")
    out.attrs["reports_on_both_sides"] = len(group_disjoint_check(items, manifest.train, manifest.test, "document"))
    return out
