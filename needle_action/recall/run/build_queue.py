"""The scheduler's build queue: every plan's trial prompts built ahead, best first, off the loop.

``BUILDERS`` threads build from one queue for the whole run, trial index first: every prompt's first
trials (each size's prefix writer waits for its cells' first trials) before any prompt's second,
whichever side of a pull request it belongs to, and no second trial while prompts are still being
planned (:meth:`BuildQueue.close` says none are); a size's cells go deepest first (the order its
prefix writers go in), and trials of a settled cell are never built. A prompt's builder takes one
trial at a time, so two builds of one plan never run together.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

from needle_action.recall.plan.prompt import trial_rng
from needle_action.recall.run.cells import CellRun
from needle_action.recall.run.prebuild import Prebuilder
from needle_action.recall.run.prompt_plan import PromptPlan
from needle_action.recall.trials.haystack import Trial
from needle_action.recall.trials.needles import make_needle
from needle_action.recall.trials.probes.needle import Needle

# trials built at once (each in a thread: rendering in a render worker, counting): one per render
# worker (assemble/isolate.py), and never two of one prompt (its builder takes one at a time)
BUILDERS = 2

BuildKey = tuple[int, int, int]  # (id(plan), id(cell), trial index)
OnBuilt = Callable[[CellRun, int, "asyncio.Future[Trial]"], None]
_Queued = tuple[tuple[int, int, int], PromptPlan, CellRun, int]  # ((index, plan order, rank), ...)


def trial_needles(plan: PromptPlan, cell: CellRun, index: int) -> tuple[Needle, Needle]:
    """(the needle of CELL's trial INDEX, the cell's reference needle: its first trial's, which
    fixes the cell's filler amount so every trial shares the text before the needle)."""
    rs, gold = plan.prompt.recall, plan.builder.gold_needle

    def needle(i: int) -> Needle:
        rng = trial_rng(rs.seed, plan.name, cell.size, cell.depth, i, style=cell.style)
        return make_needle(rs, rng, style=cell.style, gold=gold)

    return needle(index), needle(0)


class BuildQueue:
    """Trials to build, best first; ON_BUILT(cell, index, future) runs (on the loop) as each ends."""

    def __init__(self, on_built: OnBuilt, look: Callable[[PromptPlan], int | None] | None = None) -> None:
        self._on_built = on_built
        self._look = look or (lambda plan: None)  # a plan's current look (trials per cell), if gated
        self._prebuild = Prebuilder(trial_needles)  # prompts built in code: a look's inputs in one batch
        self._built: dict[BuildKey, asyncio.Future[Trial]] = {}
        # trials to build, best first: (trial index, plan order, cell rank), so every plan's first
        # trials (which its prefix writer waits for) go before any plan's later ones
        self._queue: list[_Queued] = []
        self._building: set[int] = set()  # id(plan) of the builds running
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    def add(self, plan: PromptPlan, order: int) -> None:
        """Queue every planned trial of PLAN (the ORDER-th plan) for building: a size's cells
        deepest first (the order its prefix writers go in), trial by trial."""
        cells = sorted(plan.cells, key=lambda c: (c.size, -c.depth))
        sequential = getattr(plan.provider, "sequential", False)
        position = 0
        for rank, cell in enumerate(cells):
            for index in range(cell.planned):
                # a one-call-at-a-time provider's trials in the order it asks them (prefix.py)
                key = (0, order, position) if sequential else (index, order, rank)
                heapq.heappush(self._queue, (key, plan, cell, index))
                position += 1
        self._wake.set()

    def close(self) -> None:
        """No more plans: later trials may be built now."""
        self._closed = True
        self._wake.set()

    def trial(self, plan: PromptPlan, cell: CellRun, index: int) -> Trial | None:
        """The built trial (None while queued or being built; a build error is raised here, once
        the scheduler asks for that trial: e.g. a size below the prompt)."""
        fut = self._built.get((id(plan), id(cell), index))
        if fut is None or not fut.done():
            return None  # queued or being built (the builders go in the order trials are asked)
        return fut.result()

    def start(self) -> None:
        """Start the builder threads (in a running loop)."""
        self._executor = ThreadPoolExecutor(BUILDERS, thread_name_prefix="needle-build")
        self._tasks = [asyncio.create_task(self._builder()) for _ in range(BUILDERS)]

    def stop(self) -> list[Awaitable[object]]:
        """Cancel the builders; what to await before :meth:`shutdown` (the builds in flight too)."""
        for t in self._tasks:
            t.cancel()
        return [*self._tasks, *self._built.values()]

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False)

    def _next(self) -> tuple[PromptPlan, CellRun, int] | None:
        """The best queued trial still wanted whose prompt has no build running."""
        held = []
        found = None
        while self._queue:
            item = heapq.heappop(self._queue)
            _, plan, cell, index = item
            if plan.finished() or cell.settled or (id(plan), id(cell), index) in self._built:
                continue  # never asked (or already built): dropped
            if index > 0 and not self._closed and not getattr(plan.provider, "sequential", False):
                # prompts are still being planned: their first trials come before anyone's second
                held.append(item)
                break
            if id(plan) in self._building:
                held.append(item)
                continue
            found = (plan, cell, index)
            break
        for item in held:
            heapq.heappush(self._queue, item)
        return found

    async def _builder(self) -> None:
        """Build queued trials, best first, until stopped."""
        while True:
            job = self._next()
            if job is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            plan, cell, index = job
            self._building.add(id(plan))
            try:
                await self._ahead(plan, index)
                await self._build(plan, cell, index)
            except Exception:  # noqa: S110 - surfaces (once) when the scheduler asks for that trial
                pass
            finally:
                self._building.discard(id(plan))
                self._wake.set()

    async def _ahead(self, plan: PromptPlan, index: int) -> None:
        """A prompt built in code: its next trial inputs go to the builder in one batch (never fatal:
        the build itself reports what is wrong)."""
        if plan.prompt.builder is not None and index > 0:
            # never fatal here: the build that follows raises the error where it belongs
            with contextlib.suppress(Exception):
                await asyncio.get_running_loop().run_in_executor(
                    self._executor, self._prebuild.ahead, plan, index, self._look(plan)
                )

    def _build(self, plan: PromptPlan, cell: CellRun, index: int) -> asyncio.Future[Trial]:
        key = (id(plan), id(cell), index)
        fut = self._built.get(key)
        if fut is None:
            needle, reference = trial_needles(plan, cell, index)
            loop = asyncio.get_running_loop()
            fut = self._built[key] = loop.run_in_executor(
                self._executor, plan.builder.build, cell.size, cell.depth, needle, index, reference
            )
            fut.add_done_callback(lambda f: self._on_built(cell, index, f))
        return fut
