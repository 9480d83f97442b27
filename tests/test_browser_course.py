"""The course in a real browser: Debian's headless chromium, driven over the DevTools protocol.

The small course book of ``tests/test_course.py`` (built once per session) is served on 127.0.0.1. Chromium runs
with ``--remote-debugging-pipe`` (the protocol's JSON messages on its file descriptors 3 and 4, NUL-terminated;
no WebDriver, no network), so the test can click: it opens the Start-here page and a lesson, checks that every
solution toggle is closed when the page loads and its code not shown, clicks one toggle with a real mouse
event and checks that it (and only it) opens, and that every download link of the lesson and of a card page
resolves to a file of the build that is the notebook it claims to be.
"""
from __future__ import annotations

import functools
import json
import subprocess
import threading
import time
import urllib.request
from http.server import ThreadingHTTPServer

import nbformat
import pytest

from tests.test_browser import CHROMIUM_FLAGS, _QuietHandler, chromium
from tests.test_course import build_course_book

LESSON_PAGE = "book/course/gates.html"
START_PAGE = "book/start_here.html"
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
def course_site(tmp_path_factory, data_dir):
    built = build_course_book(tmp_path_factory, data_dir)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(built["html"])))
    server.served = []
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", built
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


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


SOLUTIONS = """Array.from(document.querySelectorAll('.tag_solution details')).map(d => ({
  open: d.open, shown: d.querySelector('.cell_input').checkVisibility(),
  summary: d.querySelector('summary').innerText.trim()}))"""


def test_start_here_orders_the_lessons_and_links_them(browser, course_site):
    base, _ = course_site
    browser.open(f"{base}/{START_PAGE}")
    rows = browser.js("""Array.from(document.querySelectorAll('table tr')).slice(1).map(tr =>
        ({cells: Array.from(tr.cells).map(td => td.innerText.trim()),
          href: (tr.cells[1].querySelector('a') || {}).href}))""")
    assert [r["cells"][0] for r in rows] == ["1", "2", "3", "4", "5", "6"], rows
    assert rows[5]["cells"][1].startswith("Safety gates") and rows[5]["cells"][4] == "executed"
    for r in rows:
        assert r["href"] and _fetch(r["href"])  # each lesson page is in the build
    nav = browser.js("Array.from(document.querySelectorAll('nav.bd-links p.caption')).map(p => p.innerText.trim())")
    assert nav.index("Course") < nav.index("Cards") and nav[-1] != "Course" and "Running the atlas" in nav, nav


def test_solutions_are_closed_until_clicked(browser, course_site):
    base, _ = course_site
    browser.open(f"{base}/{LESSON_PAGE}")
    before = browser.js(SOLUTIONS)
    assert len(before) >= 3 and all(not s["open"] and not s["shown"] for s in before), before
    assert all(s["summary"] == "Show the solution" for s in before), before
    box = browser.js("""(() => { const s = document.querySelectorAll('.tag_solution details summary')[0];
        s.scrollIntoView({block: 'center'}); const r = s.getBoundingClientRect();
        return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()""")
    browser.click(box["x"], box["y"])
    after = browser.js(SOLUTIONS)
    assert after[0]["open"] and after[0]["shown"] and after[0]["summary"] == "Hide the solution", after[0]
    assert all(not s["open"] and not s["shown"] for s in after[1:]), after
    # the opened solution shows its code and the answer it printed
    text = browser.js("document.querySelectorAll('.tag_solution details')[0].innerText")
    assert "assert report.false_entailment_rate.value == 0" in text and "accuracy 0.0" in text


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
    assert any("lesson-gates.md" in h for h in links) and any("lesson-gates.ipynb" in h for h in links), links
    for href in links:
        _check_download(href, built["html"])
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
