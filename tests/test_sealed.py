"""The suite is sealed from the machine (tests/conftest.py): what every test, kernel and subprocess sees."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path


def test_caches_are_the_sessions_and_the_hubs_are_offline(session_dir):
    from huggingface_hub import constants

    from atlaslib import sources
    from atlaslib.models.hub_cache import hf_cache_dir

    assert os.environ["HF_HUB_OFFLINE"] == os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert constants.HF_HUB_OFFLINE                       # read by huggingface_hub at import: set before it
    assert Path(constants.HF_HUB_CACHE) == hf_cache_dir() == session_dir / "hf-home" / "hub"
    assert not any(hf_cache_dir().iterdir())             # empty: no hub model is ever found in it
    assert sources.cache_dir() == session_dir / "atlas-cache"
    assert Path(os.environ["XDG_CACHE_HOME"]) == session_dir / "xdg-cache"
    assert Path.home() / ".cache" not in session_dir.parents and Path(__file__).parents[1] not in session_dir.parents
    assert "ATLAS_PROFILES" not in os.environ and "ATLAS_DASK_SCHEDULER" not in os.environ


def test_a_subprocess_inherits_the_seal(session_dir):
    code = "import os; print(os.environ['ATLAS_CACHE_DIR'], os.environ['HF_HUB_CACHE'], os.environ['HF_HUB_OFFLINE'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(session_dir / "atlas-cache"), str(session_dir / "hf-home" / "hub"), "1"]


def test_a_subprocess_writes_its_temporary_configuration_and_state_files_in_the_session(session_dir):
    """Temporary files, matplotlib's, IPython's (its start-up files) and Jupyter's folders (a kernel's connection
    file), Dask's configuration: a subprocess finds them all in the session folder, never in the home folder or the
    machine's temporary folder; and no other Jupyter or Dask setting of the user's reaches it."""
    import tempfile

    code = ("import json, os, tempfile, matplotlib; from IPython.paths import get_ipython_dir; "
            "from jupyter_core import paths as j; import dask.config as d; "
            "print(json.dumps({'tmp': tempfile.gettempdir(), 'mpl': matplotlib.get_configdir(), "
            "'ipython': get_ipython_dir(), 'jupyter': [j.jupyter_config_dir(), j.jupyter_data_dir(), "
            "j.jupyter_runtime_dir()], 'dask': d.PATH, 'xdg': [os.environ['XDG_CONFIG_HOME'], "
            "os.environ['XDG_DATA_HOME']], 'other': sorted(n for n in os.environ if n.startswith(('JUPYTER_', "
            "'DASK_')))}))")
    seen = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                     check=True).stdout)
    assert seen == {"tmp": str(session_dir / "tmp"), "mpl": str(session_dir / "matplotlib"),
                    "ipython": str(session_dir / "ipython"),
                    "jupyter": [str(session_dir / "jupyter" / n) for n in ("config", "data", "runtime")],
                    "dask": str(session_dir / "dask"),
                    "xdg": [str(session_dir / "xdg-config"), str(session_dir / "xdg-data")],
                    "other": ["DASK_CONFIG", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR"]}
    assert tempfile.gettempdir() == str(session_dir / "tmp")     # this process's own temporary files too


def test_every_atlas_variable_atlaslib_reads_is_cleared_or_sealed_or_deliberately_kept(repo):
    """A user's ``ATLAS_MODEL_CALLS=off`` (or any switch atlaslib reads) must not reach a test: every ``ATLAS_*``
    name in atlaslib's code is cleared, set by the seal, or kept on purpose (the pinned data)."""
    from tests.conftest import CLEARED, KEPT, SEALED

    found = {name for path in (repo / "atlaslib").rglob("*.py")
             for name in re.findall(r"\bATLAS_[A-Z0-9_]+\b", path.read_text(encoding="utf-8"))}
    assert {"ATLAS_PROFILES", "ATLAS_MODEL_CALLS", "ATLAS_PROGRESS", "ATLAS_DATA_DIR"} <= found   # the grep works
    loose = sorted(found - set(CLEARED) - set(SEALED) - set(KEPT))
    assert not loose, f"atlaslib reads {loose}: clear them in tests/conftest.py (CLEARED), or seal or keep them"
    assert not [n for n in CLEARED if n in os.environ]


def test_a_tempeval_run_without_a_work_folder_leaves_nothing_in_the_temporary_folder(tmp_path, monkeypatch):
    import gc
    import tempfile

    from atlaslib.cards.tempeval import runs

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    result = runs.run("synthetic-v1", "closest", "phase2")
    assert result.table["n_documents"] == 12 and result.predictions
    assert result.predicted_dir is None and not list(tmp.iterdir())
    corpus = runs.load_corpus("synthetic-v1")        # its reference folder lives as long as the corpus
    assert corpus.reference_dir.is_dir() and tmp in corpus.reference_dir.parents
    del corpus
    gc.collect()
    assert not list(tmp.iterdir())


