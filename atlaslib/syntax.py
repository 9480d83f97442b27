"""A Python module as Python parses it: the one digest of code that comments and layout cannot change.

Two keys hold code this way. A run's key (:func:`atlaslib.notebook.source_digest` with ``code_only``) keeps
docstrings, because some reach a cell (a split's rules, a perturbation's reason are docstrings). A model's
identity in the model-call store (:func:`atlaslib.models.calls.code_digest`) leaves them out: an adapter's
docstrings never reach a model's output. Imports nothing else of atlaslib."""
from __future__ import annotations

import ast


def dump(source: str | bytes, *, filename: str = "<unknown>", docstrings: bool = True,
         annotate_fields: bool = True, leave_out: tuple[str, ...] = ()) -> str:
    """:func:`ast.dump` of ``source`` parsed (a :class:`SyntaxError` or :class:`ValueError` is the caller's):
    comments, blank lines and layout leave it unchanged; every statement changes it, and so does a docstring
    unless ``docstrings`` is False (each module, class and function body's leading string then left out).
    ``leave_out``: names of functions and methods (at any depth) whose definitions are left out, decorators
    included (e.g. a property that only describes an object for a record)."""
    tree = ast.parse(source, filename=filename)
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        if leave_out:
            body = [b for b in body if not (isinstance(b, functions) and b.name in leave_out)]
        if not docstrings and body and isinstance(body[0], ast.Expr) \
                and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]
        if body is not node.body:
            node.body = body or [ast.Pass()]
    return ast.dump(tree, annotate_fields=annotate_fields)
