"""The course in a real browser: Debian's headless chromium, driven over the DevTools protocol.

The session's course book (``tests/test_course.py``, built once per session by ``tests/conftest.py``) is served on
127.0.0.1. Chromium runs
with ``--remote-debugging-pipe`` (the protocol's JSON messages on its file descriptors 3 and 4, NUL-terminated;
no WebDriver, no network), so the test can click: it opens the Start-here page, the syllabus and a lesson,
checks that every solution (a sphinx-exercise dropdown) is closed when the page loads and its code not shown,
clicks one with a real mouse event and checks that it (and only it) opens, that a helper's source is folded
until opened, and that every download link of the lesson and of a card page resolves to a file of the build
that is the notebook it claims to be (the student edition without a solution).
"""
from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request

import nbformat
import pytest

from tests.books import BUILD_TIMEOUT
from tests.test_browser import CHROMIUM_FLAGS, chromium, serve

# shares the session's course book with test_course
pytestmark = [pytest.mark.xdist_group("course_book"), pytest.mark.timeout(BUILD_TIMEOUT)]

LESSON_PAGE = "book/course/gates.html"
START_PAGE = "book/start_here.html"
SYLLABUS_PAGE = "book/course/syllabus.html"
NEW_LESSON_PAGE = "book/course/multiplicity.html"
CARD_PAGE = "book/cards/nli_negation.html"


class DevTools:
    """A minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe``."""

    def __init__(self, profile):
        cmd = " ".join([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--window-size=1280,2000",
                        "--remote-debugging-pipe", "about:blank"])
        # chromium reads commands on fd 3 and writes replies on fd 4: give it our pipes there
        self.proc = subprocess.Popen(["bash", "-c", f"exec {cmd} 3<&0 4>&1 1>/dev/null"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._id, self._buf, self.events = 0, b"", []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)

    def _read(self, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buf:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError("chromium stopped answering on the DevTools pipe")
            chunk = self.proc.stdout.read1(65536)
            if not chunk:
                raise AssertionError("chromium closed the DevTools pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, session: bool = False, **params) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        self.proc.stdin.write(json.dumps(msg).encode() + b"\0")
        self.proc.stdin.flush()
        while True:
            reply = self._read()
            if reply.get("id") == self._id:
                assert "error" not in reply, f"{method}: {reply['error']}"
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, timeout: float = 60) -> dict:
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            e = self._read(timeout)
            if e.get("method") == method:
                return e
            self.events.append(e)
        raise AssertionError(f"no {method} within {timeout} s")

    def open(self, url: str) -> None:
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        self.wait_event("Page.loadEventFired")

    def js(self, expression: str):
        out = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True,
                        awaitPromise=True)
        assert "exceptionDetails" not in out, out["exceptionDetails"]
        return out["result"].get("value")

    def click(self, x: float, y: float) -> None:
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", session=True, type=kind, x=x, y=y, button="left", clickCount=1)

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except AssertionError:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="module")
def course_site(course_book):
    with serve(course_book["html"]) as (base, _):
        yield base, course_book


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium()
    tools = DevTools(tmp_path_factory.mktemp("chromium-course-profile"))
    try:
        yield tools
    finally:
        tools.close()


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as resp:
        assert resp.status == 200, url
        return resp.read()


SOLUTIONS = """Array.from(document.querySelectorAll('div.solution.dropdown')).map(d => ({
  open: !d.classList.contains('toggle-hidden'),
  shown: Array.from(d.querySelectorAll('.cell_input')).some(c => c.checkVisibility(
    {visibilityProperty: true, opacityProperty: true})),
  title: d.querySelector('.admonition-title').innerText.trim()}))"""


