"""The scheduler's caps: how many calls a provider may have in flight, and a plan's call and cost
caps (``max_calls``, ``max_cost_usd``), which stop its new calls (calls in flight finish).

A provider's adaptive window (AIMD, :mod:`needle_action.providers.ratelimit`) caps its own calls in
flight below the run's limit; the embedded model runs one call at a time.
"""

from __future__ import annotations

from typing import Any

from needle_action.recall.run.prompt_plan import PromptPlan, price
from needle_action.recall.trials.haystack import Trial


def configure_window(provider: Any, start: int, limit: int) -> None:
    """Open PROVIDER's adaptive window at START, never beyond LIMIT (a provider without one: no-op)."""
    limiter = getattr(provider, "limiter", None)
    if limiter is not None:
        limiter.configure(start, limit)


def window(provider: Any, start: int) -> int:
    """Calls PROVIDER may have in flight now (START: the run's opening window)."""
    if getattr(provider, "sequential", False):
        return 1  # in-process inference runs one at a time: more in flight would only queue
    limiter = getattr(provider, "limiter", None)
    return int(limiter.window) if limiter is not None else start


def capped(plan: PromptPlan, trial: Trial) -> bool:
    """True (and the plan stopped) when the next call would cross one of PLAN's caps."""
    rs = plan.prompt.recall
    if rs.max_calls is not None and plan.started >= rs.max_calls:
        plan.outcome.stop_reason = f"max_calls ({rs.max_calls}) reached"
        return True
    estimate = price(plan.prompt, trial.prompt_tokens, rs.max_output_tokens)
    spent = plan.outcome.cost_usd + plan.in_flight_cost
    if rs.max_cost_usd is not None and estimate is not None and spent + estimate > rs.max_cost_usd:
        plan.outcome.stop_reason = f"max_cost_usd (${rs.max_cost_usd:g}) reached"
        return True
    return False
