"""Facts quoted in prose: numbers computed from the data and the result cells, placed where a page says
``{{fact:KEY}}``.

A page in ``book/`` (card pages, the intro, the methods chapters, any chapter) never types a count, share
or score by hand: it writes a placeholder such as ``{{fact:negex.distinct_sentences}}`` and
:func:`substitute_site` replaces it while the book renders, with the value computed here. Keys are
``<namespace>.<name>``; each namespace is one provider function below (data facts from the card loaders
and audits, run facts from the result cells of this build). A key no provider knows fails the build with
one error naming the page and the key; a fact whose run is not in this build renders as
"n/a (no … run in this build)", never as a stale number.

Formatting is the same everywhere (:meth:`Fact.text`): counts with thousands separators (``2,376``),
shares as percentages with one decimal (``80.6 %``), rates and scores with three decimals (``0.446``),
intervals as ``[0.291, 0.709]``; ``markdown`` facts are whole blocks (small tables) computed the same way.

Numbers that are not from the data (the split seed, years, published figures of the sources, version
names) are listed once in :data:`CONSTANTS` with their source; ``tests/test_prose_numbers.py`` checks
that every other number in the prose of the checked pages is a placeholder.

Cost: data facts read the NegEx kit (0.2 s) and build the NLI corpus (ms); MACCROBAT and TempEval facts
come from the numbers their result cells already carry (no corpus load, no THYME audit at render time).
Each provider runs at most once per build (:class:`FactContext` caches it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

PLACEHOLDER = re.compile(r"\{\{fact:([A-Za-z0-9_.\-]+)\}\}")

#: Numbers a page may type by hand, each with its source. Anything else in the checked prose is a
#: ``{{fact:…}}`` placeholder (tests/test_prose_numbers.py holds this).
CONSTANTS: dict[str, str] = {
    "20261006": "the atlas split seed (atlaslib.cards.*.SEED)",
    "20150605": "the TempEval bootstrap seed (atlaslib.cards.tempeval)",
    "95": "the confidence level of every interval (95 %)",
    "1,000": "bootstrap resamples per interval (atlaslib.metrics.bootstrap)",
    "500": "train items of every atlas-*-v1 split (card definition)",
    "100": "test items of atlas-n100-v1 (card definition, in its name)",
    "300": "the sentence-length threshold of the NegEx audit (characters)",
    "0": "zero (gate thresholds, F1 0 or 1 by construction)",
    "1": "one (pass = 1, F1 1 by construction, depth 0–1, first word)",
    "2": "two (negation depth, 'two negations')",
    "3": "three (negation depth, three digits)",
    "1,442": "test items of the card's first draw of atlas-full-v1 (another ranking key), for comparison",
    "316": "negated test items of that first draw",
    "1,126": "affirmed test items of that first draw",
    "423": "excluded items of that first draw",
    "0.912": "the illustrative cell in the intro's 'How to read a cell' (not a result)",
    "0.880": "the illustrative cell in the intro's 'How to read a cell' (not a result)",
    "0.940": "the illustrative cell in the intro's 'How to read a cell' (not a result)",
    "36": "MACCROBAT types mapped to O (41 types, 5 kept)",
    "4.0": "the licence name CC BY 4.0",
    "1.0": "an F1 of 1 by construction (gold spans given in phase 2)",
    "30": "the scheduler connect timeout in seconds (atlaslib.executor); the cluster count under which the "
          "metrics chapter warns that a cluster bootstrap is too narrow",
    "0.95": "the confidence level as a fraction",
    "2.5": "lower percentile of a 95 % interval",
    "97.5": "upper percentile of a 95 % interval",
    "80": "power of the minimum detectable difference (atlaslib.metrics.compare)",
    "5": "two-sided level of the minimum detectable difference, in %",
    "127.0.0.1": "the loopback address",
    "0.5": "the NLI accuracy floor default (atlaslib.cards.nli_negation.challenge)",
    "120": "reports in the NegEx kit (its file name: Annotations-1-120-random.txt)",
    "1.2": "GenNegEx version 1.2 (chapmanbe/negex)",
    "1.2.0": "anaforatools version",
    "1.3.1": "medspaCy version",
    "232": "medspaCy GitHub issue number (#232)",
    "41": "MACCROBAT entity types (Caufield et al. 2019)",
    "7": "IOB2 tags over three types (O + 2 × 3)",
    "200": "MACCROBAT2020 case reports (Caufield et al.)",
    "400": "MACCROBAT brat files (200 reports × .txt/.ann)",
    "440": "THYME colon-cancer annotation files pinned (stylerw/thymedata)",
    "293": "THYME Train documents (Bethard et al. 2015)",
    "147": "THYME Dev documents (Bethard et al. 2015)",
    "6": "SemEval-2015 Task 6 / six TIMEX3 classes",
    "2010": "year (i2b2 2010)",
    "2014": "year (Styler et al. 2014)",
    "2015": "year (Clinical TempEval 2015)",
    "2019": "year",
    "2020": "year (MACCROBAT2020)",
    "471": "GenNegEx 1.2 published TP (chapmanbe/negex TestSet.md)",
    "1,851": "GenNegEx 1.2 published TN (chapmanbe/negex TestSet.md)",
    "34": "GenNegEx 1.2 published FP (chapmanbe/negex TestSet.md)",
    "20": "GenNegEx 1.2 published FN (chapmanbe/negex TestSet.md); the 20-character window of the TempEval "
          "gated-output test (tests/cards/test_tempeval_gated.py)",
    "12": "hex digits of a key shown in the splits chapter (a display choice)",
    "0.959": "GenNegEx 1.2 published sensitivity (chapmanbe/negex TestSet.md)",
    "0.982": "GenNegEx 1.2 published specificity (chapmanbe/negex TestSet.md)",
    "0.933": "GenNegEx 1.2 published PPV (chapmanbe/negex TestSet.md)",
    "0.875": "Bethard et al. 2015: BluLab EVENT span F1",
    "0.743": "Bethard et al. 2015: memorize TIMEX3 span P",
    "0.372": "Bethard et al. 2015: memorize TIMEX3 span R",
    "0.01": "Bethard et al. 2015: gap to annotator agreement (events, degree, polarity)",
    "0.03": "Bethard et al. 2015: gap to annotator agreement (modality, type)",
    "0.05": "Bethard et al. 2015: gap to annotator agreement (times, DocTimeRel)",
    "0.40": "Bethard et al. 2015: gap to annotator agreement (CONTAINS)",
    "6/7": "anaforatools' closure test case, expected precision",
    "4/9": "anaforatools' closure test case, expected recall",
}


#: The pages whose prose :func:`typed_numbers` checks (relative to the repository): card pages, the intro,
#: the methods chapters.
PROSE_PAGES = ("book/cards/*.md", "book/intro.md", "book/methods/*.md")

_FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")
_CODE_INFO = re.compile(r"^\s*(\{(code-cell|code|code-block|literalinclude|math|raw)\}|[A-Za-z0-9_+-]+)?\s*$")
_NUMBER = re.compile(r"(?<![\w.#])\d+(?:,\d{3})*(?:\.\d+)*(?:/\d+)?(?![\w])")


def prose_text(markdown: str) -> list[tuple[int, str]]:
    """The prose lines of a MyST page, each with its line number: code fences (```` ``` ````,
    ```` ```{code-cell} ````), inline code, HTML comments, ``{{fact:…}}`` placeholders, link targets, URLs
    and directive options (``:alt: …``) removed; the text of admonitions and figures' captions kept."""
    text = re.sub(r"<!--.*?-->", lambda m: "\n" * m.group(0).count("\n"), markdown, flags=re.S)
    out, fence = [], None
    for no, line in enumerate(text.split("\n"), 1):
        m = _FENCE.match(line.strip())
        if fence is not None:
            if m and m.group(1)[0] == fence[0][0] and len(m.group(1)) >= len(fence[0]) and not m.group(2).strip():
                fence = None
            elif not fence[1] and not re.match(r"^\s*:[\w-]+:", line):
                out.append((no, line))
            continue
        if m:
            fence = (m.group(1), bool(_CODE_INFO.match(m.group(2))))
            continue
        out.append((no, line))
    cleaned = []
    for no, line in out:
        line = PLACEHOLDER.sub(" ", line)
        line = re.sub(r"`[^`]*`", " ", line)
        line = re.sub(r"\]\([^)]*\)", "]", line)
        line = re.sub(r"https?://\S+", " ", line)
        cleaned.append((no, line))
    return cleaned


