"""The house's layout: no import cycle among atlaslib's modules (imports inside functions counted), the book
and the matrix executor apart, and no module outside ``atlaslib/cards/`` that knows a card by name."""
import ast
import re
from pathlib import Path

import atlaslib
from atlaslib.cards import CARD_MODULES, available_cards

ATLASLIB = Path(atlaslib.__file__).parent

#: string constants equal to a card's name allowed outside atlaslib/cards/: negspacy's own pipe name
CARD_NAME_EXCEPTIONS = {("models/rules.py", "negex")}


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every atlaslib module: dotted name -> (file, is a package)."""
    out = {}
    for path in sorted(ATLASLIB.rglob("*.py")):
        parts = list(path.relative_to(ATLASLIB.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _imports(name: str, source: str, is_package: bool, modules, top_level_only: bool = False) -> set[str]:
    """The atlaslib modules ``name`` imports by name: every ``import`` / ``from … import`` statement, those
    inside functions included (``top_level_only``: the module body's only). ``from P import x`` is an import
    of the module ``P.x`` when there is one, else of ``P``; a package's ``__init__`` that Python runs on the
    way is not counted (it is an import of its own)."""
    tree = ast.parse(source)
    package = name if is_package else name.rpartition(".")[0]
    nodes = tree.body if top_level_only else ast.walk(tree)
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                if f"{target}.{a.name}" in modules:
                    out.add(f"{target}.{a.name}")
                elif target in modules:
                    out.add(target)
    out.discard(name)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _a_cycle(graph, component) -> list[str]:
    """One shortest cycle through the first module of ``component`` (for the message)."""
    start, members = component[0], set(component)
    paths, seen = [[start]], {start}
    while paths:
        nxt = []
        for p in paths:
            for w in sorted(graph[p[-1]] & members):
                if w == start:
                    return p + [start]
                if w not in seen:
                    seen.add(w)
                    nxt.append(p + [w])
        paths = nxt
    return component


def test_the_cycle_finder_finds_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": set()}
    assert _cycles(graph) == [["a", "b", "c"]] and _a_cycle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]
    modules = {"atlaslib": None, "atlaslib.x": None, "atlaslib.x.y": None, "atlaslib.z": None}
    src = "from .z import thing\nfrom . import x\nimport os\n\ndef f():\n    from .x import y\n"
    assert _imports("atlaslib.p", src, False, modules) == {"atlaslib.z", "atlaslib.x", "atlaslib.x.y"}
    assert _imports("atlaslib.p", src, False, modules, top_level_only=True) == {"atlaslib.z", "atlaslib.x"}
    assert _imports("atlaslib.x", "from . import y\nfrom .. import z\n", True, modules) == {"atlaslib.x.y",
                                                                                           "atlaslib.z"}


def test_no_import_cycle_among_atlaslib_modules():
    """Every atlaslib module's imports, inside functions too, form no cycle: each floor stands on the ones
    below it (e.g. :mod:`atlaslib.notebook` under the runner, the data stories and the lessons)."""
    modules = _modules()
    graph = {name: _imports(name, path.read_text(encoding="utf-8"), pkg, modules)
             for name, (path, pkg) in modules.items()}
    cycles = _cycles(graph)
    assert not cycles, "import cycles among atlaslib modules:\n" + "\n".join(
        f"- {len(c)} modules, e.g. {' -> '.join(_a_cycle(graph, c))}" for c in cycles)


def test_executor_and_matrix_do_not_import_the_book():
    modules = _modules()
    top = {name: _imports(f"atlaslib.{name}", (ATLASLIB / f"{name}.py").read_text(encoding="utf-8"), False, modules,
                          top_level_only=True) for name in ("executor", "matrix")}
    for name, imports in top.items():
        assert "atlaslib.book" not in imports, f"atlaslib/{name}.py imports atlaslib.book"
    assert "atlaslib.matrix" in top["executor"]


def test_book_reexports_the_matrix_types():
    from atlaslib import book, matrix

    assert book.BuildPaths is matrix.BuildPaths and book.MatrixReport is matrix.MatrixReport


def _card_name_hits(source: str, names: set[str], allowed=frozenset()) -> list[tuple[int, str]]:
    """(line, name) of every string constant equal to one of ``names`` (not in ``allowed``)."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
            and node.value not in allowed]


def test_the_card_name_check_sees_a_name_and_nothing_else():
    src = '"""negex in a docstring"""\nx = "negex"\ny = "negex-0003"\nz = f"{x}-negex"\nw = {"maccrobat": 1}\n'
    assert _card_name_hits(src, {"negex", "maccrobat"}) == [(2, "negex"), (5, "maccrobat")]
    assert _card_name_hits(src, {"negex", "maccrobat"}, {"negex"}) == [(5, "maccrobat")]


