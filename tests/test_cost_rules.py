"""What a run cost, as a page says it: a rate only from a prediction phase long enough to time, and tokens per
item that count every item the run asked, whether computed or served from the model-call store."""
from __future__ import annotations

import pytest

from atlaslib.pages import rowinfo


def _cell(items: int, seconds: float, served: float = 0.0) -> dict:
    return {"status": "ok", "environment": {"cpu": "a test CPU", "cpu_count": 2},
            "timing": {"phases": {"prediction": {"items": items, "seconds": seconds, "served_seconds": served,
                                                 "served_untimed": 0}}}}


@pytest.mark.parametrize("items, seconds", [
    (1432, 6.9e-5),     # a constant baseline: 1,432 answers in 0.07 ms (the page said 20,753,623 items/s)
    (207, 2.2e-4),      # always-entailment on 207 NLI items
    (7, 2.89),          # a rule on 7 items: the first call's warm-up (2.4 items/s; 65.8 on 207 items)
    (100, 0.6),         # 100 answers in 0.6 s
])
def test_a_phase_too_short_to_time_has_no_rate(items, seconds):
    c = _cell(items, seconds)
    assert rowinfo.speed(c) is None
    assert rowinfo.speed_cell(c) == "too short to time"
    why = rowinfo.speed_reason(c)
    assert why.startswith("too short to time") and f"{items:,} answers" in why
    assert rowinfo.download_fields(c)["items_per_second"] is None


def test_a_long_enough_phase_has_its_rate_served_time_included():
    c = _cell(207, 2.5, served=0.645)                 # 207 / 3.145 s, by hand: 65.82
    s = rowinfo.speed(c)
    assert s["items_per_second"] == pytest.approx(207 / 3.145)
    assert rowinfo.speed_cell(c) == "65.8"
    assert rowinfo.speed_reason(c) is None
    assert rowinfo.speed_cell(_cell(50, 1.0)) == "50.0"            # the rule's edges are inside
    assert rowinfo.speed_cell(_cell(49, 10.0)) == "too short to time"


def test_the_note_declares_the_rule():
    note = rowinfo.speed_note([_cell(207, 3.0)])
    assert f"fewer than {rowinfo.MIN_TIMED_ITEMS} answers" in note and f"{rowinfo.MIN_TIMED_SECONDS:g} s" in note


def _with_cost(cost: dict) -> dict:
    return {"status": "ok", "spec": {"parameters": {"details": {"adapter": {"cost": cost}}}}}


def test_tokens_per_item_only_from_records_that_count_every_item():
    old = {"calls": 2, "items": 600, "wall_seconds": 0.2, "prompt_tokens": 0, "completion_tokens": 0}
    got = rowinfo.model_cost(_with_cost(old))
    assert got["prompt_tokens_per_item"] is None and not got["tokens_of_every_item"]
    assert rowinfo.download_fields(_with_cost(old))["prompt_tokens"] is None
    new = {**old, "prompt_tokens": 19680, "tokens_of": "every item"}
    got = rowinfo.model_cost(_with_cost(new))
    assert got["prompt_tokens_per_item"] == pytest.approx(32.8)


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    from tests import tiny_models as tm

    return tm.tiny_encoder(tmp_path_factory.mktemp("tiny"))


@pytest.mark.parametrize("capability", ["embed.text.pooled", "embed.text.tokens"])
def test_served_items_count_their_tokens(encoder, tmp_path, monkeypatch, capability):
    """A second run served every item from the store reads the same tokens as the first, which computed them
    (the old count was of computed items only: 0 for the second), and both are the tokenizer's own count."""
    from transformers import AutoTokenizer

    from atlaslib.models import load_adapter

    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))
    for sw in ("ATLAS_MODEL_CALLS", "ATLAS_EMBED_CACHE"):
        monkeypatch.delenv(sw, raising=False)
    texts = ["No chest pain.", "The patient denies fever or chills.", "Cough resolved."]
    tok = AutoTokenizer.from_pretrained(str(encoder))
    costs = []
    for _ in range(2):
        ad = load_adapter(str(encoder), capability, progress=False, batch_size=2)
        if capability == "embed.text.pooled":
            ad.embed(texts)
            want = sum(len(x) for x in tok(texts)["input_ids"])
        else:
            words = [t.split() for t in texts]
            ad.embed_words(words)
            want = sum(len(tok(w, is_split_into_words=True, add_special_tokens=False)["input_ids"]) for w in words)
        costs.append(ad.info["cost"])
    assert costs[0]["prompt_tokens"] == costs[1]["prompt_tokens"] == want > 0
    assert costs[1]["tokens_of"] == "every item"
    served = sum(sp.served for sp in ad._spaces.values())
    assert served == len(texts)                      # the second run was served, not computed


