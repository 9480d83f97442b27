"""Statements of the built book that readers found wrong stay corrected, each number rendered from data.

Each check reads a rendered site tree (``_build/site-src`` of a build: the pages after the facts are filled,
the executed lessons) with the result cells it was built from, recomputes what the statement says from the
cells or the data with an independent reference (scipy, seqeval, the scorer's own table), and returns what
it found wrong (empty: the statement holds):

- the course's false-entailment bound is the card's one-sided 95 % Clopper–Pearson bound everywhere (the
  gates lesson's table, its "zero observed" sentence and exercise 3, "Proportions at the edge");
- "Dependent items" gives each simulated coverage its Monte-Carlo standard error and says from it whether the
  coverage is within two standard errors of 95 %;
- the home page's licence column is each card's declared licence, and the card pages say the same;
- the NegEx reproduction names each rate's own gap to GenNegEx;
- the metrics chapter says which seqeval mode the atlas uses and shows both modes on this build's span runs;
- the TempEval disagreement table counts what the scorer counts (gold = the scorer's reference, found = its
  correct items), and the data page explains its two EVENT counts (items with attributes, distinct spans);
- a paired interval that ends on 0 because the two runs tie on many resamples says so, with the share;
- every card page has the table "Where this page departs from the card", one row per declared departure.

A check that finds no page or cell to read says so as a problem (it never passes for want of input). Three sites
are checked in the suite, each with the checks whose pages and cells it has (:data:`SITES`; together they run
every check): the course book (``tests/test_course.py``: real NLI cells shown, every lesson executed, built
with Jupyter Book; its NegEx cells have no run page, so no NegEx row is shown), the session's small book
(``tests/books.py``: NegEx atlas-n100-v1, a run and a not-run cell) and a site rendered from runs made here
(TempEval synthetic-v1 through the card's own run, negspacy on both NegEx versions with the whole-kit reproduction,
three NegEx systems scored by ``atlaslib.evaluate``, a MACCROBAT cell whose tags are chosen by hand).
``python -m tests.test_book_statements <checkout>`` runs every check on that checkout's last build (its
``_build/site-src`` and ``results/``), e.g. the full default book.
"""
from __future__ import annotations

import html
import json
import math
import re
import sys
from pathlib import Path

import nbformat
import pytest
from scipy.stats import beta

from atlaslib import book, results
from atlaslib.cards import available_cards, get_card
from atlaslib.pages import card_pages, departures
from tests.books import BUILD_TIMEOUT
from tests.statements import collect as collect_more
from tests.statements import missing
from tests.test_prose_numbers import render_without_lessons

LEVEL = 0.95


# -- reading a rendered site ----------------------------------------------------------------------------------

def md(src: Path, page: str) -> str:
    p = Path(src) / page
    return re.sub(r"\s+", " ", p.read_text(encoding="utf-8")) if p.is_file() else ""


def notebook_text(src: Path, page: str) -> str:
    """A rendered notebook's Markdown and every output's text (Markdown, plain text, HTML without tags)."""
    p = Path(src) / page
    if not p.is_file():
        return ""
    nb = nbformat.read(p, as_version=4)
    parts = []
    for c in nb.cells:
        if c.cell_type == "markdown":
            parts.append(c.source)
        for o in c.get("outputs", []):
            data = o.get("data", {})
            for kind in ("text/markdown", "text/plain"):
                if kind in data:
                    parts.append("".join(data[kind]))
            if "text/html" in data:
                parts.append(re.sub(r"<[^>]+>", " ", "".join(data["text/html"])))
            if o.get("output_type") == "stream":
                parts.append("".join(o.get("text", "")))
    return re.sub(r"\s+", " ", " ".join(parts))


def ok_cells(cells, card, version=None, model=None):
    return [c for c in cells if c["card"] == card and c["status"] == "ok" and (version is None or c["version"] == version)
            and (model is None or c["model"] == model)]


def one_sided_bound(k: int, n: int) -> float:
    """The card's bound, by scipy: Beta⁻¹(0.95; k + 1, n − k), 1 when k = n."""
    return 1.0 if k == n else float(beta.ppf(LEVEL, k + 1, n - k))


# -- the checks ------------------------------------------------------------------------------------------------

def check_false_entailment_bound(src: Path, cells) -> list[str]:
    from atlaslib.pages.course import lessons

    out = []
    # the NLI runs the gates lesson declares it reads (a whole book has more, e.g. a language model's row)
    read = {r.model for lesson in lessons() if lesson.name == "gates" for r in lesson.requires
            if (r.card, r.version) == ("nli_negation", "builtin-v1")}
    nli = [c for c in ok_cells(cells, "nli_negation", "builtin-v1") if c["model"] in read]
    gates = notebook_text(src, "book/course/gates.ipynb")
    if not nli or not gates:
        return missing("an ok NLI challenge cell or the executed gates lesson")
    if "(two-sided 95 %)" in gates:
        out.append("gates lesson: a two-sided bound is still given as the bound")
    for c in nli:
        fer = c["extra"]["report"]["false_entailment_rate"]
        want = f"{one_sided_bound(fer['successes'], fer['trials']):.3f}"
        if "FER upper bound (one-sided 95 %)" not in gates or want not in gates:
            out.append(f"gates lesson: {c['model']}'s bound is not the one-sided {want}")
    n = nli[0]["extra"]["report"]["false_entailment_rate"]["trials"]
    zero = f"{one_sided_bound(0, n):.1%}"
    if f"up to {zero} possible (the one-sided 95 % Clopper–Pearson upper bound)" not in gates:
        out.append(f"gates lesson: 'zero observed' does not give the one-sided bound {zero}")
    needed = next(m for m in range(1, 10_000) if one_sided_bound(0, m) <= 0.01)
    if f"{needed} cases (the challenge has {n})" not in gates:
        out.append(f"gates lesson: exercise 3's answer is not {needed} cases")
    edges = notebook_text(src, "book/course/edges.ipynb")
    abstain = ok_cells(cells, "nli_negation", "builtin-v1", "always-abstain")
    if not edges or not abstain:
        return out + missing("the executed edges lesson or the always-abstain cell")
    fer = abstain[0]["extra"]["report"]["false_entailment_rate"]
    want = f"{one_sided_bound(fer['successes'], fer['trials']):.1%}"
    if f"the one-sided 95 % Clopper–Pearson upper bound, is {want}" not in edges:
        out.append(f"edges lesson: 'zero observed' does not give the card's bound {want}")
    return out


