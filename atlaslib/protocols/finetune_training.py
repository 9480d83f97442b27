"""The fine-tune protocol's trained model (:mod:`.finetune`): the heads and their initialisation, the
deterministic set-up, input encoding, batching and the training loop.

Everything here decides the trained weights: :func:`.finetune_cache.code_sha256` hashes the source text of
these functions and classes into every weight cache key, so a change to their text (a comment inside one
included) trains every fine-tuned model anew. Prediction (:mod:`.finetune`) and the weight cache
(:mod:`.finetune_cache`) live apart, so that a change there does not.
"""
from __future__ import annotations

import contextlib
import os
import time
from typing import Mapping, Sequence

import numpy as np
import torch
from torch import nn

IGNORE_INDEX = -100


class FinetuneError(ValueError):
    """A recipe or training input is not what the fine-tune protocol expects."""


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
def deterministic(threads: int, device: str = "cpu"):
    """Deterministic torch algorithms and ``threads`` intra-op threads inside the block (restored after). On a
    CUDA ``device`` the cuBLAS workspace setting must be in place (set before CUDA started): else one
    :class:`FinetuneError` saying so, before anything is trained."""
    from ..models import devices   # cuBLAS's rule lives with the devices (devices.place sets it before CUDA starts)

    if str(device).startswith("cuda") and not devices.cublas_deterministic():
        raise FinetuneError(f"finetune on {device}: deterministic training needs the environment variable "
                            f"{devices.CUBLAS_VARIABLE}={devices.CUBLAS_VALUES[0]} set before CUDA starts (atlas sets "
                            f"it when it places a model on CUDA; it is {os.environ.get(devices.CUBLAS_VARIABLE)!r} here)")
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
    device = next(model.parameters()).device   # the run's device: batches go where the model is
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
            batch = {k: v.to(device) for k, v in _collate([examples[i] for i in idx], pad_id, keys).items()}
            logits = model(batch)
            if token_level:
                y = _pad([targets[i] for i in idx], IGNORE_INDEX).to(device)
                loss = loss_fn(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            else:
                y = torch.tensor([targets[i] for i in idx], dtype=torch.long, device=device)
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


# ------------------------------------------------------------------------------------------ input encoding

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
