"""Every number in the prose of the card pages, the intro and the methods chapters is rendered from data or
result cells ({{fact:KEY}}, atlaslib.pages.facts) or is one of the listed constants; the statements a
reading of the book against its cells found wrong stay corrected.

The site tree is rendered by ``book.render_site`` (no Jupyter Book build) from a few hand-built result cells
whose predictions are chosen so that each fact has a value computed here independently."""
from __future__ import annotations

import csv
import glob
import re
import unicodedata
from pathlib import Path

import nbformat
import pytest
from scipy.stats import binomtest

from atlaslib import book, results
from atlaslib.cards import negex
from atlaslib.cards.negex import pages as negex_pages
from atlaslib.cards.tempeval import pages as tempeval_pages
from atlaslib.cards.nli_negation.corpus import PATTERNS, default_nli_negation_cases
from atlaslib.pages import facts

REPO = Path(__file__).resolve().parent.parent
ENV = {"python": "test"}


# -- the checker ----------------------------------------------------------------------------------------

def test_checker_finds_typed_numbers_and_nothing_else():
    md = """# Title with 2,376 sentences

Typed: 0.413223 and ±0.15 and 48–63 cases, 1.3.1.
Rendered: {{fact:negex.rows}}; code `1,442` and
```python
x = 123
```
```{warning}
Inside a warning: 17 rows.
```
Names: i2b2, MiniLM-L6-v2, Apache-2.0, SemEval-2015, F1, [link](../a/17.md), #232, 95 %.
"""
    found = facts.typed_numbers(md)
    assert found == [(1, "2,376"), (3, "0.413223"), (3, "0.15"), (3, "48"), (3, "63"), (9, "17")]


#: the pages held to this: facts.PROSE_PAGES, the card pages' sub-pages, the glossary and the references
PAGES = (*facts.PROSE_PAGES, "book/cards/*/*.md", "book/glossary.md", "book/references.md")


@pytest.mark.parametrize("page", sorted(p for pat in PAGES for p in glob.glob(str(REPO / pat))))
def test_prose_numbers_are_rendered_or_listed_constants(page):
    """A number typed into prose must become {{fact:KEY}} (a fact computed by a card's pages module or
    atlaslib.pages.facts) or, if it is a true constant (a seed, a year, a published figure), an entry of the
    card's pages.CONSTANTS (or facts.CONSTANTS) with its source."""
    typed = facts.typed_numbers(Path(page).read_text(encoding="utf-8"))
    assert not typed, (f"{Path(page).relative_to(REPO)}: numbers typed by hand (line, number): {typed}. Write "
                       f"{{{{fact:KEY}}}} (a card's pages.py) or list a true constant in its pages.CONSTANTS.")


@pytest.fixture(scope="module")
def facts_cache(tmp_path_factory):
    """One cache of the slow data facts (the MACCROBAT corpus) for the whole module."""
    return tmp_path_factory.mktemp("facts-cache")


def test_every_placeholder_in_the_sources_names_a_known_fact(facts_cache):
    ctx = facts.FactContext(cache_dir=facts_cache)
    keys = {m.group(1) for p in (REPO / "book").rglob("*.md") for m in facts.PLACEHOLDER.finditer(p.read_text())}
    keys |= {m.group(1) for f in sorted((REPO / "atlaslib/cards").rglob("*.py"))  # every card package's modules
             for m in facts.PLACEHOLDER.finditer(f.read_text())}
    assert keys
    for k in sorted(keys):
        ctx.get(k)  # raises UnknownFact


def test_unknown_fact_fails_naming_page_and_key(data_dir):
    with pytest.raises(facts.UnknownFact, match=r"book/x\.md: unknown fact 'negex\.distinct_sentence'.*"
                                                 r"did you mean|book/x\.md: unknown fact 'negex\.distinct_sentence'"):
        facts.substitute("{{fact:negex.distinct_sentence}}", facts.FactContext(data_dir=data_dir), "book/x.md")
    with pytest.raises(facts.UnknownFact, match="unknown fact namespace 'nope'"):
        facts.substitute("{{fact:nope.x}}", facts.FactContext(), "book/x.md")


