"""Test set-up: offline model hubs, the pinned data directory beside the checkout."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if "ATLAS_DATA_DIR" not in os.environ and SHARED_DATA.is_dir():
    os.environ["ATLAS_DATA_DIR"] = str(SHARED_DATA)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    d = os.environ.get("ATLAS_DATA_DIR")
    if not d or not Path(d).is_dir():
        pytest.fail("ATLAS_DATA_DIR is not set and ../shared/data is missing: the tests need the pinned data")
    return Path(d)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO
