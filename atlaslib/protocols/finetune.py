"""Fine-tune protocol: a fresh head on an encoder, trained on a split's train items, on a CPU.

What is trained
    The encoder of a model with ``embed.text.pooled`` (item-level cards) or ``embed.text.tokens``
    (token-level cards), loaded through the same adapter as the probe (same weights, tokenizer and
    padding), with a new linear head:

    - :class:`SequenceHead` (item-level): attention-masked mean of the last layer (the pooling of the
      ``embed.text.pooled`` adapter) → dropout → linear over the card's labels;
    - :class:`TokenHead` (token-level): last layer → dropout → linear over the card's IOB2 tags. Each
      word is labelled on its *first* sub-word; the other sub-words and the special tokens carry the
      ignore index (-100). A sentence longer than ``max_length`` sub-words is cut into consecutive
      chunks of whole words (the adapter's rule), each a training example of its own. A test word takes
      the arg-max tag of its first sub-word, and each sentence is then repaired conlleval-style (an
      ``I-X`` after ``O`` or another type starts a mention), exactly as the probe's tags are.

    Encoder and head are trained together on the train items only, for a fixed number of epochs (no
    validation split, no early stopping: test items are never looked at before prediction), with the
    card's recipe (a dict of data in the card module, checked by :func:`check_recipe` and recorded in the
    result cell): AdamW (weight decay on every weight except biases and LayerNorm), linear warm-up
    then linear decay to zero, cross-entropy (mean over items, or over labelled words), gradient
    norm clipped, dynamic padding per batch (batches of similar length: :func:`epoch_batches`).

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
    Training and prediction run under :func:`deterministic`: ``torch.use_deterministic_algorithms(True)``
    and the recipe's torch thread count (both restored afterwards). The head's initial weights come from
    a ``torch.Generator`` seeded with the model's seed; the order of the train items and of the batches in
    each epoch from ``numpy.random.default_rng(seed)``; dropout from ``torch.manual_seed(seed)`` set just before the
    first step. The same seed gives the same weights and predictions bit for bit on the same machine
    (tested on tiny encoders).

Weight cache
    The trained weights (safetensors) and the training record (loss per step, seconds, label order) are
    stored under ``$ATLAS_FINETUNE_CACHE_DIR`` (default ``<atlas cache dir>/finetune``, i.e.
    ``~/.cache/clinical-nlp-atlas/finetune``) in a folder named by the *content key*: sha256 of the
    canonical JSON of the encoder (profile name, source, location, revision, model class), the recipe,
    the label list, the train item ids, the sha256 of the train inputs and labels, the card's data
    sha256, the torch and transformers versions and the sha256 of the training code (:func:`code_sha256`).
    A rebuild with nothing changed loads the weights and trains nothing; a change of any field trains anew. An encoder
    without a pinned revision (a hub id not in the registry) has no reliable key and is never cached.
    ``retrain=True`` (the notebooks' ``retrain`` parameter, or ``ATLAS_FINETUNE_RETRAIN=1``) trains even
    when the weights are cached and replaces them. ``meta.json`` records the sha256 of ``model.safetensors``;
    an entry whose weights do not match it (or that cannot be read) is never loaded: the weights are trained
    again and replace it, and the run says so (``weight_cache["corrupt"]``, a warning, the run page's
    fine-tuning paragraph). Entries are written to a temporary folder and renamed
    into place; a lock file per key makes a second run of the same key (e.g. two split versions sharing
    their train items) wait for the first and then load its weights instead of training again.

Progress
    One bar over the epochs and one over the steps of each epoch, through
    :func:`atlaslib.progress.progress_bar` (plain ASCII lines at most every 30 s in papermill logs,
    ``ATLAS_PROGRESS=off`` silences them).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch
from torch import nn

from .. import sources
from ..metrics.spans import repair_iob2, validate_tags
from .recipe import RECIPE_KEYS  # every recipe names these (values checked by check_recipe); torch-free

FORMAT = 2   # 2: meta.json records the sha256 of the weights file
CACHE_ENV = "ATLAS_FINETUNE_CACHE_DIR"
RETRAIN_ENV = "ATLAS_FINETUNE_RETRAIN"
IGNORE_INDEX = -100
_ON = ("1", "true", "yes", "on")


class FinetuneError(ValueError):
    """A recipe or training input is not what the fine-tune protocol expects."""


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


def retrain_requested(retrain: bool = False) -> bool:
    """``retrain`` or the environment variable ``ATLAS_FINETUNE_RETRAIN`` (1 / true / yes / on)."""
    return bool(retrain) or os.environ.get(RETRAIN_ENV, "").strip().lower() in _ON


def versions() -> dict:
    """torch and transformers versions (part of the cache key and of the cell)."""
    out = {"torch": torch.__version__}
    try:
        out["transformers"] = metadata.version("transformers")
    except metadata.PackageNotFoundError:
        out["transformers"] = None
    return out


# ------------------------------------------------------------------------------------------ models

def _init_linear(linear: nn.Linear, std: float, generator: torch.Generator) -> None:
    with torch.no_grad():
        linear.weight.copy_(torch.randn(linear.weight.shape, generator=generator) * std)
        linear.bias.zero_()


class _Head(nn.Module):
    def __init__(self, encoder: nn.Module, n_labels: int, dropout: float, seed: int):
        super().__init__()
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        hidden = int(encoder.config.hidden_size)
        self.classifier = nn.Linear(hidden, n_labels)
        std = float(getattr(encoder.config, "initializer_range", 0.02) or 0.02)
        _init_linear(self.classifier, std, torch.Generator().manual_seed(int(seed)))

    def hidden(self, batch: dict) -> torch.Tensor:
        return self.encoder(**batch).last_hidden_state


class SequenceHead(_Head):
    """Masked mean of the encoder's last layer → dropout → linear (one logit row per input)."""

    def forward(self, batch: dict) -> torch.Tensor:
        h = self.hidden(batch)
        m = batch["attention_mask"].unsqueeze(-1).to(h.dtype)
        pooled = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return self.classifier(self.dropout(pooled))


class TokenHead(_Head):
    """Encoder's last layer → dropout → linear (one logit row per sub-word)."""

    def forward(self, batch: dict) -> torch.Tensor:
        return self.classifier(self.dropout(self.hidden(batch)))


@contextlib.contextmanager
def deterministic(threads: int):
    """Deterministic torch algorithms and ``threads`` intra-op threads inside the block (restored after)."""
    was_det, was_threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was_det)
        torch.set_num_threads(was_threads)


# ------------------------------------------------------------------------------------------ batching

def _pad(rows: Sequence[Sequence[int]], value: int, width: int | None = None) -> torch.Tensor:
    width = width or max(len(r) for r in rows)
    a = np.full((len(rows), width), value, dtype=np.int64)
    for i, r in enumerate(rows):
        a[i, :len(r)] = r
    return torch.from_numpy(a)


def _collate(examples: Sequence[dict], pad_id: int, keys: Sequence[str], width: int | None = None) -> dict:
    """Right-padded tensors of a batch: input ids (pad id), other id rows (0), attention mask; ``width``: pad to
    that many positions (default: the longest example)."""
    batch = {"input_ids": _pad([e["input_ids"] for e in examples], pad_id, width)}
    for k in keys:
        if k != "input_ids":
            batch[k] = _pad([e[k] for e in examples], 0, width)
    lens = np.array([len(e["input_ids"]) for e in examples])
    width = batch["input_ids"].shape[1]
    batch["attention_mask"] = torch.from_numpy((np.arange(width)[None, :] < lens[:, None]).astype(np.int64))
    return batch


def _model_keys(enc) -> list[str]:
    return [k for k in ("input_ids", "token_type_ids") if k in enc]


