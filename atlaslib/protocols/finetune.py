"""Fine-tune protocol: a fresh head on an encoder, trained on a split's train items, on a CPU.

What is trained
    The encoder of a model with ``embed.text.pooled`` (item-level cards) or ``embed.text.tokens``
    (token-level cards), loaded through the same adapter as the probe (same weights, tokenizer and
    padding), with a new linear head:

    - :class:`.finetune_training.SequenceHead` (item-level): attention-masked mean of the last layer (the
      pooling of the ``embed.text.pooled`` adapter) → dropout → linear over the card's labels;
    - :class:`.finetune_training.TokenHead` (token-level): last layer → dropout → linear over the card's IOB2
      tags. Each word is labelled on its *first* sub-word; the other sub-words and the special tokens carry the
      ignore index (-100). A sentence longer than ``max_length`` sub-words is cut into consecutive
      chunks of whole words (the adapter's rule), each a training example of its own. A test word takes
      the arg-max tag of its first sub-word, and each sentence is then repaired conlleval-style (an
      ``I-X`` after ``O`` or another type starts a mention), exactly as the probe's tags are.

    Encoder and head are trained together on the train items only, for a fixed number of epochs (no
    validation split, no early stopping: test items are never looked at before prediction), with the
    card's recipe (a dict of data in the card module, checked by :func:`check_recipe` and recorded in the
    result cell): AdamW (weight decay on every weight except biases and LayerNorm), linear warm-up
    then linear decay to zero, cross-entropy (mean over items, or over labelled words), gradient
    norm clipped, dynamic padding per batch (batches of similar length:
    :func:`.finetune_training.epoch_batches`).

Seeds
    The recipe declares a list of training ``seeds``; each seed is one trained model, started from the
    pretrained encoder (a fresh copy per seed) with the recipe's other settings, cached under its own content
    key (:func:`seed_recipe`: the key holds that seed, not the list, so adding a seed trains only the new
    one). The inputs are tokenised once for all seeds. The protocol returns the first seed's predictions at
    the top and every seed's in ``seed_runs``; the card turns them into the row (the mean over seeds, with
    :mod:`atlaslib.metrics.seeds`).

Speed
    AdamW runs fused (one kernel per step instead of a Python loop over ~100 tensors: the step of a 22 M
    parameter encoder drops from 0.45 s to 0.09 s on this CPU); the recipe's ``torch_threads`` is 1, because
    ``atlas book`` runs two Dask workers on two cores (two threads each oversubscribe them); batches are
    padded to their longest input, prediction runs under ``torch.inference_mode``.

Determinism
    Training and prediction run under :func:`.finetune_training.deterministic`:
    ``torch.use_deterministic_algorithms(True)`` and the recipe's torch thread count (both restored
    afterwards). The head's initial weights come from
    a ``torch.Generator`` seeded with the model's seed; the order of the train items and of the batches in
    each epoch from ``numpy.random.default_rng(seed)``; dropout from ``torch.manual_seed(seed)`` set just before the
    first step. The same seed gives the same weights and predictions bit for bit on the same machine
    (tested on tiny encoders).

Weight cache
    Each trained model's weights are stored under a content key of everything that decides them and loaded
    instead of trained when nothing changed (:mod:`.finetune_cache`). ``retrain=True`` (the notebooks'
    ``retrain`` parameter, or ``ATLAS_FINETUNE_RETRAIN=1``) trains even when the weights are cached and
    replaces them.

Progress
    One bar over the epochs and one over the steps of each epoch, through
    :func:`atlaslib.progress.progress_bar` (plain ASCII lines at most every 30 s in papermill logs,
    ``ATLAS_PROGRESS=off`` silences them).

Modules
    This module is the protocol: recipe checks, one trained model per seed, prediction. The trained model
    (heads, input encoding, batching, the training loop: what :func:`.finetune_cache.code_sha256` hashes)
    is :mod:`.finetune_training`, the weight cache :mod:`.finetune_cache`, the run page's fine-tuning
    section :mod:`atlaslib.pages.finetune`.
"""
from __future__ import annotations