def check_coverage_standard_errors(src: Path, cells) -> list[str]:
    text = notebook_text(src, "book/course/clusters.ipynb")
    if not text:
        return missing("the executed clusters lesson")
    m = re.search(r"over ([\d,]+) simulated test sets per row, the item interval covers the truth in "
                  r"([\d.]+) % \(± ([\d.]+) %\), (within two standard errors of 95 %|below 95 %[^,]*|above 95 %[^,.]*)",
                  text)
    if not m:
        return ["clusters lesson: the ICC-0 coverage sentence with its Monte-Carlo standard error is missing"]
    n, cov, se = int(m.group(1).replace(",", "")), float(m.group(2)) / 100, float(m.group(3)) / 100
    out = []
    if abs(se - math.sqrt(cov * (1 - cov) / n)) > 0.0006:
        out.append(f"clusters lesson: the standard error {se} is not sqrt(c(1-c)/{n})")
    within = abs(cov - 0.95) <= 2 * math.sqrt(cov * (1 - cov) / n)
    if within != m.group(4).startswith("within"):
        out.append(f"clusters lesson: coverage {cov:.3f} ± {se:.3f} is called '{m.group(4)}'")
    if n < 1000:
        out.append(f"clusters lesson: {n} simulations cannot tell 95 % from a few points less")
    return out


def check_licence_story(src: Path, cells) -> list[str]:
    out = []
    intro = md(src, "book/intro.md")
    shown = [card for card in available_cards() if (Path(src) / card.page).is_file()]
    if not intro or not shown:
        return missing("the home page or a card page")
    for card in shown:
        row = next((ln for ln in intro.split("| [") if ln.startswith(card.title.replace("|", "\\|"))), "")
        if card.licence not in row or departures.publication(card) not in row:
            out.append(f"intro: the licence of {card.name} is not its declared one ({card.licence!r})")
        if "cleared for publication" in row:
            out.append(f"intro: {card.name} is said to be cleared for publication")
    mac = md(src, "book/cards/maccrobat.md")
    if mac and get_card("maccrobat").licence not in mac:
        out.append("MACCROBAT page: the licence caveat is not the card's declared licence")
    return out


def check_negex_reproduction_gaps(src: Path, cells) -> list[str]:
    from atlaslib.cards.negex import GENNEGEX

    cell = ok_cells(cells, "negex", "atlas-full-v1", "negspacy-negex-kit")
    page = md(src, "book/cards/negex/reproduction.md")
    if not cell or not page:
        return missing("negspacy's atlas-full-v1 cell or the NegEx reproduction page")
    row = next((r for r in cell[0].get("extra", {}).get("reproduction") or [] if str(r["system"]).endswith("rows")),
               None)
    if row is None:
        return missing("the whole-kit reproduction row of negspacy's cell")
    gaps = [GENNEGEX[r] - row[r] for r in ("sensitivity", "specificity", "precision")]
    want = ", ".join(f"{g:.3f}" for g in gaps[:2]) + f" and {gaps[2]:.3f}, the largest {max(map(abs, gaps)):.3f}"
    out = [] if want in page else [f"NegEx reproduction: the gaps to GenNegEx are not named ({want})"]
    return out + (["NegEx reproduction: one rounded bound for three gaps"] if "lands within" in page else [])


def check_seqeval_modes(src: Path, cells) -> list[str]:
    from seqeval.metrics import f1_score
    from seqeval.scheme import IOB2

    text = md(src, "book/methods/metrics.md")
    if not text:
        return missing("the metrics chapter")
    out = []
    if "strict matching, as seqeval's default" in text or "seqeval's *default* mode" not in text:
        out.append("metrics chapter: the seqeval mode statement is not corrected")
    for c in ok_cells(cells, "maccrobat"):
        shown = Path(src) / "book/results" / c["card"] / c["version"] / results.slug(c["model"]) / f"{c['protocol']}.json"
        if not shown.is_file():   # a cell on no page of this build (a lesson's input, written without a run)
            continue
        gold = [p["gold"] if isinstance(p["gold"], list) else eval(p["gold"]) for p in c["predictions"]]  # noqa: S307
        pred = [p["pred"] if isinstance(p["pred"], list) else eval(p["pred"]) for p in c["predictions"]]  # noqa: S307
        d, s = f1_score(gold, pred), f1_score(gold, pred, mode="strict", scheme=IOB2)
        if f"| {c['model']} ({c['protocol']}) | {d:.4f} | {s:.4f} |" not in text:
            out.append(f"metrics chapter: no row with both modes for {c['model']} ({d:.4f}, {s:.4f})")
    return out


def check_tempeval_disagreement(src: Path, cells) -> list[str]:
    out, checked = [], 0
    for version in get_card("tempeval").versions:
        page = md(src, f"book/cards/tempeval/{version}/failures.md")
        closest = [c for c in ok_cells(cells, "tempeval", version, "closest")
                   if (c["metrics"].get(f"contains_f1_{c['protocol']}") or {}).get("value") is not None]
        if not page or not closest:
            continue
        checked += 1
        rows = {r["row"]: r for r in closest[0]["extra"]["scorer_table"]["rows"]}
        m = re.search(r"\| contains \|((?: [^|]+ \|){5})", page)
        # the counts may be links into the item explorer: their text, without thousands separators
        nums = [re.sub(r"<[^>]+>|,|\s", "", c) for c in m.group(1).split("|")[:5]] if m else []
        if len(nums) != 5 or not all(n.isdigit() for n in nums):
            out.append(f"TempEval {version}: no CONTAINS row in the disagreement table")
            continue
        runs, found_all, found_some, _none, gold = map(int, nums)
        if gold != rows["contains"]["reference"]:
            out.append(f"TempEval {version}: disagreement counts {gold} CONTAINS, the scorer "
                       f"{rows['contains']['reference']}")
        if runs == 1 and found_all != rows["contains"]["correct"]:
            out.append(f"TempEval {version}: disagreement finds {found_all} CONTAINS, the scorer "
                       f"{rows['contains']['correct']}")
    return out if checked else missing("a TempEval failures page with a closest-rule cell")