# ------------------------------------------------------------------------------------------ training

def epoch_batches(lengths: Sequence[int], batch_size: int, group: int, rng: np.random.Generator) -> list:
    """One epoch's batches of example indices: a seeded permutation, cut into groups of ``group`` batches;
    inside a group the examples are sorted by length (longest first, stable) and cut into batches; then the
    batch order is shuffled. Every example appears once; batches hold examples of similar length, so
    dynamic padding wastes little. ``group=1`` gives plain consecutive batches of the permutation."""
    order = rng.permutation(len(lengths))
    if group <= 1:
        return [order[a:a + batch_size] for a in range(0, len(order), batch_size)]
    batches, span = [], group * batch_size
    for a in range(0, len(order), span):
        chunk = sorted(order[a:a + span], key=lambda i: -lengths[i])
        batches += [np.asarray(chunk[b:b + batch_size]) for b in range(0, len(chunk), batch_size)]
    return [batches[k] for k in rng.permutation(len(batches))]


def train_loop(model: _Head, examples: Sequence[dict], targets: Sequence, recipe: Mapping, *, pad_id: int,
               keys: Sequence[str], token_level: bool, progress: bool = True, desc: str = "finetune") -> dict:
    """Train ``model`` in place; returns ``{loss, epoch_of_step, lr, steps, seconds}``.

    ``targets``: one class index per example (item-level) or one list per example aligned with its
    input ids, :data:`IGNORE_INDEX` on unlabelled sub-words (token-level)."""
    from transformers import get_linear_schedule_with_warmup

    from ..progress import plain_mode, progress_bar

    n = len(examples)
    if n == 0:
        raise FinetuneError("finetune: no train items")
    bs, epochs = recipe["batch_size"], recipe["epochs"]
    steps_per_epoch = -(-n // bs)
    total = steps_per_epoch * epochs
    no_decay = [p for name, p in model.named_parameters() if p.ndim < 2 or "norm" in name.lower()]
    ids_nd = {id(p) for p in no_decay}
    decay = [p for p in model.parameters() if id(p) not in ids_nd]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": recipe["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=recipe["learning_rate"], betas=tuple(recipe["adam_betas"]), eps=recipe["adam_eps"],
                            fused=True)   # one fused kernel per step: 5x faster on CPU than the per-tensor loop
    sched = get_linear_schedule_with_warmup(opt, int(round(recipe["warmup_ratio"] * total)), total)
    rng = np.random.default_rng(recipe["seed"])
    torch.manual_seed(recipe["seed"])
    loss_fn = nn.CrossEntropyLoss(ignore_index=IGNORE_INDEX)
    history, epoch_of, lrs = [], [], []
    model.train()
    t0 = time.perf_counter()
    nested = not plain_mode()
    ebar = progress_bar(epochs, f"{desc}: epochs", progress) if nested else None
    sbar = None if nested else progress_bar(total, f"{desc}: steps", progress)
    for epoch in range(epochs):
        batches = epoch_batches([len(e["input_ids"]) for e in examples], bs, recipe["length_grouping"], rng)
        if nested:
            sbar = progress_bar(steps_per_epoch, f"{desc}: epoch {epoch + 1}/{epochs} steps", progress)
        for s in range(steps_per_epoch):
            idx = batches[s]
            batch = _collate([examples[i] for i in idx], pad_id, keys)
            logits = model(batch)
            if token_level:
                y = _pad([targets[i] for i in idx], IGNORE_INDEX)
                loss = loss_fn(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            else:
                y = torch.tensor([targets[i] for i in idx], dtype=torch.long)
                loss = loss_fn(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if recipe["max_grad_norm"]:
                nn.utils.clip_grad_norm_(model.parameters(), recipe["max_grad_norm"])
            lrs.append(float(sched.get_last_lr()[0]))
            opt.step()
            sched.step()
            history.append(float(loss.detach()))
            epoch_of.append(epoch + 1)
            sbar.set_postfix_str(f"epoch {epoch + 1}/{epochs}, loss {history[-1]:.4f}", refresh=False)
            sbar.update(1)
        if nested:
            sbar.close()
            ebar.set_postfix_str(f"mean loss {np.mean(history[-steps_per_epoch:]):.4f}", refresh=False)
            ebar.update(1)
    (ebar if nested else sbar).close()
    model.eval()
    return {"loss": history, "epoch_of_step": epoch_of, "lr": lrs, "steps": total,
            "steps_per_epoch": steps_per_epoch, "seconds": round(time.perf_counter() - t0, 3)}


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
    rows = [{k: list(e[k]) for k in keys} for e in examples]

    def compute(positions):
        got = {}
        bar = progress_bar(len(positions), desc, progress)
        with torch.inference_mode():
            for width, members in calls.fixed_batches([len(rows[p]["input_ids"]) for p in positions], batch_size):
                idx = [positions[m] for m in members]
                fill = [rows[p] for p in idx] + [rows[idx[0]]] * (batch_size - len(idx))
                batch = _collate(fill, pad_id, keys, width=width)
                logits = model(batch).float()
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


# ------------------------------------------------------------------------------------------ cache

def cache_root() -> Path:
    """``$ATLAS_FINETUNE_CACHE_DIR`` when set, else ``<atlas cache dir>/finetune`` (read at each use)."""
    explicit = os.environ.get(CACHE_ENV, "").strip()
    return Path(explicit).expanduser() if explicit else sources.cache_dir() / "finetune"


def _sha256_json(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                     default=str).encode("utf-8")).hexdigest()


def code_sha256() -> str:
    """sha256 of the source of everything that decides the trained weights (heads, their init, input
    encoding, batching, the training loop, the deterministic set-up): a change there trains anew; a
    change to prediction or page code does not."""
    import inspect

    parts = [_init_linear, _Head, SequenceHead, TokenHead, deterministic, _pad, _collate, _model_keys,
             epoch_batches, train_loop, _encode_texts, _word_examples]
    return hashlib.sha256("\n".join(inspect.getsource(f) for f in parts).encode("utf-8")).hexdigest()


def key_fields(adapter, task: str, recipe: Mapping, labels: Sequence[str], train_ids: Sequence[str],
               train_inputs, train_targets, data_sha256: Mapping | None) -> dict:
    """Everything that decides the trained weights (see the module docstring)."""
    info = dict(getattr(adapter, "info", {}) or {})
    return {
        "format": FORMAT, "task": task,
        "encoder": {"profile": info.get("profile"), "source": info.get("source"), "location": info.get("location"),
                    "revision": info.get("revision"), "model_class": info.get("model_class"),
                    "add_prefix_space": info.get("add_prefix_space")},
        "recipe": dict(recipe), "labels": list(labels),
        "train_item_ids_sha256": _sha256_json(list(train_ids)), "n_train": len(train_ids),
        "train_data_sha256": _sha256_json({"inputs": train_inputs, "targets": train_targets}),
        "data_sha256": dict(data_sha256 or {}),
        "versions": versions(), "code_sha256": code_sha256(),
    }


class WeightCache:
    """One content key's folder: ``model.safetensors`` + ``meta.json`` (+ ``key.json`` for readers).

    ``meta.json`` carries ``weights_sha256``, the sha256 of ``model.safetensors`` as written; :meth:`load`
    checks it before using the weights, so a file changed after it was written (a flipped bit, a truncated
    copy) is never loaded: it is reported in :attr:`corrupt` and trained again."""

    def __init__(self, fields: dict):
        self.fields = fields
        self.enabled = bool(fields["encoder"].get("revision"))
        self.key = _sha256_json(fields)
        self.path = cache_root() / self.key
        self.corrupt: str | None = None   # why the stored entry was refused, after a failed load
        self.unwritable: str | None = None  # why trained weights could not be stored (the run goes on)

    def exists(self) -> bool:
        return self.enabled and (self.path / "model.safetensors").is_file() and (self.path / "meta.json").is_file()

    def load(self, model: nn.Module) -> dict | None:
        """Load the stored weights into ``model`` and return the stored training record; None when there is
        no entry, or when the entry fails its checks (unreadable meta, weights whose sha256 is not the one
        recorded, tensors that do not fit ``model``): then :attr:`corrupt` says why and ``model`` is untouched."""
        self.corrupt = None
        if not self.exists():
            return None
        from safetensors.torch import load as load_bytes

        try:
            meta = json.loads((self.path / "meta.json").read_text(encoding="utf-8"))
            data = (self.path / "model.safetensors").read_bytes()
        except (OSError, ValueError) as exc:
            self.corrupt = f"unreadable entry ({type(exc).__name__}: {exc})"
            return None
        expected = meta.get("weights_sha256") if isinstance(meta, dict) else None
        actual = hashlib.sha256(data).hexdigest()
        if not expected:
            self.corrupt = "meta.json records no weights_sha256"
            return None
        if actual != expected:
            self.corrupt = f"model.safetensors has sha256 {actual[:16]}…, its meta.json records {expected[:16]}…"
            return None
        try:
            state = load_bytes(data)
            missing, unexpected = model.state_dict().keys() - state.keys(), state.keys() - model.state_dict().keys()
            if missing or unexpected:
                raise ValueError(f"tensors missing {sorted(missing)[:3]}, unexpected {sorted(unexpected)[:3]}")
            model.load_state_dict(state, strict=True)
        except Exception as exc:  # a checksum-valid file that does not fit the model
            self.corrupt = f"weights do not fit the model ({type(exc).__name__}: {str(exc)[:200]})"
            return None
        model.eval()
        return meta

    def save(self, model: nn.Module, meta: dict) -> dict:
        """Store ``model``'s weights and ``meta`` (with the weights' sha256 added, which is also returned in
        the meta) atomically: written to a temporary folder, then renamed into place."""
        from safetensors.torch import save as save_bytes

        state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
        data = save_bytes(state)
        meta = {**meta, "weights_sha256": hashlib.sha256(data).hexdigest()}
        if not self.enabled:
            return meta
        try:
            self._write(data, meta)
        except OSError as exc:  # a cache that cannot be written costs the next run its training, never this run
            import warnings

            self.unwritable = f"{type(exc).__name__}: {exc.strerror or exc}"
            warnings.warn(f"fine-tune weight cache {self.path.parent}: the trained weights cannot be stored "
                          f"({self.unwritable}); this run uses them, the next one trains again", RuntimeWarning,
                          stacklevel=3)
        return meta

    def _write(self, data: bytes, meta: dict) -> None:
        root = self.path.parent
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{self.key[:12]}."))
        try:
            (tmp / "model.safetensors").write_bytes(data)
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1, default=str), encoding="utf-8")
            (tmp / "key.json").write_text(json.dumps(self.fields, indent=1, default=str), encoding="utf-8")
            old = None
            if self.path.exists():       # retrain or a corrupt entry: move the old entry aside, then swap
                old = root / f".{self.key[:12]}.old.{os.getpid()}"
                os.replace(self.path, old)
            os.replace(tmp, self.path)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    @contextlib.contextmanager
    def lock(self):
        """An exclusive lock on ``<key>.lock`` (POSIX flock; a no-op where unavailable or disabled)."""
        if not self.enabled:
            yield
            return
        try:
            import fcntl
        except ImportError:  # pragma: no cover - non-POSIX
            yield
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fh = open(self.path.parent / f"{self.key}.lock", "a+")
        except OSError:  # a cache that cannot be written: no lock to take (save() says what is lost)
            yield
            return
        with fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