import os
import time
from typing import Mapping, Sequence

import numpy as np
import torch

from ..metrics.spans import repair_iob2, validate_tags
from .finetune_cache import _train_or_load, key_fields, versions
from .finetune_training import (FinetuneError, SequenceHead, TokenHead, _collate, _encode_texts, _Head,
                                _word_examples, deterministic, train_loop)
from .recipe import RECIPE_KEYS  # every recipe names these (values checked by check_recipe); torch-free

RETRAIN_ENV = "ATLAS_FINETUNE_RETRAIN"
_ON = ("1", "true", "yes", "on")


def check_recipe(recipe: Mapping) -> dict:
    """The recipe as a plain dict after checking it names every key of :data:`RECIPE_KEYS` and no other,
    with positive integers / non-negative numbers where expected; FinetuneError names the key."""
    if not isinstance(recipe, Mapping):
        raise FinetuneError(f"finetune recipe: expected a mapping of settings, got {type(recipe).__name__}")
    r = dict(recipe)
    missing, unknown = sorted(set(RECIPE_KEYS) - set(r)), sorted(set(r) - set(RECIPE_KEYS))
    if missing or unknown:
        raise FinetuneError(f"finetune recipe: missing key(s) {missing}, unknown key(s) {unknown}; "
                            f"expected exactly {sorted(RECIPE_KEYS)}")
    if r["optimizer"] != "torch.optim.AdamW":
        raise FinetuneError(f"finetune recipe key 'optimizer': only 'torch.optim.AdamW' is implemented, "
                            f"got {r['optimizer']!r}")
    for k in ("epochs", "batch_size", "max_length", "torch_threads", "eval_batch_size", "length_grouping"):
        if not isinstance(r[k], int) or isinstance(r[k], bool) or r[k] < 1:
            raise FinetuneError(f"finetune recipe key {k!r}: expected a positive integer, got {r[k]!r}")
    seeds = r["seeds"]
    if (not isinstance(seeds, (list, tuple)) or not seeds
            or any(not isinstance(x, int) or isinstance(x, bool) or x < 0 for x in seeds)
            or len(set(seeds)) != len(seeds)):
        raise FinetuneError(f"finetune recipe key 'seeds': expected a non-empty list of distinct non-negative "
                            f"integers, got {seeds!r}")
    r["seeds"] = [int(x) for x in seeds]
    for k in ("learning_rate", "weight_decay", "adam_eps", "max_grad_norm", "head_dropout", "warmup_ratio"):
        if not isinstance(r[k], (int, float)) or isinstance(r[k], bool) or r[k] < 0:
            raise FinetuneError(f"finetune recipe key {k!r}: expected a non-negative number, got {r[k]!r}")
    if not 0 <= r["warmup_ratio"] < 1 or not 0 <= r["head_dropout"] < 1 or r["learning_rate"] <= 0:
        raise FinetuneError("finetune recipe: expected 0 <= warmup_ratio < 1, 0 <= head_dropout < 1 and "
                            f"learning_rate > 0, got {r['warmup_ratio']}, {r['head_dropout']}, {r['learning_rate']}")
    betas = r["adam_betas"]
    if not (isinstance(betas, (list, tuple)) and len(betas) == 2 and all(0 <= b < 1 for b in betas)):
        raise FinetuneError(f"finetune recipe key 'adam_betas': expected two numbers in [0, 1), got {betas!r}")
    r["adam_betas"] = [float(b) for b in betas]
    return r


def seed_recipe(recipe: Mapping, seed: int) -> dict:
    """The recipe of one trained model: the card's recipe with ``seeds`` replaced by this ``seed`` (what
    the training loop reads and what the weight cache's key holds, so adding a seed to the list never
    retrains the others)."""
    r = {k: v for k, v in dict(recipe).items() if k != "seeds"}
    r["seed"] = int(seed)
    return r


#: the environment variable a preparation task sets to train (and predict with) only some of a recipe's seeds:
#: each seed's weights and predictions go to the caches, where the whole run then finds them
#: (:func:`atlaslib.executor.prepare_part`); comma-separated seeds, each one of the recipe's
SEEDS_ENV = "ATLAS_FINETUNE_SEEDS"


def seeds_to_train(recipe: Mapping) -> list[int]:
    """The recipe's seeds, or only those :data:`SEEDS_ENV` names (in the recipe's order); a seed there that is not
    the recipe's is a :class:`FinetuneError` naming it."""
    text = os.environ.get(SEEDS_ENV, "").strip()
    if not text:
        return list(recipe["seeds"])
    try:
        asked = {int(x) for x in text.split(",") if x.strip()}
    except ValueError:
        raise FinetuneError(f"{SEEDS_ENV}={text!r}: expected comma-separated whole numbers (training seeds)") from None
    unknown = sorted(asked - set(recipe["seeds"]))
    if unknown:
        raise FinetuneError(f"{SEEDS_ENV}={text!r}: seeds {unknown} are not the recipe's ({recipe['seeds']})")
    return [s for s in recipe["seeds"] if s in asked]


def retrain_requested(retrain: bool = False) -> bool:
    """``retrain`` or the environment variable ``ATLAS_FINETUNE_RETRAIN`` (1 / true / yes / on)."""
    return bool(retrain) or os.environ.get(RETRAIN_ENV, "").strip().lower() in _ON


# ------------------------------------------------------------------------------------------ prediction

def _predict_logits(model: _Head, examples: Sequence[dict], batch_size: int, pad_id: int, keys,
                    progress: bool, desc: str) -> list[torch.Tensor]:
    """Logits per example (its real positions, for a token head), in input order; inference mode, fixed-shape
    batches (:func:`atlaslib.models.calls.fixed_batches`: ``batch_size`` rows, widths rounded up to a bucket, the
    last batch filled with copies), so an example's logits never depend on the other examples of the call.
    Each example's logits are a model call of the store when the model carries its identity
    (``model.atlas_identity``: its weight key and weights' sha256, set when it was trained or loaded)."""
    from ..models import calls
    from ..progress import progress_bar

    model.eval()
    device = next(model.parameters()).device
    rows = [{k: list(e[k]) for k in keys} for e in examples]

    def compute(positions):
        got = {}
        bar = progress_bar(len(positions), desc, progress)
        with torch.inference_mode():
            for width, members in calls.fixed_batches([len(rows[p]["input_ids"]) for p in positions], batch_size):
                idx = [positions[m] for m in members]
                fill = [rows[p] for p in idx] + [rows[idx[0]]] * (batch_size - len(idx))
                batch = {k: v.to(device) for k, v in _collate(fill, pad_id, keys, width=width).items()}
                logits = model(batch).float().cpu()
                for r, i in enumerate(idx):
                    got[i] = {"logits": (logits[r, :len(rows[i]["input_ids"])] if logits.ndim == 3
                                         else logits[r]).numpy()}
                bar.update(len(idx))
        bar.close()
        return [got[p] for p in positions]

    identity = getattr(model, "atlas_identity", None)
    space = calls.CallSpace(identity, "finetune.logits", {"batch": [batch_size, calls.WIDTH],
                                                          "threads": torch.get_num_threads()})
    return [torch.from_numpy(np.asarray(v["logits"], dtype=np.float32)) for v in space.answer(rows, compute)]


def weights_identity(cache_info: Mapping) -> dict | None:
    """A trained model's identity in the model-call store's keys: its weight key and its weights' sha256, with
    the prediction code and the numeric packages' versions; None when its weights are not cached (an encoder
    without a pinned revision)."""
    from ..models import calls

    if not cache_info.get("enabled") or not cache_info.get("weights_sha256"):
        return None
    return {"finetuned": cache_info["key"], "weights_sha256": cache_info["weights_sha256"],
            "code": calls.code_digest(__file__), "versions": versions()}


# ------------------------------------------------------------------------------------------ protocols

def _details(adapter, recipe, seed, labels, record, cache_info, extra) -> dict:
    info = dict(getattr(adapter, "info", {}) or {})
    info.pop("model_calls", None)
    info.pop("stats", None)
    info["max_length"] = recipe["max_length"]
    return {"capability": adapter.capability, "recipe": dict(recipe), "seed": int(seed), "labels": list(labels),
            "id2label": {i: lab for i, lab in enumerate(labels)},
            "validation": recipe["validation"],
            "seeds": {"finetune": seed, "head_init": seed, "data_order": seed, "dropout": seed},
            "versions": versions(), "deterministic_algorithms": True, "torch_threads": recipe["torch_threads"],
            "device": device_of(adapter),
            "training": {k: record.get(k) for k in ("loss", "epoch_of_step", "lr", "steps", "steps_per_epoch",
                                                   "seconds", "n_train_examples")},
            "trained_here": not cache_info["hit"], "weight_cache": cache_info,
            "adapter": info, **extra}


def _seed_summary(runs: Sequence[dict]) -> list[dict]:
    """One line per trained model, for the first seed's details (what the run page says about all seeds)."""
    out = []
    for r in runs:
        d = r["details"]
        out.append({"seed": r["seed"], "trained_here": d["trained_here"], "seconds": d["training"].get("seconds"),
                    "steps": d["training"].get("steps"), "key": d["weight_cache"].get("key"),
                    "weights_sha256": d["weight_cache"].get("weights_sha256"),
                    "predict_seconds": d.get("predict_seconds")})
    return out


def _with_seed_runs(runs: list[dict], **top) -> dict:
    """The protocol's answer: the first seed's model at the top (``pred`` / ``proba`` / ``tags``, ``model``,
    ``details`` with ``seed_runs`` summarising every seed), every seed's outputs in ``seed_runs`` and every
    seed's trained model in ``models`` (``[(seed, model)]``, in seed order: a variant run predicts with each)."""
    first = runs[0]
    details = dict(first["details"], seed_runs=_seed_summary(runs),
                   training_seeds=[r["seed"] for r in runs])
    out = {k: v for k, v in first.items() if k not in ("details", "seed")}
    out.update(top, details=details, models=[(r["seed"], r["model"]) for r in runs],
               seed_runs=[{k: v for k, v in r.items() if k != "model"} for r in runs])
    return out


def device_of(adapter) -> str:
    """The device a fine-tune of ``adapter`` trains and predicts on: the one its encoder was placed on
    (:func:`atlaslib.models.devices.place`: ``--device`` / ``ATLAS_DEVICE`` / the profile's ``device`` / ``auto``),
    e.g. ``cpu`` or ``cuda``."""
    param = next(iter(adapter.model.parameters()), None)
    return str(param.device) if param is not None else "cpu"


def _head_on_device(head_class, adapter, n_labels: int, dropout: float, seed: int, device: str):
    """A new head over a copy of the adapter's encoder, on ``device``: the head's weights are drawn on the CPU
    (a seeded CPU generator, the same numbers on every device) and moved with it."""
    import copy

    return head_class(copy.deepcopy(adapter.model), n_labels, dropout, seed).to(device)


def check_positions(adapter, recipe: Mapping) -> None:
    """The recipe's ``max_length`` must fit the encoder's position embeddings (``max_position_embeddings``
    of its config, where it has one); else one clear error instead of a tensor-size failure mid-training."""
    limit = getattr(getattr(getattr(adapter, "model", None), "config", None), "max_position_embeddings", None)
    if isinstance(limit, int) and recipe["max_length"] > limit:
        raise FinetuneError(f"finetune: the recipe's max_length is {recipe['max_length']} sub-words, but this "
                            f"encoder has {limit} positions (config max_position_embeddings); use an encoder with "
                            f"at least {recipe['max_length']} positions")


