"""What a leaderboard row cost and what its model may have seen, read from its result cell.

- **Speed**: the model's answers to the test items per second of prediction (``timing.phases.prediction``:
  :mod:`atlaslib.phases`), apart from loading, training, side measurements and scoring, which the run also
  records; answers the model-call store served count at the time they took when computed. A seeded row
  answers each test item once per seed. On the machine the cell's ``environment`` names (its CPU and cores
  when recorded, else its platform). A language model's adapter also records what its own calls cost
  (``info["cost"]``: wall seconds, items, prompt and completion tokens, :mod:`atlaslib.models.cost`), shown
  per item beside the contamination mark.
- **Contamination**: the mark a language-model row carries when its profile's ``training_data`` say it may
  have seen a public test set (``extra.contamination``, :func:`atlaslib.models.contamination.may_have_seen`),
  and the memorisation probe beside it (``extra.memorisation``: the test sentences and the reference card's
  sentences the model cannot have seen).
"""
from __future__ import annotations

import math

from ..escape import md

MISSING = "—"


#: the least a prediction phase must hold for its items per second to be said: below either, the first call's
#: warm-up (loading a pipeline, filling caches) and the timer's resolution weigh more than the answers; a rule
#: answering 7 NLI items took 2.9 s and 207 of them 3.1 s, a constant baseline answered 1,432 items in 0.07 ms
MIN_TIMED_ITEMS = 50
MIN_TIMED_SECONDS = 1.0
TOO_SHORT = "too short to time"
#: the tokens cell of a run whose recorded tokens leave out the items served from the model-call store
TOKENS_NOT_ALL = "not counted for items served from the model-call store (run it again)"


def _timed(cell: dict) -> dict | None:
    from ..phases import throughput
    from ..results.schema import is_external

    if cell.get("status") != "ok" or is_external(cell):   # outside predictions: the atlas did not run the system
        return None
    t = throughput(cell.get("timing"))
    if t is None:
        return {"reason": "its run recorded no phases (run it again)"}
    if "reason" not in t and (t["items"] < MIN_TIMED_ITEMS or t["seconds"] < MIN_TIMED_SECONDS):
        took = f"{t['seconds']:.2f} s" if t["seconds"] >= 0.01 else "under 0.01 s"
        return {"reason": f"{TOO_SHORT}: {t['items']:,} answers in {took} of prediction; a rate needs at least "
                          f"{MIN_TIMED_ITEMS} answers and {MIN_TIMED_SECONDS:g} s", "too_short": True}
    return t


def speed(cell: dict) -> dict | None:
    """``{items_per_second, seconds_per_item, prediction_seconds, n_answers}`` of an ok run's prediction
    phase (:func:`atlaslib.phases.throughput`), or None when it cannot be said (:func:`speed_reason`): a phase
    of fewer than :data:`MIN_TIMED_ITEMS` answers or :data:`MIN_TIMED_SECONDS` is too short to time."""
    t = _timed(cell)
    if not t or "reason" in t:
        return None
    return {"items_per_second": t["items_per_second"], "seconds_per_item": t["seconds"] / t["items"],
            "prediction_seconds": t["seconds"], "n_answers": t["items"]}


def speed_reason(cell: dict) -> str | None:
    """Why an ok run of the atlas has no prediction throughput (None when it has one, or is not such a run)."""
    t = _timed(cell)
    return None if not t else t.get("reason")


def too_short(cell: dict) -> bool:
    """Whether a run's prediction phase was timed but too short for a rate (:data:`MIN_TIMED_ITEMS`)."""
    return bool((_timed(cell) or {}).get("too_short"))


def speed_text(s: dict) -> str:
    v = s["items_per_second"]
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}" if v >= 1 else f"{v:.2f}"


def speed_cell(cell: dict) -> str:
    """A table's items-per-second cell: the rate, "too short to time", or — where the run could not say."""
    s = speed(cell)
    return speed_text(s) if s else TOO_SHORT if too_short(cell) else MISSING


def machine(cell: dict) -> str:
    """The build machine a cell was run on: its CPU and core count when recorded, else its platform."""
    env = cell.get("environment") or {}
    cpu, cores = env.get("cpu"), env.get("cpu_count")
    if cpu:
        return f"{cpu}, {cores} cores" if cores else str(cpu)
    return str(env.get("platform") or "an unrecorded machine")


def machine_of(cells) -> str:
    """The one machine the cells name, or "several machines"."""
    names = {machine(c) for c in cells if c.get("status") == "ok"}
    if not names:
        return "an unrecorded machine"
    return md(names.pop()) if len(names) == 1 else "several machines"


def speed_note(cells) -> str:
    return (f"the model's answers to the test items per second of prediction, on {machine_of(cells)}: loading, "
            f"training, side measurements (perturbations, memorisation) and scoring are timed apart and left out; "
            f"a seeded row answers each item once per seed; answers served from the model-call store count at "
            f"the time they took when computed; \"{TOO_SHORT}\" where the prediction held fewer than "
            f"{MIN_TIMED_ITEMS} answers or took less than {MIN_TIMED_SECONDS:g} s (warm-up and the timer's "
            f"resolution would weigh more than the answers); — where the run could not say.")


def cost_records(cell: dict) -> list[dict]:
    """Every ``info["cost"]`` record of the adapters a run's spec records (its details, or its profile when the
    card records the predictor's info there), in the order they are found."""
    found = []

    def walk(x):
        if isinstance(x, dict):
            c = x.get("cost")
            if isinstance(c, dict) and "wall_seconds" in c and "items" in c:
                found.append(c)
            for k, v in x.items():
                if k != "cost":
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    spec = cell.get("spec") or {}
    walk((spec.get("parameters") or {}).get("details"))
    walk(spec.get("profile"))     # a card that records its predictor's info as the run's profile
    return found


def model_cost(cell: dict) -> dict | None:
    """The summed :func:`cost_records` of a run: wall seconds, items, prompt and completion tokens; or None."""
    from ..models.cost import tokens_of_every_item

    found = cost_records(cell)
    if not found:
        return None
    tot = {k: sum(float(c.get(k) or 0) for c in found) for k in ("wall_seconds", "items", "prompt_tokens",
                                                                 "completion_tokens")}
    n = tot["items"]
    tot["items_per_second"] = n / tot["wall_seconds"] if n and tot["wall_seconds"] > 0 else None
    # tokens per item only from records that count the tokens of every item, served from the store or not: else
    # they would say what an earlier run had left in the store (a probe read 6.3 tokens per item, then 0.0)
    every = all(tokens_of_every_item(c) for c in found)
    tot["tokens_of_every_item"] = every
    tot["prompt_tokens_per_item"] = tot["prompt_tokens"] / n if n and every else None
    tot["completion_tokens_per_item"] = tot["completion_tokens"] / n if n and every else None
    return tot


def contamination(cell: dict) -> dict | None:
    return (cell.get("extra") or {}).get("contamination")


def contamination_mark(cell: dict) -> str | None:
    """The reason a row may have seen its public test set (the mark's text), or None."""
    c = contamination(cell)
    if c and c.get("may_have_seen") is True:
        return str(c.get("reason") or "may have seen this public test set")
    return None


def _rate(x) -> str:
    return MISSING if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _probe_text(p: dict | None) -> str:
    if not p:
        return MISSING
    n = int(p.get("n_probed") or 0)
    a, b = p.get("mean_prefix_tokens"), p.get("mean_target_tokens")
    tokens = f", {a + b:.1f} tokens on average" if n and a is not None and b is not None else ""
    return f"{_rate(p.get('exact_match_rate'))} / {_rate(p.get('token_overlap'))} ({n:,} sentences{tokens})"


