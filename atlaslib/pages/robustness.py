"""The robustness page of one (card, split version), rendered from result cells: each run against its variants
(:mod:`atlaslib.variants`; the numbers from :func:`atlaslib.analysis.robustness`).

- the card's perturbations: name, version, why each keeps the gold label, its parameters and seed;
- the robustness table, model × perturbation: the paired difference of the primary metric (perturbed −
  default run) with its paired interval over the card's resampling unit, McNemar's b and c, the exact p with
  Holm over the table (its star), and how many items the perturbation read, of those it applies to; an interval
  whose items read hold a stratum of the card's resampling smaller than the card's minimum (the slice tables'
  minimum for an interval) is marked † (the table's ``small_stratum``); as the CSV download
  ``robustness-<card>-<version>.csv`` (with ``smallest_stratum``, ``stratum_minimum``, ``small_stratum``);
- 20 perturbed inputs per perturbation (from the data, by seed-hash rank; ids only in a publish build or on a
  gated card, as in the item explorer);
- for runs with a prompt set: each prompt variant's paired comparison with the card's prompt, and the spread
  of the primary metric across prompts beside its spread across models.

The leaderboard's "worst perturbation" column (:func:`worst_text`) reads the same table, under the declared
rule :data:`atlaslib.analysis.perturbed.WORST_RULE`: one procedure (exact McNemar, Holm) picks and qualifies it.
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
#: the mark of a paired interval from a stratum smaller than the card's minimum
SMALL_STRATUM_MARK = "†"

_CACHE: dict = {}


def _variant_cells(cells: list[dict]) -> list[dict]:
    from ..variants import of_cell

    out = []
    for c in cells:
        if c.get("status") == "ok":
            out += of_cell(c)
    return out


def table_for(card, version: str, cells: list[dict]) -> pd.DataFrame:
    """:func:`atlaslib.analysis.robustness` of the version's ok cells and the variant cells beside them (computed
    once per build for the same cells)."""
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
    v = float(v)
    if round(v, digits) == 0:     # a resampled difference of -1e-17 is zero, not "-0.000"
        v = 0.0
    return f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"


def _p(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return "< 0.001" if v < 0.001 else f"{v:.3f}"


def _stratum_unit(card) -> str:
    """What the card's minimum counts (its slice rule's unit, e.g. "items"), for the small-stratum mark."""
    from ..cards import scoring_of

    rule = scoring_of(card).slices
    return rule.unit if rule is not None else "units"


def _small(row) -> bool:
    v = row.get("small_stratum") if hasattr(row, "get") else None
    return bool(v) if v is not None and not (isinstance(v, float) and math.isnan(v)) else False


def difference_text(row, unit: str = "items") -> str:
    """``−0.052 [−0.071, −0.030]``: the paired difference and its interval; ``… † too few items in a stratum
    (1 < 20)`` when the items read hold a stratum of the card's resampling under the card's minimum (the
    interval cannot show its uncertainty: see :func:`small_stratum_note`)."""
    ci = "" if any(isinstance(x, float) and math.isnan(x) for x in (row["ci_low"], row["ci_high"])) else \
        f" [{_num(row['ci_low'], signed=True)}, {_num(row['ci_high'], signed=True)}]"
    if not _small(row):
        return _num(row["difference"], signed=True) + ci
    # too few to resample: the point and the mark, no interval (as a slice table gives a group that small none);
    # the CSV keeps the interval's numbers
    from ..cards import scoring_of

    rs = scoring_of(row["card"]).resampling if "card" in row else None
    what = (f"{unit} in a stratum" if rs is None or rs.rule == "stratified" else f"{md(rs.unit)} to resample")
    return (_num(row["difference"], signed=True) + f" {SMALL_STRATUM_MARK} too few {what} "
            f"({int(row['smallest_stratum'])} < {int(row['stratum_minimum'])}): no interval")


def small_stratum_note(rows: pd.DataFrame, card) -> str:
    """The sentence under a table with a † row, else ""."""
    if rows.empty or "small_stratum" not in rows or not rows["small_stratum"].astype(bool).any():
        return ""
    from ..cards import scoring_of

    rs = scoring_of(card).resampling
    minimum = int(rows["stratum_minimum"].iloc[0])
    unit = _stratum_unit(card)
    if rs.rule != "stratified":
        return (f"{SMALL_STRATUM_MARK} The items read hold fewer than {minimum} {md(rs.unit)}, the draws of the card's "
                "resampling: a percentile interval over so few is too narrow to read, so none is shown (the "
                "download keeps its numbers). Read the exact McNemar p beside it, which does not resample.")
    return (f"{SMALL_STRATUM_MARK} Among the items read, a stratum of the card's resampling ({md(rs.unit)}) holds "
            f"fewer than {minimum} {unit}, the card's minimum for an interval (a slice table gives a group that small "
            "no interval, and neither does this table): the resampling keeps each stratum's size, so a stratum that "
            "small has few distinct draws (a stratum of one is the same item in every resample) and the interval "
            "cannot show its uncertainty. Read the exact McNemar p beside it, which does not resample.")


def holm_column(n: int, what: str) -> str:
    """The column of Holm-adjusted p-values, named with its family: ``p (Holm over the table's 30 perturbation
    runs)``. A run page and the card's robustness page adjust over different families (a run's own variants, every
    run's), and the same "p (Holm)" header gave one variant 0.047 on one and 0.422 on the other."""
    return f"p (Holm over {what}: {n:,})"


