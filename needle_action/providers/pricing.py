"""Cost estimates from one data file, ``needle_action/data/prices.toml`` (USD per million tokens).

The prices are the project's estimates to keep current, not quotes. ``estimate_cost`` returns None
for a model the table does not know: the recall engine then enforces ``max_calls`` only and says
that the cost is unknown, rather than pretending it is zero.

Prompt caching and batches are priced here too, from the same table: tokens written to the cache
cost ``cache_write`` x the input price, tokens read from it ``cache_read`` x, and the batch API
multiplies everything by ``batch``. :class:`Usage` adds those counts up and says what they would
have cost without the cache.

A cloud's own model id is priced as the model it names (``specs.model_family``: Bedrock's
``global.anthropic.claude-sonnet-5-5-v1:0`` as ``claude-sonnet-5-5``, an Azure deployment named
after its model as that model), times the cloud's ``regional`` multiplier (``[providers.NAME]``)
when the call goes to a regional endpoint (``specs.regional``).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import Any

from needle_action.core import environment
from needle_action.providers import specs

LOCAL = "local"


@dataclass(frozen=True)
class Price:
    """USD per million tokens of one model, and its cache and batch multipliers."""

    input_per_mtok: float
    output_per_mtok: float
    cache_write: float = 1.25
    cache_read: float = 0.10
    cache_min_tokens: int = 1024
    batch: float = 0.5

    def cost(
        self,
        input_tokens: int,
        output_tokens: int,
        *,
        cache_write_tokens: int = 0,
        cache_read_tokens: int = 0,
        batch: bool = False,
    ) -> float:
        """USD for one call; INPUT_TOKENS are the uncached ones (the API reports the three apart)."""
        billed_in = input_tokens + self.cache_write * cache_write_tokens + self.cache_read * cache_read_tokens
        usd = (billed_in * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1_000_000
        return usd * (self.batch if batch else 1.0)


@dataclass
class Usage:
    """Tokens of many calls, as the provider reported them, and what they bill."""

    input_tokens: int = 0  # uncached
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    output_tokens: int = 0
    weights: tuple[float, float] = field(default=(1.25, 0.10))  # (cache_write, cache_read)

    def add(self, input_tokens: int, output_tokens: int, cache_write: int = 0, cache_read: int = 0) -> None:
        """Count one call's usage."""
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.cache_write_tokens += cache_write
        self.cache_read_tokens += cache_read

    @property
    def prompt_tokens(self) -> int:
        """Every input token the calls sent, cached or not (the bill without a cache)."""
        return self.input_tokens + self.cache_write_tokens + self.cache_read_tokens

    @property
    def billed_input_tokens(self) -> float:
        """Input tokens weighted as billed: writes and reads at their multipliers."""
        write, read = self.weights
        return self.input_tokens + write * self.cache_write_tokens + read * self.cache_read_tokens


def _entry(defaults: dict[str, Any], entry: dict[str, Any]) -> Price:
    merged = {**defaults, **entry}
    return Price(
        float(merged["input"]),
        float(merged["output"]),
        cache_write=float(merged.get("cache_write", 1.25)),
        cache_read=float(merged.get("cache_read", 0.10)),
        cache_min_tokens=int(merged.get("cache_min_tokens", 1024)),
        batch=float(merged.get("batch", 0.5)),
    )


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    return tomllib.loads((resources.files("needle_action") / "data" / "prices.toml").read_text("utf-8"))


@lru_cache(maxsize=1)
def price_table() -> dict[str, Price]:
    """Every model of prices.toml, its [defaults] filled in."""
    data = _data()
    defaults = data.get("defaults", {})
    return {name: _entry(defaults, entry) for name, entry in data.get("models", {}).items()}


def regional_multiplier(provider: str) -> float:
    """What a regional endpoint of PROVIDER costs against its global one (prices.toml)."""
    return float(_data().get("providers", {}).get(provider, {}).get("regional", 1.0))


def price_of(model: str, provider: str | None = None, env: Mapping[str, str] | None = None) -> Price | None:
    """The price for ``model``; every model of the ``local`` provider is free; unknown -> None. A
    cloud's id is priced as the model it names, regional endpoints at the cloud's premium (ENV:
    where the region is read from, default this process's environment)."""
    table = price_table()
    if provider == LOCAL:
        return table.get(LOCAL, Price(0.0, 0.0))
    known = provider in specs.SPECS
    price = _lookup(table, specs.model_family(provider, model) if known and provider else model)
    if (
        price is not None
        and known
        and provider
        and specs.regional(provider, model, env or environment.process())
    ):
        factor = regional_multiplier(provider)
        price = replace(
            price,
            input_per_mtok=price.input_per_mtok * factor,
            output_per_mtok=price.output_per_mtok * factor,
        )
    return price


def _lookup(table: dict[str, Price], model: str) -> Price | None:
    if model in table:
        return table[model]
    # prefix entries ("gpt-4o*") and dated snapshots ("claude-haiku-5-5-20261001")
    best = None
    for name, price in table.items():
        stem = name[:-1] if name.endswith("*") else name + "-"
        if model.startswith(stem) and (best is None or len(stem) > len(best[0])):
            best = (stem, price)
    return best[1] if best else None


def estimate_cost(
    model: str,
    input_tokens: int,
    output_tokens: int,
    *,
    provider: str | None = None,
    cache_write_tokens: int = 0,
    cache_read_tokens: int = 0,
    batch: bool = False,
) -> float | None:
    """Estimated USD for one call, or None when the model's price is unknown."""
    price = price_of(model, provider)
    if price is None:
        return None
    return price.cost(
        input_tokens,
        output_tokens,
        cache_write_tokens=cache_write_tokens,
        cache_read_tokens=cache_read_tokens,
        batch=batch,
    )
