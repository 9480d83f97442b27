"""What an outside system sees of a card's split, and the checks its answers pass before they are scored.

A card takes outside predictions when it declares a ``prediction_format`` (:class:`atlaslib.cards.Card`:
``label``, ``tags`` or ``anafora``) and its package has an ``outside`` module: ``outside_split`` (the split
as an outside system sees it: a :class:`Split`) and ``outside_cell_parts`` (checked answers to the card's cell
parts, scored by the card's own code, exactly as a model run is; the cell is made by
:class:`atlaslib.cards.run.CardRun`). Reading and checking answers depends only on the format, so it lives
here; what the answers mean lives with the card.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from ..jsonio import as_float
from ..results.schema import EXTERNAL, is_external  # noqa: F401  (the vocabulary lives a floor down)
from ..splits import Split  # noqa: F401

from ..predfiles import MAX_LISTED, Pred, PredictionsError, at, fail, short  # noqa: F401  (a floor down)


def sha256_path(path: Path) -> str:
    """sha256 of a file; for a folder, of every file's relative path and sha256 (sorted)."""
    from ..sources import sha256_file

    from .. import fsio

    path = Path(path)
    try:
        if not path.is_dir():
            return sha256_file(path)
        h = hashlib.sha256()
        for f in sorted(p for p in path.rglob("*") if p.exists() and not p.is_dir()):  # a pipe is refused, not skipped
            h.update(str(f.relative_to(path)).encode() + b"\0" + sha256_file(f).encode() + b"\n")
    except fsio.NotAFile as exc:
        raise PredictionsError(str(exc)) from None
    return h.hexdigest()


# ------------------------------------------------------------------------------------------- loading

def load_split(card: str, version: str, split: str = "test", data_dir=None, protocol: str | None = None) -> Split:
    """The :class:`Split` of ``card`` / ``version`` / ``split`` ("test" or "train"), from the card's
    ``outside_split``."""
    module = outside_module(card, version)
    if split not in ("test", "train"):
        raise ValueError(f"split {split!r}: expected test or train")
    return module.outside_split(version, split, data_dir, protocol)


def outside_module(card: str, version: str | None = None):
    """The card's package, checked to take outside predictions (a declared ``prediction_format`` and the
    ``outside`` functions) and to have ``version``; ValueError naming what is missing otherwise."""
    from ..cards import available_cards, get_card
    from ..cards.run import card_module

    c = get_card(card)
    if version is not None and version not in c.versions:
        raise ValueError(f"card {c.name} has no split version {version!r}; expected one of {', '.join(c.versions)}")
    module = card_module(c.name)
    if not c.prediction_format or not all(hasattr(module, f) for f in ("outside_split", "outside_cell_parts")):
        takes = sorted(k.name for k in available_cards() if k.prediction_format)
        raise ValueError(f"card {c.name} takes no outside predictions: it declares no prediction_format with "
                         f"outside_split and outside_cell_parts (atlaslib/cards/<card>/outside.py; cards that do: "
                         f"{', '.join(takes)})")
    return module


def other_version_hint(card: str, version: str, unknown: set[str], data_dir=None) -> str:
    """" (they are test items of <other version>)" when every unknown id belongs to another version."""
    from ..cards import get_card

    if not unknown:
        return ""
    for other in get_card(card).versions:
        if other == version:
            continue
        try:
            ids = set(load_split(card, other, "test", data_dir).ids)
        except Exception:
            continue
        if unknown <= ids:
            return f" (they are test items of {card} {other}: was the file made for that version?)"
    return ""


def check_ids(where: str, s: Split, preds: list[Pred], data_dir=None) -> None:
    """Every test id exactly once, no unknown id (one error listing the problems by row and id)."""
    if not preds:
        raise PredictionsError(f"{where}: empty: expected one prediction per test item of {s.card} {s.version} "
                               f"({len(s.ids)} items)")
    known = set(s.ids)
    seen: dict[str, int] = {}
    problems, unknown = [], []
    for p in preds:
        if p.item_id in seen:
            problems.append(f"{at(p)}: item id {p.item_id!r} appears again (first at row {seen[p.item_id]})")
        else:
            seen[p.item_id] = p.row
        if p.item_id not in known:
            unknown.append(p)
    if unknown:
        hint = other_version_hint(s.card, s.version, {p.item_id for p in unknown}, data_dir)
        if len(unknown) > MAX_LISTED:
            problems.insert(0, f"{len(unknown)} item ids are not test items of {s.card} {s.version}{hint}, e.g. "
                               f"{at(unknown[0])} ({unknown[0].item_id!r})")
        else:
            problems[:0] = [f"{at(p)}: item id {p.item_id!r} is not a test item of {s.card} {s.version}{hint}"
                            for p in unknown]
    missing = [i for i in s.ids if i not in seen]
    if missing:
        problems.append(f"{len(missing)} test item(s) have no prediction, e.g. {', '.join(map(repr, missing[:3]))}")
    fail(where, problems)