def family_column(t: pd.DataFrame) -> str:
    """A run page's Holm column: over the run's own variants of each kind (``p (Holm over this run's variants of
    the same kind: 5 perturbations, 3 prompts)``), not the card's table of every run."""
    kinds = t["kind"].value_counts()
    sizes = ", ".join(f"{n:,} {k}{'s' if n != 1 else ''}" for k, n in sorted(kinds.items()))
    return f"p (Holm over this run's variants of the same kind: {sizes})"


def _answers(base: list[dict]) -> dict:
    """``{(model, protocol, variant name): the one answer}`` of the runs and their variant runs that give one
    answer to every item they read (:func:`atlaslib.analysis.perturbed.collapsed`; None where they do not)."""
    from ..analysis.perturbed import collapsed
    from ..variants import variant_of

    return {(c["model"], c["protocol"], (variant_of(c) or {}).get("name")): collapsed(c)
            for c in base + _variant_cells(base)}


def collapsed_text(answer, n_read) -> str:
    """The mark of a run that answers one label for every item read: it measures that, not the variant."""
    return f"**collapsed: answers {md(answer)} for all {int(n_read):,} items**"


def _range(values) -> str:
    lo, hi = int(min(values)), int(max(values))
    return f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}"


def read_text(r) -> str:
    """``100 items read (of 1,432 applicable)``: the items a perturbation read, of those it applies to."""
    out = f"{int(r['n_read']):,} items read"
    return out + (f" (of {int(r['n_applicable']):,} applicable)" if int(r["n_read"]) < int(r["n_applicable"]) else "")


def worst_text(card, version: str, cells: list[dict], cell: dict) -> str:
    """The leaderboard's "worst perturbation (exact McNemar, Holm)" of ``cell``'s run, under the declared rule
    :data:`atlaslib.analysis.perturbed.WORST_RULE`, from that one procedure: ``scope-distractor -0.123 · b 10 /
    c 0 of 100 items read · Holm p 0.002`` (the point difference of the primary metric, McNemar's b and c on the
    items read, the Holm-adjusted exact p over the version's perturbation table); "none shown worse (3
    perturbations, 18–100 items read each)" when none qualifies; "—" for a run without perturbation rows. The
    bootstrap intervals stay on the robustness page."""
    from ..analysis.perturbed import worst

    table = table_for(card, version, cells)
    if table.empty:
        return MISSING
    mine = table[(table["kind"] == "perturbation") & (table["model"] == cell["model"])
                 & (table["protocol"] == cell["protocol"])]
    if mine.empty:
        return MISSING
    w = worst(mine, card.higher_is_better.get(card.primary_metric, True))
    if w.empty:
        k = len(mine)
        each = " each" if k > 1 else ""
        applicable = ""
        if (mine["n_read"] < mine["n_applicable"]).any():
            applicable = f" of {_range(mine['n_applicable'])} applicable"
        return (f"none shown worse ({k} perturbation{'s' if k != 1 else ''}, {_range(mine['n_read'])} items "
                f"read{applicable}{each})")
    r = w.iloc[0]
    return (f"{md(r['variant'])} {_num(r['difference'], signed=True)} · b {int(r['b'])} / c {int(r['c'])} of "
            f"{read_text(r)} · Holm p {_p(r['p_holm'])}")