def _train_or_load(model: _Head, fields: dict, recipe: dict, retrain: bool, train_fn) -> tuple[dict, dict]:
    """``(training record, cache info)``: load the weights for ``fields`` or train (and store) them. An entry
    that fails its checks (:meth:`WeightCache.load`) is trained again and replaced; ``info["corrupt"]`` says
    why, and a warning says so where the run is shown."""
    import warnings

    from ..phases import phase

    cache = WeightCache(fields)
    asked = time.time()
    with cache.lock():
        meta = None
        if cache.exists():
            fresh = (cache.path / "meta.json").stat().st_mtime >= asked   # trained by another run meanwhile
            if not retrain or fresh:
                with phase("loading"):
                    meta = cache.load(model)
        hit = meta is not None
        if cache.corrupt:
            warnings.warn(f"fine-tune weight cache {cache.path}: {cache.corrupt}; the entry is not used, the "
                          "weights are trained again and replace it", RuntimeWarning, stacklevel=3)
        if not hit:
            meta = cache.save(model, train_fn())
    info = {"key": cache.key, "enabled": cache.enabled, "hit": hit, "retrain_requested": bool(retrain),
            "dir": str(cache.path) if cache.enabled else None, "corrupt": cache.corrupt,
            "unwritable": cache.unwritable,
            "weights_sha256": meta.get("weights_sha256"),
            "note": None if cache.enabled else "encoder without a pinned revision: weights not cached"}
    return meta, info


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
    import copy

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
    with deterministic(recipe["torch_threads"]):
        train_rows, keys, n_trunc_train = _encode_texts(tok, train_texts, recipe["max_length"])
        test_rows, _, n_trunc_test = _encode_texts(tok, test_texts, recipe["max_length"])
        targets = [labels.index(str(y)) for y in train_labels]
        texts = list(map(str, train_texts))
        for seed in recipe["seeds"]:
            one = seed_recipe(recipe, seed)
            model = SequenceHead(copy.deepcopy(adapter.model), len(labels), one["head_dropout"], seed)
            fields = key_fields(adapter, "sequence", one, labels, train_ids, texts, targets, data_sha256)
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
    with deterministic(recipe["torch_threads"]), phase("prediction", items=len(texts)):
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
    with deterministic(recipe["torch_threads"]), phase("prediction", items=len(test_words)):
        sents = [list(w) for w in test_words]
        ex, _, segs, keys = _word_examples(adapter, sents)
        logits = _predict_logits(model, [{k: e[k] for k in keys} for e in ex], recipe["eval_batch_size"],
                                 tok.pad_token_id, keys, progress, "finetune: predict")
    per_sentence: list[list[str]] = [[] for _ in sents]
    for e, seg, lg in zip(ex, segs, logits):
        best = lg.argmax(-1).tolist()
        per_sentence[seg[0]].extend(tags[best[t]] for t in e["_first"])
    return [repair_iob2(p) for p in per_sentence]


