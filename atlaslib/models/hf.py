"""Hugging Face adapters: one class per capability, all frozen, CPU float32 by default.

Shared behaviour (:class:`_HFAdapter`):

- weights through :func:`atlaslib.models.from_pretrained` (local cache first; WeightsUnavailable else);
- ``model.eval()`` and ``torch.inference_mode()``; no dropout, no gradient;
- every output is a model call of the store (:mod:`atlaslib.models.calls`): read back when the model already
  answered that exact input, else computed in fixed-shape batches (inputs grouped by width bucket, ``batch_size``
  rows a batch, the last batch filled with copies; :meth:`_HFAdapter._fixed`), so an input's outputs never depend
  on the other inputs of its call, and put back in input order;
- ``torch_threads``: option, else ``$ATLAS_TORCH_THREADS`` (the runner sets each worker's share of the cores);
- ``max_length``: option, else the model folder's ``sentence_bert_config.json`` ``max_seq_length`` (what
  sentence-transformers uses), else ``min(tokenizer.model_max_length, config.max_position_embeddings)``;
- a progress bar per call (:func:`atlaslib.progress.progress_bar`: terminal, notebook and log alike);
- ``.info``: profile, revision, capability, batch size, dtype, device, max_length, torch threads, pooling
  and the adapter's own fields, for the run spec; ``info["cost"]`` (:class:`Cost`): wall seconds, inputs,
  seconds per input and inputs per second, prompt and completion tokens over the adapter's calls;
- a causal LM (``*ForCausalLM`` / ``*LMHeadModel``, and every ``gguf`` profile) is loaded with its LM head
  for every capability; the embedders read the states of its base model (``model.base_model``: the
  decoder stack with its final norm, as ``AutoModel`` would load it), so one loaded model also serves the
  memorisation probe (:meth:`_HFAdapter.greedy_continuations`);
- a model's identity in the store holds the code of this module and of its families' modules (:data:`CODE_FILES`),
  one digest for every adapter, so the adapters of one model share the store's entries; what only describes an
  adapter for its run spec (its ``info``, :data:`atlaslib.models.calls.RECORD_ONLY`) is left out of it.

The families: this module holds the shared base and the text-level adapters (:class:`AssertionClassifier`,
:class:`NliClassifier`, :class:`PooledEmbedder`); :mod:`.hf_options` the option scorers of causal LMs
(:class:`~.hf_options.OptionScorer`, :class:`~.hf_options.OptionNli`); :mod:`.hf_words` the word-level adapters
(:class:`~.hf_words.TokenEmbedder`, :class:`~.hf_words.NerTagger`).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from atlaslib.models import calls
from atlaslib.models.cost import EVERY_ITEM, Cost
from atlaslib.progress import progress_bar
from atlaslib.models.registry import ASSERTION_LABELS, NLI_LABELS, Profile, ProfileError, check_texts, source_of
from atlaslib.models.weights import from_pretrained, is_causal_lm, resolve_weights

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


_check_texts = check_texts  # shared with the rule and baseline adapters

#: rows of a greedy-continuation batch: one value for every adapter of a model, so they share the store's entries
CONTINUATION_ROWS = 8
THREADS_ENV = "ATLAS_TORCH_THREADS"
#: the code in every adapter's identity in the model-call store (:meth:`_HFAdapter.call_identity`): this module and
#: its families' modules, read as files (they import this one). One digest for all, so the adapters of one model
#: share the store's entries (a greedy continuation, whichever adapter asked for it)
CODE_FILES = tuple(str(Path(__file__).with_name(name)) for name in ("hf.py", "hf_options.py", "hf_words.py"))


def threads_from_env() -> int | None:
    """The torch intra-op thread count a runner gives its kernels (``$ATLAS_TORCH_THREADS``: each worker's share
    of the cores); None when unset (torch's default)."""
    value = os.environ.get(THREADS_ENV, "").strip()
    if not value:
        return None
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"${THREADS_ENV} is {value!r}; expected a whole number of threads >= 1") from None
    if n < 1:
        raise ValueError(f"${THREADS_ENV} is {value!r}; expected a whole number of threads >= 1")
    return n


def map_label_names(id2label: dict, label_map: dict, targets, model: str) -> dict[int, str]:
    """Native class index -> atlas label, via ``label_map`` (case-insensitive keys) or equal names.

    ``targets`` are the atlas labels (e.g. PRESENT/ABSENT/POSSIBLE); a native name that is neither a
    ``label_map`` key nor (case-insensitively) a target raises naming the model and every such name.
    """
    canon = {t.lower(): t for t in targets}
    lmap = {}
    for k, v in (label_map or {}).items():
        if str(v).lower() not in canon:
            raise ProfileError(f"model {model!r}: label_map value {v!r} is not one of {list(targets)}")
        lmap[str(k).strip().lower()] = canon[str(v).lower()]
    out, unknown = {}, []
    for idx, name in sorted(((int(i), str(n)) for i, n in id2label.items())):
        key = name.strip().lower()
        if key in lmap:
            out[idx] = lmap[key]
        elif key in canon:
            out[idx] = canon[key]
        else:
            unknown.append(name)
    if unknown:
        raise ProfileError(
            f"model {model!r}: label name(s) {unknown} in config.id2label cannot be mapped to "
            f"{list(targets)}; add them to the profile's label_map")
    return out


def _code_digest() -> str:
    """The code part of every adapter's identity in the model-call store: the digest of the digests
    (:func:`atlaslib.models.calls.code_digest`) of the files of :data:`CODE_FILES`."""
    return calls.digest([calls.code_digest(f) for f in CODE_FILES])


class _HFAdapter:
    capability = ""
    auto_class = "AutoModel"
    pooling = None
    #: the rows of a fixed-shape batch when the caller gives no ``batch_size``
    default_rows = 8

    def __init__(self, profile: Profile, *, batch_size: int | None = None, max_length: int | None = None,
                 device: str = "cpu", dtype: str = "float32", torch_threads: int | None = None,
                 progress: bool = True, **unknown):
        if unknown:
            raise TypeError(f"{type(self).__name__} ({profile.name}): unknown option(s) {sorted(unknown)}; "
                            "allowed: batch_size, max_length, device, dtype, torch_threads, progress")
        batch_size = self.default_rows if batch_size is None else batch_size
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"{profile.name}: batch_size must be a positive integer, got {batch_size!r}")
        if dtype not in _DTYPES:
            raise ValueError(f"{profile.name}: dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
        import transformers
        from transformers import AutoTokenizer

        torch_threads = torch_threads or threads_from_env()
        if torch_threads:
            torch.set_num_threads(int(torch_threads))
        self.profile = profile
        self.batch_size = batch_size
        self.device = device
        self.dtype = dtype
        self.progress = progress
        self.tokenizer = from_pretrained(AutoTokenizer, profile)
        self.plain_tokenizer = self.tokenizer   # the folder's own (the word adapters may replace self.tokenizer)
        self.causal = is_causal_lm(profile)
        auto_class = "AutoModelForCausalLM" if self.causal else self.auto_class
        self.model = from_pretrained(getattr(transformers, auto_class), profile, dtype=_DTYPES[dtype])
        self.model.to(device).eval()
        #: what the embedders read the last layer of: the model itself, or a causal LM's decoder stack
        self.encoder = self.model.base_model if self.causal and self.auto_class == "AutoModel" else self.model
        self.cost = Cost(tokens_of=EVERY_ITEM)   # every adapter here counts the tokens of every item asked
        self.max_length = int(max_length) if max_length else self._default_max_length()
        self.stats: dict = {}
        self._spaces: dict = {}
        self._fix_padding()

    def _fix_padding(self):
        """Right padding always (masked positions never precede real ones, so absolute positions stay
        those of an unpadded sequence); a tokenizer without a pad token (GPT-2, Llama) pads with its EOS
        (or UNK) token, which the attention mask hides. Recorded in ``info["padding"]``."""
        tok = self.tokenizer
        tok.padding_side = "right"
        self.pad_note = "tokenizer pad token"
        if tok.pad_token is None:
            fallback = tok.eos_token or tok.unk_token
            if fallback is None:
                raise ProfileError(f"model {self.profile.name!r}: tokenizer has no pad, eos or unk token to pad with")
            tok.pad_token = fallback
            self.pad_note = f"pad token set to {fallback!r} (id {tok.pad_token_id}); masked"
        if getattr(self.model.config, "pad_token_id", None) is None:
            self.model.config.pad_token_id = tok.pad_token_id

    def _default_max_length(self) -> int:
        loc, _ = resolve_weights(self.profile)
        st = Path(loc) / "sentence_bert_config.json"
        if st.is_file():
            from ..jsonio import load

            try:  # a file that cannot be read, or of another shape, is passed over: the model's own limits follow
                v = load(st, what="sentence_bert_config.json")
                v = v.get("max_seq_length") if isinstance(v, dict) else None
                if v:
                    return int(v)
            except (ValueError, TypeError, OverflowError):
                pass
        cands = [getattr(self.model.config, "max_position_embeddings", None),
                 getattr(self.model.config, "n_positions", None)]
        tml = getattr(self.tokenizer, "model_max_length", None)
        if tml and tml < 1_000_000:
            cands.append(tml)
        cands = [int(c) for c in cands if c]
        return min(cands) if cands else 512

    @property
    def info(self) -> dict:
        return {
            "profile": self.profile.name,
            "source": self.profile.source,
            "location": self.profile.location,
            "revision": self.profile.revision,
            "capability": self.capability,
            "adapter": f"{type(self).__module__}.{type(self).__name__}",
            "model_class": type(self.model).__name__,
            "batch_size": self.batch_size,
            "dtype": self.dtype,
            "device": self.device,
            "max_length": self.max_length,
            "torch_threads": torch.get_num_threads(),
            "pooling": self.pooling,
            "padding": f"right; {self.pad_note}",
            "stats": dict(self.stats),
            "cost": self.cost.to_dict(),
            "batches": f"fixed shape: {self.batch_size} rows, widths rounded up to a multiple of {calls.WIDTH} tokens",
            "model_calls": {k[0]: sp.spec for k, sp in self._spaces.items()},
        }

    # -- model calls: the store (atlaslib.models.calls), fixed-shape batches
    def call_identity(self) -> dict | None:
        """The model's identity in the model-call store's keys: the weights' pin (hub commit with the repo id,
        wheel archive or GGUF file sha256, a local folder's content digest), the model class, dtype, device,
        the code of this module and its families' (:data:`CODE_FILES`) and the versions of the packages that change
        the numbers. None for a model without a pinned revision (its calls are computed every time, never stored)."""
        prof = self.profile
        if not prof.revision:
            return None
        src = source_of(prof)
        names = ("torch", "transformers", "tokenizers") + tuple(src.packages)
        return {"source": prof.source, "repo": prof.location if src.from_hub else None,
                "revision": prof.revision, "model_class": type(self.model).__name__, "dtype": self.dtype,
                "device": torch.device(self.device).type, "code": _code_digest(),
                "versions": calls.package_versions(names)}

    def _space(self, kind: str, *, rows: int | None = None, switch: str | None = None, enabled: bool = True,
               **settings) -> calls.CallSpace:
        """The store's space of this model's ``kind`` of call under ``settings`` (with max_length and the batch
        shape, which decide the outputs' last bits)."""
        rows = self._rows(rows)
        settings = {"max_length": self.max_length, "batch": [rows, calls.WIDTH], **settings}
        key = (kind, switch, bool(enabled), json.dumps(settings, sort_keys=True, default=str))
        if key not in self._spaces:
            self._spaces[key] = calls.CallSpace(self.call_identity(), kind, settings, enabled=enabled,
                                                switch=switch)
        return self._spaces[key]

    def _rows(self, rows: int | None) -> int:
        rows = rows or self.batch_size
        if not isinstance(rows, int) or isinstance(rows, bool) or rows < 1:
            raise ValueError(f"{self.profile.name}: batch_size must be a positive integer, got {rows!r}")
        return rows

    def _fixed(self, rows: list[dict], positions: list[int], n_rows: int | None = None, *, left: bool = False,
               cap: int | None = -1):
        """Fixed-shape batches of the model inputs ``rows[p]`` (``input_ids`` and any other id row) at
        ``positions``: ``(positions in the batch, tensors)``; each input padded to its width bucket
        (:func:`atlaslib.models.calls.fixed_batches`; right-padded, or left-padded with ``left``), the batch
        filled with copies of its first input to exactly ``n_rows`` rows, so an input's outputs never depend
        on its neighbours."""
        n_rows = self._rows(n_rows)
        pad = {"input_ids": self.tokenizer.pad_token_id,
               "token_type_ids": getattr(self.tokenizer, "pad_token_type_id", 0) or 0}
        id_keys = [k for k in ("input_ids", "token_type_ids") if rows and k in rows[positions[0]]] if positions \
            else []
        lengths = [len(rows[p]["input_ids"]) for p in positions]
        cap = self.max_length if cap == -1 else cap
        for width, members in calls.fixed_batches(lengths, n_rows, cap=cap):
            idx = [positions[m] for m in members]
            fill = [rows[p] for p in idx] + [rows[idx[0]]] * (n_rows - len(idx))
            batch = {}
            for k in id_keys:
                a = np.full((n_rows, width), pad[k], dtype=np.int64)
                for r, row in enumerate(fill):
                    n = len(row[k])
                    if left:
                        a[r, width - n:] = row[k]
                    else:
                        a[r, :n] = row[k]
                batch[k] = torch.from_numpy(a).to(self.device)
            lens = np.array([len(row["input_ids"]) for row in fill])
            cols = np.arange(width)[None, :]
            mask = (cols >= width - lens[:, None]) if left else (cols < lens[:, None])
            batch["attention_mask"] = torch.from_numpy(mask.astype(np.int64)).to(self.device)
            yield idx, batch

    def _bos(self) -> list[int]:
        """``[bos id]`` when the tokenizer is configured to put one first, else ``[]``."""
        tok = self.tokenizer
        if getattr(tok, "add_bos_token", False) and tok.bos_token_id is not None:
            return [tok.bos_token_id]
        return []

    def token_ids(self, text: str) -> list[int]:
        """``text``'s token ids without special tokens (what the memorisation probe cuts in halves), by the
        tokenizer as the model folder gives it (never the word adapters' prefix-space variant), so every
        adapter of one model cuts a sentence the same way."""
        return list(self.plain_tokenizer(text, add_special_tokens=False)["input_ids"])

    def greedy_continuations(self, prefixes, n_new, batch_size: int | None = None) -> list[list[int]]:
        """Greedy (arg-max) continuation of each token-id prefix by ``n_new[i]`` tokens under the causal LM
        (the BOS id put first when the tokenizer adds one). Batches are left-padded (positions follow the
        attention mask, so a padded prefix continues as it would alone) and of a fixed shape (see
        :meth:`_fixed`); a continuation that reaches the end-of-text token is cut there. Each continuation is
        a model call of the store (the same for every adapter of the model). Raises TypeError for a model
        without an LM head."""
        if not self.causal:
            raise TypeError(f"{self.profile.name}: greedy continuation needs a causal LM")
        prefixes = [list(p) for p in prefixes]
        n_new = [int(n) for n in n_new]
        if len(prefixes) != len(n_new):
            raise ValueError(f"greedy_continuations: {len(prefixes)} prefixes, {len(n_new)} lengths")
        out: list = [[] for _ in prefixes]
        bos, pad = self._bos(), self.tokenizer.pad_token_id
        eos = self.tokenizer.eos_token_id
        todo = [i for i, (p, n) in enumerate(zip(prefixes, n_new)) if n > 0 and (p or bos)]
        rows = self._rows(batch_size or CONTINUATION_ROWS)
        inputs = [{"input_ids": bos + prefixes[i], "n_new": n_new[i]} for i in todo]
        t0, n_prompt, n_gen = time.perf_counter(), 0, 0

        def compute(positions):
            got = {}
            bar = progress_bar(len(positions), "continue", self.progress)
            with torch.inference_mode():
                for idx, batch in self._fixed(inputs, positions, rows, left=True, cap=None):
                    width = batch["input_ids"].shape[1]
                    gen = self.model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                                              max_new_tokens=max(inputs[j]["n_new"] for j in idx), do_sample=False,
                                              num_beams=1, pad_token_id=pad, eos_token_id=eos)
                    for r, j in enumerate(idx):
                        new = gen[r, width:width + inputs[j]["n_new"]].tolist()
                        if eos is not None and eos in new:
                            new = new[:new.index(eos)]
                        got[j] = {"ids": np.asarray(new, dtype=np.int64)}
                    bar.update(len(idx))
            bar.close()
            return [got[j] for j in positions]

        space = self._space("continue.greedy", rows=rows, max_length=None)
        values = space.answer(inputs, compute)
        for j, i in enumerate(todo):
            out[i] = [int(x) for x in values[j]["ids"]]
            n_prompt += len(inputs[j]["input_ids"])
            n_gen += len(out[i])
        self.stats["last_continuations"] = {"sequences": len(todo), "prompt_tokens": n_prompt,
                                            "generated_tokens": n_gen,
                                            "wall_seconds": round(time.perf_counter() - t0, 3)}
        return out


# ============================================================================ item-level classifiers

class _SequenceClassifier(_HFAdapter):
    auto_class = "AutoModelForSequenceClassification"
    targets: tuple = ()

    def __init__(self, profile, **options):
        super().__init__(profile, **options)
        self.label_of = map_label_names(self.model.config.id2label, profile.label_map, self.targets,
                                        profile.name)

    def _logits(self, first: list[str], second: list[str] | None, desc: str) -> np.ndarray:
        """The head's logits per text (or text pair), each a model call of the store (its input: the token ids,
        truncated at ``max_length``)."""
        t0 = time.perf_counter()
        n = len(first)
        if n == 0:
            return np.zeros((0, len(self.label_of)), dtype=np.float32)
        args = (first,) if second is None else (first, second)
        full = self.tokenizer(*args, truncation=False, verbose=False)["input_ids"]
        lengths = [min(len(x), self.max_length) for x in full]
        self.stats["n_truncated"] = self.stats.get("n_truncated", 0) + sum(len(x) > self.max_length for x in full)
        enc = self.tokenizer(*args, truncation=True, max_length=self.max_length, verbose=False)
        keys = [k for k in ("input_ids", "token_type_ids") if k in enc]
        rows = [{k: list(enc[k][i]) for k in keys} for i in range(n)]

        def compute(positions):
            got = {}
            bar = progress_bar(len(positions), desc, self.progress)
            with torch.inference_mode():
                for idx, batch in self._fixed(rows, positions):
                    lg = self.model(**batch).logits.float().cpu().numpy()
                    for r, i in enumerate(idx):
                        got[i] = {"logits": lg[r]}
                    bar.update(len(idx))
            bar.close()
            return [got[i] for i in positions]

        values = self._space(f"{self.capability}.logits").answer(rows, compute)
        out = np.stack([v["logits"] for v in values]).astype(np.float32)
        self.cost.add(n, time.perf_counter() - t0, sum(lengths))
        return out

    def _labels(self, logits: np.ndarray) -> list[str]:
        return [self.label_of[int(j)] for j in logits.argmax(axis=1)]

    @property
    def info(self) -> dict:
        return {**super().info, "id2label": {int(k): v for k, v in self.model.config.id2label.items()},
                "label_of": dict(self.label_of)}


