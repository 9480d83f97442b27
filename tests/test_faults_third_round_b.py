"""Faults and bad inputs, third round (issue 36), cases 6-9 and 14-17: one line instead of a traceback, nothing
shown that must stay on the machine, no name that passes for another.

One test per case, each reproducing the case as reported (through ``atlas`` in-process, ``cli.main``, where the
report used the command; no kernel starts): a score that is an integer too large for a float or longer than
Python's 4,300 digits (6); JSON nested 200,000 deep as predictions, NLI cases, course answers and result cells
(7); a CSV field past csv's limit and a quote left open (8); a model config.json of the wrong shape, local or
cached from the hub (9); credentials and private paths of profiles on pages and in records (14); look-alike
names (15); ``{{`` in a model folder's name (16); MACCROBAT's licence flag and text (17). Then two Hypothesis
properties: names that reach pages, and nested or oversized JSON and CSV inputs.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atlaslib import book, results, runner
from atlaslib.pages.site import render_models
from atlaslib.runner import RunRequest
from tests.external.test_score import atlas  # atlas(capsys, *args) -> (exit code, stdout, stderr), in-process
from tests.test_faults_second_round import negex_ids, refused  # noqa: F401  (a fixture, and one line + exit code)

N100 = "atlas-n100-v1"
NESTED = "[" * 200_000 + "]" * 200_000


def rows(path: Path, ids, special: dict | None = None) -> Path:
    """A JSONL predictions file, every row affirmed with score 0.1 but those in ``special`` (row index -> the
    row's text as written)."""
    special = special or {}
    path.write_text("".join(special.get(k, json.dumps({"item_id": i, "label": "affirmed", "score": 0.1})) + "\n"
                            for k, i in enumerate(ids)), encoding="utf-8")
    return path


def score_args(preds, name, results_dir):
    return ["score", "--card", "negex", "--version", N100, "--predictions", preds, "--name", name,
            "--results-dir", results_dir]


def no_cells(folder: Path) -> bool:
    return not folder.exists() or not list(folder.rglob("*.json"))


# ------------------------------------------------------------------------------------------------ 6


def test_case06_a_score_too_large_for_a_float_is_one_line_naming_file_and_row(tmp_path, capsys, negex_ids,
                                                                              monkeypatch):
    r = tmp_path / "r"
    big = rows(tmp_path / "big.jsonl", negex_ids,
               {3: '{"item_id": "%s", "label": "affirmed", "score": 1%s}' % (negex_ids[3], "0" * 400)})
    line = refused(capsys, *score_args(big, "big", r))
    assert f"{big}: row 4 (id {negex_ids[3]!r}): score 100000000000… (401 digits) is too large for a float" in line
    assert "in [0, 1]" in line and no_cells(r)

    huge = rows(tmp_path / "huge.jsonl", negex_ids,
                {3: '{"item_id": "%s", "label": "affirmed", "score": 1%s}' % (negex_ids[3], "0" * 5000)})
    line = refused(capsys, *score_args(huge, "huge", r))
    assert f"{huge}: row 4: a number of 5,001 digits" in line and "at most 4,300 digits" in line
    assert 'expected one object per line like {"item_id"' in line and no_cells(r)

    # the same file as a --matrix predictions entry: the matrix, the entry, the file and the row
    monkeypatch.setattr(book, "build", lambda **kw: pytest.fail("built despite a bad predictions file"))
    matrix = tmp_path / "m.yml"
    matrix.write_text(yaml.safe_dump([{"card": "negex", "version": N100, "predictions": "big.jsonl", "name": "big"}]))
    line = refused(capsys, "book", "--no-run", "--matrix", matrix, "--results-dir", r)
    assert f"{matrix}, line 1: entry 1: {big}: row 4 (id {negex_ids[3]!r}): score 100000000000…" in line

    # and as a course answer
    answers = tmp_path / "answers.json"
    answers.write_text('{"seed": 1, "answers": {"q1": 1%s}}' % ("0" * 400))
    line = refused(capsys, "course", "check", "intervals", answers)
    assert f"{answers}: answer q1 must be a finite number, got the integer 100000000000… (401 digits)" in line
    answers.write_text('{"seed": 1, "answers": {"q1": 1%s}}' % ("0" * 5000))
    line = refused(capsys, "course", "check", "intervals", answers)
    assert f"{answers}: a number of 5,001 digits (at line 1, column 31)" in line


# ------------------------------------------------------------------------------------------------ 7


def test_case07_deeply_nested_json_is_one_line_naming_the_file_wherever_it_is_read(tmp_path, capsys):
    deep = "arrays or objects nested more than 100 levels deep"
    preds = tmp_path / "nested.jsonl"
    preds.write_text(NESTED + "\n")
    line = refused(capsys, *score_args(preds, "nested", tmp_path / "r"))
    assert f"{preds}: row 1: {deep}" in line and no_cells(tmp_path / "r")

    for suffix, where in ((".json", ""), (".jsonl", ", row 1")):  # NLI cases (openmed fixture files)
        cases = tmp_path / f"cases{suffix}"
        cases.write_text(NESTED + "\n")
        line = refused(capsys, "score", "nli_negation", "--cases", cases, "--predictions", preds)
        assert f"{cases}{where}: {deep}" in line, line
        from atlaslib.cards.nli_negation.corpus import load_nli_negation_cases
        from atlaslib.cards.nli_negation.errors import NliNegationInputError

        with pytest.raises(NliNegationInputError, match=rf"{cases.name}{where}: {deep}"):
            load_nli_negation_cases(cases)

    answers = tmp_path / "answers.json"
    answers.write_text(NESTED)
    assert f"{answers}: {deep}" in refused(capsys, "course", "check", "intervals", answers)

    # a result cell: read_cell names it, folder_owner passes it over, and the book says it in one line
    cell = tmp_path / "results" / "negex" / N100 / "x" / "zero_shot.json"
    cell.parent.mkdir(parents=True)
    cell.write_text(NESTED)
    with pytest.raises(results.ResultCellError, match=deep):
        results.read_cell(cell)
    assert results.folder_owner(cell.parent, "x", external=False) is None
    line = refused(capsys, "book", "--no-run", "--card", "negex", "--results-dir", tmp_path / "results",
                   "--build-dir", tmp_path / "_build")
    assert f"{cell}: {deep}" in line


# ------------------------------------------------------------------------------------------------ 8


def test_case08_a_long_csv_field_and_an_open_quote_name_their_row(tmp_path, capsys, negex_ids):
    header = "item_id,label,score\n"
    long = tmp_path / "long.csv"
    long.write_text(header + "".join(f"{i},affirmed,0.1\n" if k != 2 else f'{i},"{"x" * 140_000}",0.1\n'
                                     for k, i in enumerate(negex_ids)))
    line = refused(capsys, *score_args(long, "long", tmp_path / "r"))
    assert f"{long}: row 4: a field longer than 131,072 characters" in line

    quote = tmp_path / "quote.csv"
    quote.write_text(header + "".join(f'{i},{chr(34) if k == 1 else ""}affirmed,0.1\n'
                                      for k, i in enumerate(negex_ids)))
    line = refused(capsys, *score_args(quote, "quote", tmp_path / "r"))
    assert f"{quote}: row 3: a field opens a quote" in line and "have no prediction" not in line
    assert no_cells(tmp_path / "r")


# ------------------------------------------------------------------------------------------------ 9


def test_case09_a_config_of_the_wrong_shape_is_one_line_naming_file_and_field(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ATLAS_PROFILES", "")
    shapes = {"list": ([], "an array; expected a JSON object"),
              "number": ({"architectures": 5}, "field 'architectures' must be a list of model class names (text), "
                                               "got the number 5"),
              "labels": ({"architectures": ["BertForSequenceClassification"], "id2label": ["a", "b"]},
                         "field 'id2label' must be an object of label id -> label name (text), got an array")}
    for name, (config, said) in shapes.items():
        folder = tmp_path / "w" / "tm" / name
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(config))
        line = refused(capsys, "run", "--card", "negex", "--version", N100, "--model", folder, "--protocol",
                       "zero_shot", "--results-dir", tmp_path / "r", "--runs-dir", tmp_path / "n")
        assert f"{folder / 'config.json'}: {said}" in line, line
        assert "unknown model" not in line
    assert no_cells(tmp_path / "r")

    # a hub model's config in the local cache goes the same way
    hub = tmp_path / "hub"
    snap = hub / "models--org--bad-config" / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True)
    (hub / "models--org--bad-config" / "refs").mkdir()
    (hub / "models--org--bad-config" / "refs" / "main").write_text("0" * 40)
    (snap / "config.json").write_text(json.dumps({"architectures": ["BertModel"], "id2label": ["a"]}))
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    line = refused(capsys, "run", "--card", "negex", "--version", N100, "--model", "org/bad-config", "--protocol",
                   "zero_shot", "--results-dir", tmp_path / "r", "--runs-dir", tmp_path / "n")
    assert f"{snap / 'config.json'}: field 'id2label' must be an object" in line


