"""Runtime helpers for applications: put key context where models read it, and refuse to send a
request that would blow the token or dollar budget.

This package is for the application that *sends* prompts, not for the checker; it imports neither
click nor Jinja2. ``edge_order`` needs nothing beyond the standard library; ``PreflightGuard``
loads the tokenizer (``needle_action.tokens``) and the price table
(``needle_action.providers.pricing``) when it is first built.

    from needle_action.runtime import edge_order, PreflightGuard, BudgetExceeded

    docs = edge_order(retrieved_docs)                 # best at the start, runner-up at the end
    guard = PreflightGuard("claude-sonnet-5-5", max_input_tokens=30_000, max_cost_usd=0.05)
    create = guard.wrap(anthropic.Anthropic().messages.create)
    create(model="claude-sonnet-5-5", max_tokens=512, system=..., messages=[...])  # may raise BudgetExceeded

See docs/runtime.md.
"""

from needle_action.request.ordering import edge_order
from needle_action.runtime.guard import BudgetExceeded, Estimate, PreflightGuard

__all__ = ["BudgetExceeded", "Estimate", "PreflightGuard", "edge_order"]
