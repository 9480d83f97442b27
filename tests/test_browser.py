"""The built book in a real browser: Debian's chromium, headless, against the HTML served on 127.0.0.1.

The small book of ``tests/conftest.py`` (NegEx atlas-n100-v1: the majority baseline, which runs, and the bvanaken
hub profile, which cannot run offline), built once per session. Four pages are opened: the home page, the NegEx
card page (leaderboard), the majority run's executed notebook and the not-run notebook of the hub model. Each gets
a screenshot, kept under the session's artifacts folder (pytest's temporary folder, never the checkout), and its
DOM as chromium rendered it (``--dump-dom``), which
is what the assertions read: the leaderboard table with the cell's CI text, the figures (and that the
server really delivered them), the notebook's metrics table with the same numbers, and no Python
traceback or error output anywhere.

chromium is installed by the set-up (``make browser``, a dependency of ``make test``); when it is absent
the test fails and says so.
"""
from __future__ import annotations

import contextlib
import functools
import json
import re
import shutil
import struct
import subprocess
import threading
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from atlaslib.cards import get_card

pytestmark = pytest.mark.xdist_group("books")  # shares the session's books (tests/conftest.py)
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]
WINDOW = (1280, 2000)
CARD_PAGE = "book/cards/negex.html"
RUN_PAGE = "book/runs/negex/atlas-n100-v1/majority/zero_shot.html"
HOME_PAGE = "book/intro.html"
NOT_RUN_PAGE = "book/runs/negex/atlas-n100-v1/bvanaken--clinical-assertion-negation-bert/zero_shot.html"


# -- serving and browsing ------------------------------------------------------------------------------

class _QuietHandler(SimpleHTTPRequestHandler):
    timeout = 10  # a stuck connection cannot hold a server thread for long

    def log_message(self, fmt, *args):  # keep the test output clean, remember what was served
        pass

    def log_request(self, code="-", size="-"):
        self.server.served.append((self.path.split("?")[0], int(code) if str(code).isdigit() else code))

    def do_GET(self):
        page = getattr(self.server, "extra", {}).get(self.path.split("?")[0].lstrip("/"))
        if page is None:
            return super().do_GET()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)


@contextlib.contextmanager
def serve(html_dir: Path, extra: dict[str, bytes] | None = None):
    """Serve ``html_dir`` on 127.0.0.1 (the server binds port 0 and reports the port it got): the base URL and the
    list of served (path, status). ``extra``: pages served beside the folder's files (site-relative path ->
    bytes), so a test adds a page to a shared book without writing into it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(html_dir)))
    server.served = []
    server.extra = dict(extra or {})
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.served
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def site(small_book):
    """Base URL of the small book served on 127.0.0.1 (a free port), and the list of served (path, status)."""
    with serve(small_book[0]) as served:
        yield served


def chromium() -> str:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.fail("chromium is not installed, so the book cannot be tested in a browser. The set-up installs "
                    "it: run `make browser` (or `make test`), i.e. "
                    "`apt-get update && apt-get install -y --no-install-recommends chromium`.")
    return exe


def _chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess:
    cmd = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"chromium did not finish within 90 s: {' '.join(cmd)}\n{exc.stderr or ''}")
    assert proc.returncode == 0, f"chromium failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}"
    return proc


def screenshot(url: str, name: str, profile: Path, where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    png = where / f"{name}.png"
    png.unlink(missing_ok=True)
    _chromium([f"--screenshot={png}", f"--window-size={WINDOW[0]},{WINDOW[1]}", url], profile)
    data = png.read_bytes() if png.is_file() else b""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"chromium wrote no PNG screenshot of {url} to {png}"
    assert struct.unpack(">II", data[16:24]) == WINDOW, f"screenshot {png} is not {WINDOW[0]}x{WINDOW[1]}"
    return png


def dump_dom(url: str, profile: Path) -> str:
    dom = _chromium(["--virtual-time-budget=5000", "--dump-dom", url], profile).stdout
    assert "<html" in dom and "</body>" in dom, f"chromium dumped no page for {url}: {dom[:500]!r}"
    return dom


# -- reading a rendered DOM ----------------------------------------------------------------------------

class _DomReader(HTMLParser):
    """Tables (as rows of cell texts), <img> srcs, and the text of error/stderr output blocks."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self.images: list[str] = []
        self.error_blocks: list[str] = []   # myst-nb error / traceback outputs
        self.stderr_blocks: list[str] = []  # myst-nb stderr stream outputs
        self._tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None
        self._stack: list[tuple[str, str | None]] = []  # (tag, kind of output block or None)
        self._open: dict[str, list[str]] = {}

    def handle_starttag(self, tag, attrs):
        d = {k: (v or "") for k, v in attrs}
        if tag == "img":
            self.images.append(d.get("src", ""))
        if tag in self.VOID:
            return
        classes = set(d.get("class", "").split())
        kind = None
        if "output" in classes and classes & {"error", "traceback"}:
            kind = "error"
        elif "output" in classes and "stderr" in classes:
            kind = "stderr"
        self._stack.append((tag, kind))
        if kind:
            self._open.setdefault(kind, [])
        if tag == "table":
            self._tables.append([])
        elif tag == "tr" and self._tables:
            self._tables[-1].append([])
        elif tag in ("td", "th") and self._tables:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        while self._stack:
            t, kind = self._stack.pop()
            if kind and not any(k == kind for _, k in self._stack):
                text = "".join(self._open.pop(kind, []))
                (self.error_blocks if kind == "error" else self.stderr_blocks).append(text)
            if t == tag:
                break
        if tag in ("td", "th") and self._cell is not None and self._tables and self._tables[-1]:
            self._tables[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table" and self._tables:
            self.tables.append(self._tables.pop())

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        for buf in self._open.values():
            buf.append(data)


def read_dom(dom: str) -> _DomReader:
    r = _DomReader()
    r.feed(dom)
    r.close()
    return r


TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\s*\w+(Error|Exception): ", re.M)


def page_faults(dom: str) -> list[str]:
    """What a reader must never see: error outputs, tracebacks in any output or in the page text."""
    r = read_dom(dom)
    faults = [f"error output: {b.strip()[:300]}" for b in r.error_blocks]
    faults += [f"traceback in stderr output: {b.strip()[:300]}" for b in r.stderr_blocks if TRACEBACK.search(b)]
    if "Traceback (most recent call last)" in dom and not faults:
        faults.append("a Python traceback is on the page")
    return faults


def _header(cell: str) -> str:
    """A header cell's name without sort arrows or other trailing marks (``macro_f1 ↕`` → ``macro_f1``)."""
    return re.sub(r"[^\w)\]]+$", "", cell).strip()


def table_with_header(r: _DomReader, *names: str) -> list[list[str]]:
    """The first table whose header row has all ``names``; its header row normalised by :func:`_header`."""
    for t in r.tables:
        if t and all(n in [_header(c) for c in t[0]] for n in names):
            return [[_header(c) for c in t[0]]] + t[1:]
    raise AssertionError(f"no table with header columns {names}; tables' headers: {[t[0] for t in r.tables if t]}")


# -- the DOM checks themselves catch what they are meant to catch (no browser needed) ---------------------

MYST_NB_ERROR = ('<div class="cell_output docutils container"><div class="output traceback highlight-ipythontb '
                 'notranslate"><div class="highlight"><pre><span class="gt">Traceback</span> (most recent call '
                 'last)\nCell In[3], line 1\n----&gt; 1 raise ValueError("boom")\n<span class="ne">ValueError'
                 '</span>: boom\n</pre></div></div></div>')
STDERR_WARNING = ('<div class="output stderr highlight-myst-ansi notranslate"><div class="highlight"><pre>'
                  'tqdm/auto.py:21: TqdmWarning: IProgress not found.\n</pre></div></div>')
STDERR_TRACEBACK = ('<div class="output stderr highlight-myst-ansi notranslate"><div class="highlight"><pre>'
                    'Exception ignored in thread\nKeyError: \'x\'\n</pre></div></div>')


@pytest.mark.parametrize("body, expected", [
    ("<p>0.441 [0.441, 0.441]</p>", []),
    (STDERR_WARNING, []),
    (MYST_NB_ERROR, ["error output: Traceback (most recent call last)"]),
    (STDERR_TRACEBACK, ["traceback in stderr output: Exception ignored in thread"]),
    ("<pre>Traceback (most recent call last):\n  File \"x.py\"</pre>", ["a Python traceback is on the page"]),
])
def test_page_faults_recognise_myst_nb_error_outputs(body, expected):
    faults = page_faults(f"<html><body><main>{body}</main></body></html>")
    assert [f[:len(e)] for f, e in zip(faults, expected)] == expected and len(faults) == len(expected), faults


def test_dom_reader_reads_tables_and_images():
    r = read_dom("<table><thead><tr><th>model</th><th>macro_f1</th></tr></thead><tbody><tr><td><a href='x'>"
                 "majority</a></td><td>0.441 [0.441,\n 0.441]</td></tr></tbody></table><img src='a.png'>")
    assert r.tables == [[["model", "macro_f1"], ["majority", "0.441 [0.441, 0.441]"]]] and r.images == ["a.png"]
    with pytest.raises(AssertionError, match="no table with header"):
        table_with_header(r, "sensitivity")
    sortable = read_dom("<table><tr><th>model ↕</th><th>macro_f1 ▲</th></tr><tr><td>m</td><td>1</td></tr></table>")
    assert table_with_header(sortable, "model", "macro_f1") == [["model", "macro_f1"], ["m", "1"]]


# -- the book in chromium --------------------------------------------------------------------------------

def test_chromium_is_installed():
    """The set-up installs chromium; without it this fails (and the page tests error) instead of skipping."""
    out = subprocess.run([chromium(), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "Chromium" in out.stdout, out.stdout + out.stderr


@pytest.fixture(scope="session")
def screenshots(artifacts_dir) -> Path:
    return artifacts_dir / "screenshots"


@pytest.fixture(scope="session")
def pages(site, tmp_path_factory, screenshots):
    """Screenshot and rendered DOM of the four pages, and what the server delivered meanwhile."""
    chromium()
    base, served = site
    profile = tmp_path_factory.mktemp("chromium-profile")
    out = {}
    for name, rel in [("home", HOME_PAGE), ("negex-card", CARD_PAGE), ("negex-majority-run", RUN_PAGE),
                      ("negex-bvanaken-not-run", NOT_RUN_PAGE)]:
        url = f"{base}/{rel}"
        out[name] = {"png": screenshot(url, name, profile, screenshots), "dom": dump_dom(url, profile), "rel": rel}
    return out, served


def _ok_cell(results_dir: Path) -> dict:
    return json.loads((results_dir / "negex/atlas-n100-v1/majority/zero_shot.json").read_text())


def test_pages_show_no_traceback_or_error_cell(pages):
    got, _ = pages
    faults = {name: page_faults(p["dom"]) for name, p in got.items()}
    assert faults == {name: [] for name in got}, faults


def test_no_page_of_the_build_has_an_error_output(small_book):
    """The same check over every built page's HTML as served (no browser needed, so all of them)."""
    html_dir, _ = small_book
    pages = [f for f in html_dir.rglob("*.html") if "_static" not in f.parts]
    faults = {f.relative_to(html_dir).as_posix(): page_faults(f.read_text(encoding="utf-8")) for f in pages}
    assert len(pages) >= 8 and not any(faults.values()), {k: v for k, v in faults.items() if v}


def test_home_page_lists_the_cards(pages):
    got, _ = pages
    r = read_dom(got["home"]["dom"])
    cards = table_with_header(r, "card", "task", "licence (as the card declares it)", "versions (test items)")
    negex = [row for row in cards[1:] if row[0].startswith("NegEx")]
    # the licence column is the card's declaration and what the atlas does because of it
    plain = lambda t: t.replace("\u2019", "'")  # noqa: E731  (the page sets typographic apostrophes)
    assert negex and plain(negex[0][3]).startswith(get_card("negex").licence), negex
    assert "local evaluation only" in negex[0][3]
    # the small book ran only atlas-n100-v1: its test size shows, the other version has none yet
    assert "atlas-n100-v1 (100)" in negex[0][4]


def test_leaderboard_table_shows_the_cells_with_their_intervals(pages, small_book):
    got, served = pages
    _, results_dir = small_book
    card = get_card("negex")
    f1 = _ok_cell(results_dir)["metrics"]["macro_f1_zero_shot"]
    r = read_dom(got["negex-card"]["dom"])
    board = table_with_header(r, "model", "protocol, regime", *(m.replace("_", " ") for m in card.metrics), "run")
    rows = {row[0]: dict(zip(board[0], row)) for row in board[1:]}
    assert set(rows) == {"majority", "bvanaken/clinical-assertion-negation-bert"}, rows
    ci = f"{f1['value']:.3f} [{f1['ci_low']:.3f}, {f1['ci_high']:.3f}]"
    assert rows["majority"]["macro f1"] == ci
    assert rows["majority"]["run"] == "notebook · JSON"
    # a not-run row carries one short mark with a footnote number; the reason is said once, below the table
    assert re.fullmatch(r"not run\d+", rows["bvanaken/clinical-assertion-negation-bert"]["macro f1"]), rows
    assert "not run: weights unavailable" in got["negex-card"]["dom"]
    # one run with an interval: no forest plot (nothing to compare); every image the page shows was served
    assert not [s for s in r.images if "forest-negex-atlas-n100-v1" in s], r.images
    for img in r.images:
        assert any(p.endswith(Path(img).name) and code == 200 for p, code in served), (img, served)


def test_executed_notebook_shows_its_figures_and_metrics(pages, small_book):
    got, served = pages
    _, results_dir = small_book
    cell = _ok_cell(results_dir)
    r = read_dom(got["negex-majority-run"]["dom"])
    figures = [s for s in r.images if "_images/" in s]
    assert len(figures) >= 2, r.images  # bootstrap distributions and the confusion matrix
    delivered = {Path(p).name for p, code in served if code == 200}
    assert all(Path(s).name in delivered for s in figures), (figures, served)
    m = cell["metrics"]["macro_f1_zero_shot"]
    text = " ".join(re.sub(r"<[^>]+>", " ", got["negex-majority-run"]["dom"]).split())
    if f"{m['value']:.3f} [{m['ci_low']:.3f}, {m['ci_high']:.3f}]" not in text:
        # the notebook shows the metrics as a table with value / ci_low / ci_high columns
        table = table_with_header(r, "value", "ci_low", "ci_high")
        shown = {row[0]: row[1:] for row in table[1:]}
        assert [float(x) for x in shown["macro_f1_zero_shot"][:3]] == pytest.approx(
            [m["value"], m["ci_low"], m["ci_high"]], abs=5e-6)
    assert cell["split"]["test_label_counts"] == {"negated": 21, "affirmed": 79}


def test_not_run_notebook_says_why(pages):
    got, _ = pages
    text = " ".join(re.sub(r"<[^>]+>", " ", got["negex-bvanaken-not-run"]["dom"]).split())
    assert "Not run: weights unavailable: bvanaken/clinical-assertion-negation-bert@" in text


def test_screenshots_are_kept_as_artifacts(pages, screenshots):
    got, _ = pages
    for name, p in got.items():
        assert p["png"] == screenshots / f"{name}.png" and p["png"].stat().st_size > 20_000, p["png"]