def test_fact_formats():
    assert facts.Fact(2376).text() == "2,376"
    assert facts.Fact(0.80587, "percent").text() == "80.6 %"
    assert facts.Fact(0.4462, "rate").text() == "0.446"
    assert facts.Fact((0.2911, 0.70889), "interval").text() == "[0.291, 0.709]"


# -- NegEx facts against independent counts --------------------------------------------------------------

def _kit_rows(data_dir) -> list[list[str]]:
    path = Path(data_dir) / negex.ANNOTATIONS.name
    return [r for r in csv.reader(path.read_text(encoding="utf-8").splitlines(), delimiter="\t") if r]


def test_length_bands_and_miss_kinds_by_hand():
    import pandas as pd

    items = pd.DataFrame({"item_id": ["a", "b", "c", "d"],
                          "sentence": ["x" * 50, "y" * 150, "z" * 400, "w" * 100],
                          "text": ["SKIN: No [entity] RASHES [entity].", "He was negative for [entity] FEVER [entity].",
                                   "[entity] ALLERGIES [entity] - NONE.", "No [entity] PAIN [entity]."]})
    recs = [{"item_id": i, "gold": "negated", "pred": p} for i, p in zip("abcd", ["affirmed", "affirmed", "negated",
                                                                            "affirmed"])]
    bands = negex_pages.error_rates_by_length(items, {"m": recs}).set_index("band")
    assert bands.loc["0–100", ["items", "errors"]].tolist() == [2, 2]
    assert bands.loc["101–300", "error_rate"] == 1.0 and bands.loc["over 300", "errors"] == 0
    miss = negex_pages.negation_misses(items, recs)
    assert miss.set_index("item_id")["kind"].to_dict() == {"a": "section header", "b": "negative for", "d": "other"}


# -- the rendered site ------------------------------------------------------------------------------------

def _write(paths: book.BuildPaths, cell: dict) -> None:
    results.write_cell(cell, results.cell_path(paths.results, cell["card"], cell["version"], cell["model"],
                                               cell["protocol"]))
    nb = paths.runs / cell["card"] / cell["version"] / results.slug(cell["model"]) / f"{cell['protocol']}.ipynb"
    nb.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# run")]), nb)


def _cell(card, version, model, protocol, metrics, predictions, extra=None, split=None):
    spec = results.RunSpec(card=card, version=version, model=model, protocol=protocol)
    return results.make_cell(spec, metrics=metrics, predictions=predictions, extra=extra or {}, split=split or {},
                             env=ENV)


HEADER_MISSES = ("negex-0089", "negex-1989")   # "SKIN: No RASHES", "PSYCHOLOGICAL: No DEPRESSION"
OTHER_MISS = "negex-2109"                       # "He did have some LEFT-SIDED WEAKNESS although ... resolved"