def test_start_here_orders_the_lessons_and_links_them(browser, course_site):
    base, _ = course_site
    browser.open(f"{base}/{START_PAGE}")
    rows = browser.js("""Array.from(document.querySelectorAll('table tr')).slice(1).map(tr =>
        ({cells: Array.from(tr.cells).map(td => td.innerText.trim()),
          href: (tr.cells[1].querySelector('a') || {}).href}))""")
    assert [r["cells"][0] for r in rows] == [str(k) for k in range(1, 11)], rows
    titles = ["Why a test set", "Proportions at the edge", "Dependent items", "Scoring spans", "Comparing two models",
              "Many comparisons at once", "Calibration", "Leakage", "Safety gates", "Evaluating a language model"]
    assert all(r["cells"][1].startswith(t) and r["cells"][4] == "executed" for r, t in zip(rows, titles)), rows
    for r in rows:
        assert r["href"] and _fetch(r["href"])  # each lesson page is in the build
    nav = browser.js("Array.from(document.querySelectorAll('nav.bd-links p.caption')).map(p => p.innerText.trim())")
    assert nav.index("Course") < nav.index("Cards") and nav[-1] != "Course" and "Running the atlas" in nav, nav


def test_syllabus_lists_every_lesson_with_its_times(browser, course_site):
    base, _ = course_site
    browser.open(f"{base}/{SYLLABUS_PAGE}")
    rows = browser.js("""Array.from(document.querySelectorAll('table tr')).slice(1).map(tr =>
        ({cells: Array.from(tr.cells).map(td => td.innerText.trim()), href: (tr.cells[0].querySelector('a') || {}).href}))""")
    assert len(rows) == 10 and rows[0]["cells"][0].startswith("1. Why a test set needs an interval"), rows
    for r in rows:
        assert re.fullmatch(r"\d+ min \([\d,]+ words\)", r["cells"][1]) and re.fullmatch(r"\d+\.\d s", r["cells"][3]), r
        assert r["cells"][4] == "none" and _fetch(r["href"])
    headings = browser.js("Array.from(document.querySelectorAll('article h2')).map(h => h.innerText.trim())")
    assert len(headings) == 10, headings
    text = browser.js("document.querySelector('article').innerText")
    assert text.count("After this lesson a student can:") == 10 and "200 words a minute" in text


def test_solutions_are_closed_until_clicked(browser, course_site):
    base, _ = course_site
    browser.open(f"{base}/{LESSON_PAGE}")
    before = browser.js(SOLUTIONS)
    assert len(before) >= 3 and all(not s["open"] and not s["shown"] for s in before), before
    assert [s["title"] for s in before][:2] == ["Solution to Exercise (1 of 4)", "Solution to Exercise (2 of 4)"], before
    box = browser.js("""(() => { const s = document.querySelectorAll('div.solution.dropdown .admonition-title')[0];
        s.scrollIntoView({block: 'center'}); const r = s.getBoundingClientRect();
        return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()""")
    browser.click(box["x"], box["y"])
    deadline = time.monotonic() + 60  # the toggle fades in (a 0.3 s opacity transition); a hang fails below
    while True:
        after = browser.js(SOLUTIONS)
        if (after[0]["open"] and after[0]["shown"]) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert after[0]["open"] and after[0]["shown"], after[0]
    assert all(not s["open"] and not s["shown"] for s in after[1:]), after
    # the opened solution shows its code and the answer it printed
    text = browser.js("document.querySelectorAll('div.solution.dropdown')[0].innerText")
    assert "assert report.false_entailment_rate.value == 0" in text and "accuracy 0.0" in text
    # the helper the lesson calls is shown, its source folded until opened
    source = browser.js("""Array.from(document.querySelectorAll('details.atlas-source')).map(d => ({open: d.open,
        name: d.querySelector('summary').innerText, shown: d.querySelector('pre').checkVisibility()}))""")
    assert any("course.false_entailment_bound" in d["name"] for d in source), source
    assert all(not d["open"] and not d["shown"] for d in source), source


