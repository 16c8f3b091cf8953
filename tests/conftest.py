"""Session-wide setup: an offline tiktoken cache seeded from the bpe-openai package."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from needle_action import tiktoken_cache

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def pytest_configure(config):
    cache = os.environ.get("TIKTOKEN_CACHE_DIR") or str(REPO / ".needle-cache" / "tiktoken")
    os.environ["TIKTOKEN_CACHE_DIR"] = cache
    tiktoken_cache.seed(cache)


@pytest.fixture
def examples_dir() -> Path:
    return EXAMPLES