def finetune_sequence(adapter, train_ids: Sequence[str], train_texts: Sequence[str], train_labels: Sequence[str],
                      test_texts: Sequence[str], labels: Sequence[str], recipe: Mapping, *,
                      data_sha256: Mapping | None = None, retrain: bool = False, progress: bool = True) -> dict:
    """Fine-tune ``adapter``'s encoder (an ``embed.text.pooled`` adapter) with a :class:`SequenceHead`
    over ``labels`` on the train texts, once per seed of the recipe's ``seeds`` (each seed starts from the
    pretrained encoder), then predict the test texts with each trained model.

    ``train_labels`` are label names (each must be in ``labels``; the head's class ``i`` is
    ``labels[i]``). Inputs longer than ``max_length`` sub-words are truncated (counted in
    ``details["n_truncated"]``). Texts are tokenised once for all seeds. Returns ``{pred, proba, labels,
    model, details, seed_runs}``: ``pred`` the class index per test text and ``proba`` the softmax over
    ``labels`` of the first seed's model; ``seed_runs`` one ``{seed, pred, proba, details}`` per seed."""
    recipe = check_recipe(recipe)
    labels = list(labels)
    if len(set(labels)) != len(labels) or len(labels) < 2:
        raise FinetuneError(f"finetune: labels must be at least two distinct names, got {labels}")
    bad = sorted({str(y) for y in train_labels} - set(labels))
    if bad:
        raise FinetuneError(f"finetune: train labels {bad} are not among the head's labels {labels}")
    if not (len(train_ids) == len(train_texts) == len(train_labels)):
        raise FinetuneError(f"finetune: {len(train_ids)} train ids, {len(train_texts)} texts and "
                            f"{len(train_labels)} labels; expected equal lengths")
    check_positions(adapter, recipe)
    tok = adapter.tokenizer
    retrain = retrain_requested(retrain)
    runs = []
    device = device_of(adapter)
    with deterministic(recipe["torch_threads"], device):
        train_rows, keys, n_trunc_train = _encode_texts(tok, train_texts, recipe["max_length"])
        test_rows, _, n_trunc_test = _encode_texts(tok, test_texts, recipe["max_length"])
        targets = [labels.index(str(y)) for y in train_labels]
        texts = list(map(str, train_texts))
        for seed in seeds_to_train(recipe):
            one = seed_recipe(recipe, seed)
            model = _head_on_device(SequenceHead, adapter, len(labels), one["head_dropout"], seed, device)
            fields = key_fields(adapter, "sequence", one, labels, train_ids, texts, targets, data_sha256, device)
            record, cache_info, logits, t0 = _fit_one_seed(model, fields, one, retrain, train_rows, targets, test_rows,
                                                           labels, tok.pad_token_id, keys, False, progress,
                                                           n_test=len(test_rows))
            proba = torch.softmax(torch.stack(logits) if logits else torch.zeros((0, len(labels))), dim=1).numpy()
            pred = proba.argmax(axis=1).astype(int) if len(proba) else np.zeros(0, dtype=int)
            details = _details(adapter, recipe, seed, labels, record, cache_info,
                               {"head": "masked mean of the last layer -> dropout -> linear",
                                "n_train_items": len(train_ids),
                                "n_truncated": {"train": int(n_trunc_train), "test": int(n_trunc_test)},
                                "predict_seconds": round(time.perf_counter() - t0, 3)})
            runs.append({"seed": seed, "pred": pred, "proba": proba, "details": details, "model": model})
            del model
    return _with_seed_runs(runs, labels=labels)


