"""Session-wide setup: the fakes as plugins, an offline tiktoken cache seeded from bpe-openai, and
a private recall cache per run. See tests/README.md for the tiers, the fakes and the builders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from needle_action.tokens import tiktoken_cache

# Every fake is a plugin: its fixtures (fake_anthropic, anthropic_env, fake_github) are available
# to every test without an import; a fixture added to one of these modules is too.
pytest_plugins = [
    "tests.fakes.anthropic_server",
    "tests.fakes.bedrock_server",
    "tests.fakes.vertex_server",
    "tests.fakes.github_server",
    "tests.fakes.openai_server",
    "tests.fakes.simulated_model",
    "tests.fakes.lexical_model",  # after simulated_model, which it imports
]

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def pytest_configure(config):
    cache = os.environ.get("TIKTOKEN_CACHE_DIR") or str(REPO / ".needle-cache" / "tiktoken")
    os.environ["TIKTOKEN_CACHE_DIR"] = cache
    tiktoken_cache.seed(cache)
    # the recall result cache defaults to ~/.cache/needle-action: keep test runs out of it (and
    # from each other) so a rerun of the suite measures again instead of reusing the last run
    if not os.environ.get("NEEDLE_CACHE_DIR"):
        import tempfile

        os.environ["NEEDLE_CACHE_DIR"] = tempfile.mkdtemp(prefix="needle-test-cache-")


@pytest.fixture
def examples_dir() -> Path:
    return EXAMPLES


@pytest.fixture
def fresh_token_cache():
    """The token counters' content-hash cache empty and on, before and after the test."""
    import needle_action.tokens as tokens

    tokens.clear_cache()
    tokens.set_cache_enabled(True)
    yield
    tokens.clear_cache()
    tokens.set_cache_enabled(True)