def check_tempeval_event_counts(src: Path, cells) -> list[str]:
    """Table 1's EVENT items (with attributes) and the span score's reference (distinct spans) are both given,
    the difference explained by the spans annotated with two attribute sets."""
    page = md(src, "book/cards/tempeval/about.md")
    if not page:
        return missing("the TempEval about page")
    if "n/a (no audited TempEval run" in page:   # no THYME audit in this build: the page says so, no counts to add up
        return []
    m = re.search(r"\(([\d,]+) such spans in Train, ([\d,]+) in Dev\) .*? holds the distinct spans: ([\d,]+) in Train "
                  r"and ([\d,]+) in Dev, against ([\d,]+) and ([\d,]+) items with attributes", page)
    if not m:
        return ["TempEval: the two EVENT counts (with attributes, distinct spans) are not explained"]
    two_tr, two_dev, sp_tr, sp_dev, ev_tr, ev_dev = (int(g.replace(",", "")) for g in m.groups())
    if (ev_tr - two_tr, ev_dev - two_dev) != (sp_tr, sp_dev):
        return [f"TempEval: {ev_dev} − {two_dev} is not the {sp_dev} span items of Dev"]
    return []


def check_ties_explained(src: Path, cells) -> list[str]:
    """A paired interval of the primary metric that ends on 0 because the two runs tie on many resamples says
    so, with the share of tied resamples computed from the comparison's own resamples."""
    from atlaslib.pages import comparisons

    out, pairs = [], 0
    for card in available_cards():
        page = md(src, card.page)
        if not page:
            continue
        for version in card.versions:
            comp = comparisons.comparison_for(card, version, [c for c in cells if c["card"] == card.name])
            if comp is None or isinstance(comp, str) or comp.pairs.empty:
                continue
            for _, r in comp.pairs[comp.pairs["metric"] == card.metrics[0]].iterrows():
                pairs += 1
                if not (abs(r["ci_low"]) < 5e-7 or abs(r["ci_high"]) < 5e-7):
                    continue
                ties, n = card_pages.tied_resamples(comp, r["model_a"], r["model_b"], card.metrics[0])
                if ties / n >= card_pages.TIE_SHARE and f"{ties:,} of the {n:,} resamples" not in page:
                    out.append(f"{card.page}: {r['model_a']} − {r['model_b']} ends on 0 with {ties} tied resamples "
                               f"of {n}, and the page does not say so")
    return out if pairs else missing("a card page with a paired comparison")


def check_departures_tables(src: Path, cells) -> list[str]:
    out = []
    shown = [card for card in available_cards() if (Path(src) / card.page).is_file()]
    if not shown:
        return missing("a card page")
    for card in shown:
        page = Path(src) / card.page
        text = page.read_text(encoding="utf-8")
        if f"## {departures.HEADING}" not in text:
            out.append(f"{card.page}: no table 'Where this page departs from the card'")
            continue
        block = text.split(f"## {departures.HEADING}", 1)[1].split("\n#", 1)[0]
        rows = [ln for ln in block.splitlines() if ln.startswith("| ") and not ln.startswith("| topic")]
        if len(rows) != len(card.departures) or "{{fact:" in block:
            out.append(f"{card.page}: {len(rows)} departure rows for {len(card.departures)} declared")
    return out


def check_not_ranked_rows(src: Path, cells) -> list[str]:
    """No overlap-flagged row carries a rank, tie group or P(rank 1) in any leaderboard download (CSV or
    JSON), and every such row says why it is not ranked."""
    import csv

    from atlaslib.metrics.framing import NOT_RANKED, RANK_FIELDS

    out = []
    downloads = sorted(Path(src).rglob("_downloads/leaderboard-*.json"))
    if not downloads:
        return missing("a leaderboard download")
    for path in downloads:
        for r in json.loads(path.read_text(encoding="utf-8")):
            if r.get("overlap"):
                held = [f for f in RANK_FIELDS if f in r]
                if held or r.get("band") != NOT_RANKED or not r.get("not_ranked_reason"):
                    out.append(f"{path.name}: overlap-flagged {r.get('model')} ranked ({held}) or without its reason")
        with open(path.with_suffix(".csv"), encoding="utf-8", newline="") as fh:
            for r in csv.DictReader(fh):
                if r.get("overlap") and any(r.get(f) for f in RANK_FIELDS):
                    out.append(f"{path.with_suffix('.csv').name}: overlap-flagged {r.get('model')} has a rank field")
    return out


