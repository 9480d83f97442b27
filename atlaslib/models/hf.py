"""Hugging Face adapters: one class per capability, all frozen, CPU float32 by default.

Shared behaviour (:class:`_HFAdapter`):

- weights through :func:`atlaslib.models.from_pretrained` (local cache first; WeightsUnavailable else);
- ``model.eval()`` and ``torch.inference_mode()``; no dropout, no gradient;
- inputs are sorted by token length for batching (less padding) and outputs are put back in input order;
- ``max_length``: option, else the model folder's ``sentence_bert_config.json`` ``max_seq_length`` (what
  sentence-transformers uses), else ``min(tokenizer.model_max_length, config.max_position_embeddings)``;
- a progress bar per call (:func:`progress_bar`): a normal tqdm bar in a terminal, the widget bar in a
  live notebook with ipywidgets, otherwise (logs, CI, papermill kernels without widgets) a plain ASCII
  bar that refreshes at most every 30 s, because tqdm writes a line per refresh there. The environment
  variable ``ATLAS_PROGRESS`` = ``off`` | ``plain`` | ``auto`` overrides (a runner executing notebooks
  with papermill should set ``plain``: widget state is not saved in executed notebooks);
- ``.info``: profile, revision, capability, batch size, dtype, device, max_length, torch threads, pooling
  and the adapter's own fields, for the run spec; ``info["cost"]`` (:class:`Cost`): wall seconds, inputs,
  seconds per input and inputs per second, prompt and completion tokens over the adapter's calls;
- a causal LM (``*ForCausalLM`` / ``*LMHeadModel``, and every ``gguf`` profile) is loaded with its LM head
  for every capability; the embedders read the states of its base model (``model.base_model``: the
  decoder stack with its final norm, as ``AutoModel`` would load it), so one loaded model also serves the
  memorisation probe (:meth:`_HFAdapter.greedy_continuations`).
"""
from __future__ import annotations

import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from atlaslib.models.cost import Cost
from atlaslib.models.registry import ASSERTION_LABELS, NLI_LABELS, Profile, ProfileError, check_texts
from atlaslib.models.weights import from_pretrained, is_causal_lm, resolve_weights

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def progress_bar(total: int, desc: str, enabled: bool = True):
    """A tqdm bar that behaves in terminals, notebooks and logs (see module docstring)."""
    from tqdm import std

    mode = os.environ.get("ATLAS_PROGRESS", "auto").strip().lower()
    if not enabled or mode in ("0", "off", "false", "no", "none"):
        return std.tqdm(total=total, desc=desc, disable=True)
    in_kernel = "ipykernel" in sys.modules
    if mode == "plain" or not (sys.stderr.isatty() or in_kernel):
        return std.tqdm(total=total, desc=desc, mininterval=30.0, maxinterval=300.0, ascii=True,
                        file=sys.stderr, dynamic_ncols=False, ncols=80)
    if in_kernel:
        try:
            import ipywidgets  # noqa: F401
            from tqdm.notebook import tqdm as nb_tqdm
        except ImportError:  # no widgets: a plain bar, without tqdm.auto's IProgress warning
            return std.tqdm(total=total, desc=desc, mininterval=30.0, ascii=True, file=sys.stderr, ncols=80)
        return nb_tqdm(total=total, desc=desc)
    return std.tqdm(total=total, desc=desc, file=sys.stderr)


_check_texts = check_texts  # shared with the rule and baseline adapters


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

    def __init__(self, profile: Profile, *, batch_size: int = 32, max_length: int | None = None,
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

        if torch_threads:
            torch.set_num_threads(int(torch_threads))
        self.profile = profile
        self.batch_size = batch_size
        self.device = device
        self.dtype = dtype
        self.progress = progress
        self.tokenizer = from_pretrained(AutoTokenizer, profile)
        self.causal = is_causal_lm(profile)
        auto_class = "AutoModelForCausalLM" if self.causal else self.auto_class
        self.model = from_pretrained(getattr(transformers, auto_class), profile, dtype=_DTYPES[dtype])
        self.model.to(device).eval()
        #: what the embedders read the last layer of: the model itself, or a causal LM's decoder stack
        self.encoder = self.model.base_model if self.causal and self.auto_class == "AutoModel" else self.model
        self.cost = Cost()
        self.max_length = int(max_length) if max_length else self._default_max_length()
        self.stats: dict = {}
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
        }

    # -- helpers
    def _order(self, lengths, batch_size: int | None = None) -> list[list[int]]:
        """Batches of input indices, longest first (stable), so padding stays small."""
        bs = batch_size or self.batch_size
        if not isinstance(bs, int) or bs < 1:
            raise ValueError(f"{self.profile.name}: batch_size must be a positive integer, got {bs!r}")
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        return [order[i:i + bs] for i in range(0, len(order), bs)]

    def _to(self, enc):
        return {k: v.to(self.device) for k, v in enc.items()}

    def _bos(self) -> list[int]:
        """``[bos id]`` when the tokenizer is configured to put one first, else ``[]``."""
        tok = self.tokenizer
        if getattr(tok, "add_bos_token", False) and tok.bos_token_id is not None:
            return [tok.bos_token_id]
        return []

    def token_ids(self, text: str) -> list[int]:
        """``text``'s token ids without special tokens (what the memorisation probe cuts in halves)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def greedy_continuations(self, prefixes, n_new, batch_size: int | None = None) -> list[list[int]]:
        """Greedy (arg-max) continuation of each token-id prefix by ``n_new[i]`` tokens under the causal LM
        (the BOS id put first when the tokenizer adds one). Batches are left-padded (positions follow the
        attention mask, so a padded prefix continues as it would alone); a continuation that reaches the
        end-of-text token is cut there. Raises TypeError for a model without an LM head."""
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
        t0, n_prompt, n_gen = time.perf_counter(), 0, 0
        bar = progress_bar(len(todo), "continue", self.progress)
        with torch.inference_mode():
            for pos in self._order([len(prefixes[i]) for i in todo], batch_size):
                idx = [todo[j] for j in pos]
                rows = [bos + prefixes[i] for i in idx]
                width = max(len(r) for r in rows)
                ids = torch.full((len(rows), width), pad, dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                for r, row in enumerate(rows):
                    ids[r, width - len(row):] = torch.tensor(row)
                    mask[r, width - len(row):] = 1
                gen = self.model.generate(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                                          max_new_tokens=max(n_new[i] for i in idx), do_sample=False,
                                          num_beams=1, pad_token_id=pad, eos_token_id=eos)
                for r, i in enumerate(idx):
                    new = gen[r, width:width + n_new[i]].tolist()
                    if eos is not None and eos in new:
                        new = new[:new.index(eos)]
                    out[i] = new
                    n_prompt += len(rows[r])
                    n_gen += len(new)
                bar.update(len(idx))
        bar.close()
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
        t0 = time.perf_counter()
        n = len(first)
        if n == 0:
            return np.zeros((0, len(self.label_of)), dtype=np.float32)
        args = (first,) if second is None else (first, second)
        full = self.tokenizer(*args, truncation=False, verbose=False)["input_ids"]
        lengths = [min(len(x), self.max_length) for x in full]
        self.stats["n_truncated"] = self.stats.get("n_truncated", 0) + sum(len(x) > self.max_length for x in full)
        out = np.zeros((n, self.model.config.num_labels), dtype=np.float32)
        bar = progress_bar(n, desc, self.progress)
        with torch.inference_mode():
            for idx in self._order(lengths):
                a = [first[i] for i in idx]
                b = None if second is None else [second[i] for i in idx]
                enc = self.tokenizer(a, b, padding=True, truncation=True, max_length=self.max_length,
                                     return_tensors="pt")
                out[idx] = self.model(**self._to(enc)).logits.float().cpu().numpy()
                bar.update(len(idx))
        bar.close()
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
        # one sequence per prompt for its single-token options, one per multi-token option:
        # (prompt index, [(option index, option ids)], token ids, prompt length)
        seqs, methods = [], []
        by_prompt = [[None] * len(options) for _ in prompts]
        n_prompt_tokens = n_option_tokens = 0
        for i, p in enumerate(prompts):
            p_ids = prefix + tok(p, add_special_tokens=False)["input_ids"]
            if not p_ids:
                raise ValueError(f"score_options: prompt {i} is empty and the tokenizer adds no BOS token; "
                                 "expected a non-empty prompt")
            single = []
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
                by_prompt[i][k] = o_ids
                methods.append(m)
                n_option_tokens += len(o_ids)
                if len(o_ids) == 1:
                    single.append((k, o_ids))
                else:
                    seqs.append((i, [(k, o_ids)], full, len(p_ids)))
            if single:
                seqs.append((i, single, p_ids + [0], len(p_ids)))  # the last id is never read
            n_prompt_tokens += len(p_ids)
        loglik = np.zeros((len(prompts), len(options)), dtype=np.float64)
        pad = tok.pad_token_id
        bar = progress_bar(len(seqs), "options", self.progress)
        with torch.inference_mode():
            for idx in self._order([len(s[2]) for s in seqs]):
                L = max(len(seqs[j][2]) for j in idx) - 1        # the last token is never an input
                ids = torch.full((len(idx), L), pad, dtype=torch.long)
                mask = torch.zeros((len(idx), L), dtype=torch.long)
                for r, j in enumerate(idx):
                    inp = seqs[j][2][:-1]
                    ids[r, :len(inp)] = torch.tensor(inp)
                    mask[r, :len(inp)] = 1
                logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits
                for r, j in enumerate(idx):   # log-softmax only where an option token is read (a vocabulary row
                    i, scored, full, n_p = seqs[j]  # per position: an LLM's full logits are large)
                    for k, o_ids in scored:
                        pos = torch.arange(n_p - 1, n_p - 1 + len(o_ids))
                        logp = torch.log_softmax(logits[r, pos].float(), dim=-1).cpu()
                        loglik[i, k] = float(logp[torch.arange(len(o_ids)), torch.tensor(o_ids)].double().sum())
                del logits
                bar.update(len(idx))
        bar.close()
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

    @property
    def info(self) -> dict:
        return {**super().info, "bos_prefix": self._prefix(), "pad_token_id": self.tokenizer.pad_token_id}


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

    Vectors go through the on-disk embedding cache (:mod:`atlaslib.models.embed_cache`): a text this
    model already embedded (same revision, pooling, max_length, dtype, device) is read back instead of
    run again, and a text repeated within one call is embedded once. Option ``embed_cache=False`` or
    ``ATLAS_EMBED_CACHE=off`` turns it off (then every row is computed, duplicates included).
    ``info["embed_cache"]`` records hits, misses and corrupt entries."""

    capability = "embed.text.pooled"
    pooling = "mean"

    def __init__(self, profile, *, embed_cache: bool = True, **options):
        super().__init__(profile, **options)
        from atlaslib.models import embed_cache as _ec

        self.embed_cache = _ec.for_adapter(self, enabled=embed_cache)
        #: ``info["cost"]`` counts every text of a call; its prompt tokens are those of the texts computed

    @property
    def info(self) -> dict:
        return {**super().info, "embed_cache": self.embed_cache.info}

    def embed(self, texts, batch_size: int | None = None) -> np.ndarray:
        from atlaslib.models.embed_cache import text_sha256

        t0 = time.perf_counter()
        texts = _check_texts(texts, "texts")
        bs = batch_size or self.batch_size
        d = self.model.config.hidden_size
        out = np.zeros((len(texts), d), dtype=np.float32)
        if not texts:
            return out
        cache = self.embed_cache
        if cache.enabled:
            shas = [text_sha256(t) for t in texts]
            first: dict[str, int] = {}
            for i, s in enumerate(shas):
                first.setdefault(s, i)
            todo = []
            for s, i in first.items():
                vec = cache.get(s, (d,))
                if vec is None:
                    todo.append(i)
                else:
                    out[i] = vec
        else:
            shas, first, todo = None, None, list(range(len(texts)))
        # one tokenisation of every input: the model inputs of the texts to embed, and the truncation
        # count of all (a text at max_length tokens is checked again without truncation)
        enc = self.tokenizer(texts, truncation=True, max_length=self.max_length, verbose=False)
        at_limit = [i for i, x in enumerate(enc["input_ids"]) if len(x) >= self.max_length]
        if at_limit:
            full = self.tokenizer([texts[i] for i in at_limit], truncation=False, verbose=False)["input_ids"]
            n_trunc = sum(len(x) > self.max_length for x in full)
        else:
            n_trunc = 0
        self.stats["n_truncated"] = self.stats.get("n_truncated", 0) + n_trunc
        if todo:
            self._forward_pooled(enc, todo, bs, out)
        if cache.enabled:
            for i in todo:
                cache.put(shas[i], out[i])
            for i, s in enumerate(shas):       # repeated texts: copy the first occurrence's row
                if first[s] != i:
                    out[i] = out[first[s]]
        self.cost.add(len(texts), time.perf_counter() - t0, sum(len(enc["input_ids"][i]) for i in todo))
        return out

    def _forward_pooled(self, enc, todo, bs, out):
        """Embed rows ``todo`` of the tokenised inputs ``enc`` into ``out[todo]``: batches sorted by token
        length, right-padded here (pad id, mask 0, pad token type), inference mode, masked mean."""
        tok = self.tokenizer
        pad = {"input_ids": tok.pad_token_id, "token_type_ids": getattr(tok, "pad_token_type_id", 0) or 0}
        keys = [k for k in enc.keys() if k in pad]
        ids = enc["input_ids"]
        bar = progress_bar(len(todo), "embed", self.progress)
        with torch.inference_mode():
            for pos in self._order([len(ids[i]) for i in todo], bs):
                idx = [todo[p] for p in pos]
                width = max(len(ids[i]) for i in idx)
                batch = {}
                for k in keys:
                    a = np.full((len(idx), width), pad[k], dtype=np.int64)
                    for r, i in enumerate(idx):
                        row = enc[k][i]
                        a[r, :len(row)] = row
                    batch[k] = torch.from_numpy(a).to(self.device)
                lens = np.array([len(ids[i]) for i in idx])
                batch["attention_mask"] = torch.from_numpy(
                    (np.arange(width)[None, :] < lens[:, None]).astype(np.int64)).to(self.device)
                h = self.encoder(**batch).last_hidden_state.float()
                m = batch["attention_mask"].unsqueeze(-1).float()
                pooled = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
                out[idx] = pooled.cpu().numpy()
                bar.update(len(idx))
        bar.close()


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

    def _run(self, sentences, batch_size, desc, per_word):
        """Encode segments in length-sorted batches; ``per_word(hidden_or_logits[b], word_ids)`` returns
        one row per word of the segment."""
        sentences, segs = self._segments(sentences)
        self._last_subwords = sum(s[4] for s in segs)
        results = {}
        batches = self._order([s[4] for s in segs], batch_size)
        bar = progress_bar(len(segs), desc, self.progress)
        with torch.inference_mode():
            for idx in batches:
                enc = self.tokenizer([segs[j][3] for j in idx], is_split_into_words=True, padding=True,
                                     truncation=False, return_tensors="pt")
                out = self._forward(self._to(enc))
                for r, j in enumerate(idx):
                    n_words = segs[j][2] - segs[j][1]
                    results[j] = per_word(out[r], enc.word_ids(r), n_words)
                bar.update(len(idx))
        bar.close()
        per_sentence = [[] for _ in sentences]
        for j, seg in enumerate(segs):
            per_sentence[seg[0]].append(results[j])
        return sentences, per_sentence