def typed_numbers(markdown: str) -> list[tuple[int, str]]:
    """Every number typed in the prose of ``markdown`` (see :func:`prose_text`) that is not in
    :data:`CONSTANTS`, as ``(line, number)``. Parts of words and names are not numbers: ``i2b2``,
    ``MiniLM-L6-v2``, ``Apache-2.0``, ``F1``, ``SemEval-2015``."""
    found = []
    for no, line in prose_text(markdown):
        for m in _NUMBER.finditer(line):
            before = line[max(0, m.start() - 2):m.start()]
            if len(before) == 2 and before[1] == "-" and before[0].isalnum():
                continue  # a hyphenated name: Apache-2.0, SemEval-2015
            if m.group(0) not in CONSTANTS:
                found.append((no, m.group(0)))
    return found


class UnknownFact(KeyError):
    """A page names a fact no provider knows."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0]


@dataclass(frozen=True)
class Fact:
    """One value and how to write it: ``count``, ``percent`` (a share in [0, 1]), ``rate`` (three
    decimals), ``interval`` (a (low, high) pair), ``text`` or ``markdown`` (a block)."""

    value: Any
    kind: str = "count"
    source: str = ""

    def text(self) -> str:
        v = self.value
        if v is None:
            return "n/a"
        if self.kind == "count":
            return f"{int(v):,}"
        if self.kind == "percent":
            return f"{100 * float(v):.1f} %"
        if self.kind == "rate":
            return f"{float(v):.3f}"
        if self.kind == "decimal2":
            return f"{float(v):.2f}"
        if self.kind == "interval":
            return f"[{float(v[0]):.3f}, {float(v[1]):.3f}]"
        if self.kind in ("text", "markdown"):
            return str(v)
        raise ValueError(f"fact kind {self.kind!r}: expected count, percent, rate, interval, text or markdown")


def missing(what: str, kind: str = "text") -> Fact:
    """The value of a fact whose run is not part of this build."""
    return Fact(f"n/a (no {what} in this build)", "text" if kind != "markdown" else "markdown")


def join_and(parts: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


# -- context -------------------------------------------------------------------------------------------

@dataclass
class FactContext:
    """What facts are computed from: the result cells shown in this build and the data directory.
    Providers are computed on first use and kept for the build."""

    cells: list[dict] = field(default_factory=list)
    data_dir: Any = None
    cache_dir: Any = None          # where slow data facts are kept between builds (keyed by source + data)
    _cache: dict = field(default_factory=dict)

    def cell(self, card: str, version: str, model: str, protocol: str) -> dict | None:
        for c in self.cells:
            if (c.get("card"), c.get("version"), c.get("model"), c.get("protocol")) == (card, version, model,
                                                                                          protocol):
                return c if c.get("status") == "ok" else None
        return None

    def ok_cells(self, card: str, version: str | None = None) -> list[dict]:
        return [c for c in self.cells if c.get("card") == card and c.get("status") == "ok"
                and (version is None or c.get("version") == version)]

    def namespace(self, name: str) -> dict[str, Fact]:
        if name not in self._cache:
            if name not in PROVIDERS:
                raise UnknownFact(f"unknown fact namespace {name!r}; known: {', '.join(sorted(PROVIDERS))}")
            self._cache[name] = PROVIDERS[name](self)
        return self._cache[name]

    def get(self, key: str) -> Fact:
        ns, _, _ = key.partition(".")
        facts = self.namespace(ns)
        if key not in facts:
            near = [k for k in facts if k.split(".")[-1] == key.split(".")[-1]]
            raise UnknownFact(f"unknown fact {key!r}" + (f" (did you mean {near[0]!r}?)" if near else "") +
                              f"; namespace {ns!r} has: {', '.join(sorted(facts))}")
        return facts[key]


# -- substitution ----------------------------------------------------------------------------------------

def substitute(text: str, ctx: FactContext, where: str = "<text>") -> str:
    """Replace every ``{{fact:KEY}}`` in ``text``; an unknown key raises :class:`UnknownFact` naming
    ``where`` and the key."""
    def repl(m: re.Match) -> str:
        try:
            return ctx.get(m.group(1)).text()
        except UnknownFact as exc:
            raise UnknownFact(f"{where}: {exc}") from None

    return PLACEHOLDER.sub(repl, text)


def fact_text(key: str, cells: Iterable[dict] = (), data_dir=None) -> str:
    """One fact as the pages write it (for notebooks quoting the same numbers as the card pages)."""
    return FactContext(cells=list(cells), data_dir=data_dir).get(key).text()


def substitute_site(src: Path, cells: Iterable[dict], data_dir=None, cache_dir=None) -> list[str]:
    """Fill the placeholders of every Markdown page of the rendered site tree ``src`` (after the card
    pages, intro and chapters are rendered). Returns the pages changed."""
    ctx = FactContext(cells=list(cells), data_dir=data_dir, cache_dir=cache_dir)
    changed = []
    for page in sorted((Path(src) / "book").rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        if "{{fact:" not in text:
            continue
        page.write_text(substitute(text, ctx, str(page.relative_to(src))), encoding="utf-8")
        changed.append(str(page.relative_to(src)))
    return changed


# -- NegEx -----------------------------------------------------------------------------------------------

#: Sentence-length bands (characters) for the error rates by length.
LENGTH_BANDS = ((0, 100), (101, 300), (301, None))


def _negex_frames(ctx: FactContext):
    if "_negex" not in ctx._cache:
        from ..cards import negex

        rows = negex.load_rows(ctx.data_dir)
        items = negex.items_from_rows(rows)
        ctx._cache["_negex"] = (rows, items)
    return ctx._cache["_negex"]


def negex_split_facts(items: pd.DataFrame) -> dict:
    """Split balances of both NegEx versions and the subset check, from :func:`negex.split`."""
    from ..cards import negex

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
    from ..cards import negex
    from ..metrics.classification import majority_macro_f1

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
    from ..splits import allocate

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
    src = "NegEx result cells (per-item predictions) and atlaslib.pages.facts.negation_misses"
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
    from ..cards.negex import GENNEGEX

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


# -- NLI negation ----------------------------------------------------------------------------------------

def _nli(ctx: FactContext) -> dict[str, Fact]:
    from ..cards.nli_negation.corpus import LABELS, PATTERNS, default_nli_negation_cases

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
        f["nli.widest_interval_run"] = Fact(f"`{model}`", "text", rsrc)
        f["nli.widest_interval_pattern"] = Fact(f"`{pattern}`", "text", rsrc)
        f["nli.widest_interval_counts"] = Fact(f"{r.get('successes'):,} of {r.get('trials'):,}", "text", rsrc)
    return f


def _nli_openmed(ctx: FactContext) -> dict[str, Fact]:
    """The NLI card held against openmed, both ways (:func:`atlaslib.cards.nli_negation.anchor.page_facts`:
    the agreement is computed while the book builds)."""
    from ..cards.nli_negation.anchor import page_facts

    return {k: Fact(*v) for k, v in page_facts().items()}


# -- MACCROBAT -------------------------------------------------------------------------------------------

def maccrobat_data_numbers(data_dir=None) -> dict:
    """Counts of the MACCROBAT corpus and its split that the card page quotes (loads the 400 pinned files,
    about a second; :func:`_maccrobat` caches the result on disk keyed by the pinned checksums and the
    source of the card module)."""
    from ..cards import maccrobat as M

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


def _source_key(*modules) -> str:
    import hashlib
    import inspect

    h = hashlib.sha256()
    for m in modules:
        h.update(Path(inspect.getfile(m)).read_bytes())
    return h.hexdigest()


def _maccrobat(ctx: FactContext) -> dict[str, Fact]:
    import json
    import sys

    from ..cards import maccrobat as M

    key = (_source_key(M, sys.modules[__name__]) + M._SUMS_PATH.read_text()  # code and pinned checksums
           + str(ctx.data_dir or ""))
    cache = Path(ctx.cache_dir) / "facts-maccrobat.json" if ctx.cache_dir else None
    nums = None
    if cache is not None and cache.is_file():
        stored = json.loads(cache.read_text())
        nums = stored["numbers"] if stored.get("key") == key else None
    if nums is None:
        nums = maccrobat_data_numbers(ctx.data_dir)
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps({"key": key, "numbers": nums}))
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
        f["maccrobat.probe_run"] = Fact(f"`{leak.get('model', 'probe')}`", "text", lsrc)
    return f


# -- Clinical TempEval -----------------------------------------------------------------------------------

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
    return out


def _scorer_row(cell: dict, name: str) -> dict | None:
    for r in ((cell.get("extra") or {}).get("scorer_table") or {}).get("rows", []):
        if r.get("row") == name:
            return r
    return None


def _tempeval(ctx: FactContext) -> dict[str, Fact]:
    f: dict[str, Fact] = {}
    audit = next((c["extra"]["thyme_audit"] for c in ctx.ok_cells("tempeval")
                  if (c.get("extra") or {}).get("thyme_audit")), None)
    asrc = "THYME audit stored by the TempEval notebook (extra.thyme_audit, tempeval.audit.thyme_audit)"
    keys = [f"{s}.{k}" for s in ("Train", "Dev") for k in (
        *(f"{w}.{x}" for w in ("scorer", "file", "annotations") for x in ("documents", "EVENT", "TIMEX3", "CONTAINS")),
        "event_exact_duplicates", "contains_duplicate_pairs", "contains_added_by_closure", "event_outside_annotations")]
    if audit is None:  # Table 1 counts are also in every audited cell's reproduction rows
        audit = {}
        for c in ctx.ok_cells("tempeval"):
            for r in (c.get("extra") or {}).get("reproduction_rows") or []:
                m = re.match(r"THYME (Train|Dev) (documents|EVENT|TIMEX3|CONTAINS) \(Table 1\)", r.get("figure", ""))
                if m:
                    audit.setdefault(f"{m.group(1)}.scorer.{m.group(2)}", r["ours"])
    for k in keys:
        f[f"tempeval.{k}"] = Fact(audit[k], "count", asrc) if k in audit else missing("audited TempEval run")
    rsrc = "TempEval result cells (extra.scorer_table, official scorer)"
    cell = ctx.cell("tempeval", "thyme-dev-2015", "closest", "phase2")
    row = _scorer_row(cell, "contains") if cell else None
    crow = _scorer_row(cell, "contains_closure") if cell else None
    for k, kind, get in (("closest.contains_correct", "count", lambda r, c: r["correct"]),
                         ("closest.contains_reference", "count", lambda r, c: r["reference"]),
                         ("closest.contains_predicted", "count", lambda r, c: r["predicted"]),
                         ("closest.contains_precision", "rate", lambda r, c: r["precision"]),
                         ("closest.contains_recall", "rate", lambda r, c: r["recall"]),
                         ("closest.contains_f1", "rate", lambda r, c: r["f1"]),
                         ("closest.closure_precision", "rate", lambda r, c: c["precision"]),
                         ("closest.closure_f1", "rate", lambda r, c: c["f1"])):
        try:
            f[f"tempeval.{k}"] = Fact(get(row, crow), kind, rsrc)
        except (TypeError, KeyError):
            f[f"tempeval.{k}"] = missing("closest phase-2 run on thyme-dev-2015")
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
    mv = None
    if maj:
        for name in ("doctimerel_accuracy_phase2", "doctimerel_f1_phase2"):
            mv = (maj["metrics"].get(name) or {}).get("value")
            if mv is not None:
                break
    f["tempeval.majority_doctimerel_accuracy"] = (Fact(mv, "rate", rsrc) if mv is not None
                                                  else missing("majority-doctimerel run on thyme-dev-2015"))
    return f


# -- splits chapter -------------------------------------------------------------------------------------

def _splits(ctx: FactContext) -> dict[str, Fact]:
    """The worked example of the splits chapter, computed by :mod:`atlaslib.splits`."""
    from ..splits import rank, seed_hash

    seed, ids = 20261006, [f"negex-{i:04d}" for i in range(1, 6)]
    order = rank(ids, seed)
    lines = ["| item | key (first 12 hex digits) | rank |", "|---|---|---|"]
    lines += [f"| `{i}` | `{seed_hash(seed, i)[:12]}` | {order.index(i) + 1} |" for i in ids]
    src = "atlaslib.splits.seed_hash / rank"
    without = rank([i for i in ids if i != ids[3]], seed)
    return {"splits.example_table": Fact("\n".join(lines), "markdown", src),
            "splits.example_draw": Fact(" and ".join(f"`{i}`" for i in order[:2]), "text", src),
            "splits.example_removed": Fact(f"`{ids[3]}`", "text", src),
            "splits.example_draw_same": Fact("the same" if without[:2] == order[:2] else "different", "text", src)}


def finetune_recipes_markdown() -> str:
    """The fine-tune recipes of the cards that have one (``FINETUNE_RECIPE``, card data), side by side."""
    from ..cards import maccrobat, negex
    from ..protocols.recipe import RECIPE_KEYS

    recipes = {"NegEx": negex.FINETUNE_RECIPE, "MACCROBAT": maccrobat.FINETUNE_RECIPE}
    show = lambda v: f"{v:g}" if isinstance(v, float) else ("—" if v is None else str(v))  # noqa: E731
    lines = ["| setting | " + " | ".join(recipes) + " | meaning |", "|---|" + "---|" * len(recipes) + "---|"]
    for k, meaning in RECIPE_KEYS.items():
        if any(k in r for r in recipes.values()):
            lines.append(f"| `{k}` | " + " | ".join(show(r.get(k)) for r in recipes.values()) + f" | {meaning} |")
    return "\n".join(lines)


def _finetune(ctx: FactContext) -> dict[str, Fact]:
    return {"finetune.recipes": Fact(finetune_recipes_markdown(), "markdown",
                                     "FINETUNE_RECIPE in atlaslib/cards/negex/card.py and maccrobat/card.py")}


PROVIDERS: dict[str, Callable[[FactContext], dict[str, Fact]]] = {
    "finetune": _finetune,
    "splits": _splits,
    "negex": _negex,
    "negex_runs": _negex_runs,
    "nli": _nli,
    "nli_openmed": _nli_openmed,
    "maccrobat": _maccrobat,
    "tempeval": _tempeval,
}


def register_provider(namespace: str, provider: Callable[[FactContext], dict[str, Fact]]) -> None:
    """Add a namespace of facts from another module (e.g. ``register_provider("compare", my_facts)`` at import
    time of a module the book renderer imports): ``provider(ctx)`` returns ``{"compare.<name>": Fact(...)}``.
    A namespace is registered once; a second registration under the same name is an error."""
    if namespace in PROVIDERS and PROVIDERS[namespace] is not provider:
        raise ValueError(f"fact namespace {namespace!r} is already registered")
    PROVIDERS[namespace] = provider
