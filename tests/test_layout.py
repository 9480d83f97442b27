"""The house's layout: module-level imports form no cycle between the book and the matrix executor, and
every card package has the same files (see CONTRIBUTING.md, "Add a card")."""
import ast
from pathlib import Path

import atlaslib

ATLASLIB = Path(atlaslib.__file__).parent


def _module_imports(path: Path, package: str) -> set[str]:
    """Absolute names of the atlaslib modules ``path`` imports at module level (not inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m.startswith("atlaslib")}


def test_executor_and_matrix_do_not_import_the_book():
    for name in ("executor", "matrix"):
        imports = _module_imports(ATLASLIB / f"{name}.py", "atlaslib")
        assert "atlaslib.book" not in imports, f"atlaslib/{name}.py imports atlaslib.book"
    assert "atlaslib.matrix" in _module_imports(ATLASLIB / "executor.py", "atlaslib")


def test_book_reexports_the_matrix_types():
    from atlaslib import book, matrix

    assert book.BuildPaths is matrix.BuildPaths and book.MatrixReport is matrix.MatrixReport
