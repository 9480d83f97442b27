"""Word-level adapters, over the shared behaviour of :mod:`.hf` (:class:`~.hf._HFAdapter`): the card's words in
(``list[list[str]]``, through ``is_split_into_words=True``: :class:`_WordAdapter`), one value per word out:
:class:`TokenEmbedder` (``embed.text.tokens``) and :class:`NerTagger` (``predict.ner``)."""
from __future__ import annotations

import time
from collections import Counter

import numpy as np
import torch

from atlaslib.models.hf import _HFAdapter
from atlaslib.models.weights import from_pretrained
from atlaslib.progress import progress_bar


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
        sentence without words. Returns ``(sentences, values, sub-words of every sentence)``."""
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
            return [join([parts[j] for j in of_sentence[i]]) if of_sentence[i] else empty() for i in positions]

        space = self._space(kind, rows=rows_per_batch, add_prefix_space=self.add_prefix_space, **settings)
        # the sub-words of every sentence asked, computed or served from the store (``info["cost"]``'s tokens)
        return sentences, space.answer(inputs, compute), sum(sg[4] for sg in segs)


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