class TokenEmbedder(_WordAdapter):
    """``embed.text.tokens`` with pooling ``word_mean``: each word's vector is the mean of the
    last-layer states of its sub-words (special tokens excluded). See :class:`_WordAdapter` for long
    sentences and words without sub-words.

    Sentences go through the on-disk embedding cache (key: the sha256 of the sentence's word list; see
    :class:`PooledEmbedder` and :mod:`atlaslib.models.embed_cache`); the word statistics in ``stats``
    count every sentence of the call, cached or not."""

    capability = "embed.text.tokens"
    pooling = "word_mean"

    def __init__(self, profile, *, embed_cache: bool = True, **options):
        super().__init__(profile, **options)
        from atlaslib.models import embed_cache as _ec

        self.embed_cache = _ec.for_adapter(self, enabled=embed_cache,
                                           extra={"add_prefix_space": self.add_prefix_space})

    @property
    def info(self) -> dict:
        return {**super().info, "embed_cache": self.embed_cache.info}

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
        cache = self.embed_cache
        if not cache.enabled:
            sentences, parts = self._run(words, batch_size, "embed words", self._word_means)
            self.cost.add(len(sentences), time.perf_counter() - t0, self._last_subwords)
            return [np.concatenate(p, axis=0).astype(np.float32) if p else np.zeros((0, d), dtype=np.float32)
                    for p in parts]
        from atlaslib.models.embed_cache import words_sha256

        sentences, segs = self._segments(words)          # checks input, counts stats for every sentence
        out: list = [np.zeros((0, d), dtype=np.float32) if not s else None for s in sentences]
        shas = [words_sha256(s) if s else None for s in sentences]
        first: dict[str, int] = {}
        for i, s in enumerate(shas):
            if s is not None:
                first.setdefault(s, i)
        todo = set()
        for s, i in first.items():
            vec = cache.get(s, (len(sentences[i]), d))
            if vec is None:
                todo.add(i)
            else:
                out[i] = vec
        run = [j for j, seg in enumerate(segs) if seg[0] in todo]
        results = {}
        bar = progress_bar(len(run), "embed words", self.progress)
        with torch.inference_mode():
            for pos in self._order([segs[j][4] for j in run], batch_size):
                idx = [run[p] for p in pos]
                enc = self.tokenizer([segs[j][3] for j in idx], is_split_into_words=True, padding=True,
                                     truncation=False, return_tensors="pt")
                h = self._forward(self._to(enc))
                for r, j in enumerate(idx):
                    results[j] = self._word_means(h[r], enc.word_ids(r), segs[j][2] - segs[j][1])
                bar.update(len(idx))
        bar.close()
        parts: dict[int, list] = {i: [] for i in todo}
        for j in run:                                     # segments in sentence, then word order
            parts[segs[j][0]].append(results[j])
        for i in sorted(todo):
            out[i] = np.concatenate(parts[i], axis=0).astype(np.float32)
            cache.put(shas[i], out[i])
        for i, s in enumerate(shas):
            if s is not None and first[s] != i:
                out[i] = out[first[s]].copy()
        self.cost.add(len(sentences), time.perf_counter() - t0, sum(segs[j][4] for j in run))
        return out


class NerTagger(_WordAdapter):
    """``predict.ner``: the model's native label (config.id2label) of each word's first sub-word."""

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
        sentences, parts = self._run(words, batch_size, "tag words", per_word)
        self.cost.add(len(sentences), time.perf_counter() - t0, self._last_subwords)
        return [[lab for part in p for lab in part] for p in parts]

    @property
    def info(self) -> dict:
        return {**super().info, "id2label": {int(k): v for k, v in self.model.config.id2label.items()},
                "word_label": "first sub-word"}
