"""The run page's fine-tuning section: the paragraph, the recipe table and the training-loss plot that a card
notebook shows for a ``finetune`` run, every number from the run's ``details``
(:mod:`atlaslib.protocols.finetune`)."""
from __future__ import annotations

import json
from typing import Mapping

import numpy as np

from ..protocols.recipe import RECIPE_KEYS


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