# ------------------------------------------------------------------------------- the memorisation reference

class _Words:
    """A causal-LM stand-in: a token per word; it continues every prefix with a token no sentence has."""

    def token_ids(self, text):
        return [sum(map(ord, w)) for w in text.split()]

    def greedy_continuations(self, prefixes, n_new):
        return [[-1] * n for n in n_new]


def _sentence(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def _extra(monkeypatch, card, pool):
    import types

    from atlaslib.cards import llm

    monkeypatch.setattr(llm, "reference_card", lambda: types.SimpleNamespace(
        CARD=types.SimpleNamespace(name="synthetic"), memorisation_sentences=lambda: list(pool)))
    return llm.llm_row_extra(_Words(), {"source": "gguf", "training_data": ["web-crawl"]}, card,
                             [_sentence(10, "t"), _sentence(20, "u")], min_tokens=4)


def test_the_reference_is_other_text_matched_in_length(monkeypatch, tmp_path):
    import types

    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path))
    card = types.SimpleNamespace(name="public", test_set_exposure="public", test_set_note="", overlap=None)
    # pool lengths 9, 12, 19, 30 and a test sentence itself: by hand, 10 -> 9 (|1| < |2|), 20 -> 19
    pool = [_sentence(30, "a"), _sentence(12, "b"), _sentence(19, "c"), _sentence(9, "d"), _sentence(20, "u")]
    mem = _extra(monkeypatch, card, pool)["memorisation"]
    assert sorted(mem["test"]["token_lengths"]) == [10, 20]
    ref = mem["reference"]
    assert ref is not None and sorted(ref["token_lengths"]) == [9, 19] and ref["n_probed"] == 2
    assert "nearest" in ref["matching"] and mem["reference_card"] == "synthetic"


def test_the_reference_card_is_not_its_own_reference(monkeypatch, tmp_path):
    import types

    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path))
    card = types.SimpleNamespace(name="synthetic", test_set_exposure="synthetic", test_set_note="", overlap=None)
    mem = _extra(monkeypatch, card, [_sentence(10, "t"), _sentence(20, "u")])["memorisation"]
    assert mem["test"]["n_probed"] == 2 and mem["reference"] is None
    assert "reference itself" in mem["reference_reason"]


def test_a_page_shows_no_reference_for_the_reference_card_and_marks_an_unmatched_one():
    probe = {"exact_match_rate": 0.0, "token_overlap": 0.065, "n_probed": 123, "mean_prefix_tokens": 6.0,
             "mean_target_tokens": 6.5}
    old_nli = {"card": "nli_negation", "extra": {"memorisation": {"test": probe, "reference": probe,
                                                                 "reference_card": "nli_negation"}}}
    mem = old_nli["extra"]["memorisation"]
    assert "reference itself" in rowinfo.reference_text(old_nli, mem)
    assert rowinfo.download_fields(old_nli)["memorisation_token_overlap_reference"] is None
    old_negex = {**old_nli, "card": "negex"}
    assert rowinfo.reference_text(old_negex, mem) == \
        "0.000 / 0.065 (123 sentences, 12.5 tokens on average): " + rowinfo.UNMATCHED


def test_a_matched_reference_still_far_from_the_test_length_says_so():
    """The nearest-length reference can stay shorter than the test (the reference has no longer sentences):
    28.5 against 12.3 tokens is 2.3 times; within 10 % nothing is said."""
    test = {"exact_match_rate": 0.0, "token_overlap": 0.1, "n_probed": 50, "mean_prefix_tokens": 14.0,
            "mean_target_tokens": 14.5}
    near = {"exact_match_rate": 0.0, "token_overlap": 0.065, "n_probed": 50, "mean_prefix_tokens": 13.0,
            "mean_target_tokens": 13.0, "matching": "nearest"}
    short = {**near, "mean_prefix_tokens": 6.0, "mean_target_tokens": 6.3}
    cell = {"card": "negex"}
    assert rowinfo.reference_text(cell, {"test": test, "reference": near, "reference_card": "nli"}) == \
        "0.000 / 0.065 (50 sentences, 26.0 tokens on average)"
    text = rowinfo.reference_text(cell, {"test": test, "reference": short, "reference_card": "nli"})
    assert "still shorter than the test sentences (12.3 against 28.5 tokens)" in text


