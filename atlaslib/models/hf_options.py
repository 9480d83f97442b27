"""Option scoring with a causal LM, over the shared behaviour of :mod:`.hf` (:class:`~.hf._HFAdapter`):
:class:`OptionScorer` (``score.options``: the log-likelihood of each answer option after each prompt) and
:class:`OptionNli` (``predict.nli`` of a causal LM: the card's option prompt filled per pair and its options
scored)."""
from __future__ import annotations

import time

import numpy as np
import torch

from atlaslib.models.hf import _HFAdapter, _softmax_rows
from atlaslib.models.registry import NLI_LABELS
from atlaslib.models.registry import check_texts as _check_texts
from atlaslib.progress import progress_bar


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
    #: one prompt per forward pass: on one torch thread (a build worker's share of two cores) SmolLM2 scored the
    #: NegEx prompts 1.5x faster than in batches of 8 rows (``benchmarks/bench_options_speed.py``: 0.54 against
    #: 0.36 items/s, every choice the same, log-likelihoods within 1.2e-5): a batch pads every prompt to its width
    #: bucket and fills its last rows with copies, work a single thread pays in full
    default_rows = 1

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
        """The run spec's fields, with ``lm_head``: how this model's log-probabilities are computed (checked here
        when no call has checked it yet, so a run served wholly by the model-call store records the rule its
        stored answers were computed by, not a default)."""
        return {**super().info, "bos_prefix": self._prefix(), "pad_token_id": self.tokenizer.pad_token_id,
                "lm_head": "at the positions read only" if self._head_only() else "full logits"}


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
