"""The settings of a fine-tune recipe and what each means.

Card data (``FINETUNE_RECIPE`` in a card's ``card.py``) names exactly these keys; :func:`.finetune.check_recipe`
checks that and :mod:`.finetune` trains by them. Kept apart from :mod:`.finetune` so that the book can show the
recipes (:func:`atlaslib.pages.facts.finetune_recipes_markdown`) without importing torch.
"""
from __future__ import annotations

#: recipe key -> what it sets
RECIPE_KEYS = {
    "optimizer": "the optimiser (torch class)",
    "learning_rate": "peak learning rate (encoder and head)",
    "epochs": "passes over the train items (fixed; no early stopping)",
    "batch_size": "train items per step",
    "length_grouping": "batches per shuffled group sorted by length before batching (1: plain random batches)",
    "max_length": "sub-words per input, special tokens included",
    "warmup_ratio": "share of the steps with linearly rising learning rate",
    "weight_decay": "AdamW decoupled weight decay (not on biases and LayerNorm)",
    "adam_betas": "AdamW betas",
    "adam_eps": "AdamW epsilon",
    "max_grad_norm": "gradient norm clip",
    "head_dropout": "dropout before the new linear head",
    "seeds": "training seeds, one trained model per seed (each seeds the head init, data order and dropout)",
    "torch_threads": "torch intra-op threads while training and predicting",
    "eval_batch_size": "items per forward pass when predicting",
    "validation": "how the number of steps is chosen",
}