def test_a_notebook_execution_leaves_nothing_in_the_temporary_folder_nor_its_progress_setting(tmp_path,
                                                                                           monkeypatch,
                                                                                           session_dir):
    """:func:`atlaslib.notebook.execute` gives its kernel plain progress bars (``ATLAS_PROGRESS=plain``) without
    setting it for the whole process (later tests, later runs); the kernel runs sealed (no user IPython start-up
    files, its connection file in the session) and leaves nothing in the temporary folder."""
    import tempfile

    import nbformat

    from atlaslib import notebook

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.delenv("ATLAS_PROGRESS", raising=False)
    seen = tmp_path / "seen.json"
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("seen = ''", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "import json, os, tempfile\n"
            "open(seen, 'w').write(json.dumps({n: os.environ.get(n) for n in ('ATLAS_PROGRESS', 'IPYTHONDIR', "
            "'JUPYTER_RUNTIME_DIR')} | {'ipython': get_ipython().profile_dir.location, "
            "'tmp': tempfile.gettempdir()}))")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    src = tmp_path / "nb.ipynb"
    nbformat.write(nb, src)
    notebook.execute(src, tmp_path / "out.ipynb", {"seen": str(seen)}, timeout=300)
    assert "ATLAS_PROGRESS" not in os.environ                    # the kernel's setting only
    kernel = json.loads(seen.read_text())
    assert kernel == {"ATLAS_PROGRESS": "plain", "IPYTHONDIR": str(session_dir / "ipython"),
                      "JUPYTER_RUNTIME_DIR": str(session_dir / "jupyter" / "runtime"),
                      "ipython": str(session_dir / "ipython" / "profile_default"), "tmp": str(tmp)}
    assert not list(tmp.iterdir())


def test_hypothesis_is_derandomised_keeps_no_database_and_writes_to_the_session(session_dir):
    from hypothesis import settings
    from hypothesis.configuration import storage_directory

    assert settings.default.derandomize is True and settings.default.database is None
    assert storage_directory("constants", intent_to_write=False).path == session_dir / "hypothesis" / "constants"


def test_xdist_groups_keep_a_groups_tests_on_one_worker(tmp_path):
    """Tests that share a session-built book are marked ``xdist_group``; ``make test``'s ``--dist loadgroup`` must
    put each group on one worker (on pytest 9.2 it silently did not, and both workers built every book)."""
    (tmp_path / "test_grouped.py").write_text(
        "import os, pytest\n"
        "pytestmark = pytest.mark.xdist_group('shared')\n"
        "@pytest.mark.parametrize('i', range(6))\n"
        "def test_member(i):\n"
        "    with open(os.environ['GROUP_LOG'], 'a') as f:\n"
        "        f.write(os.environ['PYTEST_XDIST_WORKER'] + '\\n')\n")
    (tmp_path / "test_loose.py").write_text("def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    log = tmp_path / "workers.txt"
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist",
                          "loadgroup", "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
                         cwd=tmp_path, env={**os.environ, "GROUP_LOG": str(log)}, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    workers = log.read_text().split()
    assert len(workers) == 6 and len(set(workers)) == 1, workers


def test_xdist_workers_share_one_session_folder_and_compute_on_their_share_of_the_cores(tmp_path, session_dir):
    """A pytest run with two workers under this conftest: both workers see one session folder (made by their
    controller, not this session's), each computes with half the cores, and the folder is gone when the run ends."""
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F401,F403\n")
    (tmp_path / "test_seen.py").write_text(
        "import os\n"
        "def test_seen():\n"
        "    with open(os.environ['SEEN_LOG'], 'a') as f:\n"
        "        f.write(' '.join([os.environ['PYTEST_XDIST_WORKER'], os.environ['ATLAS_CACHE_DIR'],\n"
        "                          os.environ['OMP_NUM_THREADS'], os.environ['ATLAS_TORCH_THREADS']]) + '\\n')\n")
    log = tmp_path / "seen.txt"
    env = {**os.environ, "SEEN_LOG": str(log), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "each",
                          "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
                         cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [line.split() for line in log.read_text().splitlines()]
    from tests.conftest import cores

    share = str(max(1, cores() // 2))
    assert sorted(r[0] for r in rows) == ["gw0", "gw1"]
    assert len({r[1] for r in rows}) == 1 and {(r[2], r[3]) for r in rows} == {(share, share)}
    inner = Path(rows[0][1]).parent
    assert inner != session_dir and inner.name.startswith("atlas-tests-") and not inner.exists()
