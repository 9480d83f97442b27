"""The item explorer in a real browser: Debian's chromium, headless, driven over the DevTools protocol on a
pipe (``--remote-debugging-pipe``, no extra package), against the HTML served on 127.0.0.1.

The session's two-run book (``tests/books.py``: two systems' predictions files for NegEx atlas-n100-v1 scored
with ``atlaslib.evaluate``, no kernel) and its small book (the majority baseline's executed run). The test opens
the two-run book's item explorer, applies the one-click filter "A right, B wrong" for system-a against system-b
and reads the table's row count, which must equal McNemar's b of that pair on the card page's comparison (from
`atlaslib.analysis.paired.compare_cells` on the two result cells) and the count worked out from the two
prediction patterns; searches one item id in the table's search box and finds one row; follows both of the card
page's links (b and c of the pair) to the same filtered views; follows the small book's run page link to the
explorer filtered to that run's errors; and checks that no page asked for a script from anywhere but the local
server. Every wait is on a condition of the page (``dataset.ready``, the row count), never a fixed sleep, and no
time is asserted (the page's timings are for ``benchmarks/``).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from atlaslib import results
from atlaslib.analysis.paired import compare_cells as compare
from tests.books import TWO_RUN_SYSTEMS, TWO_RUN_VERSION as VERSION

from .test_browser import CHROMIUM_FLAGS, chromium, serve

pytestmark = pytest.mark.xdist_group("books")  # shares the session's books (tests/conftest.py)

A, B = ("system-a", "zero_shot"), ("system-b", "zero_shot")
PAGE = f"book/runs/negex/{VERSION}/explorer.html"


class DevTools:
    """A headless chromium and one page, over the DevTools protocol on a pipe (fds 3 and 4 of the child,
    messages separated by NUL bytes)."""

    def __init__(self, profile: Path):
        to_child_r, self._w = os.pipe()
        self._r, from_child_w = os.pipe()

        def fds():
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)
        self.proc = subprocess.Popen([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                                      "--remote-debugging-pipe", "about:blank"], preexec_fn=fds, close_fds=False,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self._id, self._buf, self.events = 0, b"", []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Network", "Runtime"):
            self.call(f"{domain}.enable", session=True)

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._r, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, session: bool = False, timeout: float = 60, **params) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def js(self, expression: str):
        r = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def open(self, url: str, ready: str, timeout: float = 60) -> None:
        """Navigate and wait until ``ready`` (a JS expression) is true."""
        self.call("Page.navigate", session=True, url=url)
        self.wait_for(f"Boolean({ready})", timeout)

    def wait_for(self, expression: str, timeout: float = 60):
        """Poll the page until ``expression`` (JS) is truthy; its value. Fails naming the condition after
        ``timeout`` s (a hang, not a measurement)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.js(expression)
            if value:
                return value
            time.sleep(0.05)
        raise TimeoutError(f"{expression} not true after {timeout} s")

    def requested(self) -> list[tuple[str, str]]:
        """(resource type, URL) of every request the page made so far."""
        return [(e["params"].get("type", ""), e["params"]["request"]["url"]) for e in self.events
                if e.get("method") == "Network.requestWillBeSent"]

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._w)
        os.close(self._r)


@pytest.fixture(scope="module")
def served(two_run_book, small_book):
    """Base URLs of the two-run book and of the small book, each served on 127.0.0.1."""
    with serve(two_run_book[0]) as (two, _), serve(small_book[0]) as (small, _):
        yield two, small


@pytest.fixture()
def browser(tmp_path):
    b = DevTools(tmp_path / "profile")
    try:
        yield b
    finally:
        b.close()


ROOT = "document.querySelector('#atlas-explorer-main-explorer')"


def _rows(browser) -> int:
    return int(browser.js(f"{ROOT}.dataset.rows"))


