"""One prompt's recall run as the scheduler sees it: its cells, provider, caps and what it produced.

Kept apart from :mod:`~needle_action.recall.run.scheduler` so the scheduler's parts (the build queue,
the caps, provider health, the prefix ladders) and the batch path share the plan without importing
the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from needle_action.config.model import PromptConfig
from needle_action.providers.pricing import Usage, estimate_cost
from needle_action.recall.run.cells import CellRun
from needle_action.recall.run.prefix import MarkStates
from needle_action.recall.trials.haystack import HaystackBuilder
from needle_action.results import RecallPower

__all__ = ["Progress", "ProgressFactory", "PromptPlan", "RunOutcome", "price"]


class Progress(Protocol):
    """What the engine reports progress to (the CLI hands in a terminal bar)."""

    def advance(self, n: int = 1) -> None: ...

    def close(self) -> None: ...


ProgressFactory = Callable[[int, str], Progress]  # (planned calls, label) -> Progress


@dataclass
class RunOutcome:
    """What running a plan's cells produced, beyond the cells themselves."""

    calls: int = 0  # answers counted
    speculative_calls: int = 0  # answers started ahead and not needed (discarded or cancelled)
    lost_trials: int = 0
    cost_usd: float = 0.0
    usage: Usage = field(default_factory=Usage)
    uncached_cost_usd: float = 0.0
    stop_reason: str | None = None
    provider_failed: bool = False


@dataclass
class PromptPlan:
    """Everything needed to run one prompt's cells."""

    name: str
    prompt: PromptConfig
    fixture: str | None
    sizes: list[int]
    builder: HaystackBuilder
    settings_hash: str
    cells: list[CellRun]
    provider: Any = None  # Provider; Any so tests may hand in a stub
    progress: Progress | None = None
    outcome: RunOutcome = field(default_factory=RunOutcome)
    started: int = 0  # calls started (caps count these)
    in_flight_cost: float = 0.0
    batch: bool = False
    power: RecallPower | None = None  # how the cells' trials were planned (trials = "auto")
    pool_key: str | None = None  # what decides the answers: runs that share it pool (recall/history.py)
    look: int | None = None  # the sequential look that stopped this plan (recall/gate.py)

    @property
    def speculate(self) -> bool:
        """May this plan start trials beyond what sequential early stopping needs?"""
        rs = self.prompt.recall
        return rs.early_stop and rs.max_calls is None and rs.max_cost_usd is None

    def finished(self) -> bool:
        """Stopped, or every cell settled."""
        return self.outcome.stop_reason is not None or all(c.settled for c in self.cells)

    def cached(self, marks: MarkStates) -> bool:
        """Does this plan's provider cache prefixes, and does the prompt want it?"""
        return self.prompt.recall.prompt_cache and id(self.provider) in marks.min_tokens


def price(prompt: PromptConfig, input_tokens: int, output_tokens: int, **cache: Any) -> float | None:
    """Estimated USD of one call; None when the price table does not know the model."""
    return estimate_cost(prompt.model, input_tokens, output_tokens, provider=prompt.provider, **cache)
