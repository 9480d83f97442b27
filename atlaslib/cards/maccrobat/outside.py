"""Outside systems on the MACCROBAT card (``atlas export``, ``atlas score``, :func:`atlaslib.evaluate`): the
sentences as an outside system sees them (words, case report), and its IOB2 tags scored by the card's own
code (:meth:`.runs.Outcome.metrics`: a :class:`~atlaslib.cards.run.CardRun`'s score, the one engine;
:func:`.cells.cell_parts`)."""
from __future__ import annotations

from functools import lru_cache

#: one answer, as ``atlas export`` shows it in task.json
OUTSIDE_EXAMPLE = ('{"item_id": "...", "tags": ["O", "B-problem", "I-problem"]}  (or CoNLL: items.conll with a tag '
                   'column)')


@lru_cache(maxsize=2)
def _items(data_dir):
    """The converted corpus, once per process and data directory (400 files, sha256-checked)."""
    from .data import load_items

    return load_items(data_dir)


def outside_split(version: str, split: str, data_dir=None, protocol: str | None = None):
    """The test (or train) sentences of ``version``: item id, case report and words (the train split also
    the gold tags)."""
    from ...splits import Split
    from .card import TAGS
    from .splitting import split as split_items

    items = _items(None if data_dir is None else str(data_dir)).copy()
    manifest = split_items(items, version)
    ids = list(manifest.test if split == "test" else manifest.train)
    records = [{"item_id": iid, "document": r["document"], "words": list(r["words"]),
                **({"tags": list(r["tags"])} if split == "train" else {})}
               for iid, r in items.set_index("item_id").loc[ids].iterrows()]
    return Split("maccrobat", version, split, ids, records, list(TAGS), manifest.hash,
                 answer="tags: one IOB2 tag per word", context={"items": items, "manifest": manifest})


def outside_cell_parts(s, preds, profile: dict, protocol: str, key: str, n_resamples: int, data_dir=None) -> dict:
    """The cell parts of checked predictions ``preds`` on split ``s`` (see :mod:`atlaslib.external.score`); a
    system whose ``trained_on`` names MACCROBAT is marked as overlapping (by ``CardRun.finish``, the card's rule)."""
    from ...results import EXTERNAL
    from .cells import outcome_parts
    from .runs import Outcome

    items, manifest = s.context["items"], s.context["manifest"]
    test = items.set_index("item_id").loc[manifest.test]
    by = {p.item_id: list(p.label) for p in preds}
    out = Outcome(model=profile["name"], protocol=protocol, version=s.version, status="ok", capability=EXTERNAL,
                  item_ids=list(manifest.test), documents=test["document"].tolist(),
                  gold=[list(t) for t in test["tags"]], pred=[by[i] for i in manifest.test], profile=dict(profile),
                  details={"source": EXTERNAL, "predictions_sha256": profile["revision"]}, n_resamples=n_resamples)
    return dict(outcome_parts(out, manifest, items), parameters={"n_resamples": n_resamples})