# ------------------------------------------------------------------------------------------------ 14

URL = "http://alice:s3cret-pw@127.0.0.1:18431/v1?api_key=sk-live-123"
SECRETS = ("alice", "s3cret-pw", "sk-live-123", "api_key")
PRIVATE = "/srv/hospital-share/models/site-bert-2026"


def _profiles(path: Path, url: str = URL) -> Path:
    common = {"revision": None, "label_map": {}, "trained_on": [], "description": "mine"}
    path.write_text(yaml.safe_dump({
        "leaky": {"source": "openai-compatible", "location": url, "capabilities": ["predict.assertion"],
                  "options": {"model": "m"}, **common},
        "site-bert": {"source": "path", "location": PRIVATE, "capabilities": ["embed.text.pooled"], **common}}))
    return path


def test_case14_credentials_and_private_paths_of_profiles_stay_on_the_machine(tmp_path, capsys, monkeypatch,
                                                                              refused_url):
    from atlaslib.cards import available_cards
    from atlaslib.models import get_profile
    from atlaslib.models.openai_compat import EndpointError, OpenAICompatible

    monkeypatch.setenv("ATLAS_PROFILES", "")
    prof = _profiles(tmp_path / "p.yml")
    code, out, err = atlas(capsys, "list", "--profiles", prof)    # also puts the file on $ATLAS_PROFILES
    assert code == 0 and not [s for s in SECRETS if s in out + err]

    leaky = get_profile("leaky")
    assert leaky.location == URL                                    # the request itself may still use them
    decision = runner.decide(RunRequest("negex", N100, "leaky", "zero_shot"))   # the kernel's parameter, the key
    assert decision["profile"]["location"] == "http://127.0.0.1:18431/v1"
    assert not [s for s in SECRETS if s in json.dumps(decision)]
    adapter = OpenAICompatible(leaky, "predict.assertion", model="m", max_retries=0, timeout=5)
    assert adapter.info["base_url"] == "http://127.0.0.1:18431/v1"  # what a cell records
    port = refused_url.rsplit(":", 1)[1]                           # held, nobody listening: refused at once
    closed = OpenAICompatible(replace(leaky, location=URL.replace("18431", port)), "predict.assertion",
                              model="m", max_retries=0, timeout=5)
    with pytest.raises(EndpointError) as exc:
        closed.post("/chat/completions", {"model": "m"})
    assert f"127.0.0.1:{port}/v1" in str(exc.value) and not [s for s in SECRETS if s in str(exc.value)]

    # the models page of every build, and the publish build's redaction of private folders
    src = tmp_path / "site"
    render_models(src, available_cards(), [])
    pages = {p.name: p.read_text(encoding="utf-8") for p in (src / "book" / "models").glob("*.md")}
    assert "`http://127.0.0.1:18431/v1`" in pages["leaky.md"]
    assert not {n: s for n, t in pages.items() for s in SECRETS if s in t}
    paths = book.BuildPaths(results=tmp_path / "results", runs=tmp_path / "runs", build=tmp_path / "_build")
    book.redact_local_paths(src, book.local_roots(paths))
    pages = {p.name: p.read_text(encoding="utf-8") for p in (src / "book" / "models").glob("*.md")}
    assert "`LOCAL_MODEL`" in pages["site-bert.md"] and not [n for n, t in pages.items() if PRIVATE in t]


