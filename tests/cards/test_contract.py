"""One contract for every card (parametrised over the four cards): the card declares itself as data
(``atlaslib.cards.Card``), its package has the same layout, and it exposes the same functions with the same
shapes."""
import ast
import importlib
import json
import sys
from pathlib import Path

import pytest

from atlaslib import runner
from atlaslib.cards import CARD_MODULES, CONTRACT, get_card
from atlaslib.cards.run import CardRun, contract_parts
from atlaslib.sources import PinnedFile

CARDS = sorted(CARD_MODULES)


@pytest.mark.parametrize("name", CARDS)
def test_card_declares_itself_as_data(name):
    card = get_card(name)
    assert card.name == name and card.title and card.licence and card.resampling_unit
    assert set(card.test_sizes) == set(card.versions)
    assert all(isinstance(n, int) and n > 0 for n in card.test_sizes.values())
    assert card.primary_metric == card.metrics[0]
    assert card.caveats and all(len(c) == 2 and all(isinstance(x, str) and x for x in c) and c[1].endswith(".")
                                for c in card.caveats)
    assert card.caveats_table().shape == (len(card.caveats), 2)
    assert all(isinstance(pf, PinnedFile) for pf in card.pinned_files)
    assert len({pf.name for pf in card.pinned_files}) == len(card.pinned_files)
    # baselines and model capabilities only name the card's own protocols
    assert all(set(ps) <= set(card.protocols) for ps in card.baselines.values())
    assert set(card.capabilities) <= set(card.protocols)
    # every run of the default matrix is a declared version, protocol, and a baseline or a model protocol
    for version, model, protocol in card.default_matrix:
        assert version in card.versions and protocol in card.protocols
        assert protocol in card.baselines.get(model, ()) or protocol in card.capabilities or not card.capabilities


def _top_level_names(path: Path) -> tuple[set[str], set[str]]:
    """(names a module defines at top level, names it imports at top level), read off its syntax tree."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defined, imported = set(), set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {a.asname or a.name for a in node.names}
    return defined, imported


def layout_problems(package) -> list[str]:
    """What ``package`` lacks of what every card provides (CONTRIBUTING.md, "Card package layout"), whichever
    of its files holds it: it is a package; ``CARD`` (a :class:`atlaslib.cards.Card`) and ``SCORING`` (an
    engine :class:`~atlaslib.metrics.engine.Scoring`) are reachable from it; each contract function
    (:data:`atlaslib.cards.CONTRACT`) is reachable from it under its name and defined under that name at the
    top of one of the package's own modules, or is a method of the card's own task family instance (``FAMILY``,
    :mod:`atlaslib.cards.families`); ``__init__.py`` is a docstring and re-exports only. Empty: none. File names
    are not asked: ``contract.py`` (the atlas's cards) and the toy card's ``card.py`` both pass."""
    from atlaslib.cards import Card
    from atlaslib.cards.families import TaskFamily
    from atlaslib.metrics.engine import Scoring

    name, path = package.__name__, Path(package.__file__)
    if path.name != "__init__.py":
        return [f"{name} is a single module, not a package"]
    problems = [f"{name}.{attr} is not a {kind.__name__}" for attr, kind in (("CARD", Card), ("SCORING", Scoring))
                if not isinstance(getattr(package, attr, None), kind)]
    family = getattr(package, "FAMILY", None)
    for fn in CONTRACT:
        obj = getattr(package, fn, None)
        home = getattr(obj, "__module__", None) or ""
        if not callable(obj):
            problems.append(f"{name} has no contract function {fn}")
        elif family is not None and getattr(obj, "__self__", None) is family and isinstance(family, TaskFamily):
            continue   # the card's own family instance provides it
        elif not home.startswith(f"{name}.") or fn not in _top_level_names(Path(sys.modules[home].__file__))[0]:
            problems.append(f"{name}.{fn} is not defined under that name in a module of the card ({home or 'none'})")
    init = ast.parse(path.read_text(encoding="utf-8")).body
    if not (init and isinstance(init[0], ast.Expr) and isinstance(init[0].value, ast.Constant)):
        problems.append(f"{name}/__init__.py has no module docstring")
    if not all(isinstance(node, (ast.Import, ast.ImportFrom)) for node in init[1:]):
        problems.append(f"{name}/__init__.py holds more than re-exports")
    return problems


@pytest.mark.parametrize("name", CARDS)
def test_every_card_package_has_the_same_layout(name):
    """Every card provides what a card must (:func:`layout_problems`), in whichever of its files."""
    assert layout_problems(importlib.import_module(CARD_MODULES[name])) == []


def test_the_layout_check_names_what_a_card_lacks_not_which_file(tmp_path, monkeypatch):
    """The toy card passes as it is (its family gives predict and counts); the same package without ``counts``,
    with ``counts`` borrowed from outside the card or from another card's family, or with code in ``__init__.py``
    is named for it."""
    import shutil

    monkeypatch.syspath_prepend(str(tmp_path))
    here = Path(__file__).resolve().parents[1] / "toy_card"

    def package(name: str, edit=None):
        shutil.copytree(here, tmp_path / name)
        init = tmp_path / name / "__init__.py"
        if edit:
            init.write_text(edit(init.read_text(encoding="utf-8")), encoding="utf-8")
        monkeypatch.delitem(sys.modules, name, raising=False)
        return importlib.import_module(name)

    assert not (here / "contract.py").exists() and layout_problems(package("asis")) == []
    no_counts = package("nocounts", lambda t: t.replace("cell_parts, counts,", "cell_parts,"))
    assert layout_problems(no_counts) == ["nocounts has no contract function counts"]
    borrowed = package("borrowed", lambda t: t.replace("cell_parts, counts,", "cell_parts,") +
                       "from atlaslib.metrics.engine import evaluate as counts  # noqa: F401\n")
    assert layout_problems(borrowed) == [
        "borrowed.counts is not defined under that name in a module of the card (atlaslib.metrics.engine)"]
    other = package("otherfamily", lambda t: t + "from asis import predict  # noqa: F401,F811\n")
    assert layout_problems(other) == [
        "otherfamily.predict is not defined under that name in a module of the card (atlaslib.cards.families)"]
    withcode = package("withcode", lambda t: t + "PROTOCOLS = (PROTOCOL, FINETUNE)\n")
    assert layout_problems(withcode) == ["withcode/__init__.py holds more than re-exports"]
    monkeypatch.setattr(withcode, "SCORING", None)
    assert layout_problems(withcode)[0] == "withcode.SCORING is not a Scoring"


def test_no_card_scores_on_its_own():
    """The one scorer is :meth:`CardRun.score <atlaslib.cards.run.CardRun.score>`: ``score`` is no contract
    function, and no card package defines or exposes a top-level ``score`` (its metrics are its counts under its
    ``SCORING``, through the engine)."""
    assert "score" not in CONTRACT
    for name in CARDS:
        package = importlib.import_module(CARD_MODULES[name])
        folder = Path(package.__file__).parent
        defining = [p.name for p in sorted(folder.rglob("*.py")) if "score" in _top_level_names(p)[0]]
        assert not defining and not hasattr(package, "score"), f"card {name} scores on its own: {defining}"


@pytest.mark.parametrize("name", CARDS)
def test_data_pins_come_from_the_declaration_not_reflection(name, monkeypatch):
    card = get_card(name)
    assert runner._card_data_pins(name) == sorted([pf.name, pf.sha256] for pf in card.pinned_files)
    # a pinned file the declaration leaves out is not found by looking through the module
    module = importlib.import_module(CARD_MODULES[name])
    monkeypatch.setattr(module, "_stray_pin", PinnedFile("stray.txt", "http://example.invalid", "0" * 64),
                        raising=False)
    assert ["stray.txt", "0" * 64] not in runner._card_data_pins(name)


def test_declared_test_sizes_match_the_real_splits():
    """The declared sizes against the cards' own split functions (tempeval: the pinned Dev documents)."""
    from atlaslib.cards import maccrobat, negex, nli_negation, tempeval

    assert get_card("nli_negation").test_sizes["builtin-v1"] == len(nli_negation.default_nli_negation_cases())
    assert get_card("maccrobat").test_sizes == {v: s["n_test"] for v, s in maccrobat.VERSIONS.items()}
    dev_docs = {f.name.split("/")[3] for f in tempeval.THYME_FILES if "/Dev/" in f.name}
    assert get_card("tempeval").test_sizes["thyme-dev-2015"] == len(dev_docs)
    items = negex.load_items()
    for version, n in get_card("negex").test_sizes.items():
        assert len(negex.split(items, version).test) == n


@pytest.mark.parametrize("name", CARDS)
def test_outside_systems_see_the_cards_own_test_split(name, data_dir):
    """Every card takes outside predictions (``atlas export`` / ``atlas score``): it declares a prediction
    format and its ``outside_split`` of each version holds exactly the test ids of the contract's ``split``.
    The hash ``atlas export`` gives is the one the card's result cells record: the manifest hash for NegEx
    and MACCROBAT; the NLI cells record the case-set sha256 and the TempEval cells a hash of the document
    split, as ``outside_split`` does."""
    from atlaslib.cards.run import card_module
    from atlaslib.external.tasks import load_split

    card, module = get_card(name), card_module(name)
    assert card.prediction_format in ("label", "tags", "anafora")
    assert isinstance(module.OUTSIDE_EXAMPLE, str) and module.OUTSIDE_EXAMPLE
    items = module.load_items(data_dir)
    for version in card.versions:
        manifest = module.split(items, version)
        outside = load_split(name, version, "test", data_dir)
        assert sorted(outside.ids) == sorted(manifest.test)
        assert len(set(outside.ids)) == len(outside.ids) == card.test_sizes[version]
        if name in ("negex", "maccrobat"):
            assert outside.manifest_hash == manifest.hash


@pytest.mark.parametrize("name", CARDS)
def test_runner_reads_baselines_and_capabilities_from_the_card(name):
    """A baseline asked for a protocol it does not declare is refused naming its declared protocols."""
    card = get_card(name)
    cases = [(m, p, ps) for m, ps in card.baselines.items() for p in card.protocols if p not in ps]
    for model, protocol, declared in cases:
        with pytest.raises(ValueError, match=f"has no {protocol} run; its protocols: {', '.join(declared)}"):
            runner.preflight(runner.RunRequest(name, card.versions[0], model, protocol))


# ------------------------------------------------------------------------ the five functions, end to end
#: per card: a split version, a model that runs offline in seconds, its protocol
RUNS = {
    "negex": ("atlas-n100-v1", "majority", "zero_shot"),
    "maccrobat": ("atlas-n100-v1", "memorize", "train_lookup"),
    "nli_negation": ("builtin-v1", "always-entailment", "zero_shot"),
    "tempeval": ("synthetic-v1", "closest", "phase2"),
}


class _ContractRuns(dict):
    """card -> (module, items, manifest, records, metrics), each card's run made when first asked for (one card's
    failure is its own tests')."""

    def __init__(self, data_dir):
        super().__init__()
        self.data_dir = data_dir

    def __missing__(self, name):
        version, model, protocol = RUNS[name]
        mod = importlib.import_module(CARD_MODULES[name])
        items = mod.load_items(self.data_dir)
        manifest = mod.split(items, version)
        records = mod.predict(items, manifest, model, protocol, data_dir=self.data_dir)
        # the card's cell parts where it has them (a scorer's run: its records with the scorer's table), as
        # cards.run.run makes them; scored by the one scorer either way
        parts = getattr(mod, "cell_parts", contract_parts)(CardRun(mod, version, model, protocol), records, manifest)
        self[name] = (mod, items, manifest, parts["predictions"], parts["metrics"])
        return self[name]


@pytest.fixture(scope="module")
def contract_runs(data_dir):
    """card -> (module, items, manifest, records, metrics): the contract's functions in a row, scored by the one
    scorer (:meth:`CardRun.score <atlaslib.cards.run.CardRun.score>`)."""
    return _ContractRuns(data_dir)


@pytest.mark.parametrize("name", CARDS)
def test_every_card_implements_the_contract(name, contract_runs, data_dir):
    card = get_card(name)
    version, model, protocol = RUNS[name]
    mod, items, manifest, records, metrics = contract_runs[name]
    for fn in CONTRACT:
        assert callable(getattr(mod, fn)), f"{name} has no contract function {fn}"
    assert items["item_id"].is_unique
    facts = mod.audit_items(items, data_dir)
    assert facts["n_items"] == len(items)
    json.dumps(facts)  # plain data
    assert manifest.card == name and manifest.version == version
    assert len(manifest.test) == card.test_sizes[version]
    assert sorted(r["item_id"] for r in records) == sorted(manifest.test)
    if card.analysis.kind != "temporal":   # a scorer's run: one record per document, its outcomes
        shape = ["item_id", "gold", "pred", "score"]   # NLI: per-label probabilities ``scores`` in place of score
        assert all(list(r)[:4] == shape or [k for k in r if k in (*shape, "scores")] == [*shape[:3], "scores"]
                   for r in records)
    assert set(metrics) == {card.metric_name(b, protocol) for b in card.metrics}
    for entry in metrics.values():
        assert set(entry) >= {"value", "ci_low", "ci_high"}


def test_negex_contract_scores_against_sklearn(contract_runs):
    from sklearn.metrics import f1_score, recall_score

    *_, records, metrics = contract_runs["negex"]
    assert {r["gold"] for r in records} | {r["pred"] for r in records} <= {"negated", "affirmed"}  # the cell's shape
    y, p = [r["gold"] for r in records], [r["pred"] for r in records]
    assert metrics["macro_f1_zero_shot"]["value"] == pytest.approx(f1_score(y, p, average="macro"))
    assert metrics["sensitivity_zero_shot"]["value"] == pytest.approx(recall_score(y, p, pos_label="negated"))
    # the engine's numbers are binary_metrics' (index-by-index resamples) to the bit, intervals included
    from tests.metrics.reference import binary_metrics
    scores = [r["score"] for r in records]
    ref = binary_metrics([int(g == "negated") for g in y], [int(q == "negated") for q in p],
                         None if None in scores else scores, "zero_shot",
                         no_score_reason="the run's answers are labels without scores")
    assert metrics == ref
    mod, items, *_ = contract_runs["negex"]
    facts = mod.audit_items(items)
    assert (facts["n_rows"], facts["n_items"]) == (mod.ROWS_EXPECTED, mod.ITEMS_EXPECTED)
    assert facts["dropped_rows"] == mod.ROWS_EXPECTED - mod.ITEMS_EXPECTED


def test_maccrobat_contract_scores_against_seqeval(contract_runs):
    from seqeval.metrics import f1_score
    from seqeval.scheme import IOB2

    mod, items, _, records, metrics = contract_runs["maccrobat"]
    y, p = [r["gold"] for r in records], [r["pred"] for r in records]
    assert metrics["entity_f1_train_lookup"]["value"] == pytest.approx(f1_score(y, p, mode="strict", scheme=IOB2))
    assert {r["document"] for r in records} <= set(items["document"])
    facts = mod.audit_items(items)
    assert {"sentences": facts["n_items"], **facts["mentions"]} == mod.REFERENCE_COUNTS


def test_nli_contract_scores_by_hand(contract_runs):
    *_, records, metrics = contract_runs["nli_negation"]
    assert {r["pred"] for r in records} == {"entailment"}
    acc = sum(r["gold"] == "entailment" for r in records) / len(records)
    assert metrics["aggregate_accuracy_zero_shot"]["value"] == pytest.approx(acc)
    assert metrics["false_entailment_rate_zero_shot"]["value"] == 1.0  # every non-entailment case entailed


def test_tempeval_contract_gives_the_runs_numbers(contract_runs):
    *_, records, metrics = contract_runs["tempeval"]
    # contains F1 by hand from the documents' CONTAINS counts (summed over the distance bands): F1 = 2PR / (P + R)
    ref, pred, pc, rc = (sum(c[k] for r in records for c in r["slices"]["contains_gap"].values()) for k in range(4))
    p, r = pc / pred, rc / ref
    assert metrics["contains_f1_phase2"]["value"] == pytest.approx(2 * p * r / (p + r))


@pytest.mark.parametrize("name,version,model,protocol", [
    ("negex", "atlas-n100-v1", "nobody-org/absent-model", "zero_shot"),
    ("maccrobat", "atlas-n100-v1", "nobody-org/absent-model", "zero_shot"),
    ("nli_negation", "builtin-v1", "nobody-org/absent-model", "zero_shot"),
    ("tempeval", "thyme-dev-2015", "memorize", "phase2"),
])
def test_a_run_that_cannot_happen_raises_the_contracts_not_run(name, version, model, protocol, data_dir,
                                                               monkeypatch):
    from atlaslib.cards import NotRun

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    mod = importlib.import_module(CARD_MODULES[name])
    items = mod.load_items(data_dir)
    with pytest.raises(NotRun, match="weights unavailable|needs the note text"):
        mod.predict(items, mod.split(items, version), model, protocol, data_dir=data_dir)


def test_one_overlap_rule_the_profile_entries_a_cards_marks_start():
    """Card.overlap, the rule of model runs, runs decided before a kernel and outside systems: the ``trained_on``
    entries that start with one of the card's marks, any case (a name that holds a mark later does not)."""
    negex, maccrobat, tempeval = get_card("negex"), get_card("maccrobat"), get_card("tempeval")
    assert negex.overlap(["NegEx-kit-triggers", "i2b2-2010", "my-negex-notes"]) == ["NegEx-kit-triggers"]
    assert maccrobat.overlap(["maccrobat", "webtext"]) == ["maccrobat"] and maccrobat.overlap(None) == []
    assert tempeval.overlap(["negex-kit-triggers", "maccrobat"]) == []
    # every run's cell marks with it (CardRun.finish, from the loaded or given profile): a profile trained on the
    # kit's triggers, and one whose entry only holds the name further in (a substring test marked it)
    for trained_on, marked in ((["negex-kit-triggers", "webtext"], ["negex-kit-triggers"]), (["my-negex-notes"], [])):
        run = CardRun("negex", "atlas-n100-v1", "m", "zero_shot")
        run.not_run("weights unavailable")
        cell = run.finish(profile={"name": "m", "trained_on": trained_on})
        assert cell["overlap"] == marked == negex.overlap(trained_on)
