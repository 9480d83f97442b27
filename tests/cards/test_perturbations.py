"""The cards' declared perturbations: deterministic under their seed, and each changes only what it says
(Hypothesis over kit-like sentences and MACCROBAT-like word lists)."""
from __future__ import annotations

import re

from hypothesis import given, settings, strategies as st

from atlaslib.cards import maccrobat, negex
from atlaslib.cards.negex.perturbations import LEADING_HEADER_RE
from atlaslib.cards.negex.variants import marked
from atlaslib.variants import NOT_APPLICABLE, sample

P = {p.name: p for p in negex.PERTURBATIONS}

WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=9)
FILLER = st.lists(st.one_of(WORD, WORD.map(str.upper), st.sampled_from(["no", "denies", "without", ",", "."])),
                  max_size=8)
HEADER = st.one_of(st.just(""), st.sampled_from(["SKIN:", "HISTORY OF PRESENT ILLNESS:", "EXTREMITIES:", "LUNGS:"]))


@st.composite
def kit_items(draw):
    """A NegEx-like item: an optional report header, words, the target concept in upper case, words."""
    concept = " ".join(draw(st.lists(WORD, min_size=1, max_size=3)))
    parts = [draw(HEADER), *draw(FILLER), concept.upper(), *draw(FILLER)]
    sentence = " ".join(p for p in parts if p)
    item = {"item_id": f"negex-{draw(st.integers(0, 9999)):04d}", "sentence": sentence, "concept": concept}
    return {**item, "span": negex.find_target(sentence, concept)}


def target(item):
    return negex.find_target(item["sentence"], item["concept"])


def run(name, item):
    """The perturbation applied twice (deterministic), its result."""
    first, again = P[name].apply(item), P[name].apply(dict(item))
    assert first == again
    return first


@settings(max_examples=150, deadline=None)
@given(kit_items())
def test_negex_perturbations_change_only_what_they_say(item):
    s = item["sentence"]
    a, b = target(item)

    out = run("concept-lowercase", item)
    if s[a:b] == s[a:b].lower():
        assert out is NOT_APPLICABLE
    else:  # every character outside the concept as it was; the concept lower-cased in its place
        t = out["sentence"]
        assert out["span"] == (a, b) and t[:a] == s[:a] and t[b:] == s[b:] and t[a:b] == s[a:b].lower()

    out = run("sentence-lowercase", item)
    assert out is NOT_APPLICABLE if s == s.lower() else (out["sentence"] == s.lower()
                                                          and out["sentence"][slice(*out["span"])] == s[a:b].lower())

    out = run("header-removed", item)
    m = LEADING_HEADER_RE.match(s)
    if m is None or a < m.end():
        assert out is NOT_APPLICABLE
    else:  # exactly the leading header and the spaces after it are gone
        assert s == m.group(0) + out["sentence"] and out["sentence"][slice(*out["span"])] == s[a:b]

    out = run("concept-typo", item)
    long_words = [w for w in re.findall(r"[a-zA-Z]+", s[a:b]) if len(w) >= 5 and len(set(w[1:-1])) > 1]
    if not long_words:
        assert out is NOT_APPLICABLE
    else:  # one swap of two neighbouring, different letters inside the concept; nothing else changed
        t = out["sentence"]
        assert out["span"] == (a, b) and len(t) == len(s) and t[:a] == s[:a] and t[b:] == s[b:]
        diff = [k for k in range(len(s)) if s[k] != t[k]]
        assert len(diff) == 2 and diff[1] == diff[0] + 1 and t[diff[0]] == s[diff[1]] and t[diff[1]] == s[diff[0]]
        word = next(m for m in re.finditer(r"[a-zA-Z]+", s) if m.start() < diff[0] and diff[1] < m.end() - 1)
        assert len(word.group()) >= 5 and a <= word.start() and word.end() <= b

    out = run("scope-distractor", item)
    added = out["sentence"][len(s):]
    assert out["sentence"].startswith(s) and out["span"] == (a, b)
    concept = re.fullmatch(r" No (.+)\.", added).group(1)
    assert concept in negex.card.DISTRACTORS and concept.casefold() not in s.casefold()

    assert marked(s, (a, b)) == negex.mark(s, item["concept"])  # the card's own marking, from the span


def test_negex_seed_decides_the_typo():
    """Another seed (or item id) may pick another letter pair; the same seed always the same one."""
    from dataclasses import replace

    item = {"item_id": "negex-0001", "sentence": "Denies SHORTNESS OF BREATH today.", "concept": "shortness of breath",
            "span": (7, 26)}
    picks = {replace(P["concept-typo"], seed=s).apply(item)["sentence"] for s in range(40)}
    assert len(picks) > 3
    assert P["concept-typo"].apply(item) == P["concept-typo"].apply(item)