def test_explorer_filters_to_mcnemar_b_finds_an_item_and_loads_no_remote_script(two_run_book, small_book, served,
                                                                                  browser):
    html_dir, results_dir = two_run_book
    base, small_base = served
    cells = [results.read_cell(results.cell_path(results_dir, "negex", VERSION, *run)) for run in (A, B)]
    pairs = compare(cells)
    row = pairs[(pairs["model_a"].isin([f"{A[0]} ({A[1]})", f"{B[0]} ({B[1]})"])) & pairs["b"].notna()].iloc[0]
    b = int(row["b"]) if row["model_a"] == f"{A[0]} ({A[1]})" else int(row["c"])   # system-a right, system-b wrong
    n_items = len(cells[0]["predictions"])
    # by hand: system-a errs on every 7th test item, system-b on every 3rd; A right and B wrong on the multiples
    # of 3 that are not multiples of 7 (items 0..99: 34 multiples of 3, 5 of them multiples of 21)
    steps = dict(TWO_RUN_SYSTEMS)
    assert (steps[A[0]], steps[B[0]]) == (7, 3) and n_items == 100 and b == 34 - 5

    assert "Local evaluation only" in (html_dir / PAGE).read_text()   # the kit's licence banner, as on its card
    browser.open(f"{base}/{PAGE}", f"{ROOT} && {ROOT}.dataset.ready")
    assert float(browser.js(f"{ROOT}.dataset.firstDrawMs")) >= 0   # the page records its first draw (benchmarks/)
    assert _rows(browser) == n_items

    # the one-click filter: A right, B wrong
    la, lb = (" · ".join(r) for r in (A, B))
    browser.js(f"""(() => {{ const f = {ROOT}.querySelector('form');
        f.querySelector('select[name=a]').value = {json.dumps(la)};
        f.querySelector('select[name=b]').value = {json.dumps(lb)};
        f.querySelector('button[data-filter=pair]').click(); }})()""")
    browser.wait_for(f"{ROOT}.dataset.rows == {b}")
    assert float(browser.js(f"{ROOT}.dataset.filterMs")) >= 0
    shown = browser.js(f"Array.from({ROOT}.querySelectorAll('table.dataTable tbody tr')).length")
    assert b > 25 and shown == 25                      # one page of the table
    assert f"right={la.replace(' ', '+')}".replace("·", "%C2%B7") in browser.js("location.search")

    # searching an item id in the table's own search box finds that one row (the table filters as one types:
    # wait for the count to change, not for a fixed time)
    item = cells[0]["predictions"][7]["item_id"]
    browser.js(f"{ROOT}.querySelector('button[data-filter=clear]').click()")
    browser.wait_for(f"{ROOT}.dataset.rows == {n_items}")
    browser.js(f"""(() => {{ const i = {ROOT}.querySelector('.dt-search input');
        i.value = {json.dumps(item)}; i.dispatchEvent(new Event('input', {{bubbles: true}})); }})()""")
    browser.wait_for(f"{ROOT}.dataset.rows != {n_items}")
    assert _rows(browser) == 1
    assert browser.js(f"{ROOT}.querySelector('table.dataTable tbody tr td').textContent") == item

    # the card page's b and c of the compared pair link to the same filtered views
    card_page = (html_dir / "book/cards/negex.html").read_text()
    links = re.findall(r'class="atlas-explorer-link" href="([^"]+)">(\d+)</a>', card_page)
    c = sum(1 for k in range(n_items) if k % 7 == 0 and k % 3 != 0)
    assert sorted(int(n) for _, n in links) == sorted([b, c]), links
    for target, n in links:
        browser.open(f"{base}/book/cards/" + target.replace("&amp;", "&"), f"{ROOT} && {ROOT}.dataset.ready")
        assert _rows(browser) == int(n)

    # the small book's run page: its error tables link to the explorer filtered to that run's errors
    small_html, small_results = small_book
    run, run_label = ("majority", "zero_shot"), "majority · zero_shot"
    run_page = f"book/runs/negex/{VERSION}/{run[0]}/{run[1]}.html"
    href = re.search(r'class="atlas-explorer-link" href="([^"]+)"', (small_html / run_page).read_text()).group(1)
    assert href == "../explorer.html?wrong=" + run_label.replace(" ", "+").replace("·", "%C2%B7")
    browser.open(f"{small_base}/book/runs/negex/{VERSION}/{run[0]}/" + href, f"{ROOT} && {ROOT}.dataset.ready")
    majority = results.read_cell(results.cell_path(small_results, "negex", VERSION, *run))
    errors = sum(r["pred"] != r["gold"] for r in majority["predictions"])
    assert errors == 21 and _rows(browser) == errors        # the majority answer is wrong on the 21 negated items

    # no script from anywhere but the local servers
    local = (base, small_base)
    scripts = [u for t, u in browser.requested() if t == "Script"]
    assert scripts and all(u.startswith(local) for u in scripts), scripts
    remote = [u for _, u in browser.requested() if not u.startswith((*local, "data:", "blob:", "about:"))]
    assert not remote, remote