def check_explorer_counts_are_the_comparisons(src: Path, cells) -> list[str]:
    """The item explorer says its pair filter's count is McNemar's b of the card page's paired comparison: for every
    pair of every version with b / c on the card's primary metric in the comparisons download, the explorer's CSV counts the items run A gets
    right and run B wrong (b) and the reverse (c) to the same numbers (a seeded row: its majority answer)."""
    import csv

    out, seen = [], 0
    for path in sorted(Path(src).rglob("_downloads/comparisons-*.json")):
        rows = [r for r in json.loads(path.read_text(encoding="utf-8"))
                if r.get("b") is not None and not (isinstance(r["b"], float) and math.isnan(r["b"]))]
        if not rows:
            continue
        card, version = rows[0]["card"], rows[0]["version"]
        rows = [r for r in rows if r["metric"] == get_card(card).primary_metric]   # the pairs the card page shows
        ex = Path(src) / "book" / "runs" / card / version / f"explorer-{card}-{version}.csv"
        if not ex.is_file():
            continue
        with open(ex, encoding="utf-8", newline="") as fh:
            table = list(csv.DictReader(fh))

        def right(run):   # "model (protocol)" -> that run's right/wrong column of the explorer
            model, protocol = run.rsplit(" (", 1)
            col = f"{model} · {protocol[:-1]} · right"
            return None if not table or col not in table[0] else [t[col] == "right" for t in table]

        for r in rows:
            a, b = right(r["model_a"]), right(r["model_b"])
            if a is None or b is None:
                out.append(f"{ex.name}: no right/wrong column of {r['model_a']} or {r['model_b']}")
                continue
            seen += 1
            got = (sum(x and not y for x, y in zip(a, b)), sum(y and not x for x, y in zip(a, b)))
            if got != (int(r["b"]), int(r["c"])):
                out.append(f"{ex.name}: {r['model_a']} vs {r['model_b']} counts b / c {got[0]} / {got[1]}, the "
                           f"comparison {int(r['b'])} / {int(r['c'])}")
    return out if seen or out else missing("a comparison with McNemar counts beside its item explorer")


def check_speeds_are_prediction_throughput(src: Path, cells) -> list[str]:
    """Every leaderboard download's items per second is its cell's test answers over the seconds of its
    prediction phase (answers served from the model-call store at their recorded time), recomputed from
    ``timing.phases``; never the whole run's wall time (loading, training and side measurements apart)."""
    from atlaslib.pages.rowinfo import MIN_TIMED_ITEMS, MIN_TIMED_SECONDS

    out, seen = [], 0
    by_run = {(c["card"], c["version"], c["model"], c["protocol"]): c for c in cells}
    for path in sorted(Path(src).rglob("_downloads/leaderboard-*.json")):
        for r in json.loads(path.read_text(encoding="utf-8")):
            c = by_run.get((r.get("card"), r.get("version"), r.get("model"), r.get("protocol")))
            ips = r.get("items_per_second")
            p = ((c or {}).get("timing") or {}).get("phases", {}).get("prediction")
            if c is None or p is None:
                continue
            if ips is None:         # no rate: right only where the prediction was too short to time
                seen += 1
                if p["items"] >= MIN_TIMED_ITEMS and p["seconds"] + p["served_seconds"] >= MIN_TIMED_SECONDS:
                    out.append(f"{path.name}: {r['model']} ({r['protocol']}) shows no items/s, yet its prediction "
                               f"phase held {p['items']} answers in {p['seconds'] + p['served_seconds']:.2f} s")
                continue
            seen += 1
            want = p["items"] / (p["seconds"] + p["served_seconds"])
            if r.get("answers_timed") != p["items"] or abs(ips - round(want, 4)) > 1e-9:
                out.append(f"{path.name}: {r['model']} ({r['protocol']}) {ips} items/s over {r.get('answers_timed')} "
                           f"answers; its prediction phase gives {want:.4f} over {p['items']}")
    return out if seen or out else missing("a leaderboard row with items per second")


def check_memorisation_is_one_figure(src: Path, cells) -> list[str]:
    """The memorisation probe on the reference sentences is one computation per model and test sentence set (the
    reference is drawn to match the test sentences in length, so it follows the card version): every row of a
    model on one card version shows the same reference figure (exact match, token overlap, sentences probed), and
    every leaderboard download shows each row's figures as its cell holds them (no reference where the card's test
    sentences are the reference itself)."""
    out, by_model = [], {}
    fields = ("exact_match_rate", "token_overlap", "n_probed")
    mem = {(c["card"], c["version"], c["model"], c["protocol"]): (c.get("extra") or {}).get("memorisation")
           for c in cells if c.get("status") == "ok" and (c.get("extra") or {}).get("memorisation")}
    for (card, version, model, protocol), m in sorted(mem.items()):
        ref = tuple((m.get("reference") or {}).get(f) for f in fields)
        by_model.setdefault(f"{model} on {card} {version}", {})[protocol] = ref
    for model, refs in by_model.items():
        if len(set(refs.values())) > 1:
            out.append(f"{model}: the reference memorisation figure differs between rows: {refs}")
    for path in sorted(Path(src).rglob("_downloads/leaderboard-*.json")):
        for r in json.loads(path.read_text(encoding="utf-8")):
            m = mem.get((r.get("card"), r.get("version"), r.get("model"), r.get("protocol")))
            if not m:
                continue
            for part in ("test", "reference"):
                shown = m.get(part) if part == "test" or not (m.get("reference_reason") or
                                                                m.get("reference_card") == r.get("card")) else None
                want = ((shown or {}).get("exact_match_rate"), (shown or {}).get("token_overlap"))
                got = (r.get(f"memorisation_exact_match_{part}"), r.get(f"memorisation_token_overlap_{part}"))
                if any((g is None) != (w is None) or (w is not None and abs(g - w) > 1e-9)   # downloads: 10 digits
                       for g, w in zip(got, want)):
                    out.append(f"{path.name}: {r['model']} ({r['protocol']}) shows memorisation {part} {got}, its cell "
                               f"{want}")
    return out if mem or out else missing("a language-model row with its memorisation probe")


def leaderboard_rows(text: str) -> list[tuple[str, str, dict]]:
    """(version, "model (protocol)", {column: text}) of every leaderboard table row of a card page, the version
    from the ``## Leaderboard: `V``` heading above it."""
    out, version, header = [], None, None
    for line in text.splitlines():
        m = re.match(r"^## Leaderboard: `([^`]+)`", line)
        if m:
            version, header = m.group(1), None
        elif line.startswith("| model |"):
            header = [h.strip() for h in line.strip().strip("|").split("|")]
        elif header and line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == len(header) and version:
                row = dict(zip(header, cells))
                model = html.unescape(re.sub(r"<sup>.*?</sup>|<wbr>", "", row["model"]))
                if "protocol, regime" in row:   # the version's main table: the protocol in its own column
                    model = f"{model} ({row['protocol, regime'].split()[0]})"
                out.append((version, model, row))
        elif not line.startswith("|"):
            header = None
    return out