def run_frame(cells: list[dict]) -> pd.DataFrame:
    """A run page's table of its own variants (``cells``: the run's cell and its variant cells): per variant the
    items read, the smallest stratum of the card's resampling among them, the primary metric of the run and of
    the variant on them, the paired difference with its interval (marked † under the card's minimum stratum:
    :func:`difference_text`), McNemar's b and c and the exact p (Holm over the run's variants of one kind)."""
    from ..analysis import robustness
    from ..analysis.perturbed import SEED_PAIRED

    cells = list(cells)
    t = robustness(cells)
    if t.empty:
        return t
    unit = _stratum_unit(t["card"].iloc[0])
    metric = t["metric"].iloc[0]
    # a row over training seeds pairs each seed with itself (analysis.perturbed.SEED_PAIRED_TEXT): the header says so
    diff = "difference [95 %, seed-paired]" if (t["interval"] == SEED_PAIRED).all() else "difference [95 %]"
    return pd.DataFrame({"variant": t["variant"] + " (" + t["kind"] + ")", "items read": t["n_read"],
                         "of applicable": t["n_applicable"],
                         # a count: shown as one ("21", not "21.0"), "—" where the card's resampling has no strata
                         "smallest stratum": t["smallest_stratum"].map(lambda v: "—" if pd.isna(v) else f"{int(v)}"),
                         f"{metric} (this run)": t["default"].round(3),
                         f"{metric} (variant)": t["variant_value"].round(3),
                         diff: [difference_text(r, unit) for _, r in t.iterrows()],
                         "b": t["b"], "c": t["c"], "p": t["p_mcnemar"].map(_p),
                         family_column(t): t["p_holm"].map(_p)}).set_index("variant")


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
    from ..analysis.perturbed import SEED_PAIRED, SEED_PAIRED_TEXT, WORST_RULE

    table = table_for(card, version, cells)
    if table.empty:
        return None
    # the runs (and their variant runs, read from disk once here) that answer one label for every item read: both
    # tables below mark them
    base = [c for c in cells if c["version"] == version and c.get("status") == "ok"]
    answers = _answers(base)
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
                "run wrong) and c (the reverse), the exact McNemar p and Holm's adjustment over this table. \\* "
                "beside the Holm p = significant at 5 % after Holm: the star is the test's, the interval the "
                "bootstrap's, and the two can disagree near the edge. The leaderboard's worst perturbation of a run "
                f"is, {WORST_RULE.replace('the primary metric', metric)}."
                + (" A run trained with several seeds (their number beside the model) ran every seed's model under "
                   "each perturbation and is compared as the leaderboard shows it: its value is the mean over its "
                   "seeds' models, and an item counts as right for McNemar when more than half of its seeds' models "
                   "are right, as in the card's paired comparisons. Its difference's interval draws seeds and items "
                   f"(two-level) and is {SEED_PAIRED_TEXT}. A perturbation under which no seed's model changes an "
                   "answer has an interval of no width at no difference."
                   if (pert.get("interval", pd.Series(dtype=str)) == SEED_PAIRED).any() else ""), ""]
        rows = []
        unit_word = _stratum_unit(card)
        for _, r in pert.iterrows():
            seeds = f" ({int(r['n_seeds'])} seeds)" if int(r.get("n_seeds") or 1) > 1 else ""
            one = answers.get((r["model"], r["protocol"], r["variant"]))
            # a run that answers one label for all items read measures that, not the perturbation (as the prompt
            # table marks it)
            shown = f"`{r['variant']}`" + (f"; {collapsed_text(one, r['n_read'])}" if one is not None else "")
            rows.append([md(r["model"]) + seeds, r["protocol"].replace("_", "_<wbr>"), shown,
                         f"{r['n_read']:,} of {r['n_applicable']:,}", _num(r["default"]), _num(r["variant_value"]),
                         difference_text(r, unit_word), str(r["b"]), str(r["c"]),
                         _p(r["p_mcnemar"]), _p(r["p_holm"]) + ("\\*" if r["significant"] else "")])
        out.append(":::{container} atlas-leaderboard\n" + _md_table(
            ["model", "protocol", "perturbation", "items read (applicable)", "default", "perturbed",
             "difference [95 %]", "b", "c", "p", holm_column(len(pert), "the table's perturbation runs")], rows)
            + "\n:::\n")
        note = small_stratum_note(pert, card)
        if note:
            out += [note, ""]
        dl = page_dir / "_downloads"
        dl.mkdir(parents=True, exist_ok=True)
        csv = dl / f"robustness-{card.name}-{version}.csv"
        pert.to_csv(csv, index=False, float_format="%.6g")
        out += [f"{{download}}`robustness-{card.name}-{version}.csv <{os.path.relpath(csv, page_dir)}>`", ""]
        out.append(_samples(card, version, publish))
    prompts = table[table["kind"] == "prompt"]
    if len(prompts):
        out.append(prompt_section(card, version, cells, table, page_dir, answers))
    return "\n".join(out)