# ------------------------------------------------------------------------------------------------ 15

LOOK_ALIKES = {"majority\u3164": "U+3164 (HANGUL FILLER) at position 9",
               "m\u0430jority": "looks like 'majority'",
               "majority\u2800": "U+2800 (BRAILLE PATTERN BLANK) at position 9",
               "negspacy\u2011negex\u2011kit": "looks like 'negspacy-negex-kit'"}


def test_case15_look_alike_names_are_refused_and_get_no_folder(tmp_path, capsys, negex_ids, monkeypatch):
    monkeypatch.setenv("ATLAS_PROFILES", "")
    r = tmp_path / "r"
    f = rows(tmp_path / "p.jsonl", negex_ids)
    for name, said in LOOK_ALIKES.items():
        line = refused(capsys, *score_args(f, name, r))
        assert line.startswith("atlas score: --name") and said in line, line
    assert no_cells(r)
    code, out, err = atlas(capsys, *score_args(f, "my system", r))   # an existing result's name is the atlas's
    assert code == 0, err
    assert "looks like 'my system'" in refused(capsys, *score_args(f, "my syst\u0435m", r))
    prof = tmp_path / "p.yml"
    prof.write_text(yaml.safe_dump({"m\u0430jority": {"source": "builtin", "location": "majority", "revision": None,
                                                      "capabilities": ["predict.assertion"], "label_map": {},
                                                      "trained_on": [], "description": "x"}}))
    line = refused(capsys, "list", "--profiles", prof)
    assert f"{prof}: profile name 'm\u0430jority' looks like 'majority'" in line


