"""The suite is sealed from the machine (tests/conftest.py): what every test, kernel and subprocess sees."""
from __future__ import annotations

import os
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
