"""Reading other harnesses' per-sample logs into the atlas's records: one :class:`Doc` per document, one
:class:`ImportedRun` per (model, task) log.

- **lm-evaluation-harness** (``--log_samples``): ``samples_<task>_<date>.jsonl``, one JSON object per (document,
  filter) with ``doc_id``, ``doc``, ``target``, ``arguments``, ``resps``, ``filtered_resps``, ``filter``, the
  metric names (``metrics``) and one key per metric, ``doc_hash``, ``prompt_hash``, ``target_hash``; beside it,
  the ``results_<date>.json`` lm-eval writes with it (the model, ``model_args``, ``n-shot``, the task's config and
  generation settings, ``higher_is_better``, ``lm_eval_version``). Read by those documented fields, with
  :func:`atlaslib.jsonio.load_lines` (no lm-eval needed). A task with several filters gives metrics named
  ``<metric>,<filter>`` (lm-eval's own naming in its results).
- **Inspect** (``.eval`` logs): read by ``inspect_ai.log.read_eval_log`` (inspect-ai must be importable); samples
  with ``id``, ``epoch``, ``input``, ``target``, ``scores``. Epochs are reduced by a declared rule
  (:data:`EPOCH_RULES`: ``mean`` of the epochs' values per sample, or ``cluster``: each epoch is a unit and the
  sample id the cluster its resampling draws whole).

The content key a document pairs on (:attr:`Doc.key`): lm-eval's ``doc_hash`` (sha256 of
``json.dumps(doc, indent=2, ensure_ascii=False)``); for an Inspect sample whose ``metadata`` holds the document
(``metadata["doc"]``, as the atlas's exported Inspect tasks write it) the same hash, so the two harnesses' logs of
the same documents pair; else the sha256 of its input and target.

Every problem is one :class:`LogError` naming the file, the line or sample, and what was expected; nothing is
imported from a file with a problem.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import jsonio

#: lm-eval versions whose sample logs this reader knows (their ``lm_eval_version``: major.minor)
LM_EVAL_VERSIONS = ("0.4",)
#: Inspect log format versions (the log's ``version``) and inspect-ai releases (major.minor) this reader knows
INSPECT_LOG_VERSIONS = (2,)
INSPECT_VERSIONS = ("0.3",)
#: how an Inspect log's epochs become units: the mean over epochs per sample, or each epoch a unit clustered by sample
EPOCH_RULES = ("mean", "cluster")
#: the keys of an lm-eval sample that are not metrics
LM_EVAL_KEYS = ("doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics", "doc_hash",
                "prompt_hash", "target_hash")
_REQUIRED = ("doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "doc_hash", "prompt_hash")
_SAMPLES = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[0-9.\-]+)\.jsonl$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class LogError(ValueError):
    """A harness log cannot be imported (one line: the file, the line or sample, what was expected)."""


@dataclass
class Doc:
    """One document of one run: ``key`` (the content hash runs pair on), ``doc_id`` (the harness's id),
    ``prompt_hash``, ``metrics`` (name -> value), ``fields`` (the document, for clusters), ``epoch`` (Inspect
    under the ``cluster`` rule), ``options`` (option log-likelihoods of a multiple-choice task) and ``gold`` (the
    gold option's index), ``where`` (file and line or sample)."""
    key: str
    doc_id: str
    prompt_hash: str | None
    metrics: dict
    fields: dict = field(default_factory=dict)
    epoch: int | None = None
    options: list | None = None
    gold: int | None = None
    where: str = ""

    @property
    def unit(self) -> str:
        """The unit id: the content key, with the epoch when epochs are units."""
        return self.key if self.epoch is None else f"{self.key}#epoch{self.epoch}"


@dataclass
class ImportedRun:
    """One harness log of one model on one task."""
    label: str
    harness: str
    harness_version: str
    model: str
    task: str
    settings: dict
    files: list
    docs: list
    higher_is_better: dict = field(default_factory=dict)
    epochs: str | None = None

    def metric_names(self) -> list:
        return list(self.docs[0].metrics) if self.docs else []

    def summary(self) -> dict:
        return {"label": self.label, "harness": self.harness, "harness_version": self.harness_version,
                "model": self.model, "task": self.task, "settings": self.settings, "files": list(self.files),
                "n_documents": len({d.key for d in self.docs}), "epochs": self.epochs}


def doc_hash(doc) -> str:
    """lm-eval's ``doc_hash`` of a document: sha256 of ``json.dumps(doc, indent=2, ensure_ascii=False)``."""
    return hashlib.sha256(json.dumps(doc, indent=2, default=str, ensure_ascii=False).encode("utf-8")).hexdigest()


def _number(value, where: str, name: str) -> float:
    if isinstance(value, bool):
        return float(value)
    x = jsonio.as_float(value)
    if x is None:
        raise LogError(f"{where}: metric {name!r} is {jsonio.describe(value)}; expected a finite number")
    return x


# -- lm-eval -----------------------------------------------------------------------------------------------------

def lm_eval_files(path) -> list[Path]:
    """The ``samples_<task>_<date>.jsonl`` files of ``path`` (one such file, or a folder searched recursively)."""
    p = Path(path)
    if p.is_dir():
        found = sorted(f for f in p.rglob("samples_*.jsonl") if f.is_file())
        if not found:
            raise LogError(f"{p}: no samples_<task>_<date>.jsonl file in this folder; expected lm-eval's "
                           "--log_samples output (run lm_eval with --output_path and --log_samples)")
        return found
    if not p.exists():
        raise LogError(f"{p}: no such file or folder; expected an lm-eval samples_<task>_<date>.jsonl file or "
                       "its output folder")
    return [p]


def _results_of(samples: Path) -> tuple[Path, dict]:
    m = _SAMPLES.match(samples.name)
    if not m:
        raise LogError(f"{samples}: not named samples_<task>_<date>.jsonl; expected a file lm-eval's --log_samples "
                       "wrote (its name gives the task and the run's date)")
    results = samples.with_name(f"results_{m['date']}.json")
    if not results.is_file():
        raise LogError(f"{samples}: no {results.name} beside it; lm-eval writes the run's results file (model, "
                       "settings, version) with its samples: keep the two together")
    data = jsonio.load(results, what="an lm-eval results file", error=LogError)
    if not isinstance(data, dict) or not isinstance(data.get("config"), dict):
        raise LogError(f"{results}: not an lm-eval results file; expected an object with 'config', 'configs', "
                       "'n-shot' and 'lm_eval_version'")
    version = str(data.get("lm_eval_version") or "")
    if ".".join(version.split(".")[:2]) not in LM_EVAL_VERSIONS:
        raise LogError(f"{results}: written by lm-eval {version or '(no lm_eval_version)'}; this atlas reads logs of "
                       f"lm-eval {', '.join(v + '.x' for v in LM_EVAL_VERSIONS)}")
    return results, data


def _loglik(resp, where: str):
    """The log-likelihood of one multiple-choice request's response (lm-eval logs ``[["-1.2", "False"]]``)."""
    r = resp
    while isinstance(r, list) and r and isinstance(r[0], list):
        r = r[0]
    if isinstance(r, list) and r:
        r = r[0]
    try:
        x = float(r)
    except (TypeError, ValueError):
        raise LogError(f"{where}: resps holds {jsonio.describe(r)} where a log-likelihood was expected") from None
    if not math.isfinite(x):
        raise LogError(f"{where}: resps holds a log-likelihood that is not finite ({r!r})")
    return x


def read_lm_eval(path, *, label: str | None = None) -> list[ImportedRun]:
    """The runs of ``path`` (a samples file or an lm-eval output folder): one :class:`ImportedRun` per samples
    file. Refused (:class:`LogError`): a line that is not a sample, a document given twice (same ``doc_id`` and
    filter) or missing (fewer documents than the results file counts, or a gap in the ids), a metric missing in
    some samples or not a number, a results file of an unknown lm-eval version."""
    runs = []
    for f in lm_eval_files(path):
        results_path, results = _results_of(f)
        task = _SAMPLES.match(f.name)["task"]
        config = results.get("config") or {}
        task_config = (results.get("configs") or {}).get(task) or {}
        rows = jsonio.load_lines(f, what="an lm-eval samples file", error=LogError,
                                 expected="one lm-eval sample (an object with doc_id, doc, doc_hash, prompt_hash, ...)")
        if not rows:
            raise LogError(f"{f}: no sample in this file; expected one lm-eval sample per line")
        by_doc: dict = {}
        filters: list = []
        corpus: set = set()   # metrics lm-eval aggregates over the corpus (per-sample parts, not values)
        metric_names = None
        for n, s in rows:
            where = f"{f}, row {n}"
            if not isinstance(s, dict) or [k for k in _REQUIRED if k not in s]:
                missing = [k for k in _REQUIRED if k not in s] if isinstance(s, dict) else list(_REQUIRED)
                raise LogError(f"{where}: not an lm-eval sample ({jsonio.describe(s) if not isinstance(s, dict) else 'missing ' + ', '.join(missing)}); "
                               f"expected an object with {', '.join(_REQUIRED)}")
            doc_id = s["doc_id"]
            if isinstance(doc_id, bool) or not isinstance(doc_id, int) or doc_id < 0:
                raise LogError(f"{where}: doc_id is {jsonio.describe(doc_id)}; expected a whole number >= 0")
            for k in ("doc_hash", "prompt_hash"):
                if not isinstance(s[k], str) or not _HEX64.match(s[k]):
                    raise LogError(f"{where}: {k} is {jsonio.describe(s[k])}; expected a sha256 hex digest")
            if not isinstance(s["doc"], dict):
                raise LogError(f"{where}: doc is {jsonio.describe(s['doc'])}; expected the document (an object)")
            filt = str(s.get("filter") or "none")
            if filt not in filters:
                filters.append(filt)
            names = s.get("metrics")
            if names is None:
                names = [k for k in s if k not in LM_EVAL_KEYS]
            if not isinstance(names, list) or not all(isinstance(x, str) for x in names) or not names:
                raise LogError(f"{where}: metrics is {jsonio.describe(names)}; expected the list of the sample's "
                               "metric names")
            absent = [x for x in names if x not in s]
            if absent:
                raise LogError(f"{where}: metric {absent[0]!r} is named in 'metrics' but has no value")
            if metric_names is None:
                metric_names = list(names)
            elif sorted(names) != sorted(metric_names):
                gone = sorted(set(metric_names) - set(names)) or sorted(set(names) - set(metric_names))
                raise LogError(f"{where}: metric(s) {', '.join(gone)} "
                               f"{'missing here' if set(gone) <= set(metric_names) else 'only here'}; every sample "
                               f"of a log must have the same metrics ({', '.join(metric_names)})")
            entry = by_doc.setdefault(doc_id, {"filters": {}, "row": s, "where": where})
            if filt in entry["filters"]:
                raise LogError(f"{where}: doc_id {doc_id} (filter {filt}) also at row {entry['filters'][filt][0]}; "
                               "expected each document once per filter")
            if s["doc_hash"] != entry["row"]["doc_hash"]:
                raise LogError(f"{where}: doc_id {doc_id} has another doc_hash than at {entry['where']}")
            values = {}
            for x in names:
                if isinstance(s[x], (list, dict)):  # a corpus-level metric (bleu, f1): its per-sample parts
                    corpus.add(x)
                elif x not in corpus:
                    values[x] = _number(s[x], where, x)
            entry["filters"][filt] = (n, values)
        ids = sorted(by_doc)
        expected = ((results.get("n-samples") or {}).get(task) or {}).get("effective")
        if isinstance(expected, int) and not isinstance(expected, bool) and expected != len(ids):
            raise LogError(f"{f}: {len(ids)} document(s) logged; {results_path.name} counts {expected} for task {task}")
        if not isinstance(expected, int) and ids != list(range(len(ids))):
            gap = next(i for i in range(len(ids) + 1) if i not in by_doc)
            raise LogError(f"{f}: doc_id {gap} is missing (ids run 0..{ids[-1]}); expected every document of the task")
        docs = []
        multiple_choice = task_config.get("output_type") == "multiple_choice"
        for doc_id in ids:
            e = by_doc[doc_id]
            missing = [x for x in filters if x not in e["filters"]]
            if missing:
                raise LogError(f"{e['where']}: doc_id {doc_id} has no sample for filter {missing[0]}; expected one "
                               f"per filter ({', '.join(filters)})")
            metrics = {}
            for filt in filters:
                for name, v in e["filters"][filt][1].items():
                    if name in corpus:
                        continue
                    metrics[name if len(filters) == 1 else f"{name},{filt}"] = v
            s = e["row"]
            options = gold = None
            if multiple_choice and isinstance(s["resps"], list) and s["resps"]:
                options = [_loglik(r, e["where"]) for r in s["resps"]]
                gold = _gold(s["target"], s["arguments"], len(options))
            docs.append(Doc(s["doc_hash"], str(doc_id), s["prompt_hash"], metrics, dict(s["doc"]),
                            options=options, gold=gold, where=e["where"]))
        if not docs[0].metrics:
            raise LogError(f"{f}: every metric ({', '.join(sorted(corpus))}) is aggregated over the corpus; the atlas "
                           "compares per-sample metrics (accuracy, exact match, a per-sample score)")
        model_args = config.get("model_args")
        pretrained = None
        if isinstance(model_args, dict):
            pretrained = model_args.get("pretrained")
        elif isinstance(model_args, str):
            pretrained = dict(kv.split("=", 1) for kv in model_args.split(",") if "=" in kv).get("pretrained")
        model = str(results.get("model_name") or pretrained or config.get("model") or "model")
        settings = {"model": config.get("model"), "model_args": model_args,
                    "num_fewshot": (results.get("n-shot") or {}).get(task, task_config.get("num_fewshot")),
                    "generation_kwargs": task_config.get("generation_kwargs"), "gen_kwargs": config.get("gen_kwargs"),
                    "output_type": task_config.get("output_type"), "batch_size": config.get("batch_size"),
                    "device": config.get("device"), "limit": config.get("limit"),
                    "task_version": (results.get("versions") or {}).get(task), "filters": filters,
                    "corpus_metrics_left_out": sorted(corpus)}
        hib = {}
        for name, v in ((results.get("higher_is_better") or {}).get(task) or {}).items():
            if isinstance(v, bool):
                for filt in filters:
                    hib[name if len(filters) == 1 else f"{name},{filt}"] = v
        runs.append(ImportedRun(label or model, "lm-eval", str(results.get("lm_eval_version")), model, task,
                                settings, [str(f), str(results_path)], docs, hib))
    return runs


def _gold(target, arguments, n_options: int):
    """The gold option's index of a multiple-choice sample: the target when it is an index, else the option whose
    continuation is the target's text; None when neither."""
    t = str(target).strip()
    if re.fullmatch(r"\d+", t) and int(t) < n_options:
        return int(t)
    conts = []
    if isinstance(arguments, dict):
        conts = [str((a or {}).get("arg_1", "")).strip() for a in arguments.values() if isinstance(a, dict)]
    elif isinstance(arguments, list):
        conts = [str(a[1]).strip() if isinstance(a, list) and len(a) > 1 else "" for a in arguments]
    return conts.index(t) if t in conts else None


# -- Inspect -----------------------------------------------------------------------------------------------------

def _score_value(value, where: str, name: str) -> float:
    """An Inspect score's value as a number: numbers and booleans as they are, Inspect's ``C``/``I`` (correct,
    incorrect) as 1/0, ``P`` (partial) as 0.5."""
    if isinstance(value, str) and value in ("C", "I", "P", "N"):
        return {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}[value]
    return _number(value, where, name)


def harness_env() -> Path:
    """Where inspect-ai and lm-eval are installed beside the book's environment (requirements-harness.txt):
    ``$ATLAS_HARNESS_ENV``, else ``.venv/harness`` of the checkout."""
    import os

    return Path(os.environ.get("ATLAS_HARNESS_ENV") or Path(__file__).resolve().parents[2] / ".venv" / "harness")


def _inspect_reader(p: Path):
    """``inspect_ai.log.read_eval_log``: from the environment, else from :func:`harness_env` put *after* the book's
    packages on ``sys.path`` (so that it adds inspect-ai and what only it needs, and changes no package the book
    has)."""
    import sys

    try:
        from inspect_ai.log import read_eval_log
        return read_eval_log
    except ImportError:
        pass
    env = harness_env()
    if (env / "inspect_ai").is_dir() and str(env) not in sys.path:
        sys.path.append(str(env))
        try:
            from inspect_ai.log import read_eval_log
            return read_eval_log
        except ImportError:
            pass
    raise LogError(f"{p}: reading Inspect logs needs inspect-ai 0.3.x: install requirements-harness.txt into "
                   f"{env} (see README) or pip install inspect-ai==0.3.285")


def read_inspect(path, *, label: str | None = None, epochs: str = "mean") -> list[ImportedRun]:
    """The run of an Inspect ``.eval`` (or ``.json``) log, read by ``inspect_ai.log.read_eval_log``. Refused
    (:class:`LogError`): a file Inspect cannot read (a truncated archive), a log that did not finish, an unknown
    log format or inspect-ai version, a sample id given twice in one epoch, a score missing in some samples."""
    if epochs not in EPOCH_RULES:
        raise LogError(f"--epochs {epochs!r}: expected one of {', '.join(EPOCH_RULES)}")
    p = Path(path)
    files = sorted(f for f in p.rglob("*.eval") if f.is_file()) if p.is_dir() else [p]
    if not files:
        raise LogError(f"{p}: no .eval log in this folder; expected Inspect logs (inspect eval --log-dir)")
    read_eval_log = _inspect_reader(p)
    runs = []
    for f in files:
        if not f.is_file():
            raise LogError(f"{f}: no such file; expected an Inspect .eval log")
        try:
            log = read_eval_log(str(f))
        except Exception as exc:  # a truncated zip, a bad header: Inspect's own words, one line
            first = " ".join(str(exc).split())[:200]
            raise LogError(f"{f}: Inspect cannot read this log ({type(exc).__name__}: {first}); expected a complete "
                           ".eval archive") from None
        if getattr(log, "version", None) not in INSPECT_LOG_VERSIONS:
            raise LogError(f"{f}: Inspect log format version {getattr(log, 'version', None)!r}; this atlas reads "
                           f"version {', '.join(map(str, INSPECT_LOG_VERSIONS))}")
        packages = dict(getattr(log.eval, "packages", None) or {})
        version = str(packages.get("inspect_ai") or "")
        if ".".join(version.split(".")[:2]) not in INSPECT_VERSIONS:
            raise LogError(f"{f}: written by inspect-ai {version or '(unknown)'}; this atlas reads logs of inspect-ai "
                           f"{', '.join(v + '.x' for v in INSPECT_VERSIONS)}")
        if log.status != "success":
            raise LogError(f"{f}: the evaluation's status is {log.status!r}; expected a finished log ('success')")
        samples = log.samples or []
        if not samples:
            raise LogError(f"{f}: the log holds no samples; expected one per sample and epoch")
        seen, names = {}, None
        per_id: dict = {}
        for s in samples:
            where = f"{f}, sample {s.id} epoch {s.epoch}"
            if (s.id, s.epoch) in seen:
                raise LogError(f"{where}: given twice; expected each sample once per epoch")
            seen[(s.id, s.epoch)] = True
            values = {}
            for scorer, score in (s.scores or {}).items():
                v = score.value
                if isinstance(v, dict):
                    for k, x in v.items():
                        values[f"{scorer}.{k}"] = _score_value(x, where, f"{scorer}.{k}")
                else:
                    values[scorer] = _score_value(v, where, scorer)
            if names is None:
                names = list(values)
            elif sorted(values) != sorted(names):
                gone = sorted(set(names) ^ set(values))
                raise LogError(f"{where}: score(s) {', '.join(gone)} missing in some samples; every sample must have "
                               f"the same scores ({', '.join(names)})")
            if not values:
                raise LogError(f"{where}: no score; expected a scored sample (run inspect eval with a scorer)")
            meta = dict(s.metadata or {})
            doc = meta.get("doc")
            text = s.input if isinstance(s.input, str) else json.dumps([m.model_dump(mode="json") if hasattr(
                m, "model_dump") else str(m) for m in s.input], sort_keys=True)
            key = doc_hash(doc) if isinstance(doc, dict) else hashlib.sha256(
                json.dumps({"input": text, "target": s.target}, sort_keys=True).encode()).hexdigest()
            prompt = hashlib.sha256(text.encode("utf-8")).hexdigest()
            per_id.setdefault(str(s.id), []).append(
                Doc(key, str(s.id), prompt, values, dict(doc) if isinstance(doc, dict) else dict(meta),
                    epoch=int(s.epoch), where=where))
        docs = []
        counts = {len(v) for v in per_id.values()}
        if len(counts) > 1:
            short = min(per_id, key=lambda k: len(per_id[k]))
            raise LogError(f"{f}, sample {short}: {len(per_id[short])} epoch(s); other samples have {max(counts)}: "
                           "expected every sample in every epoch")
        for sid, group in per_id.items():
            if epochs == "mean" or len(group) == 1:
                first = group[0]
                docs.append(Doc(first.key, sid, first.prompt_hash,
                                {k: sum(d.metrics[k] for d in group) / len(group) for k in names}, first.fields,
                                where=first.where))
            else:
                docs.extend(group)
        spec = log.eval
        gen = log.plan.config.model_dump(exclude_none=True) if getattr(log, "plan", None) else {}
        model = str(spec.model)
        settings = {"model": model, "model_args": dict(spec.model_args or {}), "task_args": dict(spec.task_args or {}),
                    "generation": gen, "epochs": max(counts), "epochs_rule": epochs}
        runs.append(ImportedRun(label or model, "inspect", version, model, str(spec.task), settings, [str(f)], docs,
                                {}, epochs if max(counts) > 1 else None))
    return runs
