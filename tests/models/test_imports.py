"""atlaslib.models is a house without circles: no module of the package imports, even inside a function,
a module that imports it back (registry <-> weights was one), and no module imports the package itself (its
``__init__`` imports every module, so that would be a circle too)."""
from __future__ import annotations

import ast
from pathlib import Path

import atlaslib.models

PKG = "atlaslib.models"
ROOT = Path(atlaslib.models.__file__).parent


def _module_imports(path: Path, name: str) -> set[str]:
    """atlaslib.models modules (or the package) ``path`` imports anywhere, module level or inside functions."""
    modules = {p.stem for p in ROOT.glob("*.py") if p.stem != "__init__"}
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:                                        # relative: from the package
                parts = (PKG if path.stem != "__init__" else PKG).split(".")[: len(PKG.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}".removeprefix(PKG + ".") in modules else base
                       for a in node.names]
        else:
            continue
        for t in targets:
            if t == PKG or t.startswith(PKG + "."):
                out.add(t)
    out.discard(name)
    return out


def test_no_import_cycle_in_atlaslib_models_counting_imports_inside_functions():
    graph = {f"{PKG}.{p.stem}": _module_imports(p, f"{PKG}.{p.stem}") for p in ROOT.glob("*.py")
             if p.stem != "__init__"}
    into_package = sorted(m for m, deps in graph.items() if PKG in deps)
    assert not into_package, f"modules importing the package itself (a circle through __init__): {into_package}"

    def cycle_from(start):
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    return path + [start]
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
        return None

    cycles = [c for c in (cycle_from(m) for m in graph) if c]
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)
    assert f"{PKG}.weights" not in graph[f"{PKG}.registry"] and f"{PKG}.hub_cache" in graph[f"{PKG}.registry"]
    assert f"{PKG}.hub_cache" in graph[f"{PKG}.weights"]