def _fit_one_seed(model, fields, one: Mapping, retrain, train_inputs, targets, test_inputs, labels, pad_id, keys,
                  token_level: bool, progress: bool, *, n_test: int):
    """One seed of a recipe: train ``model`` on the train inputs (or load its weights from the cache by
    ``fields``), then the logits of the test inputs (``n_test`` test items: the prediction phase's answers).
    Returns ``(record, cache_info, logits, t0)``, ``t0`` the clock when prediction began (the caller's
    ``predict_seconds``)."""
    from ..phases import phase

    def train_fn():
        with phase("training"):
            rec = train_loop(model, train_inputs, targets, one, pad_id=pad_id, keys=keys, token_level=token_level,
                             progress=progress, desc=f"finetune seed {one['seed']}")
        return {**rec, "n_train_examples": len(train_inputs), "labels": labels}

    record, cache_info = _train_or_load(model, fields, one, retrain, train_fn)
    model.atlas_identity = weights_identity(cache_info)
    t0 = time.perf_counter()
    with phase("prediction", items=n_test):
        logits = _predict_logits(model, test_inputs, one["eval_batch_size"], pad_id, keys, progress,
                                 f"finetune seed {one['seed']}: predict")
    return record, cache_info, logits, t0


def predict_sequence(adapter, model: "SequenceHead", texts: Sequence[str], recipe: Mapping,
                     progress: bool = False) -> np.ndarray:
    """The softmax over the head's labels for other ``texts`` with a model :func:`finetune_sequence` returned
    (a variant run: nothing is trained), encoded and batched as its own test texts were."""
    recipe = check_recipe(recipe)
    from ..phases import phase

    tok = adapter.tokenizer
    with deterministic(recipe["torch_threads"], device_of(adapter)), phase("prediction", items=len(texts)):
        rows, keys, _ = _encode_texts(tok, texts, recipe["max_length"])
        logits = _predict_logits(model, rows, recipe["eval_batch_size"], tok.pad_token_id, keys, progress,
                                 "finetune: predict")
        n = model.classifier.out_features if hasattr(model, "classifier") else 0
        return torch.softmax(torch.stack(logits) if logits else torch.zeros((0, n)), dim=1).numpy()


def predict_tokens(adapter, model: "TokenHead", test_words, tags: Sequence[str], recipe: Mapping,
                   progress: bool = False) -> list[list[str]]:
    """IOB2 tags for other sentences with a model :func:`finetune_tokens` returned (a variant run: nothing is
    trained): chunked, labelled on each word's first sub-word and repaired as its own test sentences were."""
    recipe = check_recipe(recipe)
    tags = list(tags)
    from ..phases import phase

    tok = adapter.tokenizer
    with deterministic(recipe["torch_threads"], device_of(adapter)), phase("prediction", items=len(test_words)):
        sents = [list(w) for w in test_words]
        ex, _, segs, keys = _word_examples(adapter, sents)
        logits = _predict_logits(model, [{k: e[k] for k in keys} for e in ex], recipe["eval_batch_size"],
                                 tok.pad_token_id, keys, progress, "finetune: predict")
    per_sentence: list[list[str]] = [[] for _ in sents]
    for e, seg, lg in zip(ex, segs, logits):
        best = lg.argmax(-1).tolist()
        per_sentence[seg[0]].extend(tags[best[t]] for t in e["_first"])
    return [repair_iob2(p) for p in per_sentence]


