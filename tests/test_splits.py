import hashlib

import pandas as pd
import pytest

from atlaslib import splits


def test_seed_hash_is_sha256_of_seed_colon_id():
    assert splits.seed_hash(20261006, "negex-0003") == hashlib.sha256(b"20261006:negex-0003").hexdigest()


def test_rank_is_independent_of_other_items():
    ids = [f"x-{i}" for i in range(50)]
    full = splits.rank(ids, 7)
    part = splits.rank(ids[:25], 7)
    assert [i for i in full if i in set(ids[:25])] == part


def test_allocate_largest_remainder():
    # NegEx: 100 seats over 491 negated / 1,874 affirmed -> 20.76 / 79.24 -> 21 / 79
    assert splits.allocate(100, {"negated": 491, "affirmed": 1874}) == {"negated": 21, "affirmed": 79}
    assert splits.allocate(3, {"a": 1, "b": 1, "c": 1}) == {"a": 1, "b": 1, "c": 1}
    assert sum(splits.allocate(7, {"a": 5, "b": 3, "c": 2}).values()) == 7
    with pytest.raises(ValueError, match="cannot draw 5 items from a pool of 3"):
        splits.allocate(5, {"a": 3})


def test_stratified_draw_takes_first_by_rank_within_each_stratum():
    frame = pd.DataFrame({"item_id": [f"i{k}" for k in range(20)], "y": ["p"] * 5 + ["n"] * 15})
    got = splits.stratified_draw(frame, 8, "y", seed=3)
    assert sorted(got) == sorted(splits.rank([f"i{k}" for k in range(5)], 3)[:2]
                                 + splits.rank([f"i{k}" for k in range(5, 20)], 3)[:6])


def test_manifest_hash_changes_with_content_and_refuses_overlap():
    a = splits.SplitManifest("c", "v", 1, ["a", "b"], ["c"])
    b = splits.SplitManifest("c", "v", 1, ["b", "a"], ["c"])
    c = splits.SplitManifest("c", "v", 1, ["a"], ["c", "b"])
    assert a.hash == b.hash != c.hash
    assert set(a.to_dict()) == {"card", "version", "seed", "hash", "train", "test", "excluded"}
    with pytest.raises(ValueError, match="on both sides"):
        splits.SplitManifest("c", "v", 1, ["a"], ["a"])