def _encode_texts(tok, texts, max_length: int):
    """Token ids of each text, truncated at ``max_length``; ``(rows, model input keys, n truncated)``. One
    tokeniser call over all texts; only the texts that turn out too long are encoded again, truncated."""
    texts = list(texts)
    enc = tok(texts, truncation=False, verbose=False)
    keys = _model_keys(enc)
    rows = [{k: list(enc[k][i]) for k in keys} for i in range(len(texts))]
    long = [i for i, r in enumerate(rows) if len(r["input_ids"]) > max_length]
    if long:
        cut = tok([texts[i] for i in long], truncation=True, max_length=max_length, verbose=False)
        for j, i in enumerate(long):
            rows[i] = {k: list(cut[k][j]) for k in keys}
    return rows, keys, len(long)


def _word_examples(adapter, sentences, tags=None, label_index=None):
    """Chunks of whole words that fit ``max_length`` (the adapter's rule) → encoded examples, with the
    first-sub-word targets when ``tags`` are given. Returns ``(examples, targets, segments, keys)``. One
    tokeniser call over all chunks."""
    sentences, segs = adapter._segments(sentences)
    tok = adapter.tokenizer
    examples, targets = [], []
    enc = tok([list(s[3]) for s in segs], is_split_into_words=True, truncation=False, verbose=False) if segs else None
    keys = _model_keys(enc) if enc is not None else ["input_ids"]
    for j, (i, a, b, words, _) in enumerate(segs):
        examples.append({k: list(enc[k][j]) for k in keys})
        wids = enc.word_ids(j)
        firsts = {}
        for t, w in enumerate(wids):
            if w is not None and w not in firsts:
                firsts[w] = t
        if len(firsts) != b - a:
            raise FinetuneError(f"finetune: sentence {i} words {a}-{b}: {len(firsts)} words found in the "
                                f"encoding, expected {b - a}")
        examples[-1]["_first"] = [firsts[w] for w in range(b - a)]
        if tags is not None:
            y = [IGNORE_INDEX] * len(wids)
            for w in range(b - a):
                y[firsts[w]] = label_index[tags[i][a + w]]
            targets.append(y)
    return examples, targets, segs, keys


