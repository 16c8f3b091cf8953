"""Looks in the scheduler: compared head runs ask their trials look by look, across all their cells,
and stop at the look where the group-sequential comparison decides (recall/sequential.py).

The scheduler asks a gated plan's cells only up to the current look's trial count (``limit``);
once every cell of every gated plan has counted that many answers (lost trials skipped), the gate
evaluates the look with :func:`needle_action.stats.sequential.evaluate_look` over all of them
together (the pull request's family) and either stops a plan (its cells settle, ``plan.look``
records the look) or lets the next look's trials go. The compare stage re-derives the same
decision from the results files (:func:`needle_action.stats.sequential.replay`): same answers,
same function, same verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from needle_action.recall.run.cells import CellRun
from needle_action.recall.run.prompt_plan import PromptPlan
from needle_action.results import CrossRun, RecallResult
from needle_action.stats.groups import cell_key
from needle_action.stats.levels import compared_prompt
from needle_action.stats.sequential import (
    Answers,
    Design,
    PromptData,
    answers_line_up,
    drop_floor,
    evaluate_look,
    result_answers,
)


@dataclass
class _Member:
    plan: PromptPlan
    base: RecallResult
    styles: list[str]
    levels: CrossRun | None = None  # the base is another run's: the cross-run tests
    decided: bool = False


def head_answers(cells: Sequence[CellRun], style: str) -> Answers:
    """The answers counted so far of the cells of STYLE, as (trial, hit) in trial order."""
    return {
        cell_key(c.size, c.depth): [(a.trial, a.hit) for a in c.answers] for c in cells if c.style == style
    }


class LookGate:
    """The compared plans of one run and the look they are at."""

    def __init__(self) -> None:
        self.members: list[_Member] = []
        self.look = 0  # 0-based index of the look being asked for

    def add(
        self, plan: PromptPlan, base: RecallResult, styles: list[str], levels: CrossRun | None = None
    ) -> None:
        """Gate PLAN (a compared head run) against BASE (a complete result) on STYLES; LEVELS: BASE
        is another run's, tested across runs (stats/runs.py) as the compare stage will."""
        self.members.append(_Member(plan, base, styles, levels))

    def _active(self) -> list[_Member]:
        return [m for m in self.members if not m.decided and not m.plan.finished()]

    def limit(self, plan: PromptPlan) -> int | None:
        """Trials per cell PLAN may ask now (None: not gated)."""
        for m in self.members:
            if m.plan is plan and not m.decided:
                looks = self._design(m).looks(self._planned(m))
                return looks[min(self.look, len(looks) - 1)]
        return None

    @staticmethod
    def _design(m: _Member) -> Design:
        rs = m.plan.prompt.recall
        return Design(block=rs.stop_on_drop, pass_early=rs.stop_on_no_change)

    @staticmethod
    def _planned(m: _Member) -> int:
        return m.plan.power.trials if m.plan.power is not None else max(c.planned for c in m.plan.cells)

    def ready(self) -> bool:
        """Has every cell of every active plan counted the current look's trials?"""
        active = self._active()
        if not active:
            return False
        for m in active:
            n = self.limit(m.plan)
            if any(not c.settled and c.next_count < (n or 0) for c in m.plan.cells):
                return False
        return True

    def data(self, m: _Member) -> PromptData:
        rs, plan = m.plan.prompt.recall, m.plan
        grids = {s: (result_answers(m.base, s), head_answers(plan.cells, s)) for s in m.styles}
        planned = self._planned(m)
        base_planned = m.base.power.trials if m.base.power is not None else 0
        return compared_prompt(
            plan.name,
            grids,
            {cell_key(c.size, c.depth) for c in plan.cells}
            | {cell_key(c.size, c.depth) for c in m.base.cells},
            planned=planned,
            base_planned=base_planned,
            floor=drop_floor(rs.min_drop),
            paired=rs.seed == m.base.seed and planned == base_planned and answers_line_up(m.base),
            design=self._design(m),
            levels=m.levels,
        )

    def evaluate(self) -> None:
        """Decide the current look for every active plan; stop those decided before their end."""
        active = self._active()
        alpha = min(m.plan.prompt.recall.alpha for m in active)
        decided = [self.data(m) for m in self.members if m not in active]  # they count as p = 1
        decisions = evaluate_look([self.data(m) for m in active], self.look, alpha, decided=decided)
        for m in active:
            d = decisions[m.plan.name]
            looks = self._design(m).looks(self._planned(m))
            if d.stopped:
                m.decided = True
                if d.look < len(looks):
                    m.plan.look = d.look
                    for c in m.plan.cells:
                        c.settled = True
        self.look += 1