def _point(text: str) -> float | None:
    m = re.match(r"^\s*([-+]?\d+\.\d+)", text or "")
    return float(m.group(1)) if m else None


def check_seeded_rows_are_over_their_seeds(src: Path, cells) -> list[str]:
    """A row trained with several seeds shows its seeds' mean everywhere beside it: the cell's primary value and
    the leaderboard download's are the mean of the seeds' values (each seed's macro F1 recomputed with sklearn
    from that seed's answers where the card's answers are labels), and the card page's sentence-cluster column
    is centred on that mean, not on one seed's value."""
    from sklearn.metrics import f1_score

    out, seen, pages = [], 0, {}
    downloads = {}
    for path in sorted(Path(src).rglob("_downloads/leaderboard-*.json")):
        for r in json.loads(path.read_text(encoding="utf-8")):
            downloads[(r.get("card"), r.get("version"), r.get("model"), r.get("protocol"))] = r
    for c in cells:
        runs = (c.get("extra") or {}).get("seed_runs") or []
        if c.get("status") != "ok" or len(runs) < 2 or c.get("variant"):
            continue
        card = get_card(c["card"])
        key = f"{card.primary_metric}_{c['protocol']}"
        gold = {p["item_id"]: p.get("gold") for p in c.get("predictions") or []}
        values = []
        for run in runs:
            preds = run.get("predictions") or []
            labels = preds and all(isinstance(gold.get(p["item_id"]), str) and isinstance(p.get("pred"), str)
                                   for p in preds)
            if labels and card.primary_metric == "macro_f1":
                values.append(f1_score([gold[p["item_id"]] for p in preds], [p["pred"] for p in preds],
                                       average="macro"))
            else:
                values.append(run["metrics"][key]["value"])
        mean = sum(values) / len(values)
        seen += 1
        label = f"{c['card']} {c['version']} {c['model']} ({c['protocol']})"
        if abs(c["metrics"][key]["value"] - mean) > 1e-9:
            out.append(f"{label}: the cell's {card.primary_metric} {c['metrics'][key]['value']:.6f}, its "
                       f"{len(values)} seeds' mean {mean:.6f}")
        r = downloads.get((c["card"], c["version"], c["model"], c["protocol"]))
        if r is None or r.get(card.primary_metric) is None or abs(r[card.primary_metric] - mean) > 1e-9:
            out.append(f"{label}: the leaderboard download shows {None if r is None else r.get(card.primary_metric)},"
                       f" its seeds' mean {mean:.10f}")
        page = Path(src) / "book" / "cards" / f"{c['card']}.md"
        if page not in pages:
            pages[page] = leaderboard_rows(page.read_text(encoding="utf-8")) if page.is_file() else []
        rows = [row for v, run, row in pages[page] if v == c["version"] and run == f"{c['model']} ({c['protocol']})"]
        name = card.primary_metric.replace("_", " ").lower()
        shown = [v for row in rows for col, v in row.items() if col.lower() == name or col.endswith("sentence-cluster")]
        if not any(col.lower() == name for row in rows for col in row):
            out.append(f"{label}: no {name} column in {page.name}'s leaderboard")
        for v in shown:   # the headline column and, where the card declares one, the sentence-cluster column
            if _point(v) is None or abs(_point(v) - round(mean, 3)) > 5e-4:
                out.append(f"{label}: {page.name} shows {v!r} beside a row whose seeds' mean is {mean:.3f}")
    return out if seen or out else missing("a row trained with several seeds")


def check_worst_perturbation_follows_the_rule(src: Path, cells) -> list[str]:
    """The leaderboard's worst perturbation follows its declared rule, recomputed from the version's robustness
    download: among the run's perturbations whose Holm-adjusted exact McNemar p is under 0.05 with b > c and a
    loss, the largest loss (ties: the smaller Holm p, then the name); the cell names it with its difference, b, c
    and Holm p; with none, it says "none shown worse"."""
    import csv

    out, seen = [], 0
    for page in sorted((Path(src) / "book" / "cards").glob("*.md")):
        for version, run, row in leaderboard_rows(page.read_text(encoding="utf-8")):
            shown = next((v for col, v in row.items() if col.startswith("worst perturbation")), None)
            if shown is None or shown == "—":
                continue
            model, protocol = run.rsplit(" (", 1)
            protocol = protocol[:-1]
            rob = page.parent / page.stem / version / "_downloads" / f"robustness-{page.stem}-{version}.csv"
            if not rob.is_file():
                out.append(f"{page.name} {version}: {run} shows a worst perturbation but {rob.name} is missing")
                continue
            with open(rob, encoding="utf-8", newline="") as fh:
                mine = [r for r in csv.DictReader(fh) if r["model"] == model and r["protocol"] == protocol
                        and r["kind"] == "perturbation"]
            seen += 1
            lower = bool(mine) and not get_card(page.stem).higher_is_better.get(mine[0]["metric"], True)
            loss = (lambda r: float(r["difference"])) if lower else (lambda r: -float(r["difference"]))
            worse = [r for r in mine if float(r["p_holm"]) < 0.05 and int(r["b"]) > int(r["c"]) and loss(r) > 0]
            if not worse:
                if not shown.startswith("none shown worse"):
                    out.append(f"{page.name} {version}: {run} shows {shown!r}; no perturbation qualifies")
                continue
            best = sorted(worse, key=lambda r: (-loss(r), float(r["p_holm"]), r["variant"]))[0]
            d = float(best["difference"])
            want = (f"{best['variant']} {d:+.3f}".replace(" +", " +" if lower else " "),
                    f"b {int(best['b'])} / c {int(best['c'])}", f"Holm p {float(best['p_holm']):.3f}")
            if not all(w in shown for w in want):
                out.append(f"{page.name} {version}: {run} shows {shown!r}; the rule gives {' · '.join(want)}")
    return out if seen or out else missing("a leaderboard row with a worst-perturbation cell")


