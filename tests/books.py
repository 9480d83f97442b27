"""The books and runs several test modules read, each built once per session by a fixture of
``tests/conftest.py`` (the first test that asks for it builds it; tests that share one carry
``pytest.mark.xdist_group("books")`` so that pytest-xdist keeps them on one worker). Tests read them and never
write into them: a test that needs to change a built site copies it first.

- the **small book**: NegEx atlas-n100-v1 with the majority baseline (its notebook executed, its data story too)
  and a hub model that is not in the (empty) hub cache, so its not-run stub;
- its **publish build**, of a copy of its results and runs, built without running anything;
- the **two-run book**: two systems' predictions files scored with ``atlaslib.evaluate`` on atlas-n100-v1 (no
  kernel), so the card page has a comparison with its forest plots, explorer links and run pages without
  notebooks, and the item explorer has two runs to filter;
- the **reference runs**: three small runs executed serially, the executor and fault tests' reference.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from atlaslib import book
from atlaslib.runner import RunRequest

#: pytest-timeout, in seconds, for the tests that build the course book (ten executed lessons) or send the cards'
#: items through a llama.cpp server: on a 2-core machine with a book building beside the suite they took 20-30
#: minutes, over the suite's default of 900 s (Makefile, pyproject.toml); still a bound that names a hung test
BUILD_TIMEOUT = 3600

SMALL_BOOK_VERSION = "atlas-n100-v1"
SMALL_BOOK_REQUESTS = [
    RunRequest("negex", SMALL_BOOK_VERSION, "majority", "zero_shot"),
    RunRequest("negex", SMALL_BOOK_VERSION, "bvanaken/clinical-assertion-negation-bert", "zero_shot"),
]
TWO_RUN_VERSION = "atlas-n100-v1"
#: two systems that err on different test items: system-a on every 7th, system-b on every 3rd (so that "A right,
#: B wrong" has more rows than the explorer shows on one page)
TWO_RUN_SYSTEMS = (("system-a", 7), ("system-b", 3))
REFERENCE_REQUESTS = [
    RunRequest("negex", "atlas-n100-v1", "majority", "zero_shot"),
    RunRequest("negex", "atlas-n100-v1", "negspacy-negex-kit", "zero_shot"),
    RunRequest("nli_negation", "builtin-v1", "always-entailment", "zero_shot"),
]


def build_paths(root: Path) -> book.BuildPaths:
    return book.BuildPaths(results=root / "results", runs=root / "runs", build=root / "_build")


def logged_build(what: str, **kwargs) -> list[str]:
    logs: list[str] = []
    code = book.build(log=lambda *a, **k: logs.append(" ".join(map(str, a))), **kwargs)
    assert code == 0, f"{what} build failed:\n" + "\n".join(logs)
    return logs


def build_small_book(root: Path, data_dir) -> tuple[Path, Path]:
    from atlaslib.cards import get_card

    paths = build_paths(root)
    logged_build("small book", paths=paths, cards=[get_card("negex")], requests=SMALL_BOOK_REQUESTS, data_dir=data_dir)
    return paths.html_out(False) / "_build" / "html", paths.results


def copy_build(results_dir: Path, root: Path) -> book.BuildPaths:
    """A copy of a build's results and runs (executed notebooks, data stories) under ``root``, to change or
    rebuild without touching the shared one."""
    paths = build_paths(root)
    shutil.copytree(results_dir, paths.results)
    shutil.copytree(results_dir.parent / "runs", paths.runs)
    return paths


def build_publish(results_dir: Path, root: Path) -> tuple[Path, book.BuildPaths]:
    from atlaslib.cards import get_card

    paths = copy_build(results_dir, root)
    logged_build("publish", paths=paths, cards=[get_card("negex")], publish=True, run_runs=False)
    return paths.html_out(True) / "_build" / "html", paths


def two_run_predictions(data_dir) -> dict[str, dict[str, str]]:
    """{system: {item_id: decision}} of :data:`TWO_RUN_SYSTEMS` on the test items of :data:`TWO_RUN_VERSION`."""
    from atlaslib.cards import negex

    items = negex.load_items(data_dir)
    _, test = negex.split_frames(items, negex.split(items, TWO_RUN_VERSION))
    gold = dict(zip(test["item_id"], test["decision"]))
    flip = {"negated": "affirmed", "affirmed": "negated"}
    return {name: {iid: (flip[g] if k % step == 0 else g) for k, (iid, g) in enumerate(gold.items())}
            for name, step in TWO_RUN_SYSTEMS}


def build_two_run_book(root: Path, data_dir) -> tuple[Path, Path]:
    from atlaslib.cards import get_card
    from atlaslib.external import evaluate

    paths = build_paths(root)
    for name, preds in two_run_predictions(data_dir).items():
        evaluate("negex", TWO_RUN_VERSION, predictions=preds, name=name, results_dir=paths.results, data_dir=data_dir)
    logged_build("two-run book", paths=paths, cards=[get_card("negex")], run_runs=False)
    return paths.html_out(False) / "_build" / "html", paths.results
