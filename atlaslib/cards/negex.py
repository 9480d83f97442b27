"""NegEx test kit card: is the named clinical concept negated in its sentence?

Data: ``Annotations-1-120-random.txt`` of GenNegEx 1.2 (chapmanbe/negex at a pinned commit): TAB-separated
with Excel-style quoting, CRLF, no header; columns number, concept, sentence, decision. 2,376 rows
(491 Negated / 1,885 Affirmed). The 11 rows whose stripped concept does not occur (case-insensitively) in
the sentence are dropped, leaving 2,365 items, ``item_id = "negex-%04d" % number``.

Normalisation and marking
-------------------------
- ``clean(text)``: every run of whitespace (spaces, tabs, CR/LF) becomes one space; ends stripped.
  Report headers inside sentences are kept verbatim.
- The model input wraps the target occurrence: ``... or [entity] AIR HUNGER [entity].``. Among the
  case-insensitive occurrences of the cleaned concept in the cleaned sentence, the first one written in
  upper case (its text equals its upper-cased text and has a letter) is the target; when none is upper
  case, the first occurrence.
- ``sentence_key = sha256(NFKC(clean(sentence)).casefold())``: rows that share a sentence (the kit
  upper-cases a different concept in each copy) share a key, so a sentence never sits on both sides of
  a split.
"""
from __future__ import annotations

import csv
import hashlib
import io
import re
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd

from .. import splits as _splits
from ..sources import PinnedFile, resolve, sha256_file
from . import Card
from . import NotRun as _ContractNotRun

SEED = 20261006
ROWS_EXPECTED = 2376
ITEMS_EXPECTED = 2365

KIT_URL_BASE = ("https://raw.githubusercontent.com/chapmanbe/negex/"
                "d136b972b5d214959807ad5de1881a3225541fe7/GeneralNegEx.Java.v.1.2.05092009/")
ANNOTATIONS = PinnedFile(
    "negex/Annotations-1-120-random.txt", KIT_URL_BASE + "Annotations-1-120-random.txt",
    "e2f652f663617ff661c7863c76075be9ae492c6ef5070d44d2d023bdf6d35b71",
)
TRIGGERS = PinnedFile(
    "negex/negex_triggers.txt", KIT_URL_BASE + "negex_triggers.txt",
    "78c268f6c753faa9b58d6a00b3bf948ad8f074082793cf9000369f883c171333",
)

MARK = "[entity]"
POSITIVE = "negated"
LABELS = ("affirmed", "negated")
ASSERTION_TO_DECISION = {"ABSENT": "negated", "PRESENT": "affirmed", "POSSIBLE": "affirmed"}
OPTION_PROMPT = 'Sentence: {sentence}\nQuestion: In this sentence, is "{concept}" negated (stated as absent)?\nAnswer:'
OPTIONS = (" yes", " no")  # " yes" = negated

# GenNegEx 1.2 on the whole kit (chapmanbe/negex TestSet.md): negated = positive class.
GENNEGEX = {"tp": 471, "tn": 1851, "fp": 34, "fn": 20,
            "sensitivity": 0.959, "specificity": 0.982, "precision": 0.933}

VERSIONS = ("atlas-n100-v1", "atlas-full-v1")
METRIC_BASES = ("macro_f1", "sensitivity", "specificity", "precision", "roc_auc")
#: The ``finetune`` protocol's recipe (atlaslib.protocols.finetune): the encoder and a new linear head over
#: LABELS on the mean-pooled marked sentence, trained on the 500 train items only, fixed epochs, no
#: validation split. max_length 256 truncates no NegEx item (the longest marked sentence is 255 sub-words
#: for all-MiniLM-L6-v2), so both [entity] markers are always seen.
FINETUNE_RECIPE = {
    "optimizer": "torch.optim.AdamW", "learning_rate": 5e-5, "epochs": 3, "batch_size": 16, "length_grouping": 8,
    "max_length": 256, "warmup_ratio": 0.1, "weight_decay": 0.01, "adam_betas": [0.9, 0.999], "adam_eps": 1e-8,
    "max_grad_norm": 1.0,
    "head_dropout": 0.1, "seed": SEED, "torch_threads": 2, "eval_batch_size": 64,
    "validation": "none: fixed epochs, no early stopping; test items unseen until prediction",
}