def test_no_module_outside_the_cards_names_a_card():
    """A card's name as a string constant (``"negex"``, not ``"negex-0003"`` nor a docstring that mentions
    it) appears only in its own package: generic modules read the card's declaration instead."""
    names = set(CARD_MODULES)
    assert names >= {c.name for c in available_cards()} and len(names) >= 4
    hits = []
    for path in sorted(ATLASLIB.rglob("*.py")):
        rel = path.relative_to(ATLASLIB).as_posix()
        if rel.startswith("cards/"):
            continue
        allowed = {n for r, n in CARD_NAME_EXCEPTIONS if r == rel}
        hits += [f"atlaslib/{rel}:{line}: {name!r}" for line, name in
                 sorted(_card_name_hits(path.read_text(encoding="utf-8"), names, allowed))]
    assert not hits, "card names outside atlaslib/cards/:\n" + "\n".join(hits)


#: every atlaslib module on a floor, from the lowest up: a module imports only from its own floor and the ones below
#: it. A name is a top-level module or package, or a module of a package that stands on a higher floor than the
#: rest of it (``harness.cli``: a command over the book); a module's floor is its longest name here.
FLOORS = (
    ("background", "builddir", "calltally", "display", "escape", "fsio", "interrupts", "linkcheck", "names",
     "phases", "plots", "progress", "registries", "splits", "streams", "syntax", "version"),   # no atlaslib import
    ("userfile", "jsonio", "yamlio", "sources", "notebook", "predfiles", "atomicio"),         # files and sources
    ("results",),
    ("metrics",),
    ("models",),
    ("protocols", "variants"),
    ("cards",),                       # cards.families among them: the task families cards declare themselves through
    ("analysis", "rescore", "runner"),
    ("course", "harness", "matrix", "external"),
    ("executor",),
    ("pages",),
    ("book",),
    ("cli", "harness.cli", "external.cli"),
)
#: and, beside the order, what two floors must never reach for (modules outside the floors)
NEVER = {"cards": ("external", "runner"), "metrics": ("external", "runner")}


def _unit(name: str) -> str | None:
    """The floor entry ``name`` (a dotted ``atlaslib.…`` module) stands under: its longest name in
    :data:`FLOORS`; None for the ``atlaslib`` package itself and for a module on no floor."""
    parts = name.split(".")[1:]
    names = {n for floor in FLOORS for n in floor}
    for k in range(len(parts), 0, -1):
        if ".".join(parts[:k]) in names:
            return ".".join(parts[:k])
    return None


def _floor_of(name: str) -> int | None:
    unit = _unit(name)
    return None if unit is None else next(i for i, floor in enumerate(FLOORS) if unit in floor)


def _floor_problems(graph: dict[str, set[str]]) -> list[str]:
    """``module -> imported module`` for every import that reaches up a floor or into :data:`NEVER`."""
    out = []
    for name, imports in sorted(graph.items()):
        mine = _floor_of(name)
        if mine is None:
            continue
        never = NEVER.get(name.split(".")[1], ())
        for other in sorted(imports):
            theirs, top = _floor_of(other), other.split(".")[1] if other.count(".") else None
            if (theirs is not None and theirs > mine) or top in never:
                out.append(f"{name} -> {other}")
    return out