# ------------------------------------------------------------------------ the statements check sees the old pages

def _site(tmp_path, card_page: str, failures: str = "", robustness: str = "") -> Path:
    (tmp_path / "book/cards/c/v").mkdir(parents=True)
    (tmp_path / "book/cards/c.md").write_text(card_page)
    (tmp_path / "book/cards/c/v/failures.md").write_text(failures)
    (tmp_path / "book/cards/c/v/robustness.md").write_text(robustness)
    return tmp_path


def _phase(items, seconds):
    return {"phases": {"prediction": {"items": items, "seconds": seconds, "served_seconds": 0.0}}}


def test_the_cost_checks_see_the_old_statements(tmp_path):
    from tests.statements import cost as checks

    lm = {"card": "c", "version": "v", "model": "lm", "protocol": "probe", "status": "ok",
          "timing": _phase(100, 40.0),
          "spec": {"parameters": {"details": {"adapter": {"cost": {"items": 600, "wall_seconds": 0.2,
                                                                   "prompt_tokens": 0, "completion_tokens": 0}}}}},
          "extra": {"memorisation": {"test": {}, "reference": {"n_probed": 123}, "reference_card": "c"}},
          "predictions": [{"item_id": "i1", "gold": "a", "pred": "a", "scores": {"a": 0.9, "b": 0.1}}]}
    base = {"card": "c", "version": "v", "model": "majority", "protocol": "zero_shot", "status": "ok",
            "timing": _phase(1432, 6.9e-5), "predictions": [{"item_id": "i1", "gold": "a", "pred": "a"}]}
    head = ("| model | may have seen this test set? | memorisation: test (exact / overlap) | memorisation: c (exact / "
            "overlap) | items/s (prediction) | tokens per item (prompt / scored or generated) |\n|---|---|---|---|---|---|\n")
    old_card = ("| model | prediction items/s |\n|---|---|\n| majority (zero_shot) | 20,753,623 |\n\n" + head +
                "| lm (probe) | no | 0.000 / 0.030 (97 sentences) | 0.000 / 0.065 (123 sentences) | 2.5 | 0.0 / 0.0 |\n")
    old_failures = ("| run | of | n | Brier | ECE |\n|:--|:--|--:|:--|:--|\n"
                    "| lm (probe) | — | 1 | n/a (labels only) | n/a (labels only) |\n")
    rob = "| model | protocol | perturbation | items read (applicable) | difference [95 %] |\n|---|---|---|---|---|\n"
    old_rob = rob + ("| m | finetune | `gold-cuts-removed` | 2 of 2 | -0.018 [-0.289, +0.200] |\n"
                     "| m | probe | `concept-typo` | 50 of 95 | +0.514 [+0.514, +0.514] † |\n")
    src = _site(tmp_path / "old", old_card, old_failures, old_rob)
    found = [p for ch in checks.CHECKS for p in ch(src, [lm, base])]
    for what in ("majority (zero_shot) at 20,753,623 items/s", "lm (probe) reads 0.0 / 0.0 tokens per item",
                 "reference is its own test sentences", "calibration shown 'n/a (labels only)'",
                 "read 2 of 2 items, under the 30 units", "is marked † but prints an interval"):
        assert any(what in p for p in found), (what, found)
    lm["extra"]["memorisation"]["reference_reason"] = "none: this card's test sentences are the synthetic reference"
    lm["spec"]["parameters"]["details"]["adapter"]["cost"].update(prompt_tokens=19680, tokens_of="every item")
    new_card = ("| model | prediction items/s |\n|---|---|\n| majority (zero_shot) | too short to time |\n\n" + head +
                "| lm (probe) | no | 0.000 / 0.030 (97 sentences) | none: this card's test sentences are the synthetic "
                "reference itself | 2.5 | 32.8 / 0.0 |\n")
    new_failures = ("| run | of | n | Brier | ECE |\n|:--|:--|--:|:--|:--|\n"
                    "| lm (probe) | P(answered label), top-label | 1 | 0.010 [0.010, 0.010] | 0.100 [0.1, 0.1] |\n")
    new_rob = rob + ("| m | finetune | `gold-cuts-removed` | 2 of 2 | -0.018 † too few case reports to resample (2 < 30): "
                     "no interval |\n| m | probe | `concept-typo` | 50 of 95 | +0.514 † too few items in a stratum "
                     "(11 < 20): no interval |\n")
    src = _site(tmp_path / "new", new_card, new_failures, new_rob)
    assert [p for ch in checks.CHECKS for p in ch(src, [lm, base])] == []
