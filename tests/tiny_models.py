"""Tiny random Hugging Face models built locally from configs, for tests (no downloads).

Every builder writes a complete model directory (``config.json``, safetensors weights, tokenizer files)
with ``save_pretrained`` into ``<tmp_path>/<name>`` and returns that directory, so tests go through
the same ``from_pretrained`` code path as real checkpoints. Weights come from a fixed torch seed, so
two builds give identical models and outputs are deterministic.

Builders (names are stable: other test modules import them):

- :func:`tiny_encoder`                 plain BERT encoder (``BertModel``)
- :func:`tiny_assertion_classifier`    BERT sequence classifier, id2label PRESENT / ABSENT / POSSIBLE
- :func:`tiny_nli_classifier`          BERT sequence classifier, id2label ENTAILMENT / NEUTRAL / CONTRADICTION
- :func:`tiny_token_classifier`        BERT token classifier with the given labels (default: i2b2 2010 IOB2)
- :func:`tiny_causal_lm`               GPT-2 causal LM with a small byte-level BPE tokenizer
- :func:`tiny_distilbert_token_classifier`  DistilBERT token classifier (d4data's architecture)
- :func:`tiny_deberta_nli_classifier`  DeBERTa-v2 NLI classifier (the cross-encoder's architecture)

Tokenizers: BERT models share a small WordPiece vocabulary written here (clinical words, single letters
and ``##`` letter pieces, so unknown words split into several sub-words); GPT-2 uses a byte-level BPE
trained in memory with the ``tokenizers`` library on a few sentences.
"""
from __future__ import annotations

import string
from pathlib import Path

import torch

I2B2_LABELS = [
    "O", "B-problem", "I-problem", "B-treatment", "I-treatment", "B-test", "I-test",
]
MACCROBAT_LABELS = [
    "O",
    "B-Sign_symptom", "I-Sign_symptom",
    "B-Disease_disorder", "I-Disease_disorder",
    "B-Medication", "I-Medication",
    "B-Therapeutic_procedure", "I-Therapeutic_procedure",
    "B-Diagnostic_procedure", "I-Diagnostic_procedure",
    "B-Lab_value", "I-Lab_value",
    "B-Biological_structure", "I-Biological_structure",
    "B-Age", "I-Age",
]
ASSERTION_LABELS = ["PRESENT", "ABSENT", "POSSIBLE"]
NLI_LABELS = ["ENTAILMENT", "NEUTRAL", "CONTRADICTION"]

SEED = 1234
MAX_POSITIONS = 64          # small on purpose: tests of truncation / chunking stay cheap

_WORDS = (
    "no denies shortness of breath stridor or air hunger weakness the patient has chest pain fever "
    "cough is negative for with without history and a an in on to was were there evidence increase "
    "sentence question answer yes not absent present possible entity denied mild severe acute left "
    "right blood pressure heart rate lung clear abdomen soft tender ct scan mri showed"
).split()

_CORPUS = [
    "Sentence: No weakness.\nQuestion: In this sentence, is \"weakness\" negated (stated as absent)?\nAnswer: yes",
    "Sentence: The patient has chest pain.\nQuestion: In this sentence, is \"chest pain\" negated?\nAnswer: no",
    "Denies shortness of breath, stridor, or air hunger.",
    "There is no evidence of pneumonia. Fever and cough were present.",
    "Blood pressure and heart rate were normal; lungs clear.",
]


def _bert_vocab() -> list[str]:
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list(string.ascii_lowercase) + list(string.digits) + list("[].,;:!?'\"()-/%+")
    pieces = ["##" + c for c in string.ascii_lowercase + string.digits]
    vocab = specials + chars + pieces
    for w in _WORDS:
        if w not in vocab:
            vocab.append(w)
    return vocab


def _bert_tokenizer():
    from transformers import BertTokenizer

    vocab = {tok: i for i, tok in enumerate(_bert_vocab())}
    return BertTokenizer(vocab=vocab, do_lower_case=True, model_max_length=MAX_POSITIONS)


def _bert_config(**kw):
    from transformers import BertConfig

    return BertConfig(
        vocab_size=len(_bert_vocab()), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=37, max_position_embeddings=MAX_POSITIONS, type_vocab_size=2,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **kw,
    )


