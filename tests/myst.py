"""The front matter the tests' own MyST text notebooks start with (jupytext's MyST format, the ``python3`` kernel), as
the card notebooks and the lessons have it."""

FRONT_MATTER = ("jupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
                "kernelspec:\n  name: python3\n  display_name: Python 3\n  language: python\n")


def myst_header(more: str = "") -> str:
    """The notebook's YAML header: ``---``, :data:`FRONT_MATTER` and ``more`` (YAML of the notebook's own, e.g. a
    lesson's ``atlas:`` block), ``---``."""
    return f"---\n{FRONT_MATTER}{more}---\n"