# ------------------------------------------------------------------------------------------------ 16


def test_case16_braces_in_a_model_folder_name_are_refused_before_anything_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ATLAS_PROFILES", "")
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "w" / "tm" / "m{{fact:nosuch.key}}"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}))   # no weights: a stub
    line = refused(capsys, "run", "--card", "nli_negation", "--version", "builtin-v1", "--model",
                   "w/tm/m{{fact:nosuch.key}}", "--protocol", "zero_shot", "--results-dir", tmp_path / "r",
                   "--runs-dir", tmp_path / "n")
    assert f"model folder '{folder}' holds '{{{{' or '}}}}'" in line
    assert not (tmp_path / "r").exists() and not (tmp_path / "n").exists()

    monkeypatch.setattr(book, "build", lambda **kw: pytest.fail("built despite a placeholder in a name"))
    matrix = tmp_path / "m.yml"
    matrix.write_text(yaml.safe_dump([{"card": "nli_negation", "version": "builtin-v1", "protocol": "zero_shot",
                                       "model": str(folder)}]))
    line = refused(capsys, "book", "--no-run", "--matrix", matrix, "--results-dir", tmp_path / "r")
    assert f"{matrix}, line 1: entry 1: model folder" in line and "placeholder" in line
    prof = tmp_path / "p.yml"
    prof.write_text(yaml.safe_dump({"m{{fact:nosuch.key}}": {
        "source": "path", "location": str(folder), "revision": None, "capabilities": ["embed.text.pooled"],
        "label_map": {}, "trained_on": [], "description": "x"}}))
    assert "placeholder" in refused(capsys, "list", "--profiles", prof)


# ------------------------------------------------------------------------------------------------ 17


def test_case17_a_cards_licence_flag_and_text_agree_and_cite_their_sources():
    from atlaslib.cards import Card, available_cards, get_card
    from atlaslib.pages import departures

    for card in available_cards():
        if card.licence_confirmed:
            assert not card.licence.lower().startswith(("unconfirmed", "not confirmed")), card.name
            assert departures.publication(card).startswith("shown in the published book")
    mac = get_card("maccrobat")
    assert mac.licence_confirmed and mac.licence.startswith("MIT (declared by the catalogued copy")
    for source in ("singh-aditya/MACCROBAT_biomedical_ner", "figshare", "CC BY 4.0", "Saieiei/NLP",
                   "PROVENANCE.md"):
        assert source in mac.licence_note, source
    page = (Path(__file__).resolve().parent.parent / "book" / "cards" / "maccrobat.md").read_text()
    assert "{{fact:card.maccrobat.licence_note}}" in page
    with pytest.raises(ValueError, match="make the flag and the text agree"):
        Card(name="x", title="x", notebook="x.md", versions=("v",), protocols=("p",), metrics=("m",),
             default_matrix=(), licence_confirmed=True, licence="unconfirmed (nobody says)")


