"""Fixtures the card test modules share. ``corpus`` and ``manifest``: MACCROBAT's corpus read from the pinned data
and its ``atlas-n100-v1`` split, read once per module that asks (a module with a ``corpus`` of its own, TempEval's,
keeps its own)."""
from __future__ import annotations

import pytest

from atlaslib.cards import maccrobat as mc


@pytest.fixture(scope="module")
def corpus(data_dir):
    return mc.load_corpus(data_dir)


@pytest.fixture(scope="module")
def manifest(corpus):
    return mc.split(corpus.items, "atlas-n100-v1")