def finetune_tokens(adapter, train_ids: Sequence[str], train_words, train_tags, test_words, tags: Sequence[str],
                    recipe: Mapping, *, data_sha256: Mapping | None = None, retrain: bool = False,
                    progress: bool = True) -> dict:
    """Fine-tune ``adapter``'s encoder (an ``embed.text.tokens`` adapter, whose ``max_length`` must be the
    recipe's) with a :class:`TokenHead` over the IOB2 ``tags``, labels on each word's first sub-word, once
    per seed of the recipe's ``seeds`` (each from the pretrained encoder); predict the test words with each
    model and repair each sentence conlleval-style.

    Returns ``{tags, model, details, seed_runs}``: ``tags`` one IOB2 list per test sentence, aligned with its
    words, from the first seed's model; ``seed_runs`` one ``{seed, tags, details}`` per seed."""
    import copy

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
    with deterministic(recipe["torch_threads"]):
        stats_before = dict(adapter.stats)
        train_ex, targets, _, keys = _word_examples(adapter, train_words, train_tags, label_index)
        test_sents = [list(w) for w in test_words]
        test_ex, _, test_segs, _ = _word_examples(adapter, test_sents)
        chunk_stats = {k: adapter.stats.get(k, 0) - stats_before.get(k, 0)
                       for k in ("n_unk_words", "n_chunked_sentences")}
        train_inputs = [{k: e[k] for k in keys} for e in train_ex]
        test_inputs = [{k: e[k] for k in keys} for e in test_ex]
        for seed in recipe["seeds"]:
            one = seed_recipe(recipe, seed)
            model = TokenHead(copy.deepcopy(adapter.model), len(tags), one["head_dropout"], seed)
            fields = key_fields(adapter, "token", one, tags, train_ids, train_words, train_tags, data_sha256)
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