@pytest.fixture(scope="module")
def site(tmp_path_factory, data_dir, facts_cache):
    import shutil

    root = tmp_path_factory.mktemp("prose")
    paths = book.BuildPaths(results=root / "results", runs=root / "runs", build=root / "_build")
    shutil.copytree(facts_cache, paths.build)  # the MACCROBAT facts, if an earlier test computed them
    items = negex.load_items(data_dir)
    full = negex.split(items, "atlas-full-v1")
    gold = items.set_index("item_id")["decision"]
    m = lambda v: results.metric(v, v, v)  # noqa: E731
    # medspaCy: three misses (two after a section header); the probe: one long-sentence error
    med = [{"item_id": i, "gold": gold[i], "pred": "affirmed" if i in HEADER_MISSES + (OTHER_MISS,) else gold[i],
            "score": None} for i in full.test]
    long_ids = [i for i in full.test if len(items.set_index("item_id").loc[i, "sentence"]) > 300]
    probe = [{"item_id": i, "gold": gold[i], "pred": ("affirmed" if gold[i] == "negated" else "negated")
              if i == long_ids[0] else gold[i], "score": 0.5} for i in full.test]
    repro = [{"system": "2,376 rows", "tp": 440, "tn": 1860, "fp": 25, "fn": 51, "sensitivity": 0.896,
              "specificity": 0.987, "precision": 0.946}]
    nm = {f"{b}_zero_shot": m(0.9) for b in negex.METRIC_BASES}
    cells = [
        _cell("negex", "atlas-full-v1", "medspacy-context", "zero_shot", nm, med, {"reproduction": repro}),
        _cell("negex", "atlas-full-v1", "negspacy-negex-kit", "zero_shot", nm, med,
              {"reproduction": [dict(repro[0], sensitivity=0.95, specificity=0.97, precision=0.92)]}),
        _cell("negex", "atlas-full-v1", "all-minilm-l6-v2", "probe", {f"{b}_probe": m(0.9) for b in negex.METRIC_BASES},
              probe),
    ]
    # NLI: a real run (always-entailment: every case whose gold is not entailment is a false entailment), its
    # report read from the cell's unit counts; the expected counts per pattern are counted from the case set here
    from atlaslib.cards.run import run as run_card_contract

    cases = default_nli_negation_cases()
    fe = {}
    for p in PATTERNS:
        n = sum(c.pattern == p and c.gold_label != "entailment" for c in cases)
        fe[p] = (n, n)
    cells.append(run_card_contract("nli_negation", "builtin-v1", "always-entailment", "zero_shot"))
    # TempEval: the scorer's table of closest, the audit numbers, a synthetic-v1 memorize cell
    table = {"rows": [{"row": "contains", "reference": 6173, "predicted": 2078, "correct": 1050, "precision": 0.5053,
                       "recall": 0.1701, "f1": 0.2545},
                      {"row": "contains_closure", "precision": 0.5452, "recall": 0.1734, "f1": 0.2591}]}
    audit = {f"{s}.{k}": v for s in ("Train", "Dev") for k, v in (
        ("scorer.EVENT", 38890), ("scorer.TIMEX3", 3833), ("scorer.CONTAINS", 11176), ("file.EVENT", 39002),
        ("file.CONTAINS", 11248), ("event_outside_annotations", 65), ("event_exact_duplicates", 47),
        ("contains_duplicate_pairs", 72), ("contains_added_by_closure", 2935))}
    cells.append(_cell("tempeval", "thyme-dev-2015", "closest", "phase2", {"contains_f1_phase2": m(0.2545)}, [],
                       {"scorer_table": table, "thyme_audit": audit}))
    cells.append(_cell("tempeval", "thyme-dev-2015", "majority-doctimerel", "phase2",
                       {"doctimerel_accuracy_phase2": m(0.468)}, []))
    cells.append(_cell("tempeval", "synthetic-v1", "memorize", "phase1",
                       {"contains_closure_f1_phase1": results.metric(None, reason="not applicable"),
                        "event_span_f1_phase1": m(0.8)}, [], {"n_train_documents": 28, "n_test_documents": 12}))
    # MACCROBAT: a probe cell carrying the gold-cut measurement
    leak = {"with_gold_cuts": {"f1": 0.5}, "without_gold_cuts": {"f1": 0.25}, "f1_difference": 0.25,
            "model": "all-minilm-l6-v2"}
    cells.append(_cell("maccrobat", "atlas-n100-v1", "all-minilm-l6-v2", "probe", {"entity_f1_probe": m(0.5)}, [],
                       {"gold_cut_leakage": leak}))
    for c in cells:
        _write(paths, c)
    src = render_without_lessons(paths)  # the lessons read real runs' cells, and these cells are made up
    return {"src": src, "items": items, "full": full, "fe": fe, "long_ids": long_ids}