def check_labels(where: str, s: Split, preds: list[Pred]) -> None:
    """Labels in the card's label set; scores on every row or on none, each a probability in [0, 1] (of the
    card's positive class, ``Card.analysis.positive``)."""
    problems = [f"{at(p)} (id {p.item_id!r}): label {short(p.label)} is not one of {', '.join(s.labels)}"
                for p in preds if p.label not in s.labels]
    with_score = [p for p in preds if p.score is not None]
    if with_score and len(with_score) != len(preds):
        p = next(p for p in preds if p.score is None)
        problems.append(f"{at(p)} (id {p.item_id!r}): no score, while other rows have one (give a score on "
                        f"every row or on none)")
    positive = getattr(getattr(_card(s.card), "analysis", None), "positive", None)
    what = f"P({positive}), the probability of the positive class" if positive else "a probability"
    for p in with_score:
        if as_float(p.score) is None:  # text, NaN, infinity, or an integer too large for a float
            big = isinstance(p.score, int) and not isinstance(p.score, bool)
            problems.append(f"{at(p)} (id {p.item_id!r}): score {short(p.score)} is "
                            f"{'too large for a float' if big else 'not a finite number'}; expected {what} in [0, 1]")
        elif not 0.0 <= p.score <= 1.0:
            problems.append(f"{at(p)} (id {p.item_id!r}): score {short(p.score)} is not in [0, 1]; a score is "
                            f"{what} (rescale scores given in percent or as logits)")
    fail(where, problems)


def _card(name: str):
    from ..cards import get_card

    return get_card(name)


def check_tags(where: str, s: Split, preds: list[Pred]) -> None:
    """MACCROBAT: a list of tags, one per word of the item, each one of the card's IOB2 tags; CoNLL words
    must be the exported words (compared, never shown)."""
    words = {r["item_id"]: r["words"] for r in s.records}
    problems = []
    for p in preds:
        w = words[p.item_id]
        if not isinstance(p.label, list):
            problems.append(f"{at(p)} (id {p.item_id!r}): tags must be a list of strings, one per word")
            continue
        if len(p.label) != len(w):
            problems.append(f"{at(p)} (id {p.item_id!r}): {len(p.label)} tags for {len(w)} words")
            continue
        bad = [t for t in p.label if t not in s.labels]
        if bad:
            problems.append(f"{at(p)} (id {p.item_id!r}): tag {short(bad[0])} is not one of {', '.join(s.labels)}")
        if p.words is not None and list(p.words) != list(w):
            k = next(i for i, (a, b) in enumerate(zip(p.words, w)) if a != b)
            problems.append(f"{at(p)} (id {p.item_id!r}): word {k + 1} differs from the exported words "
                            f"(tags must follow the words of `atlas export`)")
    fail(where, problems)


def iob2_notes(where: str, preds: list[Pred]) -> list[str]:
    """A note when tags break IOB2 order (an ``I-X`` first, after ``O`` or after another type): accepted, and
    said, with what the scorer does with them."""
    bad = []
    for p in preds:
        prev = "O"
        for k, t in enumerate(p.label, 1):
            if isinstance(t, str) and t.startswith("I-") and (prev == "O" or prev[2:] != t[2:]):
                bad.append((p, k, t))
                break
            prev = t if isinstance(t, str) else "O"
    if not bad:
        return []
    p, k, t = bad[0]
    return [f"{where}: {len(bad)} item(s) have an I- tag that continues no mention (first: {at(p)}, id "
            f"{p.item_id!r}, word {k}, {t!r} after {'O' if k == 1 or p.label[k - 2] == 'O' else repr(p.label[k - 2])}"
            f"); the scorer reads each such I-X as the start of a new X mention (conlleval and seqeval's "
            f"default mode): write B-X to make it explicit"]


def check_spans(where: str, s: Split, preds: list[Pred]) -> None:
    """TempEval: every predicted EVENT/TIMEX3 span lies inside its document's text, where the version's
    text is known (synthetic-v1; THYME note text is not available here, so its spans are not checked)."""
    docs = {d.doc_id: d for d in (s.context or {}).get("docs", [])}
    problems = []
    for p in preds:
        d = docs.get(p.item_id)
        text = getattr(d, "text", None)
        if text is None:
            continue
        for e in p.label.entities:
            for start, end in e.spans:
                if not 0 <= start <= end <= len(text):
                    problems.append(f"{p.label.path or at(p)}: {e.type} {e.id!r} has span {start},{end}, outside "
                                    f"document {p.item_id!r} ({len(text):,} characters)")
    fail(where, problems)