def _download_links(browser) -> dict:
    return browser.js("""Object.fromEntries(Array.from(document.querySelectorAll('a')).filter(a =>
        a.href.includes('/_downloads/') || a.href.includes('/_sources/')).map(a => [a.href, a.innerText.trim()]))""")


def _check_download(href: str, html_dir) -> None:
    body = _fetch(href)
    rel = href.split("/", 3)[3].split("?")[0]
    assert (html_dir / rel).is_file(), rel  # a file of the build, not something the server made up
    if href.endswith(".ipynb"):
        nbformat.validate(nbformat.reads(body.decode(), as_version=4))
    elif href.endswith(".md"):
        assert body.decode().startswith("---\njupytext:"), href


def test_lesson_downloads_resolve_to_notebooks_of_the_build(browser, course_site):
    base, built = course_site
    browser.open(f"{base}/{LESSON_PAGE}")
    links = _download_links(browser)
    kinds = {h.rsplit(".", 1)[-1] for h in links}
    assert {"md", "ipynb"} <= kinds, links
    assert any("/_sources/book/course/gates.ipynb" in h for h in links), links  # the theme's button
    assert any("lesson-gates.md" in h for h in links), links
    student = [h for h in links if h.endswith("gates-student.ipynb")]
    teacher = [h for h in links if h.endswith("gates-instructor.ipynb")]
    assert len(student) == 1 and len(teacher) == 1, links
    for href in links:
        _check_download(href, built["html"])
    tags = lambda href: [c.metadata.get("tags", []) for c in nbformat.reads(_fetch(href).decode(), as_version=4).cells]  # noqa: E731
    assert not any("solution" in t for t in tags(student[0])) and sum("solution" in t for t in tags(teacher[0])) >= 4
    command = browser.js("document.querySelector('.atlas-take-home pre').innerText.trim()")
    assert command == ".venv/bin/python -m atlaslib.pages.course gates"


def test_card_page_offers_its_notebook(browser, course_site):
    base, built = course_site
    browser.open(f"{base}/{CARD_PAGE}")
    links = _download_links(browser)
    mine = [h for h in links if "card-nli_negation" in h]
    assert {h.rsplit(".", 1)[-1] for h in mine} == {"md", "ipynb"}, links
    for href in mine:
        _check_download(href, built["html"])
    command = browser.js("document.querySelector('.atlas-take-home pre').innerText.trim()")
    assert command.startswith(".venv/bin/atlas run --card nli_negation --model ")


def test_a_new_lesson_renders_with_closed_solutions_and_its_editions(browser, course_site):
    """Many comparisons at once: its exercises and dropdown solutions, the library's Holm and MDD code folded,
    its figure, and both editions linked (the student one without a solution)."""
    base, built = course_site
    browser.open(f"{base}/{NEW_LESSON_PAGE}")
    solutions = browser.js(SOLUTIONS)
    assert len(solutions) == 4 and all(not s["open"] and not s["shown"] for s in solutions), solutions
    exercises = browser.js("Array.from(document.querySelectorAll('div.exercise')).map(d => "
                           "d.querySelector('.admonition-title').innerText.trim())")
    assert exercises == [f"Exercise ({k} of 4)" for k in range(1, 5)], exercises
    source = browser.js("Array.from(document.querySelectorAll('details.atlas-source summary')).map(s => s.innerText)")
    assert any("compare.holm" in s for s in source) and any("compare.mcnemar_mdd" in s for s in source), source
    assert browser.js("document.querySelectorAll('article img').length") >= 1
    links = _download_links(browser)
    student = [h for h in links if h.endswith("multiplicity-student.ipynb")]
    assert student and any(h.endswith("multiplicity-instructor.ipynb") for h in links), links
    nb = nbformat.reads(_fetch(student[0]).decode(), as_version=4)
    assert not any("solution" in c.metadata.get("tags", []) for c in nb.cells)
    assert "course check multiplicity" in browser.js("document.querySelector('article').innerText")