CHECKS = (check_false_entailment_bound, check_coverage_standard_errors, check_licence_story,
          check_negex_reproduction_gaps, check_seqeval_modes, check_tempeval_disagreement, check_tempeval_event_counts,
          check_ties_explained, check_departures_tables, check_not_ranked_rows, check_explorer_counts_are_the_comparisons,
          check_speeds_are_prediction_throughput, check_memorisation_is_one_figure,
          check_seeded_rows_are_over_their_seeds, check_worst_perturbation_follows_the_rule)


#: checks only a whole default book feeds: its fine-tuned rows over five seeds and their perturbation runs (the
#: suite's books have neither: a seeded fine-tune with its variants costs minutes). Each is tested on hand-made
#: pages below and runs on a whole book with ``python -m tests.test_book_statements <checkout>``.
WHOLE_BOOK_ONLY = (check_seeded_rows_are_over_their_seeds, check_worst_perturbation_follows_the_rule)
#: the two of them this file tests on hand-made pages (tests/statements/ test their own checks)
SEEDED_AND_WORST = WHOLE_BOOK_ONLY

#: the checks each of the suite's sites is held to (the pages and cells it has); together, every check
SITES = {
    "course book": (check_false_entailment_bound, check_coverage_standard_errors, check_licence_story,
                    check_seqeval_modes, check_ties_explained, check_departures_tables),
    # every row of the course book, its language-model row included (the lessons read it; no run page shows it)
    "course book, every row": (check_memorisation_is_one_figure,),
    "small book": (check_licence_story, check_seqeval_modes, check_departures_tables, check_not_ranked_rows,
                   check_speeds_are_prediction_throughput),
    # two systems scored on one version: the only site of the suite whose card page pairs two runs beside its explorer
    "two-run book": (check_explorer_counts_are_the_comparisons,),
    "mixed site": (check_licence_story, check_negex_reproduction_gaps, check_seqeval_modes, check_tempeval_disagreement,
                   check_tempeval_event_counts, check_ties_explained, check_departures_tables, check_not_ranked_rows,
                   check_explorer_counts_are_the_comparisons),
}


# the checks of ``tests/statements/`` (one module per area), held to the same rules: every check runs on a site of the
# suite or on a whole book only
_MORE, _MORE_SITES, _MORE_WHOLE = collect_more()
CHECKS += _MORE
WHOLE_BOOK_ONLY += _MORE_WHOLE
for _site, _checks in _MORE_SITES.items():
    if _site not in SITES:
        raise KeyError(f"tests/statements names a site {_site!r}; the sites are {sorted(SITES)}")
    SITES[_site] += _checks


def all_problems(src: Path, cells, checks=CHECKS) -> list[str]:
    return [p for check in checks for p in check(src, cells)]


# -- the checks catch what they are meant to catch ----------------------------------------------------------------

def test_the_checks_see_the_old_statements(tmp_path):
    src = tmp_path
    (src / "book/cards/negex").mkdir(parents=True)
    (src / "book/methods").mkdir(parents=True)
    (src / "book/cards/negex.md").write_text("# NegEx\n\nno departures here\n")
    (src / "book/cards/negex/reproduction.md").write_text("negspacy lands within 0.020 of each of the three rates")
    (src / "book/methods/metrics.md").write_text("(strict matching, as seqeval's default)")
    (src / "book/intro.md").write_text("| [" + get_card("negex").title + "](x) | t | d | cleared for publication | v |")
    repro = [{"system": "2,376 rows", "sensitivity": 0.95, "specificity": 0.97, "precision": 0.912}]
    cells = [{"card": "negex", "version": "atlas-full-v1", "model": "negspacy-negex-kit", "protocol": "zero_shot",
              "status": "ok", "extra": {"reproduction": repro}, "metrics": {}, "predictions": []}]
    dl = src / "book/cards/_downloads"
    dl.mkdir(parents=True)
    ranked = [{"model": "kit-rules", "overlap": "negex", "band": "not ranked", "rank": 1, "p_rank1": 0.95},
              # the old speed: 240 test items over the whole run's 200 s, not its 4.8 s of prediction
              {"card": "negex", "version": "atlas-full-v1", "model": "negspacy-negex-kit", "protocol": "zero_shot",
               "items_per_second": 1.2, "answers_timed": 240}]
    zero = {"seconds": 0.0, "items": 0, "served_seconds": 0.0, "served_untimed": 0}
    cells[0]["timing"] = {"wall_seconds": 200.0, "phases": {"loading": zero, "training": zero, "side": zero,
                                                           "prediction": {**zero, "seconds": 4.8, "items": 240}}}
    (dl / "leaderboard-negex-v.json").write_text(json.dumps(ranked))
    (dl / "leaderboard-negex-v.csv").write_text("model,overlap,rank\nkit-rules,negex,1\n")
    pair = [{"card": "negex", "version": "v", "metric": get_card("negex").primary_metric, "model_a": "enc (finetune)",
             "model_b": "rules (zero_shot)", "b": 2.0, "c": 1.0}]
    (dl / "comparisons-negex-v.json").write_text(json.dumps(pair))
    (src / "book/runs/negex/v").mkdir(parents=True)
    (src / "book/runs/negex/v/explorer-negex-v.csv").write_text(   # the first seed's answers: b 1, c 1
        "item_id,enc · finetune · right,rules · zero_shot · right\ni1,right,wrong\ni2,wrong,right\ni3,right,right\n")
    for protocol, overlap in (("zero_shot", 0.065), ("probe", 0.071)):   # a probe per row, not one per test set
        mem = {"test": {}, "reference": {"exact_match_rate": 0.0, "token_overlap": overlap, "n_probed": 123}}
        cells.append({"card": "negex", "version": "atlas-full-v1", "model": "lm", "protocol": protocol, "status": "ok",
                      "extra": {"memorisation": mem}, "metrics": {}, "predictions": []})
    found = all_problems(src, cells)
    for what in ("lm on negex atlas-full-v1: the reference memorisation figure differs between rows", "enc (finetune) vs rules (zero_shot) counts b / c 1 / 1, the comparison 2 / 1",
                 "overlap-flagged kit-rules ranked", "overlap-flagged kit-rules has a rank field",
                 "no table 'Where this page departs", "the gaps to GenNegEx are not named",
                 "one rounded bound", "seqeval mode statement", "cleared for publication",
                 "negspacy-negex-kit (zero_shot) 1.2 items/s over 240 answers; its prediction phase gives 50.0000"):
        assert any(what in p for p in found), (what, found)


