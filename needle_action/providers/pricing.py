"""Cost estimates from one data file, ``needle_action/data/prices.toml`` (USD per million tokens).

The prices are the project's estimates to keep current, not quotes. ``estimate_cost`` returns None
for a model the table does not know: the recall engine then enforces ``max_calls`` only and says
that the cost is unknown, rather than pretending it is zero.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

LOCAL = "local"


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1_000_000


@lru_cache(maxsize=1)
def price_table() -> dict[str, Price]:
    data = tomllib.loads((resources.files("needle_action") / "data" / "prices.toml").read_text("utf-8"))
    return {
        name: Price(float(entry["input"]), float(entry["output"]))
        for name, entry in data.get("models", {}).items()
    }


def price_of(model: str, provider: str | None = None) -> Price | None:
    """The price for ``model``; every model of the ``local`` provider is free; unknown -> None."""
    table = price_table()
    if provider == LOCAL:
        return table.get(LOCAL, Price(0.0, 0.0))
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
    model: str, input_tokens: int, output_tokens: int, *, provider: str | None = None
) -> float | None:
    """Estimated USD for one call, or None when the model's price is unknown."""
    price = price_of(model, provider)
    return None if price is None else price.cost(input_tokens, output_tokens)
