"""Checks of the robustness pages' statements, each recomputed from the cells (default runs and their variant cells)
or from the counts the page itself prints, with an independent reference (scipy's exact binomial test, Holm by hand):

- a row trained with several seeds whose perturbation changes no seed's answer has no interval around a difference
  no seed shows (the seed-paired interval is zero at both ends), and the page names the seed pairing;
- every Holm-adjusted column says over which family it adjusts (the card's table or the run's own variants), the
  family's size is the rows it adjusts, and its values are Holm's over those rows' exact McNemar p (a run page
  and the card's page gave one variant 0.047 and 0.422 under the same header "p (Holm)");
- a variant run that answers one label for every item it read is marked collapsed in the robustness table as in
  the prompt table (the prompt table's rule: one label, all items read), and no other row is.

Only a whole default book has fine-tuned rows with perturbation runs and text-reading runs with variants (the
suite's books have none), so the three are whole-book-only checks, tested on hand-made pages in
``tests/analysis/test_robust_statements.py``.
"""
from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat
from scipy.stats import binomtest

from tests.statements import missing


# -- reading the pages ----------------------------------------------------------------------------------------

def md_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """(header, rows) of every Markdown table in ``text`` (cells stripped; ``\\|`` inside a cell kept)."""
    out, head, rows = [], None, []
    for line in text.splitlines() + [""]:
        line = line.strip()
        if line.startswith("|") and line.endswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line[1:-1])]
            if head is None:
                head, rows = cells, []
            elif not all(re.fullmatch(r":?-+:?", c) for c in cells if c):
                rows.append(cells)
            continue
        if head is not None:
            out.append((head, rows))
            head = None
    return out


def html_tables(markup: str) -> list[tuple[list[str], list[list[str]]]]:
    """(header, rows) of every pandas HTML table in ``markup``: the header's first row (its index column
    included), each body row's index and values (tags removed, entities unescaped)."""
    out = []
    for table in re.findall(r"<table.*?</table>", markup, flags=re.S):
        thead = re.search(r"<thead>(.*?)</thead>", table, flags=re.S)
        first = re.search(r"<tr[^>]*>(.*?)</tr>", thead.group(1), flags=re.S) if thead else None
        head = [html.unescape(re.sub(r"<[^>]+>", "", h)).strip()
                for h in re.findall(r"<th[^>]*>(.*?)</th>", first.group(1), flags=re.S)] if first else []
        body = re.search(r"<tbody>(.*?)</tbody>", table, flags=re.S)
        rows = [[html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
                 for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", tr, flags=re.S)]
                for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body.group(1) if body else "", flags=re.S)]
        out.append((head, rows))
    return out


def robustness_pages(src: Path):
    """(card, version, page text) of every card version's robustness page."""
    for page in sorted((Path(src) / "book" / "cards").glob("*/*/robustness.md")):
        yield page.parent.parent.name, page.parent.name, page.read_text(encoding="utf-8")