def render_without_lessons(paths: book.BuildPaths) -> Path:
    """``book.render_site`` without executing the course's lessons; the rendered site tree."""
    mp = pytest.MonkeyPatch()
    mp.setattr(book, "start_course", lambda *a, **k: None)
    mp.setattr(book, "finish_course", lambda *a, **k: [])
    try:
        src, _ = book.render_site(paths)
    finally:
        mp.undo()
    return src


def _text(src: Path, page: str) -> str:
    return re.sub(r"\s+", " ", (src / page).read_text(encoding="utf-8"))


def _card_text(src: Path, card: str) -> str:
    """The card page and its sub-pages (data and protocols, reproduction, per version), as one text."""
    pages = [src / f"book/cards/{card}.md", *sorted((src / "book/cards" / card).rglob("*.md"))]
    return " ".join(re.sub(r"\s+", " ", p.read_text(encoding="utf-8")) for p in pages)


def test_rendered_pages_hold_no_placeholder(site):
    left = [str(p) for p in (site["src"] / "book").rglob("*.md") if "{{fact:" in p.read_text()]
    assert not left


def test_negex_counts_rows_and_distinct_sentences_apart(site, data_dir):
    rows = _kit_rows(data_dir)
    found = [r for r in rows if r[1].strip().casefold() in r[2].casefold()]
    distinct = {unicodedata.normalize("NFKC", " ".join(r[2].split())).casefold() for r in found}
    page = _card_text(site["src"], "negex")
    assert f"{len(rows):,} rows from 120 de-identified reports" in page
    assert f"{len(found):,} items in {len(distinct):,} distinct sentences" in page
    intro = _text(site["src"], "book/intro.md")
    assert f"{len(rows):,} rows ({len(distinct):,} distinct sentences)" in intro
    assert "2,376 sentences" not in page + intro


def test_negex_balances_and_subset_are_the_splits(site):
    items, full = site["items"], site["full"]
    lab = items.set_index("item_id")["label"]
    n100 = negex.split(items, "atlas-n100-v1")
    affirmed = 1 - lab.loc[full.test].mean()
    page = _card_text(site["src"], "negex")
    assert f"| class balance | {100 * affirmed:.1f} % of `atlas-full-v1` test items are affirmed" in page
    assert "78–79" not in page
    f1_majority = affirmed / (1 + affirmed)  # F1 of the affirmed class when everything is affirmed, halved
    assert f"scores {f1_majority:.3f} macro F1" in page
    splits = _text(site["src"], "book/methods/splits.md")
    assert set(n100.test) <= set(full.test)
    assert "Every test item of `atlas-n100-v1` is also a test item of `atlas-full-v1`." in splits
    assert (f"{len(full.test):,} items, {100 * lab.loc[full.test].mean():.1f} % negated against "
            f"{100 * lab.mean():.1f} % in the pool") in splits
    assert "same three rules on every card" not in splits


def test_context_misses_and_length_bands_come_from_predictions(site):
    page = _card_text(site["src"], "negex")
    assert ('of its 3 false negatives, 2 are negations that follow a section header directly ("SKIN: No RASHES" '
            'and "PSYCHOLOGICAL: No DEPRESSION"), 0 use the phrase "negative for", and 1 are other phrasings') in page
    n_long = len(site["long_ids"])
    assert f"| all-minilm-l6-v2 (probe) |" in page and f"1 of {n_long:,} ({1 / n_long:.3f})" in page
    assert "tend to miss long" not in page
    # published GenNegEx minus the cell, each rate named with its own gap (not one rounded bound for all three)
    gaps = [0.959 - 0.95, 0.982 - 0.97, 0.933 - 0.92]
    assert ("scores sensitivity 0.950, specificity 0.970 and PPV 0.920; GenNegEx's published rates minus these are "
            f"{gaps[0]:.3f}, {gaps[1]:.3f} and {gaps[2]:.3f}, the largest {max(gaps):.3f} in size") in page
    assert "lands within" not in page


