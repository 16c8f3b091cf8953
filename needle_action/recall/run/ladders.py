"""The scheduler's prompt-cache ladders: a plan's cells of one size share the text before their
needles up to the shallower needle, so their prefixes form a ladder of cache marks
(:mod:`needle_action.recall.run.prefix`). A trial is ready to send with a prompt-caching provider when
every cell of its ladder has built its first trial (the writer can then be chosen) and no prefix it
would write is being written; its request carries the breakpoints the ladder plans.
"""

from __future__ import annotations

from typing import Any

from needle_action.core.names import GOLD_STYLE
from needle_action.providers.base import Breakpoint
from needle_action.providers.pricing import price_of
from needle_action.recall.run.cells import CellRun
from needle_action.recall.run.prefix import Mark, MarkStates, marks_in
from needle_action.recall.run.prompt_plan import PromptPlan
from needle_action.recall.trials.haystack import Trial

LadderKey = tuple[int, int, bool]  # (id(plan), size, gold)


def ladder(plan: PromptPlan, cell: CellRun) -> LadderKey:
    """The prefix ladder CELL belongs to: its plan's cells of its size over the same hay. Gold
    trials' hay is the fixture's context without the gold item, so their text before the needle
    differs from the other styles' and they climb a ladder of their own."""
    return id(plan), cell.size, cell.style == GOLD_STYLE


class Ladders:
    """Every plan's ladders of prefix marks, over one run's mark states (MARKS)."""

    def __init__(self, marks: MarkStates) -> None:
        self.marks = marks
        self._cells: dict[LadderKey, list[CellRun]] = {}
        self._memo: dict[int, tuple[Trial, list[Mark]]] = {}  # id(trial) -> (trial kept alive, marks)

    def add_provider(self, provider: Any, plan: PromptPlan) -> None:
        """A provider that caches prompts: its shortest cacheable prefix, from PLAN's model's price."""
        if getattr(provider, "prompt_cache", False):
            p = price_of(plan.prompt.model, plan.prompt.provider)
            self.marks.min_tokens[id(provider)] = p.cache_min_tokens if p else 1024

    def add(self, plan: PromptPlan) -> None:
        for cell in plan.cells:
            self._cells.setdefault(ladder(plan, cell), []).append(cell)

    def ready(self, plan: PromptPlan, cell: CellRun, trial: Trial) -> bool:
        """May TRIAL be sent now (no prefix it would write is being written)?"""
        if not plan.cached(self.marks):
            return True
        if not self._known(plan, cell):
            return False
        return not self.marks.blocked(id(plan.provider), self.marks_of(plan, cell, trial), ladder(plan, cell))

    def request(
        self, plan: PromptPlan, cell: CellRun, trial: Trial
    ) -> tuple[tuple[Breakpoint, ...], list[Mark], Mark | None]:
        """(breakpoints to send, marks the request writes, the mark it reads) for TRIAL."""
        if not plan.cached(self.marks):
            return (), [], None
        marks = self.marks_of(plan, cell, trial)
        breakpoints, writes = self.marks.plan_request(id(plan.provider), marks, ladder(plan, cell))
        cached = [m for m, bp in zip(marks, breakpoints, strict=False) if bp.cache]
        return breakpoints, writes, cached[-1] if cached and not writes else None

    def finished(
        self, plan: PromptPlan, cell: CellRun, read: Mark | None, writes: list[Mark], *, ok: bool
    ) -> None:
        """A request that read READ and wrote WRITES ended (OK: it succeeded)."""
        if writes or read is not None:
            self.marks.finished(id(plan.provider), read, writes, ok, ladder(plan, cell))

    def marks_of(self, plan: PromptPlan, cell: CellRun, trial: Trial) -> list[Mark]:
        """The prefix marks TRIAL carries (computed once: it hashes the prompt's text)."""
        key = id(trial)
        if key not in self._memo:
            rungs = [c.mark for c in self._cells[ladder(plan, cell)] if c.mark is not None]
            self._memo[key] = (trial, marks_in(trial.rendered, cell.mark, rungs))
        return self._memo[key][1]

    def _known(self, plan: PromptPlan, cell: CellRun) -> bool:
        """Every cell of this size has built its first trial, so the writer can be chosen."""
        return all(c.prompt_tokens is not None or c.settled for c in self._cells[ladder(plan, cell)])