class AssertionClassifier(_SequenceClassifier):
    """``predict.assertion`` with a sequence-classification head on the marked sentence
    (``... [entity] AIR HUNGER [entity] ...``, passed as is)."""

    capability = "predict.assertion"
    targets = ASSERTION_LABELS

    def predict_assertion(self, marked_texts) -> list[str]:
        texts = _check_texts(marked_texts, "marked_texts")
        return self._labels(self._logits(texts, None, "assertion"))

    def assertion_proba(self, marked_texts) -> np.ndarray:
        """Softmax over the native classes, columns ordered PRESENT, ABSENT, POSSIBLE (summed when
        several native classes map to one label)."""
        logits = self._logits(_check_texts(marked_texts, "marked_texts"), None, "assertion")
        p = torch.softmax(torch.from_numpy(logits), dim=1).numpy()
        out = np.zeros((len(p), len(self.targets)), dtype=np.float32)
        for j, lab in self.label_of.items():
            out[:, self.targets.index(lab)] += p[:, j]
        return out


def _softmax_rows(scores) -> np.ndarray:
    """Row-wise softmax in float64 (scipy's; an empty batch stays empty)."""
    from scipy.special import softmax

    s = np.asarray(scores, dtype=np.float64)
    return softmax(s, axis=1) if len(s) else np.zeros((0, 0))


class NliClassifier(_SequenceClassifier):
    """``predict.nli``: a sequence-pair head on (premise, hypothesis); labels from config.id2label mapped
    to entailment / neutral / contradiction (profile label_map, else case-insensitive equal names).
    :meth:`last_label_probabilities` gives the last call's softmax per pair (recorded beside the labels,
    never deciding them)."""

    capability = "predict.nli"
    targets = NLI_LABELS

    def predict_nli(self, premises, hypotheses) -> list[str]:
        p = _check_texts(premises, "premises")
        h = _check_texts(hypotheses, "hypotheses")
        if len(p) != len(h):
            raise ValueError(f"predict_nli: {len(p)} premises but {len(h)} hypotheses; expected equal lengths")
        logits = self._logits(p, h, "nli")
        self.last_logits = logits
        return self._labels(logits)

    def last_label_probabilities(self) -> list[dict] | None:
        """Per pair of the last :meth:`predict_nli` call, ``{label: probability}``: the softmax over the head's
        native classes, summed into the NLI label each maps to (None before any call)."""
        logits = getattr(self, "last_logits", None)
        if logits is None:
            return None
        p = _softmax_rows(logits)
        out = []
        for row in p:
            d = dict.fromkeys(sorted(set(self.label_of.values()), key=NLI_LABELS.index), 0.0)
            for j, lab in self.label_of.items():
                d[lab] += float(row[j])
            out.append(d)
        return out


# ============================================================================ embeddings

class PooledEmbedder(_HFAdapter):
    """``embed.text.pooled``: frozen last layer, attention-masked mean over tokens, no normalisation
    (sentence-transformers' Pooling(mean) before its Normalize module).

    Each text's vector is a model call of the store (:mod:`atlaslib.models.calls`; its input: the text's token
    ids): a text this model already embedded is read back instead of run again, and a text repeated within one
    call is embedded once. Option ``embed_cache=False`` or ``ATLAS_EMBED_CACHE=off`` (or ``ATLAS_MODEL_CALLS=off``)
    computes every text and stores nothing. ``info["model_calls"]`` says whether the store is on; the run's cell counts the calls made and served."""

    capability = "embed.text.pooled"
    pooling = "mean"

    def __init__(self, profile, *, embed_cache: bool = True, **options):
        super().__init__(profile, **options)
        self.embed_cache = bool(embed_cache)
        #: ``info["cost"]`` counts every text of a call; its prompt tokens are those of every text, computed or
        #: served from the store

    def embed(self, texts, batch_size: int | None = None) -> np.ndarray:
        t0 = time.perf_counter()
        texts = _check_texts(texts, "texts")
        rows_per_batch = self._rows(batch_size)
        d = self.model.config.hidden_size
        if not texts:
            return np.zeros((0, d), dtype=np.float32)
        # one tokenisation of every input: the model inputs, and the truncation count of all (a text at
        # max_length tokens is checked again without truncation)
        enc = self.tokenizer(texts, truncation=True, max_length=self.max_length, verbose=False)
        at_limit = [i for i, x in enumerate(enc["input_ids"]) if len(x) >= self.max_length]
        if at_limit:
            full = self.tokenizer([texts[i] for i in at_limit], truncation=False, verbose=False)["input_ids"]
            n_trunc = sum(len(x) > self.max_length for x in full)
        else:
            n_trunc = 0
        self.stats["n_truncated"] = self.stats.get("n_truncated", 0) + n_trunc
        keys = [k for k in ("input_ids", "token_type_ids") if k in enc]
        rows = [{k: list(enc[k][i]) for k in keys} for i in range(len(texts))]
        def compute(positions):
            got = {}
            bar = progress_bar(len(positions), "embed", self.progress)
            with torch.inference_mode():
                for idx, batch in self._fixed(rows, positions, rows_per_batch):
                    h = self.encoder(**batch).last_hidden_state.float()
                    m = batch["attention_mask"].unsqueeze(-1).float()
                    pooled = ((h * m).sum(1) / m.sum(1).clamp(min=1e-9)).cpu().numpy()
                    for r, i in enumerate(idx):
                        got[i] = {"v": pooled[r]}
                    bar.update(len(idx))
            bar.close()
            return [got[i] for i in positions]

        space = self._space("embed.text.pooled", rows=rows_per_batch, switch="ATLAS_EMBED_CACHE",
                            enabled=self.embed_cache, pooling=self.pooling, layer="last")
        values = space.answer(rows, compute)
        out = np.stack([v["v"] for v in values]).astype(np.float32)
        self.cost.add(len(texts), time.perf_counter() - t0, sum(len(r["input_ids"]) for r in rows))
        return out
