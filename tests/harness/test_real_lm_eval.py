"""The NegEx card exported as an lm-eval task and run by the real lm-evaluation-harness (0.4.13, from
``.venv/harness``: requirements-harness.txt) on a tiny random-weight GPT-2: every item's option log-likelihoods in
lm-eval's ``resps`` equal the atlas's ``score.options`` within 1e-4, its accuracy equals the atlas's exactly, and
``atlas import`` of that log gives the same accuracy; the card's own scorer gives the imported log the cell metrics of
the atlas's own zero-shot records."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from atlaslib.cli import main
from atlaslib.harness.export import documents, export, option_card, prompt_of
from atlaslib.harness.logs import doc_hash, read_lm_eval
from tests.tiny_models import tiny_causal_lm

REPO = Path(__file__).resolve().parents[2]
HARNESS_ENV = REPO / ".venv" / "harness"
LIMIT = 40

needs_lm_eval = pytest.mark.skipif(not (HARNESS_ENV / "lm_eval").is_dir(),
                                   reason="lm-eval is not installed in .venv/harness (see requirements-harness.txt)")


def harness_env() -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HARNESS_ENV), str(REPO)]), HF_DATASETS_OFFLINE="1",
               HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return env


def card_records(run, card: str, version: str, data_dir=None) -> list[dict]:
    """The card's prediction records of an imported run of its exported task (``atlas export-task``): per
    document, the gold label, the prediction by the ``score.options`` rule (positive when the first option's
    log-likelihood is the larger, ties to the other) and the score (softmax of the options, the first's share),
    so that the card's scorer gives the run's metrics."""
    from atlaslib.cards import record
    from atlaslib.protocols.items import softmax_first

    module = option_card(card)
    docs, _ = documents(card, version, data_dir)
    by_id = {d["item_id"]: d for d in docs}
    positive = module.POSITIVE
    negative = next(x for x in module.LABELS if x != positive)
    out = []
    for d in run.docs:
        doc = by_id.get(d.fields.get("item_id"))
        assert doc is not None and d.options is not None and len(d.options) == 2, d.where
        ll = np.asarray([d.options], dtype=float)
        pred = positive if ll[0, 0] > ll[0, 1] else negative
        out.append(record(doc["item_id"], positive if doc["gold"] == 0 else negative, pred,
                          float(softmax_first(ll)[0])))
    return out


def test_export_writes_the_cards_prompt_options_and_gold(tmp_path, data_dir):
    out = export("lm-eval", "negex", "atlas-n100-v1", tmp_path, data_dir=data_dir)
    from atlaslib.cards import negex

    docs, spec = documents("negex", "atlas-n100-v1", data_dir)
    assert out["n_items"] == 100 and spec["options"] == list(negex.OPTIONS)
    text = Path(out["files"][1]).read_text()
    assert "output_type: multiple_choice" in text and 'doc_to_choice: [" yes", " no"]' in text
    items = negex.load_items(data_dir).set_index("item_id")
    for d in docs[:10]:
        row = items.loc[d["item_id"]]
        assert prompt_of(d, spec) == negex.option_prompts(items.loc[[d["item_id"]]])[0]
        assert d["gold"] == (0 if row["label"] == 1 else 1)


@needs_lm_eval
def test_real_lm_eval_on_the_exported_task_equals_the_atlas_item_by_item(tmp_path, data_dir, capsys):
    from atlaslib.models import load_adapter

    model = tiny_causal_lm(tmp_path, max_positions=1024)
    task = export("lm-eval", "negex", "atlas-n100-v1", tmp_path / "task", data_dir=data_dir)
    proc = subprocess.run(
        [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={model},dtype=float32",
         "--device", "cpu", "--include_path", str(tmp_path / "task"), "--tasks", task["task"], "--batch_size", "1",
         "--limit", str(LIMIT), "--output_path", str(tmp_path / "out"), "--log_samples"],
        cwd=tmp_path, env=harness_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = read_lm_eval(tmp_path / "out")
    assert len(run.docs) == LIMIT
    docs, spec = documents("negex", "atlas-n100-v1", data_dir)
    by_id = {d["item_id"]: d for d in docs}
    logged = [by_id[d.fields["item_id"]] for d in run.docs]
    # lm-eval's doc_hash and prompt_hash are the ones an exported Inspect task's log gets: the two harnesses pair
    assert [d.key for d in run.docs] == [doc_hash(d) for d in logged]
    assert [d.prompt_hash for d in run.docs] == [hashlib.sha256(prompt_of(d, spec).encode()).hexdigest() for d in logged]
    adapter = load_adapter(str(model), "score.options", progress=False)
    ours = adapter.score_options([prompt_of(d, spec) for d in logged], spec["options"])["loglik"]
    theirs = np.array([d.options for d in run.docs])
    assert np.abs(theirs - ours).max() < 1e-4
    right = (np.where(ours[:, 0] > ours[:, 1], 0, 1) == np.array([d["gold"] for d in logged]))
    assert [d.metrics["acc"] for d in run.docs] == right.astype(float).tolist()
    # the card's own scorer on the imported log's records = on the atlas's own zero-shot records of the same items
    from atlaslib.cards import negex, record
    from atlaslib.protocols.items import zero_shot_options

    items = negex.load_items(data_dir).set_index("item_id")
    frame = items.loc[[d["item_id"] for d in logged]].reset_index()
    own = zero_shot_options(adapter, negex.option_prompts(frame), negex.OPTIONS)
    labels = negex.LABELS
    atlas_records = [record(i, labels[int(g)], labels[int(p)], float(s)) for i, g, p, s in
                     zip(frame["item_id"], frame["label"], own["pred"], own["score"])]
    from atlaslib.cards.run import CardRun

    scorer = CardRun("negex", "atlas-n100-v1", "m", "zero_shot", parameters={"n_resamples": 200})
    imported = scorer.score(card_records(run, "negex", "atlas-n100-v1", data_dir))
    theirs_cell = scorer.score(atlas_records)
    for k in ("macro_f1_zero_shot", "sensitivity_zero_shot", "specificity_zero_shot", "precision_zero_shot"):
        assert imported[k] == theirs_cell[k]
    assert imported["roc_auc_zero_shot"]["value"] == pytest.approx(theirs_cell["roc_auc_zero_shot"]["value"], abs=1e-6)
    code = main(["import", "lm-eval", str(tmp_path / "out"), "-o", str(tmp_path / "rep"), "--resamples", "200"])
    capsys.readouterr()
    assert code == 0
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert rep["leaderboard"][0]["value"] == right.mean()
    assert rep["runs"][0]["harness_version"] == "0.4.13"