# ------------------------------------------------------------------------------------------------ properties

FILLERS = "\u3164\u115f\u1160\u2800\uffa0\u3000\u00a0\u200b\u200d\u2060\ufeff\u180e\ufe0f\U000e0020"
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
CONTROL = "\n\r\t\x00\x1b\x7f\x85"
#: look-alikes written out here, independently of atlaslib.names: Cyrillic, Greek, Armenian and Latin letters,
#: fullwidth and letterlike forms, hyphens and digits that read as the ASCII character
SWAPS = {"a": "\u0430\u03b1\u0251\uff41", "e": "\u0435", "o": "\u043e\u03bf\u0585", "p": "\u0440\u03c1",
         "c": "\u0441\u03f2", "x": "\u0445", "y": "\u0443", "i": "\u0456\u0131", "j": "\u0458", "s": "\u0455",
         "m": "\uff4d", "l": "\u217c1I|", "-": "\u2010\u2011\u2013\u2212", "2": "\u01a7", "g": "\u0261",
         "h": "\u04bb", "n": "\u0578", "t": "\uff54", "/": "\u2215\u2044"}
BASE = ["majority", "medspacy-context", "negspacy-negex-kit", "all-minilm-l6-v2", "gpt2", "memorize",
        "smollm2-135m-instruct", "bvanaken/clinical-assertion-negation-bert", "my system"]


@st.composite
def page_names(draw):
    """A name built to pass for another: an atlas name with characters swapped for look-alikes, with fillers,
    bidi or control characters put in, or with placeholder braces; or any short text."""
    kind = draw(st.sampled_from(["look-alike", "inserted", "braces", "any"]))
    if kind == "any":
        return draw(st.text(min_size=1, max_size=30))
    name = list(draw(st.sampled_from(BASE)))
    if kind == "look-alike":
        swappable = [k for k, ch in enumerate(name) if ch in SWAPS]
        for k in draw(st.lists(st.sampled_from(swappable), min_size=1, max_size=3, unique=True)):
            name[k] = draw(st.sampled_from(SWAPS[name[k]]))
    elif kind == "inserted":
        at = draw(st.integers(0, len(name)))
        name.insert(at, draw(st.sampled_from(FILLERS + BIDI + CONTROL)))
    else:
        at = draw(st.integers(0, len(name)))
        name.insert(at, draw(st.sampled_from(["{{", "}}", "{{fact:nosuch.key}}"])))
    return "".join(name)


def _looks(name: str) -> str:
    """A reference skeleton from :data:`SWAPS` alone: compatibility-decomposed, each look-alike read as the
    character it passes for."""
    import unicodedata

    back = {ch: proto for proto, chars in SWAPS.items() for ch in chars}
    return "".join(back.get(ch, ch) for ch in unicodedata.normalize("NFKD", name))


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(name=page_names())
def test_property_a_name_that_reaches_a_page_is_refused_or_shown_as_itself(name):
    """Every name is refused in one line, or it holds no filler, bidi or control character and no placeholder,
    does not look like one of the atlas's names without being it, and its Markdown on a page is text."""
    import unicodedata

    from atlaslib.cards import available_cards
    from atlaslib.escape import md
    from atlaslib.external.score import _check_name
    from atlaslib.models import load_profiles

    try:
        shown = _check_name(name)
    except ValueError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("--name"), str(exc)
        return
    own = set(load_profiles()) | {m for c in available_cards() for m in [*c.baselines, *(
        m for _, m, _ in c.default_matrix)]}
    assert shown not in own
    assert not [o for o in own if _looks(o) == _looks(shown)], shown                 # no look-alike
    assert not set(shown) & set(FILLERS + BIDI + CONTROL) and "{{" not in shown and "}}" not in shown
    assert all(unicodedata.category(ch)[0] != "C" and ch not in "\u2028\u2029" for ch in shown)
    text = md(shown)
    assert "{{" not in text and "<" not in text and "\n" not in text