#: the reference cell of a run whose reference was not drawn to match its test sentences' lengths
UNMATCHED = "not matched in length to the test sentences (run it again)"


def reference_text(cell: dict, mem: dict) -> str:
    """The memorisation probe's reference cell: the probe on the length-matched reference sentences; or why there
    is none (the card's test sentences are the reference itself, the reference's card has none to match)."""
    why = mem.get("reference_reason")
    if why:
        return md(why)
    if mem.get("reference_card") and mem.get("reference_card") == cell.get("card"):
        return md("none: this card's test sentences are the synthetic reference itself")
    ref = mem.get("reference")
    if ref and not ref.get("matching"):
        return f"{_probe_text(ref)}: {UNMATCHED}"
    gap = length_gap(mem.get("test"), ref)
    if gap:
        return (f"{_probe_text(ref)}: the nearest in length the reference offers, still "
                f"{'shorter' if gap[0] < gap[1] else 'longer'} than the test sentences ({gap[0]:.1f} against "
                f"{gap[1]:.1f} tokens): a difference in the rates may be one of length")
    return _probe_text(ref)


#: matched means of reference and test tokens further apart than this (relative) are said to differ in length
LENGTH_TOLERANCE = 0.10


def _mean_tokens(p: dict | None) -> float | None:
    a, b = (p or {}).get("mean_prefix_tokens"), (p or {}).get("mean_target_tokens")
    return a + b if int((p or {}).get("n_probed") or 0) and a is not None and b is not None else None


def length_gap(test: dict | None, ref: dict | None) -> tuple[float, float] | None:
    """(reference, test) mean tokens per probed sentence when the length-matched reference still differs from
    the test by more than :data:`LENGTH_TOLERANCE` of the test's mean (the reference had nothing nearer), else
    None."""
    r, t = _mean_tokens(ref), _mean_tokens(test)
    if r is None or t is None or not t or abs(r - t) <= LENGTH_TOLERANCE * t:
        return None
    return r, t


