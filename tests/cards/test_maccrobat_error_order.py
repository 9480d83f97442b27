"""The error table's order and its "overlaps" column do not depend on Python's string hashing: a predicted
mention overlapping several gold mentions lists them by position, the same in every process (they came from a
set, so each kernel, with its own hash seed, could publish another order)."""
import json
import os
import subprocess
import sys

from tests.conftest import REPO

SCRIPT = r"""
import json, pandas as pd
from atlaslib.cards.maccrobat.errors import error_table
from atlaslib.cards.maccrobat.runs import Outcome
words = ["severe", "chest", "pain", "and", "fever", "noted", "today"]
gold = ["B-Sign_symptom", "B-Biological_structure", "B-Sign_symptom", "O", "B-Sign_symptom", "B-Diagnostic_procedure",
        "B-Date"]
pred = ["B-Sign_symptom", "I-Sign_symptom", "I-Sign_symptom", "I-Sign_symptom", "I-Sign_symptom", "I-Sign_symptom",
        "I-Sign_symptom"]
out = Outcome(model="m", protocol="probe", version="v", status="ok", item_ids=["s1"], documents=["d1"], gold=[gold],
              pred=[pred])
t = error_table(out, pd.DataFrame({"item_id": ["s1"], "words": [words]}), limit=100)
print(json.dumps(t.astype(str).values.tolist()))
"""


def _table(seed: str):
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
    return json.loads(subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=REPO, capture_output=True,
                                     text=True, check=True).stdout)


def test_error_table_is_the_same_under_any_hash_seed_and_lists_overlaps_by_position():
    tables = [_table(s) for s in ("0", "1", "2", "3")]
    assert all(t == tables[0] for t in tables)
    predicted = [r for r in tables[0] if r[1] == "predicted"][0]
    assert predicted[5] == ("Sign_symptom: severe; Biological_structure: chest; Sign_symptom: pain; "
                            "Sign_symptom: fever; Diagnostic_procedure: noted; Date: today")
    gold_side = [r[3] for r in tables[0] if r[1] == "gold"]
    assert gold_side == ["severe", "chest", "pain", "fever", "noted", "today"]