def _nested(depth: int, kind: str) -> str:
    return ("[" * depth + "]" * depth) if kind == "array" else ('{"a": ' * depth + "1" + "}" * depth)


JSON_ROWS = st.one_of(
    st.builds(_nested, st.sampled_from([1, 50, 101, 999, 5_000, 200_000]), st.sampled_from(["array", "object"])),
    st.builds(lambda n: '{"item_id": "x", "label": "affirmed", "score": 1%s}' % ("0" * n),
              st.sampled_from([1, 308, 400, 4_299, 4_300, 6_000])),
    st.builds(lambda n: '{"item_id": "x", "label": "%s"}' % ("a" * n), st.sampled_from([10, 140_000])),
    st.text(max_size=40).filter(lambda t: "\n" not in t and "\r" not in t))
CSV_FIELDS = st.one_of(st.sampled_from(['"', '"x', 'a"b', '""', "x" * 140_000, '"' + "x" * 140_000]),
                       st.text(alphabet='ab,"\\ ', max_size=12))


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(json_rows=st.lists(JSON_ROWS, min_size=1, max_size=3), csv_fields=st.lists(CSV_FIELDS, max_size=3),
       where=st.integers(0, 4))
def test_property_nested_or_oversized_json_and_csv_read_or_one_clear_error(tmp_path_factory, negex_ids, json_rows,
                                                                             csv_fields, where):
    """Predictions files (JSONL and CSV), course answers and result cells holding nested, long or broken
    values: each is read, or refused with one clear error naming the file, never another exception."""
    from atlaslib import course
    from atlaslib.external import PredictionsError
    from atlaslib.external.score import read_predictions

    tmp = tmp_path_factory.mktemp("inputs")
    ids = negex_ids[:5]
    jsonl = tmp / "p.jsonl"
    lines = [json.dumps({"item_id": i, "label": "affirmed"}) for i in ids]
    lines[where:where] = json_rows
    jsonl.write_text("\n".join(lines) + "\n", encoding="utf-8")
    csv_file = tmp / "p.csv"
    csv_lines = ["item_id,label,score"] + [f"{i},affirmed,0.5" for i in ids]
    csv_lines[1 + where:1 + where] = [f"{ids[0]},{v},0.5" for v in csv_fields]
    csv_file.write_text("\n".join(csv_lines) + "\n", encoding="utf-8")
    for f in (jsonl, csv_file):
        try:
            preds = read_predictions(f, "negex")
        except PredictionsError as exc:
            assert str(exc).startswith(str(f)) and "\n" not in str(exc)
        else:
            assert all(p.item_id for p in preds)

    with pytest.MonkeyPatch.context() as mp:  # answers that pass are checked against fixed truths (no data)
        mp.setattr(course, "graded_items", lambda *a, **k: None)
        mp.setattr(course, "graded_answers", lambda *a, **k: {"q1": 0.0, "q2": 0.0, "q3": 0.0})
        for text in json_rows:
            answers, cell = tmp / "answers.json", tmp / "results" / "negex" / N100 / "m" / "zero_shot.json"
            answers.write_text('{"seed": 1, "answers": {"q1": %s}}' % text, encoding="utf-8")
            cell.parent.mkdir(parents=True, exist_ok=True)
            cell.write_text(text, encoding="utf-8")
            for read, error, path in ((lambda: course.check_answers("intervals", answers), ValueError, answers),
                                      (lambda: results.read_cell(cell), results.ResultCellError, cell)):
                try:
                    read()
                except error as exc:
                    assert "\n" not in str(exc) and str(exc).startswith(str(path)), str(exc)[:200]
            results.folder_owner(cell.parent, "m", external=False)  # never raises: an unreadable cell owns nothing
