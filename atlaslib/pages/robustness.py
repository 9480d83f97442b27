"""The robustness page of one (card, split version), rendered from result cells: each run against its variants
(:mod:`atlaslib.variants`; the numbers from :func:`atlaslib.analysis.robustness`).

- the card's perturbations: name, version, why each keeps the gold label, its parameters and seed;
- the robustness table, model × perturbation: the paired difference of the primary metric (perturbed −
  default run) with its paired interval over the card's resampling unit, McNemar's b and c, the exact p with
  Holm over the table, and how many items the perturbation read, of those it applies to; as the CSV download
  ``robustness-<card>-<version>.csv``;
- 20 perturbed inputs per perturbation (from the data, by seed-hash rank; ids only in a publish build or on a
  gated card, as in the item explorer);
- for runs with a prompt set: each prompt variant's paired comparison with the card's prompt, and the spread
  of the primary metric across prompts beside its spread across models.

The leaderboard's "worst perturbation" column (:func:`worst_text`) reads the same table.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd

from ..escape import md

#: perturbed inputs shown per perturbation
N_SAMPLES = 20
MISSING = "—"

_CACHE: dict = {}


def _variant_cells(cells: list[dict]) -> list[dict]:
    from ..variants import of_cell

    out = []
    for c in cells:
        if c.get("status") == "ok":
            out += of_cell(c)
    return out


def table_for(card, version: str, cells: list[dict]) -> pd.DataFrame:
    """:func:`atlaslib.analysis.robustness` of the version's ok cells and the variant cells beside them
    (computed once per build for the same cells)."""
    from ..analysis import robustness

    base = [c for c in cells if c["card"] == card.name and c["version"] == version and c.get("status") == "ok"]
    variants = _variant_cells(base)
    key = (card.name, version, tuple(sorted((c.get("_path") or "", c.get("run_key") or "") for c in base + variants)))
    if key not in _CACHE:
        _CACHE.clear() if len(_CACHE) > 32 else None
        _CACHE[key] = robustness(base + variants)
    return _CACHE[key]


def _num(v, digits=3, signed=False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{float(v):+.{digits}f}" if signed else f"{float(v):.{digits}f}"


def _p(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return "< 0.001" if v < 0.001 else f"{v:.3f}"


def difference_text(row) -> str:
    """``−0.052 [−0.071, −0.030]``: the paired difference and its interval."""
    ci = "" if any(isinstance(x, float) and math.isnan(x) for x in (row["ci_low"], row["ci_high"])) else \
        f" [{_num(row['ci_low'], signed=True)}, {_num(row['ci_high'], signed=True)}]"
    return _num(row["difference"], signed=True) + ci


def worst_text(card, version: str, cells: list[dict], cell: dict) -> str:
    """The leaderboard's "worst perturbation" of ``cell``'s run: the perturbation that costs its primary
    metric most, with the paired difference and interval (``*`` when significant after Holm), or "—"."""
    from ..analysis.perturbed import worst

    table = table_for(card, version, cells)
    if table.empty:
        return MISSING
    w = worst(table, card.higher_is_better.get(card.primary_metric, True))
    w = w[(w["model"] == cell["model"]) & (w["protocol"] == cell["protocol"])]
    if w.empty:
        return MISSING
    r = w.iloc[0]
    return f"{md(r['variant'])} {difference_text(r)}" + ("\\*" if bool(r["significant"]) else "")


def run_frame(cells: list[dict]) -> pd.DataFrame:
    """A run page's table of its own variants (``cells``: the run's cell and its variant cells): per variant the
    items read, the primary metric of the run and of the variant on them, the paired difference with its
    interval, McNemar's b and c and the exact p (Holm over the run's variants of one kind)."""
    from ..analysis import robustness

    t = robustness(cells)
    if t.empty:
        return t
    metric = t["metric"].iloc[0]
    return pd.DataFrame({"variant": t["variant"] + " (" + t["kind"] + ")", "items read": t["n_read"],
                         "of applicable": t["n_applicable"], f"{metric} (this run)": t["default"].round(3),
                         f"{metric} (variant)": t["variant_value"].round(3),
                         "difference [95 %]": [difference_text(r) for _, r in t.iterrows()],
                         "b": t["b"], "c": t["c"], "p": t["p_mcnemar"].map(_p),
                         "p (Holm)": t["p_holm"].map(_p)}).set_index("variant")


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] +
                     ["| " + " | ".join(r) + " |" for r in rows])


def _samples(card, version: str, publish: bool) -> str:
    """20 perturbed inputs per perturbation (the card pages module's ``perturbation_samples``), or the ids
    only where the text may not be published."""
    from ..cards import card_pages

    mod = card_pages(card)
    make = getattr(mod, "perturbation_samples", None) if mod is not None else None
    if make is None:
        return ""
    ids_only = publish or card.gated
    out = ["## Perturbed inputs", "",
           f"The first {N_SAMPLES} test items by seed-hash rank that each perturbation applies to, as the model "
           "reads them." + (" This build shows item ids only: the items' text is not published with this "
                            "build." if ids_only else ""), ""]
    for p in card.perturbations:
        frame = make(version, p, N_SAMPLES)
        out += [f"**{md(p.key)}** ({len(frame)} shown)", ""]
        if ids_only:
            out += [", ".join(f"`{i}`" for i in frame["item_id"]) or "—", ""]
            continue
        cols = [c for c in frame.columns]
        out += [_md_table(cols, [[md(str(v)) for v in r] for r in frame.itertuples(index=False)]), ""]
    return "\n".join(out)


def render(card, version: str, cells: list[dict], page_dir: Path, src: Path, publish: bool = False) -> str | None:
    """The page body, or None when the version has no variant cells."""
    table = table_for(card, version, cells)
    if table.empty:
        return None
    metric = table["metric"].iloc[0].replace("_", " ")
    unit = table["unit"].iloc[0]
    out = []
    pert = table[table["kind"] == "perturbation"]
    if len(pert):
        out += ["Every run that reads text ran again under each of the card's perturbations, with the same model "
                "and whatever the run trained (the probe's head, the fine-tuned encoder) as they were: nothing is "
                "trained on perturbed text. A perturbation changes the input and keeps the gold label; why each "
                "one keeps it:", ""]
        out.append(_md_table(["perturbation", "why the gold label stays", "parameters", "seed"],
                             [[f"`{p.key}`", md(p.why), md(", ".join(f"{k}={v}" for k, v in p.parameters.items()
                                                                     if not isinstance(v, (tuple, list)))
                                                            or "—"), str(p.seed)] for p in card.perturbations]))
        out += ["", "## Robustness table", "",
                f"Per run and perturbation: {metric} on the items the perturbation read, default run and perturbed, "
                f"the paired difference (perturbed − default) with its 95 % paired percentile interval (both runs "
                f"resampled together: {md(unit)}), McNemar's b (items the default run got right and the perturbed "
                "run wrong) and c (the reverse), the exact p and Holm's adjustment over this table. \\* = "
                "significant at 5 % after Holm.", ""]
        rows = []
        for _, r in pert.iterrows():
            rows.append([md(r["model"]), r["protocol"].replace("_", "_<wbr>"), f"`{r['variant']}`",
                         f"{r['n_read']:,} of {r['n_applicable']:,}", _num(r["default"]), _num(r["variant_value"]),
                         difference_text(r) + ("\\*" if r["significant"] else ""), str(r["b"]), str(r["c"]),
                         _p(r["p_mcnemar"]), _p(r["p_holm"])])
        out.append(":::{container} atlas-leaderboard\n" + _md_table(
            ["model", "protocol", "perturbation", "items read (applicable)", "default", "perturbed",
             "difference [95 %]", "b", "c", "p", "p (Holm)"], rows) + "\n:::\n")
        dl = page_dir / "_downloads"
        dl.mkdir(parents=True, exist_ok=True)
        csv = dl / f"robustness-{card.name}-{version}.csv"
        pert.to_csv(csv, index=False, float_format="%.6g")
        out += [f"{{download}}`robustness-{card.name}-{version}.csv <{os.path.relpath(csv, page_dir)}>`", ""]
        out.append(_samples(card, version, publish))
    prompts = table[table["kind"] == "prompt"]
    if len(prompts):
        out.append(prompt_section(card, version, cells, table, page_dir))
    return "\n".join(out)


def prompt_section(card, version: str, cells: list[dict], table: pd.DataFrame, page_dir: Path) -> str:
    """Each prompt variant against the card's prompt, and the spread across prompts beside the spread across
    models (the card's own prompt stays the leaderboard's)."""
    from ..analysis.perturbed import prompt_spread

    prompts = table[table["kind"] == "prompt"]
    metric = prompts["metric"].iloc[0].replace("_", " ")
    ps = card.prompt_set
    out = ["## Prompt and option sensitivity", "",
           f"The runs that score answer options ran again under each prompt of the card's prompt set "
           f"`{md(ps.version)}` (on the same items: {prompts['n_read'].iloc[0]:,} of the "
           f"{prompts['n_items'].iloc[0]:,} test items by seed-hash rank); the leaderboard keeps the card's own "
           "prompt. Per variant: the paired difference from the card's prompt with its interval, McNemar's b and c "
           "and the exact p (Holm over the prompt variants).", ""]
    rows = []
    by_name = {v.name: v for v in ps.variants}
    for _, r in prompts.iterrows():
        v = by_name.get(r["variant"])
        what = "; ".join(x for x in [
            f"question: {md(v.template.split(chr(10))[-2] if v.template and chr(10) in v.template else v.template)}"
            if v and v.template else "",
            f"options: {md(' / '.join(repr(o) for o in v.options))}" if v and v.options else "",
            f"{v.k_shot} in-context train items" if v and v.k_shot else ""] if x)
        rows.append([md(r["model"]), f"`{r['variant']}`", what or "—", _num(r["default"]), _num(r["variant_value"]),
                     difference_text(r) + ("\\*" if r["significant"] else ""), str(r["b"]), str(r["c"]),
                     _p(r["p_mcnemar"]), _p(r["p_holm"])])
    out.append(":::{container} atlas-leaderboard\n" + _md_table(
        ["model", "prompt", "what changes", "card's prompt", "variant", "difference [95 %]", "b", "c", "p",
         "p (Holm)"], rows) + "\n:::\n")
    spread = prompt_spread([c for c in cells if c["version"] == version], table)
    if len(spread):
        out += ["", f"**Spread across prompts beside spread across models.** {metric.capitalize()} over the card's "
                "prompt and its variants, beside the same metric over this version's ok runs of every model (each "
                "under the card's own prompt or protocol), all on the items the prompt variants read.", ""]
        rows = [[md(s["model"]), str(s["n_prompts"]), f"{_num(s['prompt_min'])}–{_num(s['prompt_max'])}",
                 _num(s["prompt_range"]), _num(s["prompt_sd"]), str(s["n_models"]), _num(s["models_range"]),
                 _num(s["models_sd"])] for _, s in spread.iterrows()]
        out.append(_md_table(["model", "prompts", "min–max", "range", "SD", "models", "range across models",
                              "SD across models"], rows))
        csv = page_dir / "_downloads" / f"prompts-{card.name}-{version}.csv"
        csv.parent.mkdir(parents=True, exist_ok=True)
        pd.concat([table[table["kind"] == "prompt"]]).to_csv(csv, index=False, float_format="%.6g")
        out += ["", f"{{download}}`prompts-{card.name}-{version}.csv <{os.path.relpath(csv, page_dir)}>`"]
    return "\n".join(out) + "\n"