def test_negex_perturbations_on_the_kit(data_dir):
    """On the kit's items: the distractor concepts are kit concepts; the sample is the first by seed-hash rank
    and the items keep their gold; the marked text is the perturbed sentence with the target marked."""
    items = negex.load_items(data_dir)
    assert set(negex.card.DISTRACTORS) <= set(items["concept"].str.lower())
    _, test = negex.split_frames(items, negex.split(items, "atlas-full-v1"))
    frame = negex.perturbed_items(test, P["header-removed"], "atlas-full-v1")
    n = negex.card.PERTURBED_ITEMS["atlas-full-v1"]
    assert frame.attrs["n_applicable"] > len(frame) == n
    applicable = [r["item_id"] for r in test.to_dict("records")
                  if P["header-removed"].apply({**r, "span": negex.find_target(r["sentence"], r["concept"])})]
    assert frame["item_id"].tolist() == sample(applicable, n, P["header-removed"].seed)
    gold = dict(zip(test["item_id"], test["decision"]))
    assert all(gold[i] == d for i, d in zip(frame["item_id"], frame["decision"]))
    assert all(t.count(negex.MARK) == 2 and t.replace(f"{negex.MARK} ", "", 1).replace(f" {negex.MARK}", "", 1) == s
               for t, s in zip(frame["text"], frame["sentence"]))


MWORD = st.text(alphabet="abcdefghijKLMNOP", min_size=1, max_size=10)


@st.composite
def tagged_sentences(draw):
    """A MACCROBAT-like item: words with IOB2 gold tags (mentions of one to three words)."""
    words, tags = [], []
    for _ in range(draw(st.integers(1, 10))):
        if draw(st.booleans()):
            n, t = draw(st.integers(1, 3)), draw(st.sampled_from(maccrobat.TYPES))
            for k in range(n):
                words.append(draw(MWORD))
                tags.append(("B-" if k == 0 else "I-") + t)
        else:
            words.append(draw(MWORD))
            tags.append("O")
    return {"item_id": f"maccrobat-d{draw(st.integers(0, 99)):03d}-s000", "words": words, "tags": tags}


MP = {p.name: p for p in maccrobat.PERTURBATIONS}


@settings(max_examples=150, deadline=None)
@given(tagged_sentences())
def test_maccrobat_perturbations_change_only_what_they_say(item):
    out = MP["word-typo"].apply(item)
    assert out == MP["word-typo"].apply(dict(item))
    eligible = [k for k, (w, t) in enumerate(zip(item["words"], item["tags"]))
                if t == "O" and len(w) >= 5 and len(set(w[1:-1])) > 1]
    if not eligible:
        assert out is NOT_APPLICABLE
    else:  # one word outside every gold mention changed, by one swap of neighbouring letters; gold as it was
        new = out["words"]
        changed = [k for k, (w, v) in enumerate(zip(item["words"], new)) if w != v]
        assert len(new) == len(item["words"]) and len(changed) == 1 and item["tags"][changed[0]] == "O"
        w, v = item["words"][changed[0]], new[changed[0]]
        assert sorted(w) == sorted(v) and sum(x != y for x, y in zip(w, v)) == 2 and w[0] == v[0] and w[-1] == v[-1]
        assert out.get("tags", item["tags"]) == item["tags"]

    out = MP["sentence-lowercase"].apply(item)
    lower = [w.lower() for w in item["words"]]
    assert out is NOT_APPLICABLE if lower == item["words"] else out["words"] == lower


def test_negex_prompt_set_few_shot_is_stratified_seeded_and_recorded(data_dir):
    """The four-shot prompt: 2 negated and 2 affirmed train items, the first of each by seed-hash rank, each
    answered with the variant's options, before the card's question; other variants change only their part."""
    from atlaslib.splits import rank

    items = negex.load_items(data_dir)
    train, test = negex.split_frames(items, negex.split(items, "atlas-n100-v1"))
    by_name = {v.name: v for v in negex.PROMPT_SET.variants}
    assert len([v for v in by_name.values() if v.template]) >= 4
    prompts, ids = negex.prompts_for(by_name["four-shot"], test, train)
    seed = negex.PROMPT_SET.seed
    expect = [i for d in ("affirmed", "negated") for i in rank(train.loc[train.decision == d, "item_id"], seed)[:2]]
    assert ids == rank(expect, seed)
    card_prompts = negex.option_prompts(test)
    ex = train.set_index("item_id").loc[ids]
    prefix = "".join(negex.OPTION_PROMPT.format(sentence=s, concept=c) + (" yes" if d == "negated" else " no") + "\n\n"
                     for s, c, d in zip(ex["sentence"], ex["concept"], ex["decision"]))
    assert prompts == [prefix + p for p in card_prompts]
    assert negex.prompts_for(by_name["options-capitalised"], test, train) == (card_prompts, [])
    para, _ = negex.prompts_for(by_name["absent"], test, train)
    assert all(s in p and f'"{c}"' in p and p != q for p, q, s, c in zip(para, card_prompts, test.sentence, test.concept))
