"""Cost estimates read from needle_action/data/prices.toml."""

from __future__ import annotations

import tomllib
from importlib import resources

import pytest

from needle_action.providers.pricing import estimate_cost, price_of, price_table


def raw_table() -> dict:
    text = (resources.files("needle_action") / "data" / "prices.toml").read_text("utf-8")
    return tomllib.loads(text)


def test_every_claude_5_5_model_has_a_price():
    for model in ("claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"):
        price = price_of(model)
        assert price is not None
        assert price.input_per_mtok > 0
        assert price.output_per_mtok > price.input_per_mtok


def test_cost_follows_the_data_file():
    entry = raw_table()["models"]["claude-sonnet-5-5"]
    expected = (12_000 * entry["input"] + 64 * entry["output"]) / 1e6
    assert estimate_cost("claude-sonnet-5-5", 12_000, 64) == pytest.approx(expected)


def test_bigger_models_cost_more():
    a = estimate_cost("claude-haiku-5-5", 10_000, 100)
    b = estimate_cost("claude-sonnet-5-5", 10_000, 100)
    c = estimate_cost("claude-opus-5-5", 10_000, 100)
    assert a < b < c


def test_unknown_model_has_no_price():
    assert price_of("mystery-model-9") is None
    assert estimate_cost("mystery-model-9", 1000, 10) is None


def test_local_provider_is_free_whatever_the_model_name():
    assert estimate_cost("gemma-3-270m", 50_000, 500, provider="local") == 0.0
    assert estimate_cost("local", 50_000, 500) == 0.0


def test_dated_snapshots_use_the_longest_matching_entry():
    assert price_of("claude-haiku-5-5-20261001") == price_of("claude-haiku-5-5")
    assert price_of("gpt-4o-mini-2024-07-18") == price_of("gpt-4o-mini")
    assert price_of("gpt-4o-2024-08-06") == price_of("gpt-4o")
    assert price_of("claude-haiku") is None  # a prefix of an id is not that id


def test_table_marks_itself_as_estimates():
    text = (resources.files("needle_action") / "data" / "prices.toml").read_text("utf-8")
    assert "ESTIMATES" in text
    assert "as_of" in raw_table()
    assert set(price_table()) >= {"claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5", "local"}


# ---- the clouds ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "provider", "env", "factor_key"),
    [
        ("global.anthropic.claude-sonnet-5-5-v1:0", "bedrock", {}, None),
        ("us.anthropic.claude-sonnet-5-5-v1:0", "bedrock", {}, "bedrock"),
        ("anthropic.claude-sonnet-5-5-v1:0", "bedrock", {}, "bedrock"),
        ("claude-sonnet-5-5@20261001", "vertex", {"CLOUD_ML_REGION": "global"}, None),
        ("claude-sonnet-5-5@20261001", "vertex", {"CLOUD_ML_REGION": "europe-west1"}, "vertex"),
    ],
)
def test_claude_on_a_cloud_costs_the_api_price_and_the_regional_premium(model, provider, env, factor_key):
    table = raw_table()
    entry = table["models"]["claude-sonnet-5-5"]
    factor = table["providers"][factor_key]["regional"] if factor_key else 1.0
    expected = factor * (10_000 * entry["input"] + 100 * entry["output"]) / 1e6
    price = price_of(model, provider, env)
    assert price is not None
    assert price.cost(10_000, 100) == pytest.approx(expected)
    # the cache multipliers and the batch discount apply to the cloud's price as to the API's
    assert price.cache_read == price_of("claude-sonnet-5-5").cache_read


def test_the_regional_premium_is_ten_percent_as_the_sources_state():
    providers = raw_table()["providers"]
    assert providers["bedrock"]["regional"] == providers["vertex"]["regional"] == pytest.approx(1.10)


def test_an_azure_deployment_is_priced_as_the_model_it_is_named_after():
    assert price_of("prod-gpt-4o-mini", "azure") == price_of("gpt-4o-mini")
    assert price_of("chat-prod", "azure") is None  # a name that says no model: the cost is unknown
