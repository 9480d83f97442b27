"""Follows book/guide/own_model.md step by step with a tiny local model: the page must stay true."""
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from atlaslib.models import load_profiles
from tests.tiny_models import tiny_encoder

GUIDE = Path(__file__).resolve().parent.parent / "book" / "guide" / "own_model.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", GUIDE.read_text(), flags=re.S)


def _atlas(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "atlaslib.cli", *args], capture_output=True, text=True)


def test_the_guide_works_with_a_local_model(tmp_path, data_dir):
    model_dir = tiny_encoder(tmp_path, name="my-encoder")
    # Step 1: the page's command, with the folder of our model and private output folders.
    cmd = _blocks("bash")[0].split()
    assert cmd[:2] == [".venv/bin/atlas", "run"]
    args = [str(model_dir) if a == "/path/to/my-encoder" else a for a in cmd[1:]]
    out_dirs = ["--results-dir", str(tmp_path / "results"), "--runs-dir", str(tmp_path / "runs"),
                "--data-dir", str(data_dir)]
    proc = _atlas(*args, *out_dirs)
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = json.loads(proc.stdout)
    # the paths the page promises
    assert printed["notebook"].endswith("negex/atlas-n100-v1/local-my-encoder/probe.ipynb")
    assert printed["result_cell"].endswith("negex/atlas-n100-v1/local-my-encoder/probe.json")
    cell = json.loads(Path(printed["result_cell"]).read_text())
    assert cell["status"] == "ok" and len(cell["predictions"]) == 100
    assert cell["spec"]["profile"]["revision"]  # a sha256 of the folder
    assert all(cell["metrics"][f"{m}_probe"]["ci_low"] is not None
               for m in ("macro_f1", "sensitivity", "specificity", "precision", "roc_auc"))
    # again: served from the run cache
    again = json.loads(_atlas(*args, *out_dirs).stdout)
    assert again["status"] == "cached"
    # a protocol the model cannot serve gives a cell that says so
    proc = _atlas("run", "--card", "negex", "--model", str(model_dir), "--protocol", "zero_shot", "--version",
                  "atlas-n100-v1", *out_dirs)
    assert proc.returncode == 0, proc.stderr[-2000:]
    missing = json.loads(Path(json.loads(proc.stdout)["result_cell"]).read_text())
    assert missing["status"] == "not_run" and "capability missing" in missing["reason"]
    # Step 3: the book shows it (leaderboard and a model page).
    proc = _atlas("book", "--no-run", "--card", "negex", "--results-dir", str(tmp_path / "results"),
                  "--runs-dir", str(tmp_path / "runs"), "--build-dir", str(tmp_path / "_build"))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    html = tmp_path / "_build/site/_build/html/book"
    assert str(model_dir) in (html / "cards/negex.html").read_text()
    assert (html / f"models/local-my-encoder.html").is_file()


def test_the_guide_profile_snippet_is_a_valid_profile(tmp_path):
    # Step 2: the YAML on the page passes the registry's validation as written.
    snippet = _blocks("yaml")[0]
    path = tmp_path / "profiles.yml"
    path.write_text(snippet)
    profiles = load_profiles(path)
    assert set(profiles) == {"my-encoder"}
    assert profiles["my-encoder"].capabilities == ["embed.text.pooled", "embed.text.tokens"]
    assert yaml.safe_load(snippet)["my-encoder"]["trained_on"] == []
