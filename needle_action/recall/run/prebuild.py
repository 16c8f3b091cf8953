"""Trial inputs of a prompt built in code, sent to its builder ahead in one batch.

A builder prompt (``builder = "file.py:function"``) renders every trial by calling the user's
function in a worker process (:mod:`needle_action.assemble.builder.client`): one round trip per call when
trials are built one at a time. Once a cell's first trial is built its filler amount is known, so
the keyword arguments of its next trials are too (:meth:`HaystackBuilder.trial_variables`). The
first time a plan builds a later trial, :class:`Prebuilder` computes those inputs for every cell of
the plan, up to the current look (or :data:`AHEAD` trials on), and hands them to the builder's
worker in one batch; the builds that follow are answered from its cache. The requests are the same
as built one by one: the same function over the same inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from needle_action.assemble.builder.client import prefetch
from needle_action.recall.run.cells import CellRun
from needle_action.recall.run.prompt_plan import PromptPlan
from needle_action.recall.trials.probes.needle import Needle

AHEAD = 16  # trials per cell sent ahead at once when no look bounds them (early stopping may end a cell)

TrialNeedles = Callable[["PromptPlan", CellRun, int], tuple[Needle, Needle]]


class Prebuilder:
    """Which trials of each plan went to the builder ahead; ``ahead`` sends the next ones."""

    def __init__(self, trial_needles: TrialNeedles) -> None:
        self.trial_needles = trial_needles
        self.covered: dict[int, int] = {}  # id(plan) -> trial indices below this were sent

    def ahead(self, plan: PromptPlan, index: int, look: int | None = None) -> int:
        """Before trial INDEX of PLAN is built: when it was not sent ahead, send the plan's trial
        inputs from INDEX up to LOOK (the current look's trial count; None: AHEAD more) in one batch.
        Returns how many calls went to the worker (0 for prompts not built in code)."""
        if plan.prompt.builder is None or index == 0:
            return 0
        if index < self.covered.get(id(plan), 1):
            return 0
        stop = look if look is not None and look > index else index + AHEAD
        self.covered[id(plan)] = stop
        calls = []
        for cell in plan.cells:
            if cell.settled:
                continue
            for i in range(index, min(stop, cell.planned)):
                needle, reference = self.trial_needles(plan, cell, i)
                variables = plan.builder.trial_variables(cell.size, cell.depth, needle, i, reference)
                if variables is not None:
                    calls.append(variables)
        if not calls:
            return 0
        return prefetch(plan.builder.config, plan.prompt, calls)


def every_trial(plan: PromptPlan, trial_needles: TrialNeedles) -> Iterator[tuple[CellRun, int]]:
    """(cell, trial index) of every planned trial of PLAN, in the order to build them all at once
    (``--batch``, ``needle capture``): each cell's first trial (which fixes its filler), then, once
    the other trials' inputs went to a builder prompt's worker in one batch, the rest cell by cell."""
    for cell in plan.cells:
        if cell.planned:
            yield cell, 0
    Prebuilder(trial_needles).ahead(plan, 1, max((c.planned for c in plan.cells), default=1))
    for cell in plan.cells:
        for index in range(1, cell.planned):
            yield cell, index


__all__ = ["AHEAD", "Prebuilder", "every_trial"]
