"""Write what an outside system needs to answer a card's split: items, label set, manifest hash.

``export(card, version, out_dir, split="test")`` writes into ``out_dir``:

- ``items.jsonl``: one object per item, ``item_id`` plus the card's input fields (NegEx ``concept``,
  ``sentence`` and the marked ``text``; NLI ``premise`` and ``hypothesis``; MACCROBAT ``document`` and
  ``words``; TempEval the document id). On the train split the gold answer is included (``label`` /
  ``tags``) so a system can be trained on it; the test split never carries gold.
- ``labels.txt``: the label set, one per line (MACCROBAT: the IOB2 tags; TempEval: the THYME schema values
  a prediction may use, as ``TYPE.Property=value``).
- ``task.json``: card, version, split, number of items, the split manifest hash, the label set, what a
  prediction holds and the ``atlas score`` command that reads it.
- a card whose answers are tags (MACCROBAT) also ``items.conll``: ``# item_id = <id>``, then one word per
  line (``word<TAB>gold tag`` on the train split), a blank line after each item.
- the files of the card's own ``write_outside_files``: TempEval ``documents.txt`` (the document ids) and
  ``anafora/<doc>/``: the note text ``<doc>`` where the version has public text (synthetic-v1; THYME text
  is under a data use agreement and is never written), and on the test split the phase-2 input
  ``<doc>.Temporal-Relation.input.completed.xml`` (gold EVENT/TIMEX3 with their attributes, no DocTimeRel,
  no relations); on the train split the gold annotations ``<doc>.Temporal-Relation.gold.completed.xml``;
  NLI ``openmed_fixtures.json``: the case set with its gold labels as an openmed fixture file.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..atomicio import atomic_write_text
from .tasks import Split, load_split, outside_module


def _jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def _conll(s: Split) -> str:
    lines = []
    for r in s.records:
        lines.append(f"# item_id = {r['item_id']}")
        tags = r.get("tags")
        for k, w in enumerate(r["words"]):
            lines.append(f"{w}\t{tags[k]}" if tags else w)
        lines.append("")
    return "\n".join(lines) + "\n"


def export(card: str, version: str, out_dir: str | os.PathLike, split: str = "test", data_dir=None) -> dict:
    """Write the split's items, label set and manifest hash to ``out_dir``; returns ``task.json``'s content
    (with a ``files`` list)."""
    from ..cards import get_card

    module = outside_module(card, version)
    s = load_split(card, version, split, data_dir)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = ["items.jsonl", "labels.txt", "task.json"]
    atomic_write_text(out / "items.jsonl", _jsonl(s.records))
    atomic_write_text(out / "labels.txt", "\n".join(s.labels) + "\n")
    if get_card(s.card).prediction_format == "tags":
        atomic_write_text(out / "items.conll", _conll(s))
        files.append("items.conll")
    if hasattr(module, "write_outside_files"):  # the card's own files (TempEval: documents and an Anafora layout)
        files += module.write_outside_files(s, out)
    task = {"card": s.card, "version": s.version, "split": s.split, "n_items": len(s.ids),
            "manifest_sha256": s.manifest_hash, "labels": s.labels, "answer": s.answer,
            "prediction_example": module.OUTSIDE_EXAMPLE,
            "score": (f"atlas score --card {s.card} --version {s.version} --predictions FILE --name NAME"
                      if s.split == "test" else "the train split is for training; predictions are scored on test"),
            "files": files}
    atomic_write_text(out / "task.json", json.dumps(task, indent=1, ensure_ascii=False) + "\n")
    return task
