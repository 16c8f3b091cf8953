"""One scheduler for every model call of a run: all prompts, all cells, all trials, and in the
action the head's and the base's prompts together. One queue, one concurrency limit.

How a slot is filled (``Scheduler._pick``), best first:

1. a **needed** trial: one that one-call-at-a-time early stopping would ask whatever the answers
   (below the cell's horizon, :meth:`CellRun.horizon`), from the cell with the fewest trials asked
   (rounds across cells and prompts);
2. a **speculative** trial: the next one of an unsettled cell beyond its horizon, at most
   ``SPECULATE_AHEAD`` per cell in flight (one covers the usual last step of a cell without paying
   for all its remaining trials when slots are plentiful);
3. in the run's **tail** -- every needed trial of the run is in flight (none waits to be built or
   behind a prefix being written, and no prompt is still to come) and slots are idle -- any
   remaining trial of an unsettled cell, speculatively. Nothing else can use those slots then, and
   a cell that needs one more answer would otherwise add a whole round of latency at the end of the
   run (early stopping on was ~10% slower than off on the bench workload: the last cell of a
   prefix-cache chain waited for its answers before asking its 5th trial).

Speculation only ever takes a slot that would otherwise sit idle and only asks planned trials, so
a run sends at most the requests it would without early stopping; answers are counted in trial
order (:mod:`needle_action.recall.run.cells`), so the verdict is the non-speculative one, and a cell
that settles cancels its speculative calls still in flight. Runs with a call or cost cap do not
speculate (a cap must stop where the sequential rule would).

Looks. A compared head run (a baseline is known) asks its trials look by look
(:mod:`needle_action.recall.run.gate`): nothing beyond the current look's trials per cell is asked,
needed or speculative, until every gated plan has counted that look and the group-sequential
comparison has decided it (stop, pass or fail, or go on to the next look).

The scheduler's parts, each a module of its own:

- :mod:`~needle_action.recall.run.build_queue`: ``BUILDERS`` threads build every plan's trials ahead,
  from one queue for the whole run, trial index first;
- :mod:`~needle_action.recall.run.ladders`: with a prompt-caching provider a trial is ready when no
  prefix it would write is being written (:mod:`needle_action.recall.run.prefix`);
- :mod:`~needle_action.recall.run.caps`: a provider's adaptive window (AIMD,
  :mod:`needle_action.providers.ratelimit`) below the run's limit, a plan's call and cost caps;
- :mod:`~needle_action.recall.run.health`: lost trials, and when a provider is dead;
- :mod:`~needle_action.recall.run.prompt_plan`: the plan of one prompt and what it produced.

Every cell has a needle style (a prompt may run several, each its own grid); a trial's needle is a
pure function of (seed, prompt, style, size, depth, trial index), and its answer is judged by
:func:`needle_action.recall.trials.scoring.judge` (hit, and whether a miss repeated a look-alike's value).

Failures. A call that exhausts its retries loses that trial only (asked once more, then counted
lost); ``DEAD_AFTER`` distinct trials lost in a row make the provider dead
(:mod:`~needle_action.recall.run.health`). A request the provider rejects for good (400/404) stops that
prompt. Caps (``max_calls``, ``max_cost_usd``) stop a prompt's new calls; calls in flight finish.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from needle_action.config.model import RecallSettings
from needle_action.core.errors import ProviderUnavailable
from needle_action.core.names import GOLD_STYLE
from needle_action.providers.base import Completion
from needle_action.providers.pricing import price_of
from needle_action.providers.retry import RequestInvalid, RequestRejected, RetriesExhausted
from needle_action.recall.run import caps
from needle_action.recall.run.build_queue import BUILDERS, BuildQueue, trial_needles
from needle_action.recall.run.cells import CellRun
from needle_action.recall.run.gate import LookGate
from needle_action.recall.run.health import DEAD_AFTER, PROVIDER_STOP_PREFIX, ProviderState, stop_plan
from needle_action.recall.run.ladders import Ladders
from needle_action.recall.run.prefix import Mark, MarkStates, find_mark, sequential_order
from needle_action.recall.run.prompt_plan import Progress, ProgressFactory, PromptPlan, RunOutcome, price
from needle_action.recall.trials.haystack import Trial, needle_anchor
from needle_action.recall.trials.scoring import judge
from needle_action.results import RecallAnswer

# speculative calls one cell may have in flight: one covers a cell's usual last step (the answer
# that settles it) without paying for every remaining trial when slots are plentiful
SPECULATE_AHEAD = 1

# the scheduler's parts keep their names here: callers import them from the scheduler
__all__ = [
    "BUILDERS",
    "DEAD_AFTER",
    "PROVIDER_STOP_PREFIX",
    "CellRun",
    "Progress",
    "ProgressFactory",
    "PromptPlan",
    "RunOutcome",
    "Scheduler",
    "bill",
    "judged",
    "price",
    "trial_needles",
]

SortKey = tuple[float, ...]  # which trial to start first: the smallest
Picked = tuple[PromptPlan, CellRun, int, Trial, bool]  # (plan, cell, trial index, trial, speculative)


@dataclass
class _Call:
    plan: PromptPlan
    cell: CellRun
    index: int
    trial: Trial
    estimate: float
    speculative: bool
    read: Mark | None = None
    writes: list[Mark] = field(default_factory=list)
    successes_at_start: int = 0  # its provider's answers received when it started


class Scheduler:
    """Runs the plans added to it (``add``) under one concurrency LIMIT until ``close`` is called
    and every plan is finished. Each provider's window starts at START (default LIMIT) and may open
    up to LIMIT on its rate-limit headers' word (providers/ratelimit.py)."""

    def __init__(self, limit: int, *, start: int | None = None) -> None:
        self.limit = max(1, limit)
        self.start = min(self.limit, max(1, start or limit))
        self.plans: list[PromptPlan] = []
        self.marks = MarkStates()
        self._ladders = Ladders(self.marks)
        self._pending: dict[asyncio.Task[Completion], _Call] = {}
        self._providers: dict[int, ProviderState] = {}
        self._settled_cells: set[int] = set()
        self._wake = asyncio.Event()
        self._closed = False
        self._prompt_rank: dict[str, int] = {}  # a one-call-at-a-time provider's order (prefix.py)
        # a lambda, not the bound method: the callback is looked up when a build ends
        self._builds = BuildQueue(
            lambda cell, index, fut: self._built_one(cell, index, fut),
            look=lambda plan: self.gate.limit(plan),
        )
        self.gate = LookGate()  # compared head runs ask look by look (recall/gate.py)

    # ---- feeding ------------------------------------------------------------------------------
    def add(self, plan: PromptPlan) -> None:
        """Queue PLAN's cells; it starts as soon as its first prompts are built."""
        self.plans.append(plan)
        self._prompt_rank.setdefault(plan.name, len(self._prompt_rank))  # head and base side by side
        key = id(plan.provider)
        if key not in self._providers:
            self._providers[key] = ProviderState()
            caps.configure_window(plan.provider, self.start, self.limit)
            self._ladders.add_provider(plan.provider, plan)
        self._ladders.add(plan)
        self._builds.add(plan, len(self.plans) - 1)
        self._wake.set()

    def close(self) -> None:
        """No more plans will be added."""
        self._closed = True
        self._wake.set()
        self._builds.close()

    def _done(self) -> bool:
        return self._closed and not self._pending and all(p.finished() for p in self.plans)

    # ---- the loop -----------------------------------------------------------------------------
    async def run(self) -> None:
        """Issue and collect calls until ``close`` was called and every plan is finished."""
        self._builds.start()
        try:
            while not self._done():
                self._issue()
                if self._done():
                    break
                await self._wake.wait()
                self._wake.clear()
                for task in [t for t in self._pending if t.done()]:
                    self._collect(task, self._pending.pop(task))
        finally:
            for task in self._pending:
                task.cancel()
            await asyncio.gather(*self._pending, *self._builds.stop(), return_exceptions=True)
            self._builds.shutdown()
            for plan in self.plans:
                plan.outcome.speculative_calls += sum(1 for c in self._pending.values() if c.plan is plan)
            self._pending.clear()

    def _built_one(self, cell: CellRun, index: int, fut: asyncio.Future[Trial]) -> None:
        """A trial is built; the first of a cell gives the cell its size, offset and prefix mark."""
        if index == 0 and not fut.cancelled() and fut.exception() is None and cell.prompt_tokens is None:
            trial = fut.result()
            cell.prompt_tokens, cell.token_offset = trial.prompt_tokens, trial.token_offset
            cell.mark = find_mark(trial.rendered, needle_anchor(trial.needle.facts[0]), trial.token_offset)
        self._wake.set()

    # ---- issuing ------------------------------------------------------------------------------
    def _candidate(
        self, plan: PromptPlan, cell: CellRun, tail: bool = False
    ) -> tuple[SortKey, int, bool] | None:
        """(its sort key, the trial index, needed?) of CELL's next trial worth asking, or None."""
        index = cell.next_index()
        if index is None:
            return None
        rs = plan.prompt.recall
        horizon = cell.horizon(rs.threshold, rs.early_stop)
        look = self.gate.limit(plan)
        if look is not None:
            if index >= look:
                return None  # beyond the current look: asked only if the look does not stop the run
            horizon = min(horizon, look)
        needed = index < horizon
        if not needed and (
            not plan.speculate or (not tail and sum(i >= horizon for i in cell.in_flight) >= SPECULATE_AHEAD)
        ):
            return None
        if getattr(plan.provider, "sequential", False):  # the embedded model: prefix.py
            prompt_rank, own_hay = self._prompt_rank[plan.name], cell.style == GOLD_STYLE
            return sequential_order(needed, prompt_rank, cell.size, cell.depth, index, own_hay), index, needed
        rank = -cell.depth if plan.cached(self.marks) else cell.depth  # a size's writer is its deepest cell
        key = (0, index, rank) if needed else (1, index - horizon, rank)
        return key, index, needed

    def _pick(self) -> Picked | None:
        picked, waiting = self._pick_in(tail=False)
        if picked is None and not waiting and self._closed:
            # the tail: every needed trial of the run is in flight, so nothing but answers can end
            # it; a slot left idle now is a round of latency later for a cell that needs one more
            picked, _ = self._pick_in(tail=True)
        return picked

    def _pick_in(self, *, tail: bool) -> tuple[Picked | None, bool]:
        """(the best trial to start now, whether a needed trial is waiting: not built yet, or
        behind a prefix being written). In the TAIL a cell speculates on all its remaining trials."""
        best: tuple[SortKey, int, PromptPlan, CellRun, int, Trial, bool] | None = None
        waiting = False
        next_in_order = next_in_order_of(self.plans, lambda plan, cell: self._candidate(plan, cell, tail))
        for order, plan in enumerate(self.plans):
            state = self._providers[id(plan.provider)]
            if plan.finished() or state.dead or state.in_flight >= caps.window(plan.provider, self.start):
                continue
            for cell in plan.cells:
                found = self._candidate(plan, cell, tail)
                if found is None:
                    continue
                key, index, needed = found
                if next_in_order.get(id(plan.provider), (key, order)) != (key, order):
                    continue  # a one-call-at-a-time provider waits for its next trial, built or not
                if best is not None and (key, order) >= (best[0], best[1]):
                    continue  # (WAITING only matters when nothing is startable)
                trial = self._builds.trial(plan, cell, index)
                if trial is None or not self._ladders.ready(plan, cell, trial):
                    waiting = waiting or needed
                    continue
                best = (key, order, plan, cell, index, trial, needed)
        picked = None if best is None else (best[2], best[3], best[4], best[5], not best[6])
        return picked, waiting

    def _issue(self) -> None:
        """Start calls until the limit is reached or no trial is ready."""
        self._check_gate()
        while len(self._pending) < self.limit:
            picked = self._pick()
            if picked is None:
                return
            plan, cell, index, trial, speculative = picked
            if caps.capped(plan, trial):
                continue
            self._start(plan, cell, index, trial, speculative)

    def _start(self, plan: PromptPlan, cell: CellRun, index: int, trial: Trial, speculative: bool) -> None:
        rs = plan.prompt.recall
        estimate = price(plan.prompt, trial.prompt_tokens, rs.max_output_tokens) or 0.0
        cell.take(index)
        plan.started += 1
        plan.in_flight_cost += estimate
        state = self._providers[id(plan.provider)]
        state.in_flight += 1
        call = _Call(plan, cell, index, trial, estimate, speculative, successes_at_start=state.successes)
        breakpoints, call.writes, call.read = self._ladders.request(plan, cell, trial)
        coro = plan.provider.complete(
            trial.rendered, max_output_tokens=rs.max_output_tokens, breakpoints=breakpoints
        )
        task = asyncio.ensure_future(coro)
        task.add_done_callback(lambda _t: self._wake.set())
        self._pending[task] = call

    # ---- collecting ---------------------------------------------------------------------------
    def _collect(self, task: asyncio.Task[Completion], call: _Call) -> None:
        plan, cell = call.plan, call.cell
        key = id(plan.provider)
        state = self._providers[key]
        state.in_flight -= 1
        plan.in_flight_cost -= call.estimate
        if task.cancelled():
            return self._ladders.finished(plan, cell, call.read, call.writes, ok=False)
        exc = task.exception()
        self._ladders.finished(plan, cell, call.read, call.writes, ok=exc is None)
        if exc is None:
            state.answered()
            return self._record(call, task.result())
        if isinstance(exc, RetriesExhausted):
            return self._lost(call, state, exc)
        if isinstance(exc, RequestInvalid):  # a request bug, not an outage: the run stops, exit 2
            raise located(exc, plan)
        if isinstance(exc, RequestRejected):
            cell.in_flight.discard(call.index)
            return stop_plan(plan, exc.message)
        if isinstance(exc, ProviderUnavailable):
            cell.in_flight.discard(call.index)
            return self._provider_dead(key, exc.message)
        raise exc

    def _lost(self, call: _Call, state: ProviderState, exc: RetriesExhausted) -> None:
        """CALL exhausted its retries: its trial is asked once more, then lost; the provider is
        dead after DEAD_AFTER distinct trials lost in a row."""
        plan, cell = call.plan, call.cell
        state.lost(first=call.index not in cell.failures, successes_at_start=call.successes_at_start)
        if cell.fail(call.index):
            plan.outcome.lost_trials += 1
            # answers of later trials were waiting for this one: count them now
            self._counted(plan, cell, cell.count(plan.prompt.recall.threshold, plan.prompt.recall.early_stop))
        if state.down:
            self._provider_dead(
                id(plan.provider),
                f"{state.lost_in_a_row} trials in a row failed after every retry ({exc.message})",
            )

    def _provider_dead(self, key: int, message: str) -> None:
        self._providers[key].dead = message
        for plan in self.plans:
            if id(plan.provider) == key:
                stop_plan(plan, message)

    def _record(self, call: _Call, completion: Completion) -> None:
        plan, cell, rs = call.plan, call.cell, call.plan.prompt.recall
        bill(plan, call.trial, completion)
        c = completion
        answer = judged(call.index, call.trial, c.text, rs, tool_call=c.tool_call, tool_input=c.tool_input)
        before = cell.discarded
        counted = cell.receive(answer, rs.threshold, rs.early_stop)
        plan.outcome.speculative_calls += cell.discarded - before
        self._counted(plan, cell, counted)

    def _check_gate(self) -> None:
        """Evaluate looks as long as every gated plan has reached the current one (all plans added)."""
        while self._closed and self.gate.ready():
            self.gate.evaluate()

    def _counted(self, plan: PromptPlan, cell: CellRun, counted: int) -> None:
        plan.outcome.calls += counted
        if plan.progress is not None and counted:
            plan.progress.advance(counted)
        if cell.settled and id(cell) not in self._settled_cells:
            self._settled_cells.add(id(cell))
            self._settled(plan, cell)

    def _settled(self, plan: PromptPlan, cell: CellRun) -> None:
        """CELL's verdict is fixed: its speculative calls still in flight are cancelled."""
        if plan.progress is not None and cell.saved:
            plan.progress.advance(cell.saved)
        for task, call in self._pending.items():
            if call.cell is cell and not task.done():
                task.cancel()
                plan.outcome.speculative_calls += 1
                plan.outcome.cost_usd += call.estimate  # it may be billed for what it read


