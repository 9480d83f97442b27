"""The NegEx card's variant runs (:mod:`atlaslib.variants`): a run that reads text, again under each of the
card's perturbations (``PERTURBATIONS``) and, for a run that scores answer options, under each prompt of the
card's prompt set (``PROMPT_SET``), with the model and whatever the run trained as they are. A fine-tuned row
runs every training seed's model under each perturbation: its variant cell is a row over the same seeds (each
seed's predictions in ``extra.seed_runs``, the metrics the mean over seeds), as its default run's cell is."""
from __future__ import annotations

import pandas as pd

from ... import results
from ...phases import side
from ...variants import few_shot, inputs_sha256, sample
from ...variants import NOT_APPLICABLE
from .card import MARK, OPTION_PROMPT, OPTIONS, PERTURBATIONS, POSITIVE, PROMPT_SET
from .data import find_target


def marked(sentence: str, span) -> str:
    """The model input of a perturbed sentence: the target at ``span`` wrapped in the card's markers."""
    a, b = span
    return f"{sentence[:a]}{MARK} {sentence[a:b]} {MARK}{sentence[b:]}"


def perturbed_items(test: pd.DataFrame, perturbation, version: str | None = None) -> pd.DataFrame:
    """The test items the perturbation applies to (at most its ``max_items``, by seed-hash rank), with their
    perturbed ``sentence`` and marked ``text`` (every other column as it was), in test order;
    ``attrs["n_applicable"]``: how many it applies to before the sample."""
    rows = []
    for rec in test.to_dict("records"):
        out = perturbation.apply({**rec, "span": find_target(rec["sentence"], rec["concept"])})
        if out is NOT_APPLICABLE:
            continue
        rows.append({**rec, "sentence": out["sentence"], "text": marked(out["sentence"], out["span"])})
    frame = pd.DataFrame(rows, columns=test.columns)
    keep = set(sample(frame["item_id"].tolist(), perturbation.max_items, perturbation.seed, version))
    res = frame[frame["item_id"].isin(keep)].reset_index(drop=True)
    res.attrs["n_applicable"] = len(frame)
    return res


def prompts_for(variant, test: pd.DataFrame, train: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The prompt of each test item under a prompt ``variant`` (its template, else the card's), preceded by
    its ``k_shot`` answered train items (:func:`atlaslib.variants.few_shot`, stratified by decision, the
    prompt set's seed; each answered with the variant's options, positive first); and the examples' ids."""
    template = variant.template or OPTION_PROMPT
    yes, no = variant.options or OPTIONS
    prefix, ids = "", []
    if variant.k_shot:
        ids = few_shot(train["item_id"].tolist(), train["decision"].tolist(), variant.k_shot, PROMPT_SET.seed)
        ex = train.set_index("item_id").loc[ids]
        prefix = "".join(template.format(sentence=s, concept=c) + (yes if d == POSITIVE else no) + "\n\n"
                         for s, c, d in zip(ex["sentence"], ex["concept"], ex["decision"]))
    return [prefix + template.format(sentence=s, concept=c) for s, c in zip(test["sentence"], test["concept"])], ids


@side
def run_variants(card_run, out: dict | None, train: pd.DataFrame, test: pd.DataFrame, *, data_dir=None,
                 n_resamples: int = 1000) -> list[dict]:
    """The variant cells of the finished run ``card_run`` (its :class:`~atlaslib.cards.run.CardRun`, which makes
    and writes them) whose :func:`.runs.run_protocol` outcome is ``out`` (its ``predict``: the same adapter,
    probe head or fine-tuned model): one per perturbation that applies to some test item, and one per prompt
    variant when the run scores answer options; written beside the run's cell
    (:meth:`CardRun.write_variants <atlaslib.cards.run.CardRun.write_variants>`). A variant's metrics are scored
    by the run, as its own are (:meth:`CardRun.score <atlaslib.cards.run.CardRun.score>` of
    :func:`.cells.scored_records`: a row over training seeds as its mean over seeds, each seed's metrics and unit
    counts in its ``extra.seed_runs``). None for a run that did not happen or reads no text (a constant
    baseline)."""
    from ..run import CardRun
    from .cells import predictions, rounded, scored_records, seed_run_records
    from .runs import option_prompts

    cell = card_run.cell
    if out is None or cell.get("status") != "ok" or not getattr(out.get("adapter"), "reads_text", True):
        return []
    protocol = cell["protocol"]
    options_run = out.get("capability") == "score.options"
    jobs = []
    for p in PERTURBATIONS:
        frame = perturbed_items(test, p, cell["version"])
        if len(frame):
            jobs.append((p.spec(), frame, None, OPTIONS, frame.attrs["n_applicable"]))
    if options_run and PROMPT_SET is not None and PROMPT_SET.runs_on(cell["version"], protocol):
        read = set(sample(test["item_id"].tolist(), PROMPT_SET.max_items, PROMPT_SET.seed, cell["version"]))
        sub = test[test["item_id"].isin(read)].reset_index(drop=True)
        for v in PROMPT_SET.variants:
            prompts, ids = prompts_for(v, sub, train)
            jobs.append(({**v.spec(PROMPT_SET), "examples": ids}, sub, prompts, tuple(v.options or OPTIONS), len(test)))
    made = []
    for spec, frame, prompts, options, n_applicable in jobs:
        with results.Timer() as timer:
            res = out["predict"](frame, prompts=prompts, options=options) if options_run else out["predict"](frame)
            full = predictions(frame, {**res, "adapter": out.get("adapter")}, data_dir)  # as the run's own
            scored = scored_records(frame, res, full)   # as the run's: a row over training seeds, every seed's model
            seeded = isinstance(scored, dict)
            # scored as the run's metrics are, by a run of its own (the finished run's resamples stay its own)
            s = card_run.spec
            scorer = CardRun(card_run.module, s.version, s.model, s.protocol, parameters=s.parameters)
            metrics = scorer.score(scored, n_resamples=n_resamples)
            for r in (res["seed_runs"] if seeded else []):
                r.update({k: scorer.seed_scores[r["seed"]][k] for k in ("metrics", "unit_counts")})
        inputs = prompts or (option_prompts(frame) if options_run else frame["text"].tolist())
        details = res.get("details") or {}
        extra = ({"options": details["options"], "option_token_ids": details.get("option_token_ids")}
                 if "options" in details else {})
        if seeded:
            extra["seed_runs"] = seed_run_records(frame["item_id"], res)
        made.append(card_run.variant(spec, metrics=metrics, predictions=rounded(full),
                                     inputs_digest=inputs_sha256(inputs), n_items=len(test),
                                     n_applicable=n_applicable, timing=timer.timing, extra=extra, scored=full))
    card_run.write_variants()
    return made

