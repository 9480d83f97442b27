"""Protocols: how a model capability turns items into predictions.

- ``items``: item-level tasks (one label per item): zero-shot through a native head or option
  scoring, and the logistic probe on frozen pooled embeddings.
- ``tokens``: token-level tasks (one tag per word): zero-shot NER heads and the word-level probe.
- ``finetune``: the fine-tune protocol (a new head trained with the encoder), over ``finetune_training`` (the
  heads, input encoding, batching and training loop) and ``finetune_cache`` (the weight cache); ``recipe``: the
  recipe's settings, torch-free.
"""