# ------------------------------------------------------------------------------------------ pages

def section_markdown(details: Mapping, unit: str = "items") -> str:
    """The run page's fine-tuning section heading and paragraph, every number from ``details``."""
    rec, tr = details["recipe"], details.get("training") or {}
    n = details.get("n_train_items", tr.get("n_train_examples"))
    how = (f"trained in this run in {tr.get('seconds'):.0f} s" if details.get("trained_here") else
           f"loaded from the weight cache (trained earlier in {tr.get('seconds'):.0f} s with the same recipe, "
           "encoder revision and train items)")
    corrupt = (details.get("weight_cache") or {}).get("corrupt")
    if corrupt:
        how += f" (the cached weights for this key failed their check, {corrupt}, so they were trained again)"
    loss = tr.get("loss") or []
    per_epoch = ""
    if loss:
        ep = np.asarray(tr["epoch_of_step"])
        means = [float(np.mean(np.asarray(loss)[ep == e])) for e in np.unique(ep)]
        per_epoch = " Mean train loss per epoch: " + ", ".join(f"{m:.3f}" for m in means) + "."
    seed = details.get("seed", rec.get("seed"))
    runs = details.get("seed_runs") or []
    seeds_text = ""
    if len(runs) > 1:
        here = sum(1 for r in runs if r.get("trained_here"))
        secs = sum(float(r.get("seconds") or 0) for r in runs if r.get("trained_here"))
        seeds_text = (f" The recipe declares {len(runs)} training seeds ({', '.join(str(r['seed']) for r in runs)}): "
                      f"one model per seed, each from the pretrained encoder; {here} of them trained in this run"
                      + (f" ({secs:.0f} s in all)" if here else "") + f", {len(runs) - here} loaded from the weight "
                      f"cache. The metrics are the mean over the {len(runs)} models; the error tables, plots and "
                      f"per-item table below show the model of seed {seed}.")
    return (f"### Fine-tuning\n\nThe encoder and a new linear head were trained together on the {n} train "
            f"{unit} only, for {rec['epochs']} epochs of {tr.get('steps_per_epoch')} steps ({rec['batch_size']} "
            f"{unit} per step, learning rate {rec['learning_rate']:g} with {rec['warmup_ratio']:.0%} warm-up, "
            f"seed {seed}). Validation: {rec['validation']}. The weights of seed {seed} were {how}.{per_epoch}"
            f"{seeds_text}")