def _unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph between floor entries (top-level modules and packages): ``a -> b`` when a module of
    ``a`` imports one of ``b``."""
    out: dict[str, set[str]] = {}
    for name, imports in graph.items():
        a = _unit(name)
        if a is None:
            continue
        out.setdefault(a, set())
        for other in imports:
            b = _unit(other)
            if b is not None and b != a:
                out[a].add(b)
                out.setdefault(b, set())
    return out


def test_the_floor_check_sees_an_import_up_and_nothing_else():
    graph = {"atlaslib.metrics.a": {"atlaslib.results", "atlaslib.metrics.b", "atlaslib.jsonio"},
             "atlaslib.metrics.c": {"atlaslib.cards.negex"}, "atlaslib.cards.x": {"atlaslib.external.score"},
             "atlaslib.pages.p": {"atlaslib.cards", "atlaslib.runner"}, "atlaslib.runner": {"atlaslib.book"}}
    assert _floor_problems(graph) == ["atlaslib.cards.x -> atlaslib.external.score",
                                      "atlaslib.metrics.c -> atlaslib.cards.negex",
                                      "atlaslib.runner -> atlaslib.book"]
    assert _floor_problems({"atlaslib.harness.cli": {"atlaslib.book"}, "atlaslib.harness.report": {"atlaslib.book"},
                            "atlaslib.variants": {"atlaslib.cards"}}) == [
        "atlaslib.harness.report -> atlaslib.book", "atlaslib.variants -> atlaslib.cards"]


def _graph():
    modules = _modules()
    return {name: _imports(name, path.read_text(encoding="utf-8"), pkg, modules)
            for name, (path, pkg) in modules.items()}


def test_every_atlaslib_module_stands_on_a_floor():
    """No module is left off the floors (a module on none is checked by nothing): each top-level module and
    package of atlaslib is named in :data:`FLOORS`, once."""
    names = [n for floor in FLOORS for n in floor]
    assert len(names) == len(set(names)), "a name on two floors"
    off = sorted(name for name in _modules() if name != "atlaslib" and _unit(name) is None)
    assert not off, "atlaslib modules on no floor:\n" + "\n".join(f"- {n}" for n in off)


def test_the_unit_graph_sees_a_package_cycle():
    graph = {"atlaslib.variants": {"atlaslib.cards"}, "atlaslib.cards.run": {"atlaslib.variants"},
             "atlaslib.cards": set(), "atlaslib.harness.cli": {"atlaslib.book"}, "atlaslib.book": {"atlaslib.harness"},
             "atlaslib.harness": set()}
    units = _unit_graph(graph)
    assert units == {"variants": {"cards"}, "cards": {"variants"}, "harness.cli": {"book"}, "book": {"harness"},
                     "harness": set()}
    assert _cycles(units) == [["cards", "variants"]]


def test_no_import_cycle_among_atlaslib_packages():
    """Top-level modules and packages (the floor entries) form no cycle either: a module cycle-free graph can
    still run back up between packages (``cards.run`` importing ``variants`` while ``variants`` imports
    ``cards``), which the floors then cannot order."""
    units = _unit_graph(_graph())
    cycles = _cycles(units)
    assert not cycles, "import cycles among atlaslib packages:\n" + "\n".join(
        f"- {' -> '.join(_a_cycle(units, c))}" for c in cycles)


def test_each_floor_imports_only_the_floors_below_it():
    """:data:`FLOORS` (… results < metrics < models < protocols < cards < analysis < … < pages < book < cli), imports
    inside functions counted: statistics look up no card, a card's page content declares its facts without importing the pages
    (:mod:`atlaslib.cards.facts`), and a card reads no outside-system scorer or runner."""
    modules = _modules()
    graph = {name: _imports(name, path.read_text(encoding="utf-8"), pkg, modules)
             for name, (path, pkg) in modules.items()}
    problems = _floor_problems(graph)
    assert not problems, "imports up a floor:\n" + "\n".join(f"- {p}" for p in problems)


def _finish_calls(text: str) -> list[str]:
    """Every statement in a MyST notebook's code cells that finishes a run (names ``finish``), as written."""
    return [m.group(0) for m in re.finditer(r"^.*\bfinish\w*\(.*$", text, re.M)]


FINISH = r"cell = card_run\.finish\(\*\*[a-z_]+\.cell_parts\("


def test_the_finish_check_sees_another_idiom():
    for other in ("cell = maccrobat.finish_run(card_run, out, manifest, items)", "cell = run.finish(card_run)",
                  "cell = card_run.finish(metrics=m)"):
        assert not re.match(FINISH, _finish_calls(other)[0])


def test_every_card_notebook_finishes_its_run_with_the_same_single_call():
    """Each card notebook ends its run with one ``cell = card_run.finish(**<card>.cell_parts(...))``: the
    card says what its cell holds (a run that did not happen, its reason), :class:`atlaslib.cards.run.CardRun`
    writes it."""
    notebooks = sorted((ATLASLIB.parent / "notebooks").glob("*.md"))
    runs = [p for p in notebooks if "CardRun(" in p.read_text(encoding="utf-8")]
    assert {p.stem for p in runs} == {c.name for c in available_cards()}
    for path in runs:
        calls = _finish_calls(path.read_text(encoding="utf-8"))
        assert len(calls) == 1 and re.match(FINISH, calls[0]), f"{path.name}: {calls}"


def test_no_generic_module_dispatches_on_a_cards_analysis_kind():
    """What differs between task families is said by the card's family (:func:`atlaslib.cards.families.family_of`:
    its unit, slice note, slice groups, whether its tags are scored both ways), so a new family edits no generic
    module: outside ``atlaslib/cards/`` no module reads a card's ``analysis.kind``."""
    pattern = re.compile(r"analysis(?:_of\([^()]*\))?\.kind\b")
    assert pattern.search("x = card.analysis.kind") and pattern.search("analysis_of(card).kind in KINDS")
    hits = [f"atlaslib/{p.relative_to(ATLASLIB).as_posix()}:{n}" for p in sorted(ATLASLIB.rglob("*.py"))
            if not p.relative_to(ATLASLIB).as_posix().startswith("cards/")
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not hits, "generic modules dispatching on a card's analysis kind:\n" + "\n".join(hits)