def test_a_check_without_its_pages_and_cells_fails_and_every_check_runs_on_a_site_of_the_suite(tmp_path):
    (tmp_path / "book").mkdir()
    for check in CHECKS:
        found = check(tmp_path, [])
        assert found and all("is missing: nothing to check" in p for p in found), (check.__name__, found)
    assert set(CHECKS) == {c for checks in SITES.values() for c in checks} | set(WHOLE_BOOK_ONLY)


def _seeded_site(src: Path, cluster: str, worst: str) -> list[dict]:
    """A hand-made NegEx page, downloads and cell: a fine-tune over two seeds (macro F1 1.000 and 0.733 by
    hand: seed 2 calls one affirmed item negated; mean 0.867) and two perturbations, the larger loss not
    significant (-0.300, b 3 / c 0, Holm p 0.200), the smaller one significant (-0.100, b 9 / c 1, Holm p 0.020)."""
    gold = ["negated", "affirmed", "negated", "affirmed"]
    seeds = [gold, ["negated", "negated", "negated", "affirmed"]]
    f1s = [1.0, (0.8 + 2 / 3) / 2]
    runs = [{"seed": k, "metrics": {"macro_f1_finetune": {"value": f}},
             "predictions": [{"item_id": f"i{j}", "pred": p} for j, p in enumerate(preds)]}
            for k, (preds, f) in enumerate(zip(seeds, f1s))]
    mean = sum(f1s) / 2
    cell = {"card": "negex", "version": "v", "model": "m", "protocol": "finetune", "status": "ok",
            "metrics": {"macro_f1_finetune": {"value": mean}}, "extra": {"seed_runs": runs},
            "predictions": [{"item_id": f"i{j}", "gold": g, "pred": g} for j, g in enumerate(gold)]}
    (src / "book/cards/_downloads").mkdir(parents=True)
    (src / "book/cards/_downloads/leaderboard-negex-v.json").write_text(json.dumps(
        [{"card": "negex", "version": "v", "model": "m", "protocol": "finetune", "macro_f1": mean}]))
    (src / "book/cards/negex.md").write_text(
        "# NegEx\n\n## Leaderboard: `v`\n\n| model | protocol, regime | macro f1 | run |\n|---|---|---|---|\n"
        "| m<sup>1</sup> | finetune <span>trained</span> | 0.867 [0.700, 1.000] | x |\n\n"
        "| model | vs the band's best (Holm, 5 %) | macro F1, sentence-cluster | worst perturbation (exact McNemar, "
        f"Holm) |\n|---|---|---|---|\n| m (finetune) | best | {cluster} | {worst} |\n")
    rob = src / "book/cards/negex/v/_downloads"
    rob.mkdir(parents=True)
    (rob / "robustness-negex-v.csv").write_text(
        "model,protocol,kind,variant,metric,difference,b,c,p_holm\n"
        "m,finetune,perturbation,a,macro_f1,-0.3,3,0,0.2\n"
        "m,finetune,perturbation,b,macro_f1,-0.1,9,1,0.02\n")
    return [cell]


def test_the_seeded_row_and_worst_perturbation_checks_catch_one_seed_and_the_largest_drop(tmp_path):
    """The two checks only a whole book feeds (:data:`WHOLE_BOOK_ONLY`), on hand-made pages: right as the rules
    say, and each wrong the way the reviewer found the book (one seed's value beside the mean; the largest drop
    by point estimate, not the one the Holm-adjusted test shows)."""
    right = tmp_path / "right"
    cells = _seeded_site(right, "0.867 [0.700, 1.000]", "b -0.100 · b 9 / c 1 of 10 items read · Holm p 0.020")
    assert all_problems(right, cells, SEEDED_AND_WORST) == []
    wrong = tmp_path / "wrong"
    cells = _seeded_site(wrong, "1.000 [1.000, 1.000]", "a -0.300 · b 3 / c 0 of 10 items read · Holm p 0.200")
    found = all_problems(wrong, cells, SEEDED_AND_WORST)
    assert any("'1.000 [1.000, 1.000]' beside a row whose seeds' mean is 0.867" in p for p in found), found
    assert any("the rule gives b -0.100 · b 9 / c 1 · Holm p 0.020" in p for p in found), found
    none = tmp_path / "none"
    cells = _seeded_site(none, "0.867 [0.700, 1.000]", "none shown worse (2 perturbations, 10 items read)")
    (none / "book/cards/negex/v/_downloads/robustness-negex-v.csv").write_text(
        "model,protocol,kind,variant,metric,difference,b,c,p_holm\nm,finetune,perturbation,a,macro_f1,-0.3,3,0,0.2\n")
    assert all_problems(none, cells, SEEDED_AND_WORST) == []


# -- the books ----------------------------------------------------------------------------------------------------

@pytest.mark.xdist_group("course_book")
@pytest.mark.timeout(BUILD_TIMEOUT)
def test_the_course_book_holds_its_corrected_statements(course_book):
    src, cells = course_book["src"], results.read_cells(course_book["paths"].results)
    assert all_problems(src, cells, SITES["course book, every row"]) == []
    # the course book also holds rows only lessons read (MACCROBAT's memorize row for the span lesson, SmolLM2's
    # NLI row for the language-model lesson): no run page shows them, so the metrics chapter does not list the
    # former, and the gates lesson reads the four offline NLI runs, not the latter
    cells = [c for c in cells if c["card"] != "maccrobat" and c["model"] != "smollm2-135m-instruct"]
    assert (src / "book/course/gates.ipynb").is_file() and (src / "book/course/clusters.ipynb").is_file()
    assert all_problems(src, cells, SITES["course book"]) == []