CARD = Card(
    name="negex",
    title="NegEx test kit: is the concept negated?",
    notebook="notebooks/negex.md",
    versions=VERSIONS,
    protocols=("zero_shot", "probe", "finetune"),
    metrics=METRIC_BASES,
    default_matrix=tuple(
        (v, m, p) for v in VERSIONS for m, p in (
            ("majority", "zero_shot"), ("medspacy-context", "zero_shot"), ("negspacy-negex-kit", "zero_shot"),
            ("all-minilm-l6-v2", "probe"), ("all-minilm-l6-v2", "finetune"),
            ("bvanaken/clinical-assertion-negation-bert", "zero_shot"),
        )
    ),
    licence_confirmed=False,
    licence_note=("The kit's Apache-2.0 is declared only by the package README beside the file; the repository "
                  "has no licence file. Local evaluation only until the terms are confirmed."),
    task="binary assertion: negated vs affirmed concept",
    data=("NegEx test kit: {{fact:negex.rows}} rows ({{fact:negex.distinct_sentences}} distinct sentences) "
          "from 120 de-identified reports"),
    licence="Apache-2.0 (declared by the kit's package README only; no licence file)",
    test_sizes={"atlas-n100-v1": 100, "atlas-full-v1": 1432},
    pinned_files=(ANNOTATIONS, TRIGGERS),
    resampling_unit="item (sentence, concept)",
    caveats=("Some sentences carry several annotated concepts; items of one sentence are kept on one side of "
             "the split, but the percentile intervals resample items, not sentences.",
             "GenNegEx was developed on these reports: its reproduction is not a held-out evaluation.",
             "A model whose training data name the NegEx kit or its triggers is marked as overlapping."),
    capabilities={"zero_shot": ("predict.assertion", "score.options"), "probe": ("embed.text.pooled",),
                  "finetune": ("embed.text.pooled",)},
)


class NegexDataError(ValueError):
    """The annotation file does not have the expected shape."""


_WS = re.compile(r"\s+")


def clean(text: str) -> str:
    """Collapse every whitespace run to one space and strip the ends."""
    return _WS.sub(" ", text).strip()


def sentence_key(sentence: str) -> str:
    """sha256 of ``NFKC(clean(sentence)).casefold()`` (see module docstring)."""
    norm = unicodedata.normalize("NFKC", clean(sentence)).casefold()
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()


def find_target(sentence: str, concept: str) -> tuple[int, int] | None:
    """(start, end) of the target occurrence of ``concept`` in ``sentence`` (both cleaned), or None."""
    s, c = clean(sentence), clean(concept)
    if not c:
        return None
    hits = [m.start() for m in re.finditer(re.escape(c.casefold()), s.casefold())]
    if not hits:
        return None
    for start in hits:
        text = s[start:start + len(c)]
        if text == text.upper() and any(ch.isalpha() for ch in text):
            return start, start + len(c)
    return hits[0], hits[0] + len(c)


def mark(sentence: str, concept: str) -> str:
    """The model input: the cleaned sentence with the target wrapped as ``[entity] X [entity]``."""
    s = clean(sentence)
    span = find_target(s, concept)
    if span is None:
        raise NegexDataError(f"concept {concept!r} does not occur in sentence {s[:80]!r}")
    a, b = span
    return f"{s[:a]}{MARK} {s[a:b]} {MARK}{s[b:]}"


def read_rows(path: str | Path) -> pd.DataFrame:
    """All rows of the kit file as a frame (number, concept, sentence, decision, row), CSV-unquoted."""
    path = Path(path)
    text = path.read_bytes().decode("utf-8")
    rows = []
    for lineno, rec in enumerate(csv.reader(io.StringIO(text, newline=""), delimiter="\t"), 1):
        if not rec:
            continue
        if len(rec) != 4:
            raise NegexDataError(f"{path}: row {lineno}: expected 4 TAB-separated columns "
                                 f"(number, concept, sentence, decision), got {len(rec)}")
        number, concept, sentence, decision = rec
        if not number.strip().isdigit():
            raise NegexDataError(f"{path}: row {lineno}: column 1 (number) should be an integer, got {number!r}")
        if decision.strip() not in ("Negated", "Affirmed"):
            raise NegexDataError(f"{path}: row {lineno}: column 4 (decision) should be Negated or Affirmed, "
                                 f"got {decision!r}")
        rows.append({"row": lineno, "number": int(number), "concept": concept, "sentence": sentence,
                     "decision": decision.strip().lower()})
    frame = pd.DataFrame(rows)
    dup = frame["number"].duplicated()
    if dup.any():
        raise NegexDataError(f"{path}: row {int(frame.loc[dup, 'row'].iloc[0])}: duplicate number "
                             f"{int(frame.loc[dup, 'number'].iloc[0])}")
    frame["item_id"] = frame["number"].map(lambda n: f"negex-{n:04d}")
    frame["concept_found"] = [c.strip().casefold() in s.casefold()
                              for c, s in zip(frame["concept"], frame["sentence"])]
    return frame