def finetune_tokens(adapter, train_ids: Sequence[str], train_words, train_tags, test_words, tags: Sequence[str],
                    recipe: Mapping, *, data_sha256: Mapping | None = None, retrain: bool = False,
                    progress: bool = True) -> dict:
    """Fine-tune ``adapter``'s encoder (an ``embed.text.tokens`` adapter, whose ``max_length`` must be the
    recipe's) with a :class:`TokenHead` over the IOB2 ``tags``, labels on each word's first sub-word, once
    per seed of the recipe's ``seeds`` (each from the pretrained encoder); predict the test words with each
    model and repair each sentence conlleval-style.

    Returns ``{tags, model, details, seed_runs}``: ``tags`` one IOB2 list per test sentence, aligned with its
    words, from the first seed's model; ``seed_runs`` one ``{seed, tags, details}`` per seed."""
    recipe = check_recipe(recipe)
    tags = list(tags)
    if "O" not in tags or len(set(tags)) != len(tags):
        raise FinetuneError(f"finetune: tags must be distinct and include 'O', got {tags}")
    validate_tags(tags, "finetune tags")
    if adapter.max_length != recipe["max_length"]:
        raise FinetuneError(f"finetune: the adapter's max_length is {adapter.max_length}, the recipe's "
                            f"{recipe['max_length']}; load the adapter with max_length={recipe['max_length']}")
    check_positions(adapter, recipe)
    train_words, train_tags = [list(w) for w in train_words], [list(t) for t in train_tags]
    if not (len(train_ids) == len(train_words) == len(train_tags)):
        raise FinetuneError(f"finetune: {len(train_ids)} train ids, {len(train_words)} word lists and "
                            f"{len(train_tags)} tag lists; expected equal lengths")
    for i, (w, t) in enumerate(zip(train_words, train_tags)):
        if len(w) != len(t):
            raise FinetuneError(f"finetune: train sentence {i} ({train_ids[i]}) has {len(w)} words but {len(t)} tags")
        unknown = sorted(set(t) - set(tags))
        if unknown:
            raise FinetuneError(f"finetune: train sentence {i} ({train_ids[i]}) has tags {unknown} outside {tags}")
    label_index = {t: k for k, t in enumerate(tags)}
    tok = adapter.tokenizer
    retrain = retrain_requested(retrain)
    runs = []
    device = device_of(adapter)
    with deterministic(recipe["torch_threads"], device):
        stats_before = dict(adapter.stats)
        train_ex, targets, _, keys = _word_examples(adapter, train_words, train_tags, label_index)
        test_sents = [list(w) for w in test_words]
        test_ex, _, test_segs, _ = _word_examples(adapter, test_sents)
        chunk_stats = {k: adapter.stats.get(k, 0) - stats_before.get(k, 0)
                       for k in ("n_unk_words", "n_chunked_sentences")}
        train_inputs = [{k: e[k] for k in keys} for e in train_ex]
        test_inputs = [{k: e[k] for k in keys} for e in test_ex]
        for seed in seeds_to_train(recipe):
            one = seed_recipe(recipe, seed)
            model = _head_on_device(TokenHead, adapter, len(tags), one["head_dropout"], seed, device)
            fields = key_fields(adapter, "token", one, tags, train_ids, train_words, train_tags, data_sha256, device)
            record, cache_info, logits, t0 = _fit_one_seed(model, fields, one, retrain, train_inputs, targets,
                                                           test_inputs, tags, tok.pad_token_id, keys, True, progress,
                                                           n_test=len(test_sents))
            per_sentence: list[list[str]] = [[] for _ in test_sents]
            for e, seg, lg in zip(test_ex, test_segs, logits):
                best = lg.argmax(-1).tolist()
                per_sentence[seg[0]].extend(tags[best[t]] for t in e["_first"])
            out_tags = [repair_iob2(p) for p in per_sentence]
            for i, (w, p) in enumerate(zip(test_sents, out_tags)):
                if len(w) != len(p):  # cannot happen: every word is in exactly one chunk
                    raise AssertionError(f"test sentence {i}: {len(w)} words, {len(p)} tags")
            details = _details(adapter, recipe, seed, tags, record, cache_info,
                               {"head": "last layer -> dropout -> linear per sub-word; word label on its first "
                                        "sub-word",
                                "word_label": "first sub-word", "n_train_items": len(train_ids),
                                "repair": "conlleval (I-X after O/other type -> B-X)",
                                "chunking": "sentences over max_length sub-words cut into chunks of whole words",
                                "n_train_words": int(sum(len(t) for t in train_tags)),
                                "stats": chunk_stats, "predict_seconds": round(time.perf_counter() - t0, 3)})
            runs.append({"seed": seed, "tags": out_tags, "details": details, "model": model})
            del model
    return _with_seed_runs(runs)
