"""The MACCROBAT page's corpus counts are cached on disk between builds under a key: a change to any module of the
card's package (the converter, the split, the gold cuts) must change it, else a build quotes the counts of the old
conversion. The key covered the package's ``__init__`` and the pages module only."""
from __future__ import annotations

import shutil
from pathlib import Path


def test_the_facts_cache_key_covers_every_module_of_the_card(tmp_path):
    from atlaslib.cards.maccrobat import pages

    here = Path(pages.__file__).parent
    copy = tmp_path / "maccrobat"
    shutil.copytree(here, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = pages.facts_key("d", copy)
    assert before == pages.facts_key("d", here) != pages.facts_key("e", here)
    for name in ("data.py", "splitting.py", "gold_cuts.py", "words.py"):
        (copy / name).write_text((copy / name).read_text() + "\n# changed\n")
        after = pages.facts_key("d", copy)
        assert after != before, name
        before = after
