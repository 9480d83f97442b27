"""The NegEx splits: frozen versions drawn stratified by decision, sentence-disjoint (:func:`split`), the
split's train and test frames and its summary."""
from __future__ import annotations

import pandas as pd

from ... import splits as _splits
from .card import SEED, VERSIONS

def split(items: pd.DataFrame, version: str, seed: int = SEED) -> _splits.SplitManifest:
    """The frozen split of one version (see the card's specification):

    - ``atlas-n100-v1``: 100 test items stratified by decision; then 500 train items stratified the same
      way from the items whose sentence_key is not a test sentence's; the rest excluded.
    - ``atlas-full-v1``: the same 500 train items; test = every item whose sentence_key is not a train
      sentence's; the rest (sharing a sentence with a train item) excluded.
    """
    if version not in VERSIONS:
        raise ValueError(f"unknown NegEx split version {version!r}; expected one of {', '.join(VERSIONS)}")
    test100 = _splits.stratified_draw(items, 100, "decision", seed)
    test_keys = set(items.loc[items["item_id"].isin(test100), "sentence_key"])
    pool = items[~items["sentence_key"].isin(test_keys)]
    train = _splits.stratified_draw(pool, 500, "decision", seed)
    if version == "atlas-n100-v1":
        test = test100
    else:
        train_keys = set(items.loc[items["item_id"].isin(train), "sentence_key"])
        test = items.loc[~items["sentence_key"].isin(train_keys), "item_id"].tolist()
    used = set(train) | set(test)
    excluded = [i for i in items["item_id"] if i not in used]
    return _splits.SplitManifest("negex", version, seed, train, test, excluded,
                                 rules=split.__doc__ or "")


def split_frames(items: pd.DataFrame, manifest: _splits.SplitManifest) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The train and test items of ``manifest``; each frame knows its split version (``attrs["version"]``), which
    a run decided from the frames alone decides for (:func:`.runs.run_protocol`)."""
    idx = items.set_index("item_id")
    train, test = idx.loc[manifest.train].reset_index(), idx.loc[manifest.test].reset_index()
    train.attrs["version"] = test.attrs["version"] = manifest.version
    return train, test


def split_summary(items: pd.DataFrame, manifest: _splits.SplitManifest) -> dict:
    """Counts per label and split (``table``), and the sentences on both sides (``shared_sentence_keys``), for the
    page."""
    side = pd.Series("excluded", index=items["item_id"])
    side[manifest.train] = "train"
    side[manifest.test] = "test"
    table = pd.crosstab(items.set_index("item_id")["decision"], side).reindex(
        index=["negated", "affirmed"], columns=["train", "test", "excluded"], fill_value=0)
    table.columns.name = "split"
    shared = _splits.group_disjoint_check(items, manifest.train, manifest.test, "sentence_key")
    return {"table": table, "shared_sentence_keys": len(shared)}


def class_balance_caveat(test: pd.DataFrame) -> tuple[str, str]:
    """The caveat row on a version's class balance: the share of affirmed test items and the macro F1 that
    always answering "affirmed" scores (:func:`atlaslib.metrics.classification.majority_macro_f1`)."""
    from ...metrics.classification import majority_macro_f1

    n_neg = int(test["label"].sum())
    n_aff = len(test) - n_neg
    return ("Class balance", f"{100 * n_aff / len(test):.1f} % of this version's test items are affirmed; always "
                             f"answering affirmed scores {majority_macro_f1(n_neg, n_aff):.3f} macro F1.")