def recipe_table(details: Mapping):
    """The recipe as a two-column frame (setting, value) with what each setting means, plus the run's
    training facts (train examples, steps, seconds, cache) — for the run page."""
    import pandas as pd

    rec = details["recipe"]
    def show(v):
        return json.dumps(v) if isinstance(v, (list, dict)) else (f"{v:g}" if isinstance(v, float) else str(v))

    rows = [{"setting": k, "value": show(rec[k]),
             "meaning": RECIPE_KEYS.get(k, "")} for k in RECIPE_KEYS]
    tr = details.get("training") or {}
    cache = details.get("weight_cache") or {}
    rows += [
        {"setting": "train examples", "value": show(tr.get("n_train_examples")), "meaning": "inputs per epoch"},
        {"setting": "steps", "value": show(tr.get("steps")), "meaning": "optimizer steps in all"},
        {"setting": "training seconds", "value": show(tr.get("seconds")),
         "meaning": "wall time of training " + ("in this run" if details.get("trained_here") else
                                                "when the cached weights were trained")},
        {"setting": "weights", "value": "trained in this run" if details.get("trained_here") else "loaded from cache",
         "meaning": (f"content key {cache.get('key')}" if cache.get("enabled")  # whole: a page never cuts it
                     else (cache.get("note") or ""))},
        {"setting": "torch / transformers", "value": " / ".join(str(v) for v in details["versions"].values()),
         "meaning": "library versions"},
    ]
    return pd.DataFrame(rows).set_index("setting")


def plot_loss(details: Mapping, title: str = ""):
    """Training loss per step (thin) and its mean per epoch (markers), with epoch boundaries."""
    import matplotlib.pyplot as plt

    tr = details["training"]
    loss = np.asarray(tr["loss"], dtype=float)
    epochs = np.asarray(tr["epoch_of_step"], dtype=int)
    steps = np.arange(1, len(loss) + 1)
    fig, ax = plt.subplots(figsize=(6.4, 2.8))
    ax.plot(steps, loss, color="#8fb3d9", lw=1, label="loss per step")
    for e in np.unique(epochs):
        sel = epochs == e
        ax.plot([steps[sel].mean()], [loss[sel].mean()], "o", color="#1f3b73",
                label="mean per epoch" if e == epochs.min() else None)
        if e != epochs.max():
            ax.axvline(steps[sel].max() + 0.5, color="#bbbbbb", lw=0.8, ls=":")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross-entropy (train)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="upper right")
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig
