"""lm-eval ``--log_samples`` output written the way lm-eval 0.4.13 writes it (``EvaluationTracker``: the
``results_<date>.json`` and ``samples_<task>_<date>.jsonl`` of one model in one folder; ``resps`` and
``filtered_resps`` sanitised to text, ``arguments`` as ``gen_args_i``/``arg_j``, ``target`` as text, the hashes
sha256 of the document's ``json.dumps(indent=2, ensure_ascii=False)``, of the prompt and of the target)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

DATE = "2026-12-05T08-00-00.000000"
OPTIONS = (" no", " yes")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sample(doc_id: int, doc: dict, logliks, gold: int, prompt: str | None = None, extra: dict | None = None) -> dict:
    """One multiple-choice sample as lm-eval logs it; ``acc`` is whether the top option is the gold one."""
    prompt = prompt if prompt is not None else f"Sentence: {doc['text']}\nAnswer:"
    acc = float(max(range(len(logliks)), key=lambda k: logliks[k]) == gold)
    s = {"doc_id": doc_id, "doc": doc, "target": str(gold),
         "arguments": {f"gen_args_{i}": {"arg_0": prompt, "arg_1": o} for i, o in enumerate(OPTIONS)},
         "resps": [[[str(x), "False"]] for x in logliks], "filtered_resps": [[str(x), "False"] for x in logliks],
         "filter": "none", "metrics": ["acc", "loglik_gold"],
         "doc_hash": sha(json.dumps(doc, indent=2, ensure_ascii=False)), "prompt_hash": sha(prompt),
         "target_hash": sha(str(gold)), "acc": acc, "loglik_gold": logliks[gold]}
    s.update(extra or {})
    return s


def write_run(folder: Path, model: str, samples: list, task: str = "negex_toy", version: str = "0.4.13",
              effective: int | None = None) -> Path:
    """``folder/<model>/`` with the results file and the samples file; returns the model's folder."""
    out = Path(folder) / model.replace("/", "__")
    out.mkdir(parents=True, exist_ok=True)
    n = len({s["doc_id"] for s in samples if isinstance(s, dict) and "doc_id" in s})
    results = {"results": {task: {"alias": task}}, "configs": {task: {"task": task, "output_type": "multiple_choice",
                                                                      "num_fewshot": 0}},
               "versions": {task: 1.0}, "n-shot": {task: 0}, "higher_is_better": {task: {"acc": True,
                                                                                          "loglik_gold": True}},
               "n-samples": {task: {"original": n, "effective": effective if effective is not None else n}},
               "config": {"model": "hf", "model_args": f"pretrained={model}", "batch_size": 1, "device": "cpu",
                          "limit": None, "gen_kwargs": None},
               "model_name": model, "lm_eval_version": version}
    (out / f"results_{DATE}.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    (out / f"samples_{task}_{DATE}.jsonl").write_text(
        "".join((s if isinstance(s, str) else json.dumps(s)) + "\n" for s in samples), encoding="utf-8")
    return out


def docs(n: int, clusters: int = 5) -> list:
    return [{"text": f"no fever in case {i}", "patient_id": f"p{i % clusters}"} for i in range(n)]