@pytest.fixture(scope="module")
def mixed_site(tmp_path_factory, data_dir):
    """A site of all four cards rendered (no Jupyter Book) from runs made here: TempEval synthetic-v1 through the
    card's own run and cell, negspacy on both NegEx versions as the course book runs it, three NegEx systems scored
    by atlaslib.evaluate, a MACCROBAT cell with hand-chosen
    tags (one predicted sentence ill-formed, so the two seqeval modes differ)."""
    from atlaslib.cards import negex
    from atlaslib.cards.run import CardRun
    from atlaslib.cards.tempeval import runs as T
    from atlaslib.external import evaluate
    from tests.test_course import write_negex_cells

    root = tmp_path_factory.mktemp("statements")
    paths = book.BuildPaths(results=root / "results", runs=root / "runs", build=root / "_build")
    for model, protocol in (("closest", "phase2"), ("closest", "phase1"), ("memorize", "phase1")):
        r = T.run("synthetic-v1", model, protocol, data_dir=data_dir, work_dir=root / f"w-{model}-{protocol}")
        card_run = CardRun("tempeval", "synthetic-v1", model, protocol,
                           result_path=results.cell_path(paths.results, "tempeval", "synthetic-v1", model, protocol))
        card_run.finish(**r.cell_parts(card_run))
    items = negex.load_items(data_dir)
    _, test = negex.split_frames(items, negex.split(items, "atlas-n100-v1"))
    flip = {"negated": "affirmed", "affirmed": "negated"}
    gold_of = dict(zip(test["item_id"], test["decision"]))
    made = {}
    for name, step in (("system-a", 7), ("system-b", 11)):
        made[name] = {iid: (flip[g] if k % step == 0 else g) for k, (iid, g) in enumerate(gold_of.items())}
    # system-c: system-a with two of its errors put right, so the pair differs on two items only and ties often
    wrong = [iid for iid in made["system-a"] if made["system-a"][iid] != gold_of[iid]][:2]
    made["system-c"] = {iid: (gold_of[iid] if iid in wrong else p) for iid, p in made["system-a"].items()}
    for name, preds in made.items():
        evaluate("negex", "atlas-n100-v1", predictions=preds, name=name, results_dir=paths.results, data_dir=data_dir)
    gold = [["B-problem", "I-problem", "O", "B-test"], ["O", "B-treatment", "O"]]
    pred = [["B-problem", "I-problem", "O", "O"], ["O", "I-treatment", "O"]]   # an I- that continues nothing
    recs = [{"item_id": f"maccrobat-d000-s00{k}", "document": "0", "gold": g, "pred": p}
            for k, (g, p) in enumerate(zip(gold, pred))]
    spec = results.RunSpec(card="maccrobat", version="atlas-n100-v1", model="hand-tags", protocol="zero_shot")
    m = results.metric(0.5, 0.4, 0.6)
    results.write_cell(results.make_cell(spec, metrics={f"{b}_zero_shot": m for b in get_card("maccrobat").metrics},
                                         predictions=recs, extra={}, split={}, env={"python": "test"}),
                       results.cell_path(paths.results, "maccrobat", "atlas-n100-v1", "hand-tags", "zero_shot"))
    write_negex_cells(paths.results, data_dir)  # negspacy on both versions, with the whole-kit reproduction
    for c in results.read_cells(paths.results):  # a page for each run made here (scored files have none)
        if c["card"] in ("maccrobat", "tempeval") or c["model"] == "negspacy-negex-kit":
            nb = paths.runs / c["card"] / c["version"] / results.slug(c["model"]) / f"{c['protocol']}.ipynb"
            nb.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# run")]), nb)
    return render_without_lessons(paths), results.read_cells(paths.results)  # the course book checks the lessons


def test_a_site_of_every_card_holds_its_corrected_statements(mixed_site):
    src, cells = mixed_site
    assert all_problems(src, cells, SITES["mixed site"]) == []
    # what the checks read is there: the TempEval table, both seqeval modes (which differ here), every card page
    assert "| contains |" in md(src, "book/cards/tempeval/synthetic-v1/failures.md")
    assert re.search(r"\| hand-tags \(zero_shot\) \| [\d.]+ \| [\d.]+ \| no \(", md(src, "book/methods/metrics.md"))
    assert all((src / c.page).is_file() for c in available_cards())
    assert "`system-c (zero_shot)` − `system-a (zero_shot)`" in md(src, "book/cards/negex.md") and "end on 0" in md(
        src, "book/cards/negex.md")


@pytest.mark.xdist_group("books")
def test_the_small_book_holds_its_corrected_statements(small_book):
    """The session's small book (``tests/books.py``), as Jupyter Book rendered it: its ``_build/site-src`` and the
    cells it was built from."""
    _, results_dir = small_book
    src = results_dir.parent / "_build" / "site-src"
    assert all_problems(src, results.read_cells(results_dir), SITES["small book"]) == []


@pytest.mark.xdist_group("books")
def test_the_two_run_book_explorer_counts_are_its_comparisons(two_run_book):
    """The two-run book (``tests/books.py``): system-a and system-b on atlas-n100-v1, one paired comparison."""
    _, results_dir = two_run_book
    src = results_dir.parent / "_build" / "site-src"
    assert all_problems(src, results.read_cells(results_dir), SITES["two-run book"]) == []


if __name__ == "__main__":  # every check on a checkout's last build: python -m tests.test_book_statements <checkout>
    root = Path(sys.argv[1])
    found = all_problems(root / "_build" / "site-src", results.read_cells(root / "results"))
    print("\n".join(found) or "every statement holds")
    sys.exit(1 if found else 0)