def _save(model, tokenizer, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def _labels_kw(labels):
    return dict(
        id2label={i: name for i, name in enumerate(labels)},
        label2id={name: i for i, name in enumerate(labels)},
    )


def tiny_encoder(tmp_path, name: str = "tiny-encoder") -> Path:
    """A plain 2-layer BERT encoder (architectures ``BertModel``)."""
    from transformers import BertModel

    torch.manual_seed(SEED)
    return _save(BertModel(_bert_config()).eval(), _bert_tokenizer(), Path(tmp_path) / name)


def tiny_sequence_classifier(tmp_path, labels, name: str) -> Path:
    from transformers import BertForSequenceClassification

    torch.manual_seed(SEED)
    model = BertForSequenceClassification(_bert_config(num_labels=len(labels), **_labels_kw(labels)))
    return _save(model.eval(), _bert_tokenizer(), Path(tmp_path) / name)


def tiny_assertion_classifier(tmp_path, labels=ASSERTION_LABELS, name: str = "tiny-assertion") -> Path:
    """A BERT sequence classifier whose id2label is PRESENT / ABSENT / POSSIBLE (by default)."""
    return tiny_sequence_classifier(tmp_path, list(labels), name)


def tiny_nli_classifier(tmp_path, labels=NLI_LABELS, name: str = "tiny-nli") -> Path:
    """A BERT sequence-pair classifier whose id2label is ENTAILMENT / NEUTRAL / CONTRADICTION."""
    return tiny_sequence_classifier(tmp_path, list(labels), name)


def tiny_token_classifier(tmp_path, labels=I2B2_LABELS, name: str | None = None) -> Path:
    """A BERT token classifier with the given IOB2 labels (i2b2 2010 by default; see MACCROBAT_LABELS)."""
    from transformers import BertForTokenClassification

    labels = list(labels)
    name = name or ("tiny-ner-" + ("i2b2" if labels == I2B2_LABELS else f"{len(labels)}labels"))
    torch.manual_seed(SEED)
    model = BertForTokenClassification(_bert_config(num_labels=len(labels), **_labels_kw(labels)))
    return _save(model.eval(), _bert_tokenizer(), Path(tmp_path) / name)


def _gpt2_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Tokenizer

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 3, trainer=trainer)
    state = __import__("json").loads(tok.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in state["merges"]]
    return GPT2Tokenizer(vocab=state["vocab"], merges=merges, model_max_length=MAX_POSITIONS)


def tiny_causal_lm(tmp_path, name: str = "tiny-gpt2", max_positions: int = MAX_POSITIONS) -> Path:
    """A 2-layer GPT-2 (architectures ``GPT2LMHeadModel``) with a tiny byte-level BPE tokenizer.
    ``max_positions`` bounds prompt + option length (real kit prompts need a few hundred)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = _gpt2_tokenizer()
    tokenizer.model_max_length = max_positions
    torch.manual_seed(SEED)
    config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=max_positions, n_embd=32, n_layer=2, n_head=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    return _save(GPT2LMHeadModel(config).eval(), tokenizer, Path(tmp_path) / name)


def tiny_distilbert_token_classifier(tmp_path, labels=MACCROBAT_LABELS, name: str = "tiny-distilbert-ner") -> Path:
    """A DistilBERT token classifier (the architecture of d4data/biomedical-ner-all)."""
    from transformers import DistilBertConfig, DistilBertForTokenClassification

    labels = list(labels)
    torch.manual_seed(SEED)
    config = DistilBertConfig(
        vocab_size=len(_bert_vocab()), dim=32, n_layers=2, n_heads=2, hidden_dim=37,
        max_position_embeddings=MAX_POSITIONS, dropout=0.0, attention_dropout=0.0,
        num_labels=len(labels), **_labels_kw(labels),
    )
    return _save(DistilBertForTokenClassification(config).eval(), _bert_tokenizer(), Path(tmp_path) / name)


def tiny_deberta_nli_classifier(tmp_path, labels=("contradiction", "entailment", "neutral"),
                                name: str = "tiny-deberta-nli") -> Path:
    """A DeBERTa-v2 sequence-pair classifier with the label order of cross-encoder/nli-deberta-v3-*
    (contradiction, entailment, neutral); WordPiece tokenizer (no sentencepiece model needed)."""
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

    labels = list(labels)
    torch.manual_seed(SEED)
    config = DebertaV2Config(
        vocab_size=len(_bert_vocab()), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=37, max_position_embeddings=MAX_POSITIONS, type_vocab_size=0,
        relative_attention=True, position_buckets=16, pos_att_type=["p2c", "c2p"],
        position_biased_input=False, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        num_labels=len(labels), **_labels_kw(labels),
    )
    return _save(DebertaV2ForSequenceClassification(config).eval(), _bert_tokenizer(), Path(tmp_path) / name)