def prompt_section(card, version: str, cells: list[dict], table: pd.DataFrame, page_dir: Path,
                   answers: dict) -> str:
    """Each prompt variant against the card's prompt, and the spread across prompts beside the spread across
    models (the card's own prompt stays the leaderboard's); ``answers``: :func:`_answers` of the version's runs."""
    from ..analysis.perturbed import prompt_spread

    prompts = table[table["kind"] == "prompt"]
    base = [c for c in cells if c["version"] == version and c.get("status") == "ok"]
    metric = prompts["metric"].iloc[0].replace("_", " ")
    ps = card.prompt_set
    out = ["## Prompt and option sensitivity", "",
           f"The runs that score answer options ran again under each prompt of the card's prompt set "
           f"`{md(ps.version)}` (on the same items: {prompts['n_read'].iloc[0]:,} of the "
           f"{prompts['n_items'].iloc[0]:,} test items by seed-hash rank); the leaderboard keeps the card's own "
           "prompt. Per variant: the paired difference from the card's prompt with its interval, McNemar's b and c "
           "and the exact p (Holm over the prompt variants; \\* beside it: significant at 5 %).", ""]
    rows = []
    by_name = {v.name: v for v in ps.variants}
    for _, r in prompts.iterrows():
        v = by_name.get(r["variant"])
        what = "; ".join(x for x in [
            f"question: {md(v.template.split(chr(10))[-2] if v.template and chr(10) in v.template else v.template)}"
            if v and v.template else "",
            f"options: {md(' / '.join(repr(o) for o in v.options))}" if v and v.options else "",
            f"{v.k_shot} in-context train items" if v and v.k_shot else ""] if x)
        one = answers.get((r["model"], r["protocol"], r["variant"]))
        if one is not None:      # the model gives one answer to every item: the variant measures that, not a prompt
            what = (what + "; " if what else "") + collapsed_text(one, r["n_read"])
        rows.append([md(r["model"]), f"`{r['variant']}`", what or "—", _num(r["default"]), _num(r["variant_value"]),
                     difference_text(r, _stratum_unit(card)), str(r["b"]), str(r["c"]),
                     _p(r["p_mcnemar"]), _p(r["p_holm"]) + ("\\*" if r["significant"] else "")])
    out.append(":::{container} atlas-leaderboard\n" + _md_table(
        ["model", "prompt", "what changes", "card's prompt", "variant", "difference [95 %]", "b", "c", "p",
         holm_column(len(prompts), "the table's prompt-variant runs")], rows) + "\n:::\n")
    note = small_stratum_note(prompts, card)
    if note:
        out += [note, ""]
    spread = prompt_spread(base, table)
    if any(v is not None for v in answers.values()):
        out += ["A variant marked *collapsed* gives one answer to every item it read: its row measures that "
                "collapse (the share of that class among the items), not the wording of the prompt; variants that "
                "collapse to the same answer give identical rows.", ""]
    if len(spread):
        family = ", ".join(sorted({s.replace("_", "-") for s in spread["models_protocol"]}))
        out += ["", f"**Spread across prompts beside spread across models.** {metric.capitalize()} over the card's "
                "prompt and its variants, beside the same metric over this version's ok runs of the same protocol "
                f"family ({md(family)}: every model run that way, the card's own prompt where it has one), all on the "
                "items the prompt variants read.", ""]
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