def load_rows(data_dir=None) -> pd.DataFrame:
    return read_rows(resolve(ANNOTATIONS, data_dir))


def items_from_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Items: rows whose concept occurs in the sentence, with the model inputs and keys."""
    kept = rows[rows["concept_found"]].copy()
    kept["concept"] = kept["concept"].map(clean)
    kept["text"] = [mark(s, c) for s, c in zip(kept["sentence"], kept["concept"])]
    kept["sentence_clean"] = kept["sentence"].map(clean)
    kept["sentence_key"] = kept["sentence"].map(sentence_key)
    kept["label"] = (kept["decision"] == POSITIVE).astype(int)
    kept["n_concepts"] = kept.groupby("sentence_key")["item_id"].transform("size").astype(int)
    cols = ["item_id", "number", "concept", "sentence_clean", "text", "decision", "label", "sentence_key",
            "n_concepts"]
    return kept[cols].rename(columns={"sentence_clean": "sentence"}).reset_index(drop=True)


def load_items(data_dir=None) -> pd.DataFrame:
    return items_from_rows(load_rows(data_dir))


def data_sha256(data_dir=None) -> dict:
    return {ANNOTATIONS.name: sha256_file(resolve(ANNOTATIONS, data_dir))}


# -- audit -------------------------------------------------------------------------------------------

HEADER_RE = re.compile(r"\b([A-Z][A-Z /&-]{2,}[A-Z]):")


def _shorten(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def audit(rows: pd.DataFrame, items: pd.DataFrame) -> dict:
    """Counts for the data audit: rows, label balance, dropped rows, sentence lengths, header fragments."""
    lengths = items["sentence"].str.len()
    headers = items["sentence"].str.findall(HEADER_RE)
    return {
        "counts": pd.DataFrame({
            "rows": rows["decision"].value_counts(),
            "items": items["decision"].value_counts(),
        }).rename_axis("decision").reindex(["negated", "affirmed"]).assign(
            dropped=lambda d: d["rows"] - d["items"]),
        "dropped": rows.loc[~rows["concept_found"], ["item_id", "concept", "sentence", "decision"]]
                       .assign(concept=lambda d: d["concept"].map(lambda t: _shorten(t, 50)),
                               sentence=lambda d: d["sentence"].map(lambda t: _shorten(clean(t), 90))),
        "sentence_length": lengths.describe().round(1),
        "long_sentences": int((lengths > 300).sum()),
        "distinct_sentences": int(items["sentence_key"].nunique()),
        "items_with_header_fragment": int((headers.str.len() > 0).sum()),
        "top_headers": headers.explode().dropna().value_counts().head(10),
    }


# -- splits ------------------------------------------------------------------------------------------

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
    idx = items.set_index("item_id")
    return (idx.loc[manifest.train].reset_index(), idx.loc[manifest.test].reset_index())


def split_summary(items: pd.DataFrame, manifest: _splits.SplitManifest) -> dict:
    """Counts per label and split, and the disjointness checks, for the page and the result cell."""
    side = pd.Series("excluded", index=items["item_id"])
    side[manifest.train] = "train"
    side[manifest.test] = "test"
    table = pd.crosstab(items.set_index("item_id")["decision"], side).reindex(
        index=["negated", "affirmed"], columns=["train", "test", "excluded"], fill_value=0)
    table.columns.name = "split"
    shared = _splits.group_disjoint_check(items, manifest.train, manifest.test, "sentence_key")
    test_counts = items.set_index("item_id").loc[manifest.test, "decision"].value_counts()
    return {
        "table": table,
        "shared_sentence_keys": len(shared),
        "hash": manifest.hash,
        "cell": {"hash": manifest.hash, "n_train": len(manifest.train), "n_test": len(manifest.test),
                 "n_excluded": len(manifest.excluded),
                 "test_label_counts": {k: int(test_counts.get(k, 0)) for k in ("negated", "affirmed")}},
    }


# -- protocols and metrics ---------------------------------------------------------------------------

def option_prompts(frame: pd.DataFrame) -> list[str]:
    """The score.options prompt per item (unmarked, cleaned sentence)."""
    return [OPTION_PROMPT.format(sentence=s, concept=c) for s, c in zip(frame["sentence"], frame["concept"])]


def metric_names(protocol: str) -> list[str]:
    return [f"{b}_{protocol}" for b in METRIC_BASES]


def rows_for_reproduction(rows: pd.DataFrame) -> pd.DataFrame:
    """All 2,376 kit rows for the reproduction table: found concepts marked as usual (``text``); the 11
    rows whose concept is missing from the sentence have ``text = None``: no system can be pointed at a
    target that is not there, and NegEx itself reports such a phrase as not negated, so they count as
    predicted affirmed."""
    out = rows.copy()
    out["text"] = [mark(s, c) if f else None
                   for s, c, f in zip(out["sentence"], out["concept"], out["concept_found"])]
    out["label"] = (out["decision"] == POSITIVE).astype(int)
    return out


class NotRun(_ContractNotRun):
    """The run cannot happen here (weights unavailable, capability missing); the reason goes in the cell."""


ZERO_SHOT_CAPABILITIES = ("predict.assertion", "score.options")


def assertion_label_map() -> dict:
    """Adapter assertion labels → 1 (negated) / 0 (affirmed)."""
    return {k: int(v == POSITIVE) for k, v in ASSERTION_TO_DECISION.items()}


def run_protocol(model: str, protocol: str, train: pd.DataFrame, test: pd.DataFrame, *, seed: int = SEED,
                 data_dir=None, retrain: bool = False) -> dict:
    """Run ``model`` under ``protocol`` on the split; returns ``{pred, score, capability, details, profile}``.

    zero_shot uses ``predict.assertion`` when the profile has it, else ``score.options``; probe uses
    ``embed.text.pooled``; finetune trains the encoder of an ``embed.text.pooled`` model with a new head
    (:data:`FINETUNE_RECIPE`; ``retrain`` ignores cached weights). A missing capability or absent weights
    raise :class:`NotRun` with the reason.
    """
    from ..models import CapabilityMissing, WeightsUnavailable, get_profile, load_adapter, with_capabilities
    from ..protocols import items as P

    try:
        profile = with_capabilities(get_profile(model))
    except WeightsUnavailable as exc:
        raise NotRun(exc.short) from None
    wanted = ZERO_SHOT_CAPABILITIES if protocol == "zero_shot" else ("embed.text.pooled",)
    if protocol not in CARD.protocols:
        raise ValueError(f"unknown protocol {protocol!r}; expected one of {', '.join(CARD.protocols)}")
    capability = next((c for c in wanted if c in profile.capabilities), None)
    if capability is None:
        raise NotRun(f"capability missing: {protocol} needs one of {', '.join(wanted)}; "
                     f"{model} has {', '.join(profile.capabilities) or 'none'}")
    options = {"max_length": FINETUNE_RECIPE["max_length"], "embed_cache": False} if protocol == "finetune" else {}
    try:
        adapter = load_adapter(profile, capability, data_dir=data_dir, **options)
    except WeightsUnavailable as exc:
        raise NotRun(exc.short) from None  # the reason without the loader's low-level cause
    except CapabilityMissing as exc:
        raise NotRun(str(exc)) from None
    if capability == "predict.assertion":
        out = P.zero_shot_assertion(adapter, test["text"].tolist(), assertion_label_map(), gold=test["label"])
    elif capability == "score.options":
        out = P.zero_shot_options(adapter, option_prompts(test), OPTIONS)
    elif protocol == "finetune":
        from ..protocols import finetune as FT

        res = FT.finetune_sequence(adapter, train["item_id"].tolist(), train["text"].tolist(),
                                   train["decision"].tolist(), test["text"].tolist(), LABELS, FINETUNE_RECIPE,
                                   data_sha256=data_sha256(data_dir), retrain=retrain)
        pos = LABELS.index(POSITIVE)
        out = {"pred": (res["pred"] == pos).astype(int), "score": res["proba"][:, pos], "details": res["details"]}
    else:
        out = P.probe(adapter, train["text"].tolist(), train["label"].tolist(), test["text"].tolist(), seed=seed)
    out.update(capability=capability, profile=profile.to_dict(), adapter=adapter)
    return out


#: Slices of the test items, as data: slice name -> record field and, for numbers, bands ``(low, high)``
#: (inclusive; ``None`` = open), for categories optionally ``top`` (the most frequent values, the rest pooled as
#: "other"). A record whose field is None falls in the ``missing`` group. The fields are
#: written by :func:`item_slices` into every prediction record.
SLICES = {
    "section header": {"field": "section", "missing": "no header before the target", "top": 8},
    "sentence length (words)": {"field": "sentence_words", "bands": ((1, 10), (11, 20), (21, 40), (41, None))},
    "concepts in the sentence": {"field": "n_concepts", "bands": ((1, 1), (2, 2), (3, 4), (5, None))},
    "nearest negation trigger": {"field": "trigger_side", "missing": "no trigger in the sentence"},
    "words between trigger and target": {"field": "trigger_gap", "bands": ((0, 0), (1, 3), (4, None)),
                                         "missing": "no trigger in the sentence"},
}
_WORD_RE = re.compile(r"\w+")


def negation_triggers(data_dir=None) -> list[str]:
    """The kit's negation trigger phrases ([PREN] and [POST] lines of the pinned ``negex_triggers.txt``)."""
    from ..models.rules import parse_negex_triggers

    path = resolve(TRIGGERS, data_dir)
    with open(path, encoding="utf-8", newline="") as fh:
        tags = parse_negex_triggers(fh.read(), str(path))
    return tags["[PREN]"] + tags["[POST]"]


