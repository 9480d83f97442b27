"""The data story once: the model-independent sections of a card notebook run once per (card, version) and
are shown on the version's data page; run pages hold the run and link there."""
from __future__ import annotations

import re
from html.parser import HTMLParser

import jupytext
import pytest

from atlaslib import notebook, runner
from atlaslib.cards import get_card
from atlaslib.pages import datastory

CARDS = ("negex", "maccrobat", "nli_negation", "tempeval")


def _sources(nb) -> str:
    return "\n".join(c.source for c in nb.cells)


@pytest.mark.parametrize("name", CARDS)
def test_each_notebook_cuts_into_a_story_and_a_run(repo, name):
    card = get_card(name)
    nb = jupytext.read(repo / card.notebook)
    for version in card.versions:
        story, run = datastory.story_notebook(nb, card, version), datastory.run_notebook(nb, version)
        assert not any("data-story" in c.metadata.get("tags", []) for c in run.cells)
        assert any("parameters" in c.metadata.get("tags", []) for c in story.cells)
        shared = [c for c in run.cells if "shared" in c.metadata.get("tags", [])]
        assert shared and all("remove-cell" in c.metadata["tags"] for c in shared)  # executed, not shown
        # every cell is in the story, the run, or both (shared); none is lost
        n_story_only = sum("data-story" in c.metadata.get("tags", []) and notebook.for_version(c, version)
                           for c in nb.cells)
        assert len(story.cells) - 1 == 1 + len(shared) + n_story_only  # title, parameters, shared, story
        assert "## The split" not in _sources(run) and "## The data\n" not in _sources(run)


def test_a_version_shows_only_its_own_data(repo):
    card = get_card("tempeval")
    nb = jupytext.read(repo / card.notebook)
    thyme, synthetic = (_sources(datastory.story_notebook(nb, card, v)) for v in ("thyme-dev-2015", "synthetic-v1"))
    assert "ta.thyme_audit(" in thyme and "synthetic.build_corpus()" not in thyme
    assert "ta.thyme_audit(" not in synthetic and "synthetic.build_corpus()" in synthetic
    assert "PAPER_ANCHORS" in thyme and "PAPER_ANCHORS" not in synthetic
    for v in card.versions:
        assert "ta.thyme_audit(" not in _sources(datastory.run_notebook(nb, v))  # no run audits THYME


def test_a_failing_run_names_its_cell_in_the_source_notebook(monkeypatch, tmp_path):
    body = ("+++ {\"tags\": [\"data-story\"]}\n\n## Data\n\n```{code-cell} python\n:tags: [data-story]\nx = 1\n```\n\n"
            "+++\n\n## Run\n\n```{code-cell} python\nraise RuntimeError('boom')\n```\n")
    from tests.test_runner_and_book import _fake_card

    _fake_card(monkeypatch, tmp_path, body)
    with pytest.raises(runner.RunFailed) as e:
        runner.run(runner.RunRequest("fake", "v", "m", "p"), results_dir=tmp_path / "r", runs_dir=tmp_path / "n",
                   failed_dir=tmp_path / "f")
    # cells of fake.md: title, parameters, data heading, data cell, run heading, failing cell
    assert "failed in cell 6" in str(e.value)


def test_stories_run_once_per_card_and_version(monkeypatch, tmp_path):
    calls = []

    def fake(card, version, **kw):
        calls.append((card, version))
        extra = {"thyme_audit": {}} if version == "thyme-dev-2015" else {}
        return datastory.StoryOutcome(card, version, "ran", 1.0, extra=extra)

    monkeypatch.setattr(datastory, "run_story", fake)
    pairs = [("tempeval", "thyme-dev-2015"), ("tempeval", "synthetic-v1")] * 3 + [("negex", "atlas-n100-v1")] * 5
    out = datastory.run_stories(pairs, tmp_path, log=lambda *a: None)
    assert calls == [("tempeval", "thyme-dev-2015"), ("tempeval", "synthetic-v1"), ("negex", "atlas-n100-v1")]
    assert datastory.audits_executed(out) == 1
    cached = [datastory.StoryOutcome("tempeval", "thyme-dev-2015", "cached", extra={"thyme_audit": {}})]
    assert datastory.audits_executed(cached) == 0


class _Sections(HTMLParser):
    """Text of each <section> of a Jupyter Book page, keyed by its heading."""

    def __init__(self):
        super().__init__()
        self.headings, self._in, self.text = [], None, []

    def handle_starttag(self, tag, attrs):
        if tag in ("h1", "h2", "h3"):
            self._in = tag
            self.headings.append("")

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None

    def handle_data(self, data):
        if self._in:
            self.headings[-1] += data
        self.text.append(data)


def _page(path):
    p = _Sections()
    p.feed(path.read_text())
    return [re.sub(r"[#¶\s]+$", "", h).strip() for h in p.headings], "".join(p.text)


@pytest.mark.xdist_group("books")
def test_run_pages_share_no_data_section_and_link_the_data_page(small_book):
    """The session's small book: the majority run's executed page and the hub model's not-run page hold no
    section of the data story and link the version's data page, which holds it."""
    html_dir, results_dir = small_book
    html = html_dir / "book"
    models = ("majority", "bvanaken--clinical-assertion-negation-bert")
    runs = {m: _page(html / f"runs/negex/atlas-n100-v1/{m}/zero_shot.html") for m in models}
    data_headings, data_text = _page(html / "runs/negex/atlas-n100-v1/data.html")
    story = {"The data", "The split", "Caveats"}
    assert story <= set(data_headings)
    for headings, text in runs.values():
        assert not story & set(headings), headings
        assert "manifest sha256" not in text and "distinct sentences" not in text
        assert "Data: atlas-n100-v1" in text  # the link back to the data page
    # the executed run's page holds the run's own sections only (besides its title and the page's contents)
    headings = runs["majority"][0]
    run_sections = {"Contents", "The run", "Metrics", "Errors", "Reproduction on the whole kit",
                    "Perturbed inputs and prompt variants"}
    assert {"The run", "Metrics", "Errors"} <= set(headings)
    assert set(headings) <= run_sections | {h for h in headings if "run:" in h}, headings
    assert "manifest sha256" in data_text
    card = (html / "cards/negex.html").read_text()
    assert "runs/negex/atlas-n100-v1/data.html" in card
    report = (results_dir.parent / "_build/site-src/book/build_report.md").read_text()
    assert "| `negex/atlas-n100-v1` | ran |" in report
    assert "THYME annotation audit executed 0 time(s)" in report