def located(exc: RequestInvalid, plan: PromptPlan) -> RequestInvalid:
    """EXC located at PLAN's prompt file when the provider's answer did not say where."""
    if not exc.location.file:
        exc.location.file = plan.prompt.source_file
    return exc


def judged(
    index: int,
    trial: Trial,
    text: str,
    rs: RecallSettings,
    *,
    tool_call: str | None = None,
    tool_input: str | None = None,
) -> RecallAnswer:
    """TEXT, the answer to TRIAL, judged: hit, and whether a miss repeated a look-alike's value. A
    reply that called TOOL_CALL instead of answering is a miss of its own kind, whatever its text,
    unless the request forced a tool (``tool_choice`` any or tool): its TOOL_INPUT is then the answer."""
    choice = trial.rendered.tool_choice
    if tool_call is not None and tool_input is not None and (choice or {}).get("type") in ("any", "tool"):
        text, tool_call = tool_input, None
    verdict = judge(text, trial.needle, rs, tool_call=tool_call)
    return RecallAnswer(
        trial=index,
        needle=trial.needle.answer,
        answer=text,
        hit=verdict.hit,
        distractor=verdict.distractor,
        tool_call=tool_call,
    )


def bill(plan: PromptPlan, trial: Trial, c: Completion) -> None:
    """Add C's tokens and cost (cache writes, reads and the batch discount priced) to PLAN's outcome."""
    rs = plan.prompt.recall
    uncached_in = c.input_tokens if c.input_tokens is not None else trial.prompt_tokens
    out = c.output_tokens if c.output_tokens is not None else rs.max_output_tokens
    spent = price(
        plan.prompt,
        uncached_in,
        out,
        cache_write_tokens=c.cache_write_tokens,
        cache_read_tokens=c.cache_read_tokens,
        batch=plan.batch,
    )
    full = price(plan.prompt, uncached_in + c.cache_write_tokens + c.cache_read_tokens, out)
    o = plan.outcome
    o.cost_usd += spent or 0.0
    o.uncached_cost_usd += full or 0.0
    o.usage.add(uncached_in, out, c.cache_write_tokens, c.cache_read_tokens)
    p = price_of(plan.prompt.model, plan.prompt.provider)
    if p is not None:
        o.usage.weights = (p.cache_write, p.cache_read)


def next_in_order_of(
    plans: list[PromptPlan], candidate: Callable[[PromptPlan, CellRun], tuple[SortKey, int, bool] | None]
) -> dict[int, tuple[SortKey, int]]:
    """(key, plan order) of the trial each one-call-at-a-time provider asks next (by id): it waits
    for that one to be built rather than start another, so consecutive prompts share the longest
    prefix whatever the builders' timing (recall/prefix.py, ``sequential_order``)."""
    out: dict[int, tuple[SortKey, int]] = {}
    for order, plan in enumerate(plans):
        if getattr(plan.provider, "sequential", False) and not plan.finished():
            for cell in plan.cells:
                if (found := candidate(plan, cell)) is not None:
                    key = id(plan.provider)
                    out[key] = min(out.get(key, (found[0], order)), (found[0], order))
    return out