def _trigger_regex(triggers) -> re.Pattern:
    alts = sorted({t.casefold() for t in triggers if t.strip()}, key=len, reverse=True)
    return re.compile(r"(?<!\w)(?:" + "|".join(re.escape(t) for t in alts) + r")(?!\w)", re.IGNORECASE)


def item_slices(test: pd.DataFrame, triggers=None, data_dir=None) -> list[dict]:
    """Slice fields per test item, read off the cleaned sentence and its target (:func:`find_target`):

    - ``section``: the last report header (:data:`HEADER_RE`, as the audit finds them) that ends before the
      target, else None;
    - ``sentence_words``: words (``\\w+`` runs) in the sentence;
    - ``n_concepts``: items of the kit sharing the sentence (its ``sentence_key``);
    - ``trigger_side`` / ``trigger_gap``: where the nearest kit negation trigger (:func:`negation_triggers`,
      whole-word, case-insensitive, not overlapping the target; nearest by words between) lies relative to
      the target (``before`` / ``after``) and how many words lie between them; None when the sentence has
      none. This is position only, with no scope rules: which trigger a rule system used is in ``evidence``.
    """
    pattern = _trigger_regex(negation_triggers(data_dir) if triggers is None else triggers)
    n_concepts = (test["n_concepts"] if "n_concepts" in test
                  else test.groupby("sentence_key")["sentence_key"].transform("size"))
    rows = []
    for sentence, concept, key, nc in zip(test["sentence"], test["concept"], test["sentence_key"], n_concepts):
        s = clean(sentence)
        a, b = find_target(s, concept) or (0, 0)
        headers = [m for m in HEADER_RE.finditer(s) if m.end() <= a]
        best = None
        for m in pattern.finditer(s):
            if m.start() < b and m.end() > a:
                continue
            side, gap_text = ("before", s[m.end():a]) if m.end() <= a else ("after", s[b:m.start()])
            gap = len(_WORD_RE.findall(gap_text))
            if best is None or gap < best[1]:
                best = (side, gap)
        rows.append({"sentence_key": key, "section": headers[-1].group(1) if headers else None,
                     "sentence_words": len(_WORD_RE.findall(s)), "n_concepts": int(nc),
                     "trigger_side": best[0] if best else None, "trigger_gap": best[1] if best else None})
    return rows


def predictions(test: pd.DataFrame, out: dict, data_dir=None) -> list[dict]:
    """Per-item predictions for the result cell (labels as words, score = P(negated) or None), with the
    item's ``sentence_key`` and slice fields (:func:`item_slices`, :data:`SLICES`) and, for rule systems
    whose adapter records it, ``evidence``: the trigger behind the decision (text, category, character span
    in the unmarked sentence the rule system saw) or None for no trigger in scope."""
    scores = out.get("score")
    native = out.get("native")
    by_text = getattr(out.get("adapter"), "evidence_by_text", None) or {}
    evidence = [by_text[t] for t in test["text"]] if all(t in by_text for t in test["text"]) else None
    slices = item_slices(test, data_dir=data_dir)
    rows = []
    for i, (iid, gold, pred) in enumerate(zip(test["item_id"], test["decision"], out["pred"])):
        row = {"item_id": iid, "gold": gold, "pred": LABELS[int(pred)],
               "score": None if scores is None else round(float(scores[i]), 6)}
        if native is not None:
            row["native"] = native[i]
        row.update(slices[i])
        if evidence is not None:
            row["evidence"] = evidence[i]
        rows.append(row)
    return rows


def error_table(test: pd.DataFrame, out: dict, kind: str = "fn", n: int = 10) -> pd.DataFrame:
    """Up to ``n`` false negatives (``fn``: negated called affirmed) or false positives (``fp``)."""
    pred = np.asarray(out["pred"])
    gold = test["label"].to_numpy()
    mask = (gold == 1) & (pred == 0) if kind == "fn" else (gold == 0) & (pred == 1)
    cols = ["item_id", "concept", "text"]
    return test.loc[mask, cols].head(n).reset_index(drop=True)


