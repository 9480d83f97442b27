"""The book's build: result cells → site tree → Jupyter Book HTML.

``atlas book`` runs the default matrix (cached, see :mod:`atlaslib.runner`; :func:`default_requests`,
:func:`run_matrix`) with the data stories beside it, then renders a site tree in ``_build/site-src`` from the
sources in ``book/``, ``_config.yml`` and ``_toc.yml`` (:func:`render_site`):

- each card's result cells that have an executed notebook (:func:`collect_cells`) go to its pages,
  :func:`atlaslib.pages.card_pages.render_card`: leaderboards (one per split version, never merged), forest plots
  and reproduction tables where the line ``<!-- leaderboard -->`` stands, the sub-pages, the executed notebooks
  as sub-pages and the result JSON files as downloads; unlicensed cards get a "local evaluation only" banner;
- the site-wide pages come from :mod:`atlaslib.pages.site`: the home page's cards table, a page per model, the
  reproduction chapter, the build report (every run with wall time, peak memory and cache status) and
  ``_toc.yml``; the methods chapters, the facts quoted in prose and the course from the rest of
  :mod:`atlaslib.pages`.

Then Jupyter Book 1.x builds HTML with execution off (notebooks arrive executed), warnings as errors and
``--keep-going`` so every warning is reported (:func:`jupyter_book_build`). A failed run is never rendered as a
result: its row says "failed" and the command exits non-zero naming the notebook and the cell. A build that would
render the same pages as the last one keeps them (:func:`render_key`), and one whose HTML passed every check
is marked so (:data:`SITE_OK`).

``--publish`` renders the same site without the cards whose licence is unconfirmed and without cells
whose data are gated, writes a "withheld" page saying what was left out and why, and replaces this machine's
folders in the site tree by names (:func:`local_roots`, :func:`redact_local_paths`).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt

from . import atomicio, builddir, linkcheck
from .results import schema, store
from .escape import md_code
from .background import in_background
from .pages import datastory
from .pages.card_pages import render_card
from .pages.site import (render_build_report, render_intro, render_models, render_reproduction,
                         render_toc, render_withheld)
from .pages import facts, imported, methods
from .pages.course import finish_course, start_course
from .cards import Card, available_cards
from .executor import run_requests
from .matrix import BuildPaths, MatrixReport, print_timing  # noqa: F401  (book.BuildPaths stays importable)
from .runner import REPO, RunRequest


# -- running the matrix --------------------------------------------------------------------------------

def default_requests(cards: list[Card] | None = None) -> list[RunRequest]:
    cards = cards if cards is not None else available_cards()
    return [RunRequest(c.name, v, m, p) for c in cards for (v, m, p) in c.default_matrix]


def run_matrix(requests: list[RunRequest], paths: BuildPaths, *, data_dir=None, force: bool = False,
               executor: str = "serial", scheduler: str | None = None, n_workers: int | None = None,
               memory_limit=None, log=print) -> MatrixReport:
    """Run every request (cached), serially or on Dask (:mod:`atlaslib.executor`); failures are collected,
    never stop the matrix, and the per-run timing table is printed at the end."""
    return run_requests(requests, paths, data_dir=data_dir, force=force, executor=executor, scheduler=scheduler,
                        n_workers=n_workers, memory_limit=memory_limit, log=log)


# -- rendering the site tree -----------------------------------------------------------------------------

def _copy_sources(paths: BuildPaths, src: Path) -> None:
    builddir.fresh_folder(src)  # only a folder the atlas made is deleted
    for name in ("_config.yml", "_toc.yml"):
        shutil.copyfile(paths.repo / name, src / name)
    shutil.copytree(paths.repo / "book", src / "book", ignore=shutil.ignore_patterns("runs", "_generated"))


is_gated = schema.is_gated  # a cell computed on data under a use agreement: never published


def collect_cells(paths: BuildPaths, card: Card, publish: bool, failed: list[RunRequest]) -> list[dict]:
    """Result cells of a card that have an executed notebook, minus failed runs (and gated ones when
    publishing)."""
    failed_keys = {(r.card, r.version, store.slug(r.model), r.protocol) for r in failed}
    cells = []
    for cell in store.read_cells(paths.results, card.name):
        key = (cell["card"], cell["version"], store.slug(cell["model"]), cell["protocol"])
        if key in failed_keys:
            continue
        if publish and is_gated(cell):
            continue
        nb = paths.runs / card.name / cell["version"] / store.slug(cell["model"]) / f"{cell['protocol']}.ipynb"
        if not nb.is_file():
            if not schema.is_external(cell):  # scored predictions files have no notebook; their row links the JSON
                continue
            nb = None
        cell["_notebook_src"] = nb
        cells.append(cell)
    return cells


def render_site(paths: BuildPaths, *, publish: bool = False, report: MatrixReport | None = None,
                cards: list[Card] | None = None) -> tuple[Path, list[tuple[str, str]]]:
    src = paths.src(publish)
    before = builddir.snapshot(src)  # what the last build rendered: unchanged files keep their times below
    _copy_sources(paths, src)
    cards = cards if cards is not None else available_cards()
    # the cards this build shows (a publish build leaves out those whose licence is unconfirmed)
    shown_cards = [c for c in cards if not (publish and not c.licence_confirmed)]
    # lessons read only result cells and data: they execute in the background while the pages render
    course = start_course(src, paths, publish, shown_cards)
    failed = [f.request for f in (report.failures if report else [])]
    card_docs, dropped, withheld, shown_cells = {}, set(), [], []
    known = {c.name for c in cards}
    for page in (src / "book" / "cards").glob("*.md"):
        if page.stem not in known:
            dropped.add(f"book/cards/{page.stem}")
    for card in cards:
        if publish and not card.licence_confirmed:
            dropped.add(f"book/cards/{card.name}")
            withheld.append((f"card `{card.name}`: page, runs and result cells",
                             f"licence unconfirmed. {card.licence_note}"))
            continue
        cells = collect_cells(paths, card, publish, failed)
        if publish:
            gated = [c for c in store.read_cells(paths.results, card.name)
                     if is_gated(c)]
            for c in gated:
                label = f"{card.name}/{c['version']}/{c['model']}/{c['protocol']}"
                withheld.append((f"run {md_code(label)}",
                                 "computed on gated data (data use agreement): outputs stay local"))
        datastory.merge_extra(cells, paths.runs, card.name)  # facts of each version's data story
        story_docs = datastory.render(card, paths.runs, src)
        card_docs[card.name] = render_card(card, cells, src, failed, story_docs, publish)
        shown_cells.extend(cells)
    for doc in dropped:  # pages this build leaves out are not built: no fact of theirs is computed either
        (src / f"{doc}.md").unlink(missing_ok=True)
    render_intro(src, shown_cards, shown_cells)
    render_reproduction(src, shown_cards, shown_cells)
    methods.render_methods(src, shown_cards, shown_cells)
    model_docs = render_models(src, shown_cards, shown_cells)
    render_build_report(src, report)
    finish_course(course, withheld)  # the lessons' pages and take-home boxes, the learning path
    extra = ["book/build_report"]
    if publish:
        render_withheld(src, withheld)
        extra.append("book/withheld")
    facts.substitute_site(src, shown_cells, cache_dir=paths.build)  # {{fact:KEY}} placeholders, every page
    render_toc(src, card_docs, dropped, extra, model_docs)
    imported.render(src, paths.results, publish)  # the "Imported evaluations" part, when imports exist
    if publish:  # executed notebooks and result cells name this machine's folders: not in what is uploaded
        redact_local_paths(src, local_roots(paths, shown_cells))
    builddir.keep_unchanged(src, before)
    return src, withheld


#: files of the site tree whose text may carry local paths (executed notebooks, result cells, pages, tables)
REDACTED_SUFFIXES = (".ipynb", ".json", ".md", ".csv", ".txt")


def local_roots(paths: BuildPaths, cells=()) -> dict[str, str]:
    """This machine's folders a build may have written into notebooks and cells -> what the publish build
    says instead (paths in the checkout become relative to it). The folders of local models are private too:
    a ``source: path`` (or GGUF file) profile's location, and the folder of every local model a cell of
    ``cells`` ran become ``LOCAL_MODEL``."""
    import tempfile

    from . import sources
    from .models import load_profiles, source_of

    roots = {str(paths.results): "RESULTS_DIR", str(paths.runs): "RUNS_DIR", str(paths.build): "BUILD_DIR",
             str(sources.cache_dir()): "CACHE_DIR", sys.prefix: "PYTHON_ENV", sys.base_prefix: "PYTHON",
             tempfile.gettempdir(): "TMP", str(Path.home()): "~", str(paths.repo): "."}
    data = sources.data_dir()
    if data is not None:
        roots[str(data)] = "DATA_DIR"
    models = [p.location for p in load_profiles().values() if source_of(p).relative_location(p.location)]
    models += [str((c.get("spec") or {}).get("profile", {}).get("location") or "") for c in cells
               if (c.get("spec") or {}).get("profile", {}).get("source") == "path"]
    models += [c["model"] for c in cells if store.is_local_model(c.get("model", ""))]
    for m in models:
        if os.path.isabs(m):
            roots[m] = "LOCAL_MODEL"
    out = {}
    for root, name in roots.items():
        for r in {root, os.path.realpath(root)}:
            if r not in ("", os.sep) and os.path.isabs(r):
                for form in written_forms(r):
                    out.setdefault(form, name)
    return out


def written_forms(path: str) -> list[str]:
    """The ways a page, table or notebook of the site may have written ``path``: as it is, HTML-escaped (with or
    without quotes), as MyST text (:func:`atlaslib.escape.md`), inside a JSON string, and each of those as JSON
    writes it. A folder named ``a<b&c`` appears in a page as ``a&lt;b&amp;c``: the redaction must find it there
    too, or the folders above it stay in the publish build."""
    import html
    import json

    from .escape import md

    forms = {path, html.escape(path, quote=False), html.escape(path), md(path)}
    forms |= {json.dumps(f, ensure_ascii=False)[1:-1] for f in list(forms)}
    forms |= {json.dumps(f)[1:-1] for f in list(forms)}
    return sorted(forms)


def redact_local_paths(src: Path, roots: dict[str, str]) -> int:
    """Replace every absolute path under one of ``roots`` (folder -> name) in the site tree's text files by the
    name (the longest root first, whole path components only); returns how many files changed."""
    if not roots:
        return 0
    ordered = sorted(roots, key=len, reverse=True)
    end = r"""(?=[/\\\s"'<>),;:`|\]&]|$)"""  # a whole path component: what may follow a folder name
    pattern = re.compile("|".join(re.escape(r) + end for r in ordered))
    changed = 0
    for f in src.rglob("*"):
        if not f.is_file() or f.suffix not in REDACTED_SUFFIXES:
            continue
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        new = pattern.sub(lambda m: roots[m.group(0)], text)
        if new != text:
            f.write_text(new, encoding="utf-8")
            changed += 1
    return changed


# -- building ---------------------------------------------------------------------------------------------

#: the file in the site tree that records what its pages were rendered from (:func:`render_key`)
RENDER_KEY = ".atlas-render-key"


def render_key(paths: BuildPaths, cards, report: MatrixReport | None) -> str:
    """sha256 over everything a site build's pages are rendered from: atlaslib's source, the book's own pages
    and configuration, every result cell and executed notebook (runs, data stories), the cards shown, the runs
    that failed in this build, the data folder and a user's profiles file. Equal keys render equal pages (the
    build report apart), so a build whose key is the last one's keeps the pages it has."""
    import hashlib
    import json

    from . import sources
    from .notebook import source_digest

    h = hashlib.sha256(json.dumps({
        "atlaslib": source_digest(), "cards": None if cards is None else sorted(c.name for c in cards),
        "failed": sorted(f.request.label for f in report.failures) if report else [],
        "data": str(sources.data_dir()), "profiles": os.environ.get("ATLAS_PROFILES"),
    }, sort_keys=True).encode())
    roots = [paths.repo / "_config.yml", paths.repo / "_toc.yml", paths.repo / "book", Path(paths.results),
             Path(paths.runs)]
    profiles = os.environ.get("ATLAS_PROFILES")
    if profiles:
        roots += [Path(p) for p in profiles.split(os.pathsep) if p]
    for root in roots:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []
        for f in files:
            try:
                h.update(f"{f}\0".encode() + hashlib.sha256(f.read_bytes()).digest())
            except OSError:
                h.update(f"{f}\0unreadable".encode())
    return h.hexdigest()


def rendered_with(src: Path) -> str | None:
    """The render key recorded in the site tree ``src`` by its last complete render; None when there is none."""
    try:
        return (Path(src) / RENDER_KEY).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None

def jupyter_book_build(src: Path, out: Path, log=print, incremental: bool = False) -> tuple[int, list[str]]:
    """``jupyter-book build`` with warnings as errors and --keep-going; returns (exit code, warnings).
    ``incremental``: keep the last build's output and Sphinx environment, so that Sphinx reads again only the
    pages whose files changed (:func:`atlaslib.builddir.keep_unchanged` keeps the others' times); otherwise
    (or when the last build left no output or failed) the output folder is made afresh and every page read."""
    last_ok = (out / "_build" / "html" / "index.html").is_file() and (out / builddir.MARKER).is_file() and \
        (out / "_build" / ".doctrees" / "environment.pickle").is_file()
    if not (incremental and last_ok):
        builddir.fresh_folder(out)  # only a folder the atlas made is deleted
        incremental = False
    exe = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(exe) if exe.exists() else "jupyter-book", "build", str(src), "--path-output", str(out),
           "-W", "-n", "--keep-going"] + ([] if incremental else ["--all"])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    text = proc.stdout + proc.stderr
    warnings = [ln for ln in text.splitlines() if re.search(r"WARNING|ERROR", ln)]
    if proc.returncode != 0 and not warnings:  # an exception (e.g. a toc naming a page twice): its last line
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        cause = next((ln for ln in reversed(lines) if re.search(r"error|exception|multiple", ln, re.I)),
                     lines[-1] if lines else f"jupyter-book exited with {proc.returncode}")
        warnings = [f"jupyter-book failed: {cause}"]
    (out.parent / f"{out.name}-build.log").write_text(text, encoding="utf-8")
    return proc.returncode, warnings


def _with_stories(reqs, paths: BuildPaths, data_dir, force: bool, log, matrix) -> MatrixReport:
    """Run ``matrix()`` (the run matrix) while the data stories of its (card, version) pairs run beside it
    (:func:`atlaslib.background.in_background`): a story is one kernel (mostly one core), and no run needs a
    story, so the stories fill the cores the matrix leaves idle instead of running alone before it. The report
    carries the stories' outcomes (the build report counts them); a story's failure is raised here."""
    stories = in_background(lambda: datastory.run_stories([(r.card, r.version) for r in reqs], paths.runs,
                                                          data_dir=data_dir, force=force, log=log),
                            "atlas-data-stories")
    report = matrix()
    report.stories = stories.result()
    return report


def build(*, paths: BuildPaths | None = None, publish: bool = False, force: bool = False, run_runs: bool = True,
          data_dir=None, requests: list[RunRequest] | None = None, cards: list[Card] | None = None,
          executor: str = "serial", scheduler: str | None = None, n_workers: int | None = None,
          memory_limit=None, log=print) -> int:
    """Run the matrix, render, build. Returns the process exit code (0 only when everything succeeded).
    ``executor``: "serial" or "dask" (a LocalCluster, or the scheduler named by ``scheduler`` /
    ``$ATLAS_DASK_SCHEDULER``); the `atlas book` command uses Dask by default."""
    paths = paths or BuildPaths()
    with builddir.build_lock(paths.build):  # one build at a time in a build folder
        for folder in (paths.src(publish), paths.html_out(publish)):  # refused before anything runs
            builddir.check_replaceable(folder)
        return _build(paths, publish, force, run_runs, data_dir, requests, cards, executor, scheduler, n_workers,
                      memory_limit, log)


def _build(paths: BuildPaths, publish: bool, force: bool, run_runs: bool, data_dir, requests, cards, executor,
           scheduler, n_workers, memory_limit, log) -> int:
    report = None
    if run_runs:
        reqs = requests if requests is not None else default_requests(cards)
        report = _with_stories(reqs, paths, data_dir, force, log, lambda: run_matrix(
            reqs, paths, data_dir=data_dir, force=force, executor=executor, scheduler=scheduler,
            n_workers=n_workers, memory_limit=memory_limit, log=log))
    pages_before = builddir.snapshot(paths.src(publish))
    key = None if publish else render_key(paths, cards, report)  # a publish build always renders afresh
    out = paths.html_out(publish)
    if key is not None and nothing_ran(report) and site_built_with(out) == key == rendered_with(paths.src(publish)):
        log("site: nothing changed since the last build (no run or data story executed, every page the same); "
            "kept as it was (its build report describes the build that made it)")
        log(f"book built: {out / '_build' / 'html' / 'index.html'}")
        return 0
    if key is not None and rendered_with(paths.src(publish)) == key:
        src, withheld = paths.src(publish), []
        render_build_report(src, report)  # the one page that tells this build apart
        log("pages: nothing they read has changed since the last build; only the build report is written again")
    else:
        src, withheld = render_site(paths, publish=publish, report=report, cards=cards)
        if key is not None:
            atomicio.atomic_write_text(src / RENDER_KEY, key + "\n")
    mark_site_built(out, None)  # until this build succeeds, the site it leaves is not one to keep as is
    # Sphinx reads again only what changed when the site has the same files as last time; a publish build, a
    # page added or removed (its old HTML would stay), or a failed last build is built afresh
    same_files = bool(pages_before) and set(pages_before) == set(builddir.snapshot(src))
    code, warnings = jupyter_book_build(src, out, log, incremental=not publish and same_files)
    html_dir = out / "_build" / "html"
    for w in warnings:
        log(w)
    status = 0
    broken = linkcheck.check(html_dir) if html_dir.is_dir() else []
    for problem in broken:
        log(f"broken link: {problem}")
    if broken:
        status = 1
    if code != 0 or warnings:
        log(f"Jupyter Book build failed ({len(warnings)} warnings/errors; warnings are errors); "
            f"log: {out.parent / (out.name + '-build.log')}")
        status = 1
    for o in (report.stories if report else []):
        if o.status == "failed":
            log(f"data story {o.label} failed: {o.error}")
            status = 1
    if report and report.failures:
        log(f"{len(report.failures)} run(s) failed and are not rendered as results:")
        for f in report.failures:
            log(f"  {f}")
        status = 1
    if publish:
        log(f"publish build: withheld {len(withheld)} item(s): " + "; ".join(w for w, _ in withheld))
    if status == 0:
        if key is not None:
            mark_site_built(out, key)
        log(f"book built: {html_dir / 'index.html'}")
    return status


#: the file beside a site's HTML that holds the render key of the last build that made that HTML without a problem
SITE_OK = ".atlas-site-ok"


def nothing_ran(report: MatrixReport | None) -> bool:
    """True when this build executed no run and no data story (everything was served from the cache)."""
    if report is None:
        return True
    return all(o.status == "cached" for o in report.outcomes) and not report.failures and \
        all(o.status in ("cached", "none") for o in (report.stories or []))


def site_built_with(out: Path) -> str | None:
    """The render key of the last build that made the HTML under ``out`` and passed every check; None when there
    is none (or its HTML is gone)."""
    try:
        if (Path(out) / "_build" / "html" / "index.html").is_file():
            return (Path(out) / SITE_OK).read_text(encoding="utf-8").strip()
    except OSError:
        pass
    return None


def mark_site_built(out: Path, key: str | None) -> None:
    """Record ``key`` as the render key of the HTML under ``out`` (None: forget it, before a build that may fail).
    A marker that cannot be written costs the next build its shortcut, never this build."""
    marker = Path(out) / SITE_OK
    try:
        if key is None:
            marker.unlink(missing_ok=True)
        else:
            atomicio.atomic_write_text(marker, key + "\n")
    except OSError:
        pass