def llm_table(rows: list[dict]) -> str:
    """The language-model rows: the contamination mark with its reason, the memorisation probe on the test
    sentences and on the reference, and what the model's own calls cost per item; "" without such a row."""
    llm = [c for c in rows if c.get("status") == "ok" and contamination(c) is not None]
    if not llm:
        return ""
    from ..metrics.compare import run_label

    ref = next((((c.get("extra") or {}).get("memorisation") or {}).get("reference_card") for c in llm
                if ((c.get("extra") or {}).get("memorisation") or {}).get("reference_card")), None)
    head = ["model", "may have seen this test set?", "memorisation: test (exact / overlap)",
            f"memorisation: {md(ref)} (exact / overlap)" if ref else "memorisation: reference",
            "items/s (prediction)", "tokens per item (prompt / scored or generated)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in llm:
        con = contamination(c)
        seen = {True: "◊", False: "no", None: "unknown"}[con.get("may_have_seen")]
        mem = (c.get("extra") or {}).get("memorisation")
        if mem is None:
            test = ref_text = md((c.get("extra") or {}).get("memorisation_reason") or "not measured")
        else:
            test, ref_text = _probe_text(mem.get("test")), reference_text(c, mem)
        cost = model_cost(c)
        # the one throughput of the atlas (the leaderboard's): the prediction phase, served answers at the time they
        # took when computed; not the adapter's own call timer, which timed a served call at the store's speed
        fast = speed(c)
        ips = f"{fast['items_per_second']:.1f}" if fast else speed_cell(c)
        toks = MISSING if not cost else TOKENS_NOT_ALL if not cost["tokens_of_every_item"] else \
            MISSING if cost["prompt_tokens_per_item"] is None else (
                f"{cost['prompt_tokens_per_item']:.1f} / {cost['completion_tokens_per_item']:.1f}")
        lines.append("| " + " | ".join([md(run_label(c)), seen_text(seen, con.get("reason")), test, ref_text,
                                         ips, toks]) + " |")
    return ("**Language-model rows: contamination and cost.** ◊ marks a row whose model may have seen this public "
            "test set, from its profile's declared training data. Beside it, the memorisation probe: the model "
            "continues the first half of each sentence greedily, compared token by token with the true second half "
            "(exact: share of sentences continued exactly; overlap: share of tokens right), on this card's test "
            "sentences and on sentences it cannot have seen" + (f" (the {md(ref)} card's synthetic premises)" if ref
                                                                else "") +
            ", other text than the test's, drawn to match it in length: for each probed test sentence the unused "
            "reference sentence nearest to it in the model's tokens (a shorter half is easier to continue, so "
            "unmatched lengths would compare lengths, not memory); a card whose test sentences are that reference "
            "has none. A test rate well above the reference's is a sign of memorisation. Tokens per item: what the model read "
            "(prompts, texts to embed) and scored or generated, per item, counting every item the run asked, those "
            "served from the model-call store included.\n\n"
            ":::{container} atlas-leaderboard\n" + "\n".join(lines) + "\n:::\n")


def download_fields(cell: dict) -> dict:
    """The cost and contamination fields of a row of the leaderboard CSV/JSON."""
    s = speed(cell)
    cost = model_cost(cell)
    con = contamination(cell) or {}
    mem = (cell.get("extra") or {}).get("memorisation") or {}
    # no reference where the card's test sentences are the reference itself (an old cell probed them twice)
    same = mem.get("reference_reason") or (mem.get("reference_card") and mem.get("reference_card") == cell.get("card"))
    ref = {} if same else (mem.get("reference") or {})
    from ..phases import seconds

    ph = seconds(cell.get("timing"))   # loading, training, prediction, side and the rest of the wall time
    out = {"items_per_second": None if s is None else round(s["items_per_second"], 4),
           "seconds_per_item": None if s is None else round(s["seconds_per_item"], 6),
           "answers_timed": None if s is None else s["n_answers"],
           "items_per_second_not_said": speed_reason(cell),
           "machine": machine(cell) if s is not None else None,
           **{f"{p}_seconds": None if ph.get(p) is None else round(ph[p], 3)
              for p in ("loading", "training", "prediction", "side", "other")},
           "model_calls_items_per_second": None if not cost or cost["items_per_second"] is None
           else round(cost["items_per_second"], 4),
           "prompt_tokens": None if not cost or not cost["tokens_of_every_item"] else int(cost["prompt_tokens"]),
           "completion_tokens": None if not cost or not cost["tokens_of_every_item"]
           else int(cost["completion_tokens"]),
           "may_have_seen_test_set": con.get("may_have_seen"), "contamination_reason": con.get("reason"),
           "memorisation_exact_match_test": (mem.get("test") or {}).get("exact_match_rate"),
           "memorisation_token_overlap_test": (mem.get("test") or {}).get("token_overlap"),
           "memorisation_exact_match_reference": ref.get("exact_match_rate"),
           "memorisation_token_overlap_reference": ref.get("token_overlap"),
           "memorisation_reference_matched_in_length": bool(ref.get("matching")) if ref else None}
    return out


#: how a contamination reason opens when it gives its answer itself (:func:`atlaslib.models.contamination.may_have_seen`)
_ANSWERS = ("no:", "no ", "yes:", "unknown:", "may have seen")


def seen_text(mark: str, reason: str | None) -> str:
    """The contamination cell: the answer's mark and the reason, the answer said once (a reason opening with its
    own answer, "no: the test set is synthetic …", is not given a second one: the table said "no: no: …")."""
    reason = (reason or "").strip()
    if not reason:
        return mark
    if reason.lower().startswith(_ANSWERS):
        return f"◊ {md(reason)}" if mark == "◊" else md(reason)
    return f"{mark}: {md(reason)}"