def reproduction(adapter, rows: pd.DataFrame, items: pd.DataFrame, known: dict | None = None) -> pd.DataFrame:
    """Confusion counts and rates of an assertion system on all 2,365 items and on all 2,376 rows, beside
    GenNegEx 1.2's published figures on the whole kit (negated = positive). Each marked item is predicted
    once: ``known`` (item_id -> 0/1, e.g. the run's own test predictions) is reused, the 2,365 items are
    the found rows of the 2,376, and a missing concept counts as affirmed."""
    from ..metrics.classification import precision, sensitivity, specificity
    from ..metrics.report import confusion_counts

    all_rows = rows_for_reproduction(rows)
    lm = assertion_label_map()
    pred_by_id = dict(known or {})
    todo = all_rows[all_rows["text"].notna() & ~all_rows["item_id"].isin(list(pred_by_id))]
    from ..models.openai_compat import UNPARSEABLE

    answers = adapter.predict_assertion(todo["text"].tolist())  # an unparseable answer counts as wrong
    pred_by_id.update(zip(todo["item_id"], (1 - int(y) if x == UNPARSEABLE else lm[x]
                                            for x, y in zip(answers, todo["label"]))))
    table = {}
    for name, frame in (("2,365 items", items), ("2,376 rows", all_rows)):
        pred = np.array([pred_by_id.get(i, 0) for i in frame["item_id"]], dtype=int)
        y = frame["label"].to_numpy()
        c = confusion_counts(y, pred)
        table[name] = {**c, "sensitivity": round(float(sensitivity(y, pred)), 3),
                       "specificity": round(float(specificity(y, pred)), 3),
                       "precision": round(float(precision(y, pred)), 3)}
    table["GenNegEx 1.2 (published, 2,376 rows)"] = dict(GENNEGEX)
    cols = ["tp", "tn", "fp", "fn", "sensitivity", "specificity", "precision"]
    return pd.DataFrame.from_dict(table, orient="index")[cols].rename_axis("system")


def reproduction_rows(repro: pd.DataFrame, system: str) -> list[dict]:
    """Rows for the book's reproduction chapter: GenNegEx's published whole-kit figures beside ``system``
    on all 2,376 rows, and the kit's own row counts."""
    from ..results import reproduction_row

    ours = repro.loc["2,376 rows"]
    src = "chapmanbe/negex TestSet.md (GenNegEx 1.2)"
    rows = [reproduction_row("kit rows / negated / affirmed", "2,376 / 491 / 1,885", "2,376 / 491 / 1,885",
                             "counted by the loader (tested)", "NegEx kit", system="loader")]
    note = ("GenNegEx on the whole kit vs each assertion system on all 2,376 rows; the card page explains "
            "the differences")
    for k in ("tp", "tn", "fp", "fn", "sensitivity", "specificity", "precision"):
        value = float(ours[k]) if k in ("sensitivity", "specificity", "precision") else int(ours[k])
        rows.append(reproduction_row(f"{k} (negated = positive)", GENNEGEX[k], value, note, src, system=system))
    return rows