def test_nli_denominators_and_widest_interval(site):
    cases = default_nli_negation_cases()
    per = {p: sum(c.pattern == p and c.gold_label != "entailment" for c in cases) for p in PATTERNS}
    page = _card_text(site["src"], "nli_negation")
    expected = ", ".join(f"{per[p]} ({p})" for p in PATTERNS[:-1]) + f" and {per[PATTERNS[-1]]} ({PATTERNS[-1]})"
    assert expected in page
    widths = {p: binomtest(k, n).proportion_ci(method="exact") for p, (k, n) in site["fe"].items()}
    widest = max(widths, key=lambda p: widths[p].high - widths[p].low)
    (k, n), ci = site["fe"][widest], widths[widest]
    assert f"[{ci.low:.3f}, {ci.high:.3f}] (`always-entailment` on `{widest}`, {k} of {n})" in page
    assert "±0.15" not in page and "48–63" not in page


def test_maccrobat_tempeval_and_sources(site):
    mac = _card_text(site["src"], "maccrobat")
    assert "F1 0.500 with the gold cuts and 0.250 when trained and tested on uncut words" in mac
    assert "project brief" not in mac and "zero-shot slot" not in mac and "`train_lookup`" in mac
    tmp = _card_text(site["src"], "tempeval")
    assert "`closest` finds 1,050 of 6,173 CONTAINS with 2,078 guesses (P 0.505, R 0.170, F1 0.255" in tmp
    assert "reaches 0.468 accuracy" in tmp and "(28 Train, 12 Dev)" in tmp
    assert "issue 5" not in tmp and "`doctimerel_accuracy`" in tmp
    for page in ("book/cards/negex.md", "book/cards/tempeval.md"):
        assert "may not be cited or republished until the licence is confirmed" in _text(site["src"], page)
        assert "leaves this card out" not in _text(site["src"], page)
    intro = _text(site["src"], "book/intro.md")
    assert "are not separated by this test set" not in intro and "paired comparisons" in intro
    assert 'A "no" in the *same* column' not in _text(site["src"], "book/reproduction.md")


def test_model_page_shows_a_metric_the_run_has(site):
    page = _text(site["src"], "book/models/memorize.md")
    assert "event_span_f1: 0.800" in page and "contains_closure_f1: n/a" not in page


# -- run-page tables and the MACCROBAT gold-cut measure ------------------------------------------------------

def test_whole_table_says_k_of_n_and_holds_every_row_in_full():
    import pandas as pd

    from atlaslib.pages.tables import whole_table

    long = "x" * 300 + " END"
    t = whole_table(pd.DataFrame({"id": range(12), "text": [long] * 12}), 10, "errors")
    html = t._repr_html_()
    assert "Showing 10 of 12 errors" in html and html.count("<details>") == 1
    assert html.count(" END") == 10 + 12 and "..." not in html and "…" not in html
    small = whole_table(pd.DataFrame({"id": [1, 2, 3]}), 10, "rows")
    assert small.caption == "Showing 3 of 3 rows." and "<details>" not in small._repr_html_()


