"""More checks of the built book's statements, one module per area (see ``tests/test_book_statements.py``).

Each module here defines ``CHECKS`` (functions ``check(src, cells) -> list[str]`` of problems found, as in
``tests/test_book_statements.py``), ``SITES`` (a mapping from a site name of that file, e.g. ``"small book"`` or
``"mixed site"``, to the checks that site is held to) and ``WHOLE_BOOK_ONLY`` (checks only a whole default book
feeds). :func:`collect` gathers them; ``tests/test_book_statements.py`` runs them with its own.
"""
from __future__ import annotations

import importlib
import pkgutil


def missing(what: str) -> list[str]:
    """The problem a check reports when what it reads is not in the site: it cannot pass for want of input."""
    return [f"{what} is missing: nothing to check"]


def collect() -> tuple[tuple, dict, tuple]:
    """(every check, {site: checks}, whole-book-only checks) of this package's modules, in module-name order."""
    checks, sites, whole = [], {}, []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        checks += list(getattr(mod, "CHECKS", ()))
        for site, more in getattr(mod, "SITES", {}).items():
            sites.setdefault(site, [])
            sites[site] += list(more)
        whole += list(getattr(mod, "WHOLE_BOOK_ONLY", ()))
    return tuple(checks), {k: tuple(v) for k, v in sites.items()}, tuple(whole)