def phrase_cases(test: pd.DataFrame, out: dict, phrase: str = "negative for", n: int = 10) -> pd.DataFrame:
    """Test items whose sentence contains ``phrase`` (case-insensitive), with gold and predicted decisions:
    for looking at a known weak spot (medspaCy's default rules do not negate "is negative for X")."""
    mask = test["sentence"].str.contains(phrase, case=False, regex=False).to_numpy()
    pred = np.asarray(out["pred"])[mask]
    frame = test.loc[mask, ["item_id", "text", "decision"]].copy()
    frame["predicted"] = [LABELS[int(p)] for p in pred]
    return frame.head(n).reset_index(drop=True)


def build_cell(spec, *, out: dict | None, not_run_reason: str | None, metrics: dict | None, test: pd.DataFrame,
               split_cell: dict, data_dir=None, timing: dict | None = None, repro: pd.DataFrame | None = None) -> dict:
    """The run's result cell: a not-run cell with its reason, or metrics, per-item predictions, confusion
    counts, the reproduction table (assertion systems on atlas-full-v1) and the overlap marker (a profile
    whose ``trained_on`` names the NegEx kit or its triggers)."""
    from .. import results
    from ..metrics import bootstrap
    from ..metrics.report import confusion_counts

    common = dict(split=split_cell, data_sha256=data_sha256(data_dir), timing=timing or {},
                  seeds={"split": SEED, "bootstrap": bootstrap.DEFAULT_SEED,
                         **({"finetune": FINETUNE_RECIPE["seed"]} if spec.protocol == "finetune" else {})})
    if out is None:
        return results.not_run_cell(spec, not_run_reason, metric_names(spec.protocol), **common)
    spec.profile, spec.capability = out["profile"], out["capability"]
    spec.revision = out["profile"].get("revision")
    spec.parameters.update(details=out["details"])
    extra = {"confusion": confusion_counts(test["label"], out["pred"])}
    if repro is not None:
        extra["reproduction"] = repro.reset_index().to_dict(orient="records")
        extra["reproduction_rows"] = reproduction_rows(repro, spec.model)
    overlap = [t for t in out["profile"].get("trained_on", []) if "negex" in t.lower()]
    return results.make_cell(spec, metrics=metrics, predictions=predictions(test, out, data_dir), extra=extra,
                             overlap=overlap, **common)


# --------------------------------------------------------------------------------------- the card contract
# Thin entry points with the same names and shapes on every card (see atlaslib.cards); the notebook still
# calls the functions above, so both paths give the same numbers (tests/cards/test_contract.py).

def audit_items(items: pd.DataFrame, data_dir=None) -> dict:
    """Contract entry point over :func:`audit` (which also needs the kit's raw rows): the counts of its
    tables as plain data (rows and items per decision, rows dropped, sentences over 300 characters)."""
    full = audit(load_rows(data_dir), items)
    counts = full["counts"]
    return {"n_items": int(len(items)), "n_rows": int(counts["rows"].sum()),
            "items_by_decision": {k: int(v) for k, v in counts["items"].items()},
            "dropped_rows": int(len(full["dropped"])), "long_sentences": full["long_sentences"]}


def predict(items: pd.DataFrame, manifest: _splits.SplitManifest, model: str, protocol: str, *, data_dir=None,
            **options) -> list[dict]:
    """Contract entry point over :func:`run_protocol`: one record per test item (``gold`` / ``prediction``
    1 = negated, ``score`` = P(negated) or None, ``decision`` the gold word); :class:`NotRun` (a subclass
    of the contract's :class:`atlaslib.cards.NotRun`) when the run cannot happen."""
    from . import record

    train, test = split_frames(items, manifest)
    out = run_protocol(model, protocol, train, test, data_dir=data_dir, **options)  # NotRun is the contract's
    scores = out.get("score")
    return [record(iid, int(g), int(p), None if scores is None else float(scores[i]), decision=d)
            for i, (iid, g, p, d) in enumerate(zip(test["item_id"], test["label"], out["pred"], test["decision"]))]


def score(records: list[dict], protocol: str, *, model: str | None = None, n_resamples: int = 1000) -> dict:
    """Contract entry point over :func:`atlaslib.metrics.report.binary_metrics` (as the notebook calls it):
    macro F1, sensitivity, specificity, precision and ROC-AUC with stratified percentile intervals."""
    from ..metrics.report import binary_metrics

    scores = [r["score"] for r in records]
    return binary_metrics([r["gold"] for r in records], [r["pred"] for r in records],
                          None if any(s is None for s in scores) else scores, protocol, n_resamples=n_resamples,
                          no_score_reason="a native assertion head gives labels without scores")