def test_gold_cuts_counted_and_projected_by_hand():
    import pandas as pd

    from atlaslib.cards import maccrobat as mc

    text = "hepatosplenomegaly and fever"
    spans = mc.words_of(text, [6, 18, 23, 28])       # gold: "splenomegaly" (6-18) and "fever" (23-28)
    words = [text[a:b] for a, b in spans]
    assert words == ["hepato", "splenomegaly", "and", "fever"]
    items = pd.DataFrame({"text": [text], "word_spans": [spans], "mentions": [[("problem", 1, 1), ("problem", 3, 3)]]})
    assert mc.gold_cut_mentions(items) == {"mentions": 2, "cut_inside_word": 1, "sentences": 1}
    gold_tags = ["O", "B-problem", "O", "B-problem"]
    uncut_words, uncut = mc.uncut_tags(text, spans, gold_tags)
    assert uncut_words == ["hepatosplenomegaly", "and", "fever"] and uncut == ["B-problem", "O", "B-problem"]
    gold = [mc.char_mentions(gold_tags, spans)]
    assert gold == [{("problem", 6, 18), ("problem", 23, 28)}]
    # without the cuts the best a model can do is the whole word: one of two gold mentions found
    pred = [mc.char_mentions(uncut, mc.natural_word_spans(text))]
    s = mc.char_span_f1(gold, pred)
    assert (s["tp"], s["fp"], s["fn"]) == (1, 1, 1) and s["f1"] == pytest.approx(0.5)


def test_tempeval_audit_numbers_flatten_the_audit_tables():
    import pandas as pd

    idx = pd.MultiIndex.from_product([["Train", "Dev"], ["documents", "EVENT", "TIMEX3", "CONTAINS"]])
    t1 = pd.DataFrame({"official scorer": [3, 100, 10, 20, 2, 50, 5, 9],
                       "elements in file": [3, 110, 10, 23, 2, 50, 5, 9],
                       "elements in <annotations>": [3, 106, 10, 23, 2, 50, 5, 9]}, index=idx)
    dup = pd.DataFrame({"Train": [6, 2, 3], "Dev": [0, 1, 0]},
                       index=["EVENT_exact_duplicates", "EVENT_spans_with_two_attribute_sets", "CONTAINS_duplicate_pairs"])
    con = pd.DataFrame({"Train": [7], "Dev": [1]}, index=["CONTAINS_added_by_closure"])
    n = tempeval_pages.tempeval_audit_numbers({"table1": t1, "duplicates": dup, "contains": con})
    assert n["Train.file.EVENT"] - n["Train.scorer.EVENT"] == n["Train.event_outside_annotations"] + \
        n["Train.event_exact_duplicates"] == 10
    assert n["Train.contains_duplicate_pairs"] == 3 and n["Dev.contains_added_by_closure"] == 1
    # a span with two attribute sets: two Table 1 items, one item of the span-only score
    assert (n["Train.scorer.EVENT_spans"], n["Dev.scorer.EVENT_spans"]) == (100 - 2, 50 - 1)
    assert facts.FactContext(cells=[{"card": "tempeval", "version": "thyme-dev-2015", "model": "closest",
                                     "protocol": "phase2", "status": "ok", "metrics": {},
                                     "extra": {"thyme_audit": n}}]).get("tempeval.Train.file.EVENT").text() == "110"


def test_each_card_registers_its_own_facts_and_constants():
    """A card's facts come from its pages module (FACTS), registered by discovery; its page functions stay
    imported from the card's pages module (facts forwards none of them); its typed constants join the generic
    ones."""
    providers = facts.providers()
    assert providers["negex"] is negex_pages.FACTS["negex"] and providers["tempeval"] is tempeval_pages._tempeval
    with pytest.raises(AttributeError):
        facts.negation_misses
    with pytest.raises(AttributeError):
        facts.LENGTH_BANDS  # a card's data, not a page function
    allowed = facts.constants()
    assert str(negex.SEED) in allowed and set(facts.CONSTANTS) <= set(allowed)
    assert "20" in allowed and "GenNegEx" in allowed["20"] and "TempEval" in allowed["20"]  # both cards' sources


def test_a_module_can_register_its_own_facts():
    def provider(ctx):
        return {"demo.count": facts.Fact(1234567)}

    facts.register_provider("demo", provider)
    try:
        assert facts.substitute("n = {{fact:demo.count}}", facts.FactContext()) == "n = 1,234,567"
        with pytest.raises(ValueError, match="already registered"):
            facts.register_provider("demo", lambda ctx: {})
    finally:
        facts.PROVIDERS.pop("demo")
