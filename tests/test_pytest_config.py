"""The suite's own configuration: every marker it declares is used, and one per-test timeout, set from a
measurement (the Makefile's comment), in both places that give it."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _ini() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]


def test_every_declared_marker_is_used_and_undeclared_ones_are_refused():
    ini = _ini()
    assert "--strict-markers" in ini["addopts"].split()
    code = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "tests").rglob("*.py"))
    for line in ini["markers"]:
        name = re.match(r"\w+", line).group(0)
        assert re.search(rf"mark\.{name}\b", code), f"marker {name!r} is declared but no test uses it"


def test_the_per_test_timeout_is_the_measured_one_in_both_places():
    make = (REPO / "Makefile").read_text(encoding="utf-8")
    args = re.search(r"^PYTEST_ARGS \?=.*--timeout (\d+)", make, flags=re.M)
    assert args and int(args.group(1)) == _ini()["timeout"] == 900
    # the comment that gives the measurement behind it: the 2-worker suite's wall time, and the margin
    assert "614 s" in make and "900 s" in make