def run_page_tables(src: Path):
    """(page, header, rows) of every HTML table of a run page's outputs (``book/runs/<card>/<version>/…``)."""
    for nb_path in sorted((Path(src) / "book" / "runs").glob("*/*/*/*.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        for c in nb.cells:
            for o in c.get("outputs", []):
                markup = "".join((o.get("data") or {}).get("text/html", ""))
                for head, rows in html_tables(markup):
                    yield nb_path.relative_to(src), head, rows


def _plain(text: str) -> str:
    """A table cell as text: Markdown code, emphasis, escapes, ``<wbr>`` and the seeds' count removed."""
    t = re.sub(r"<wbr>|</?[a-z]+[^>]*>", "", text)
    t = t.replace("`", "").replace("**", "").replace("\\", "")
    return re.sub(r"\s*\(\d+ seeds\)$", "", t).strip()


def _rows(head: list[str], rows: list[list[str]]) -> list[dict]:
    return [dict(zip(head, r)) for r in rows if len(r) == len(head)]


# -- cells --------------------------------------------------------------------------------------------------------

def _variant(cell: dict) -> dict | None:
    return ((cell.get("spec") or {}).get("parameters") or {}).get("variant") or None


def variant_pairs(cells) -> list[tuple[dict, dict]]:
    """(default run's cell, variant cell) of the ok runs: variant cells among ``cells`` or written beside a default
    run's cell (its ``variants/<protocol>/`` folder), matched by card, version, model, protocol and run key."""
    from atlaslib.variants import of_cell

    cells = list(cells)
    base = [c for c in cells if not _variant(c) and c.get("status") == "ok"]
    given = [c for c in cells if _variant(c)]
    out = []
    for b in base:
        mine = [v for v in given if (v["card"], v["version"], v["model"], v["protocol"]) ==
                (b["card"], b["version"], b["model"], b["protocol"])
                and (not b.get("run_key") or not v.get("parent_run_key") or v["parent_run_key"] == b["run_key"])]
        out += [(b, v) for v in (mine or of_cell(b)) if v.get("status") == "ok" and v.get("predictions")]
    return out


def _holm(p: list[float]) -> list[float]:
    """Holm's step-down adjustment, by hand: sorted ascending, p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j))."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out, run = [0.0] * m, 0.0
    for j, i in enumerate(order):
        run = max(run, min(1.0, (m - j) * p[i]))
        out[i] = run
    return out


def _mcnemar(b: int, c: int) -> float:
    return 1.0 if b + c == 0 else float(binomtest(b, b + c, 0.5).pvalue)


def _shown_p(text: str) -> float | None:
    """A printed p: ``0.047``, ``0.007\\*`` or ``< 0.001`` (returned as 0.0005, what "< 0.001" allows)."""
    t = text.replace("\\*", "").replace("*", "").strip()
    if t.startswith("<"):
        return 0.0005
    try:
        return float(t)
    except ValueError:
        return None


def _agrees(shown: float, exact: float) -> bool:
    return exact < 0.001 if shown == 0.0005 else abs(shown - exact) <= 5e-4 + 1e-12


# -- item 1: a seeded row's perturbation interval pairs its seeds ---------------------------------------------------

def check_seeded_perturbation_intervals_pair_the_seeds(src: Path, cells) -> list[str]:
    """A row over training seeds whose perturbation changes no seed's model's answer on any item read (each seed's
    perturbed answers against the same seed's default answers, counted from the cells) shows the difference 0 with
    no interval or with the interval [0, 0] on the card's robustness page, and the page names the seed pairing."""
    out, seen = [], 0
    pages = {(card, version): text for card, version, text in robustness_pages(src)}
    for b, v in variant_pairs(cells):
        runs_b = (b.get("extra") or {}).get("seed_runs") or []
        runs_v = (v.get("extra") or {}).get("seed_runs") or []
        if len(runs_b) < 2 or [r["seed"] for r in runs_b] != [r["seed"] for r in runs_v]:
            continue
        read = {r["item_id"] for r in v["predictions"]}
        changed = 0
        for rb, rv in zip(runs_b, runs_v):
            before = {x["item_id"]: x["pred"] for x in rb.get("predictions") or [] if x["item_id"] in read}
            changed += sum(before.get(x["item_id"]) != x["pred"] for x in rv.get("predictions") or [])
        seen += 1
        label = f"{b['card']} {b['version']} {b['model']} ({b['protocol']}) {_variant(v)['name']}"
        text = pages.get((b["card"], b["version"]))
        if text is None:
            out.append(f"{label}: the robustness page is missing")
            continue
        if "seed-paired" not in text:
            out.append(f"{b['card']} {b['version']}: the robustness page shows a row over {len(runs_b)} seeds but "
                       "does not name the seed pairing of its interval")
        if changed:
            continue
        for head, rows in md_tables(text):
            diff = next((h for h in head if h.startswith("difference")), None)
            if diff is None or "model" not in head:
                continue
            for r in _rows(head, rows):
                if (_plain(r["model"]), _plain(r.get("protocol", b["protocol"])), _plain(r.get(
                        "perturbation", r.get("prompt", ""))).split(";")[0]) != (b["model"], b["protocol"],
                                                                                _variant(v)["name"]):
                    continue
                m = re.search(r"\[([-+]?\d+\.\d+), ([-+]?\d+\.\d+)\]", r[diff])
                if m and (float(m.group(1)) != 0 or float(m.group(2)) != 0):
                    out.append(f"{label}: no seed's model changes an answer on the {len(read)} items read, yet the "
                               f"robustness page shows {r[diff]!r} (seed-paired: [0, 0])")
    return list(dict.fromkeys(out)) if seen or out else missing("a row over training seeds with a perturbation run")


# -- item 2: every Holm column names its family --------------------------------------------------------------------

def _holm_problems(where: str, head: list[str], rows: list[list[str]], run_page: bool) -> list[str]:
    col = next((h for h in head if "holm" in h.lower() and h.lower().startswith("p")), None)
    if col is None or "b" not in head or "c" not in head:
        return []
    if run_page:
        m = re.fullmatch(r"p \(Holm over this run's variants of the same kind: (.+)\)", col)
        sizes = {k.rstrip("s"): int(n.replace(",", "")) for n, k in re.findall(r"(\d[\d,]*) (\w+)", m.group(1))} \
            if m else {}
    else:
        m = re.fullmatch(r"p \(Holm over (the table's [^:]+): ([\d,]+)\)", col)
        sizes = {"": int(m.group(2).replace(",", ""))} if m else {}
    if not m:
        return [f"{where}: the column {col!r} does not say over which family it adjusts (the card's table or the "
                "run's own variants)"]
    out = []
    table = _rows(head, rows)
    if run_page:     # the index column (first header cell empty) is "name (kind)"
        kind_of = [re.search(r"\((\w+)\)$", r[head[0]]).group(1) if re.search(r"\((\w+)\)$", r[head[0]]) else "?"
                   for r in table]
    else:
        kind_of = [""] * len(table)
    for kind in sorted(set(kind_of)):
        fam = [r for r, k in zip(table, kind_of) if k == kind]
        if sizes.get(kind) != len(fam):
            out.append(f"{where}: {col!r} names {sizes.get(kind)} {kind or 'rows'} in its family, the table has "
                       f"{len(fam)}")
            continue
        exact = _holm([_mcnemar(int(r["b"]), int(r["c"])) for r in fam])
        for r, e in zip(fam, exact):
            shown = _shown_p(r[col])
            if shown is None or not _agrees(shown, e):
                name = r.get(head[0]) if run_page else " ".join(_plain(r.get(h, "")) for h in head[:3])
                out.append(f"{where}: {name}: {col!r} shows {r[col]!r}; Holm over its {len(fam)} rows' exact "
                           f"McNemar p gives {e:.3f}")
    return out


def check_holm_columns_name_their_family(src: Path, cells) -> list[str]:
    """Every Holm column of a robustness table (the card's robustness page; a run page's table of its own
    variants) names its family and its size, and each value is Holm's adjustment, by hand, of the exact McNemar p
    (scipy) of that family's rows' b and c."""
    out, seen = [], 0
    for card, version, text in robustness_pages(src):
        for head, rows in md_tables(text):
            if any("holm" in h.lower() for h in head):
                seen += 1
                out += _holm_problems(f"{card} {version} robustness page", head, rows, run_page=False)
    for page, head, rows in run_page_tables(src):
        if any("holm" in h.lower() for h in head) and any(h.startswith("difference") for h in head):
            seen += 1
            out += _holm_problems(str(page), head, rows, run_page=True)
    return out if seen or out else missing("a robustness table with a Holm column")


# -- item 3: a collapsed variant run is marked -----------------------------------------------------------------------

def _one_label(cell: dict):
    """The prompt table's rule, by hand: the one label a run gives every item it read, else None."""
    preds = [r.get("pred") for r in cell.get("predictions") or []]
    if not preds or not all(isinstance(p, str) for p in preds) or len(set(preds)) != 1:
        return None
    return preds[0]


def check_collapsed_variants_are_marked(src: Path, cells) -> list[str]:
    """A variant run (perturbation or prompt) that answers one label for every item it read is marked
    "collapsed" with that label in its row of the robustness page, and a row so marked is such a run."""
    out, seen = [], 0
    pages = {(card, version): text for card, version, text in robustness_pages(src)}
    for b, v in variant_pairs(cells):
        text = pages.get((b["card"], b["version"]))
        if text is None:
            continue
        one, name = _one_label(v), _variant(v)["name"]
        label = f"{b['card']} {b['version']} {b['model']} ({b['protocol']}) {name}"
        found = False
        for head, rows in md_tables(text):
            col = "perturbation" if "perturbation" in head else "prompt" if "prompt" in head else None
            if col is None or "model" not in head:
                continue
            for r in _rows(head, rows):
                if _plain(r["model"]) != b["model"] or _plain(r[col]).split(";")[0] != name or (
                        "protocol" in r and _plain(r["protocol"]) != b["protocol"]):
                    continue
                found = True
                seen += 1
                row = " ".join(r.values())
                if one is not None and not re.search(rf"collapsed: answers {re.escape(one)}\b", row):
                    out.append(f"{label}: answers {one!r} for all {len(v['predictions'])} items read, yet its row "
                               "is not marked collapsed")
                if one is None and "collapsed" in row:
                    out.append(f"{label}: marked collapsed, yet it gives more than one answer")
        if not found:
            out.append(f"{label}: no row on the {b['card']} {b['version']} robustness page")
    return out if seen or out else missing("a robustness page row of a variant run")


CHECKS = (check_seeded_perturbation_intervals_pair_the_seeds, check_holm_columns_name_their_family,
          check_collapsed_variants_are_marked)
SITES: dict = {}
WHOLE_BOOK_ONLY = CHECKS
