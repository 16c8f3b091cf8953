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
order (:mod:`needle_action.recall.cells`), so the verdict is the non-speculative one, and a cell
that settles cancels its speculative calls still in flight. Runs with a call or cost cap do not
speculate (a cap must stop where the sequential rule would).

Looks. A compared head run (a baseline is known) asks its trials look by look
(:mod:`needle_action.recall.gate`): nothing beyond the current look's trials per cell is asked,
needed or speculative, until every gated plan has counted that look and the group-sequential
comparison has decided it (stop, pass or fail, or go on to the next look).

A trial is ready when its prompt is built and, with a prompt-caching provider, when no prefix it
would write is being written (:mod:`needle_action.recall.prefix`). ``BUILDERS`` threads build every
plan's trials ahead, from one queue for the whole run, trial index first: every prompt's first
trials (each size's prefix writer waits for its cells' first trials) before any prompt's second,
whichever side of a pull request it belongs to, and no second trial while prompts are still being
planned; trials of a settled cell are never built. A provider's adaptive window (AIMD,
:mod:`needle_action.providers.ratelimit`) caps its own calls in flight below the run's limit.

Every cell has a needle style (a prompt may run several, each its own grid); a trial's needle is a
pure function of (seed, prompt, style, size, depth, trial index), and its answer is judged by
:func:`needle_action.recall.scoring.judge` (hit, and whether a miss repeated a look-alike's value).

Failures. A call that exhausts its retries loses that trial only: it is asked once more, then
counted lost, and the rest go on (lost trials alone never make a run partial). The provider is
declared dead (every prompt on it stops, partial) when it refuses our credentials or after
``DEAD_AFTER`` distinct trials lost in a row, none of them outlived by another call's answer: at a 60% fault rate with 7 attempts a call is lost 2.8%
of the time, so five in a row by chance is about 1 in 60 million. A request the provider rejects for
good (400/404) stops that prompt. Caps (``max_calls``, ``max_cost_usd``) stop a prompt's new calls;
calls in flight finish.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from needle_action.config.model import PromptConfig, RecallSettings
from needle_action.errors import ProviderUnavailable
from needle_action.providers.base import Breakpoint, Completion
from needle_action.providers.pricing import Usage, estimate_cost, price_of
from needle_action.providers.retry import RequestRejected, RetriesExhausted
from needle_action.recall.cells import CellRun
from needle_action.recall.gate import LookGate
from needle_action.recall.haystack import HaystackBuilder, Trial, needle_anchor
from needle_action.recall.needles import make_needle
from needle_action.recall.plan import trial_rng
from needle_action.recall.prefix import Mark, MarkStates, find_mark, marks_in, sequential_order
from needle_action.recall.probes.needle import Needle
from needle_action.recall.scoring import judge
from needle_action.results import RecallAnswer, RecallPower

PROVIDER_STOP_PREFIX = "provider unavailable: "
DEAD_AFTER = 5  # distinct trials lost in a row (no success between) after which a provider is dead
# speculative calls one cell may have in flight: one covers a cell's usual last step (the answer
# that settles it) without paying for every remaining trial when slots are plentiful
SPECULATE_AHEAD = 1
# trials built at once (each in a thread: rendering in a render worker, counting): one per render
# worker (assemble/isolate.py), and never two of one prompt (its builder takes one at a time)
BUILDERS = 2

__all__ = ["PROVIDER_STOP_PREFIX", "CellRun", "PromptPlan", "RunOutcome", "Scheduler", "price"]


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


@dataclass
class _ProviderState:
    in_flight: int = 0
    lost_in_a_row: int = 0
    successes: int = 0  # answers received so far
    dead: str | None = None


class Scheduler:
    """Runs the plans added to it (``add``) under one concurrency LIMIT until ``close`` is called
    and every plan is finished. Each provider's window starts at START (default LIMIT) and may open
    up to LIMIT on its rate-limit headers' word (providers/ratelimit.py)."""

    def __init__(self, limit: int, *, start: int | None = None) -> None:
        self.limit = max(1, limit)
        self.start = min(self.limit, max(1, start or limit))
        self.plans: list[PromptPlan] = []
        self.marks = MarkStates()
        self._pending: dict[asyncio.Task[Completion], _Call] = {}
        self._built: dict[tuple[int, int, int], asyncio.Future[Trial]] = {}
        self._providers: dict[int, _ProviderState] = {}
        self._ladders: dict[tuple[int, int, bool], list[CellRun]] = {}
        self._mark_memo: dict[int, tuple[Trial, list[Mark]]] = {}
        self._settled_cells: set[int] = set()  # id(trial) -> (trial kept alive, marks)
        self._wake = asyncio.Event()
        self._closed = False
        # trials to build, best first: (trial index, plan order, cell rank), so every plan's first
        # trials (which its prefix writer waits for) go before any plan's later ones
        self._queue: list[tuple[tuple[int, int, int], PromptPlan, CellRun, int]] = []
        self._building: set[int] = set()  # id(plan) of the builds running
        self._build_wake = asyncio.Event()
        self._builders: list[asyncio.Task[None]] = []
        self._executor: ThreadPoolExecutor | None = None
        self.gate = LookGate()  # compared head runs ask look by look (recall/gate.py)

    # ---- feeding ------------------------------------------------------------------------------
    def add(self, plan: PromptPlan) -> None:
        """Queue PLAN's cells; it starts as soon as its first prompts are built."""
        self.plans.append(plan)
        key = id(plan.provider)
        if key not in self._providers:
            self._providers[key] = _ProviderState()
            limiter = getattr(plan.provider, "limiter", None)
            if limiter is not None:
                limiter.configure(self.start, self.limit)
            if getattr(plan.provider, "prompt_cache", False):
                p = price_of(plan.prompt.model, plan.prompt.provider)
                self.marks.min_tokens[key] = p.cache_min_tokens if p else 1024
        for cell in plan.cells:
            self._ladders.setdefault(_ladder(plan, cell), []).append(cell)
        self._enqueue(plan, len(self.plans) - 1)
        self._wake.set()

    def close(self) -> None:
        """No more plans will be added."""
        self._closed = True
        self._wake.set()
        self._build_wake.set()

    def _done(self) -> bool:
        return self._closed and not self._pending and all(p.finished() for p in self.plans)

    # ---- the loop -----------------------------------------------------------------------------
    async def run(self) -> None:
        """Issue and collect calls until ``close`` was called and every plan is finished."""
        self._executor = ThreadPoolExecutor(BUILDERS, thread_name_prefix="needle-build")
        self._builders = [asyncio.create_task(self._builder()) for _ in range(BUILDERS)]
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
            for t in self._builders:
                t.cancel()
            await asyncio.gather(
                *self._pending, *self._builders, *self._built.values(), return_exceptions=True
            )
            self._executor.shutdown(wait=False)
            for plan in self.plans:
                plan.outcome.speculative_calls += sum(1 for c in self._pending.values() if c.plan is plan)
            self._pending.clear()

    # ---- building -----------------------------------------------------------------------------
    def _enqueue(self, plan: PromptPlan, order: int) -> None:
        """Queue every planned trial of PLAN for building: a size's cells deepest first (the order
        its prefix writers go in), trial by trial."""
        cells = sorted(plan.cells, key=lambda c: (c.size, -c.depth))
        sequential = getattr(plan.provider, "sequential", False)
        position = 0
        for rank, cell in enumerate(cells):
            for index in range(cell.planned):
                # a one-call-at-a-time provider's trials in the order it asks them (prefix.py)
                key = (0, order, position) if sequential else (index, order, rank)
                heapq.heappush(self._queue, (key, plan, cell, index))
                position += 1
        self._build_wake.set()

    def _next_build(self) -> tuple[PromptPlan, CellRun, int] | None:
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
        """Build queued trials, best first, until the scheduler stops."""
        while True:
            job = self._next_build()
            if job is None:
                self._build_wake.clear()
                await self._build_wake.wait()
                continue
            plan, cell, index = job
            self._building.add(id(plan))
            try:
                await self._build(plan, cell, index)
            except Exception:  # noqa: BLE001 - surfaces (once) when the scheduler asks for that trial
                pass
            finally:
                self._building.discard(id(plan))
                self._build_wake.set()

    def _build(self, plan: PromptPlan, cell: CellRun, index: int) -> asyncio.Future[Trial]:
        key = (id(plan), id(cell), index)
        fut = self._built.get(key)
        if fut is None:
            needle, reference = trial_needles(plan, cell, index)
            loop = asyncio.get_running_loop()
            fut = self._built[key] = loop.run_in_executor(
                self._executor, plan.builder.build, cell.size, cell.depth, needle, index, reference
            )
            fut.add_done_callback(lambda f: self._built_one(cell, index, f))
        return fut

    def _built_one(self, cell: CellRun, index: int, fut: asyncio.Future[Trial]) -> None:
        """A trial is built; the first of a cell gives the cell its size, offset and prefix mark."""
        if index == 0 and not fut.cancelled() and fut.exception() is None and cell.prompt_tokens is None:
            trial = fut.result()
            cell.prompt_tokens, cell.token_offset = trial.prompt_tokens, trial.token_offset
            cell.mark = find_mark(trial.rendered, needle_anchor(trial.needle.facts[0]), trial.token_offset)
        self._wake.set()

    # ---- issuing ------------------------------------------------------------------------------
    def _ready(self, plan: PromptPlan, cell: CellRun, index: int) -> Trial | None:
        fut = self._built.get((id(plan), id(cell), index))
        if fut is None or not fut.done():
            return None  # queued or being built (the builders go in the order trials are asked)
        return fut.result()  # a build error (e.g. a size below the prompt) surfaces here

    def _ladder_known(self, plan: PromptPlan, cell: CellRun) -> bool:
        """Every cell of this size has built its first trial, so the writer can be chosen."""
        return all(c.prompt_tokens is not None or c.settled for c in self._ladders[_ladder(plan, cell)])

    def _candidate(
        self, plan: PromptPlan, cell: CellRun, tail: bool = False
    ) -> tuple[tuple, int, bool] | None:
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
            return sequential_order(needed, plan.name, cell.size, cell.depth, index), index, needed
        rank = -cell.depth if plan.cached(self.marks) else cell.depth  # a size's writer is its deepest cell
        key = (0, index, rank) if needed else (1, index - horizon, rank)
        return key, index, needed

    def _pick(self) -> tuple[PromptPlan, CellRun, int, Trial, bool] | None:
        picked, waiting = self._pick_in(tail=False)
        if picked is None and not waiting and self._closed:
            # the tail: every needed trial of the run is in flight, so nothing but answers can end
            # it; a slot left idle now is a round of latency later for a cell that needs one more
            picked, _ = self._pick_in(tail=True)
        return picked

    def _pick_in(self, *, tail: bool) -> tuple[tuple[PromptPlan, CellRun, int, Trial, bool] | None, bool]:
        """(the best trial to start now, whether a needed trial is waiting: not built yet, or
        behind a prefix being written). In the TAIL a cell speculates on all its remaining trials."""
        best: tuple[tuple, int, PromptPlan, CellRun, int, Trial, bool] | None = None
        waiting = False
        next_in_order = self._next_in_order(tail)
        for order, plan in enumerate(self.plans):
            state = self._providers[id(plan.provider)]
            if plan.finished() or state.dead or state.in_flight >= self._window(plan):
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
                trial = self._ready(plan, cell, index)
                if trial is None or not self._cache_ready(plan, cell, trial):
                    waiting = waiting or needed
                    continue
                best = (key, order, plan, cell, index, trial, needed)
        picked = None if best is None else (best[2], best[3], best[4], best[5], not best[6])
        return picked, waiting

    def _next_in_order(self, tail: bool) -> dict[int, tuple[tuple, int]]:
        """(key, plan order) of the trial each one-call-at-a-time provider asks next: it waits for
        that one to be built rather than start another, so consecutive prompts share the longest
        prefix whatever the builders' timing (recall/prefix.py, ``sequential_order``)."""
        out: dict[int, tuple[tuple, int]] = {}
        for order, plan in enumerate(self.plans):
            if getattr(plan.provider, "sequential", False) and not plan.finished():
                for cell in plan.cells:
                    if (found := self._candidate(plan, cell, tail)) is not None:
                        key = id(plan.provider)
                        out[key] = min(out.get(key, (found[0], order)), (found[0], order))
        return out

    def _window(self, plan: PromptPlan) -> int:
        if getattr(plan.provider, "sequential", False):
            return 1  # in-process inference runs one at a time: more in flight would only queue
        limiter = getattr(plan.provider, "limiter", None)
        return limiter.window if limiter is not None else self.start

    def _cache_ready(self, plan: PromptPlan, cell: CellRun, trial: Trial) -> bool:
        key = id(plan.provider)
        if not plan.cached(self.marks):
            return True
        if not self._ladder_known(plan, cell):
            return False
        return not self.marks.blocked(key, self._marks(plan, cell, trial), _ladder(plan, cell))

    def _marks(self, plan: PromptPlan, cell: CellRun, trial: Trial) -> list[Mark]:
        """The prefix marks TRIAL carries (computed once: it hashes the prompt's text)."""
        key = id(trial)
        if key not in self._mark_memo:
            ladder = [c.mark for c in self._ladders[_ladder(plan, cell)] if c.mark is not None]
            self._mark_memo[key] = (trial, marks_in(trial.rendered, cell.mark, ladder))
        return self._mark_memo[key][1]

    def _issue(self) -> None:
        """Start calls until the limit is reached or no trial is ready."""
        self._check_gate()
        while len(self._pending) < self.limit:
            picked = self._pick()
            if picked is None:
                return
            plan, cell, index, trial, speculative = picked
            if self._capped(plan, trial):
                continue
            self._start(plan, cell, index, trial, speculative)

    def _capped(self, plan: PromptPlan, trial: Trial) -> bool:
        """True (and the plan stopped) when the next call would cross one of PLAN's caps."""
        rs = plan.prompt.recall
        if rs.max_calls is not None and plan.started >= rs.max_calls:
            plan.outcome.stop_reason = f"max_calls ({rs.max_calls}) reached"
            return True
        estimate = price(plan.prompt, trial.prompt_tokens, rs.max_output_tokens)
        if rs.max_cost_usd is not None and estimate is not None:
            if plan.outcome.cost_usd + plan.in_flight_cost + estimate > rs.max_cost_usd:
                plan.outcome.stop_reason = f"max_cost_usd (${rs.max_cost_usd:g}) reached"
                return True
        return False

    def _start(self, plan: PromptPlan, cell: CellRun, index: int, trial: Trial, speculative: bool) -> None:
        rs = plan.prompt.recall
        estimate = price(plan.prompt, trial.prompt_tokens, rs.max_output_tokens) or 0.0
        cell.take(index)
        plan.started += 1
        plan.in_flight_cost += estimate
        key = id(plan.provider)
        self._providers[key].in_flight += 1
        call = _Call(plan, cell, index, trial, estimate, speculative)
        call.successes_at_start = self._providers[key].successes
        breakpoints: tuple[Breakpoint, ...] = ()
        if plan.cached(self.marks):
            marks = self._marks(plan, cell, trial)
            breakpoints, call.writes = self.marks.plan_request(key, marks, _ladder(plan, cell))
            cached = [m for m, bp in zip(marks, breakpoints, strict=False) if bp.cache]
            call.read = cached[-1] if cached and not call.writes else None
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
            return self._finish_marks(call, ok=False)
        exc = task.exception()
        self._finish_marks(call, ok=exc is None)
        if exc is None:
            state.lost_in_a_row = 0
            state.successes += 1
            return self._record(call, task.result())
        if isinstance(exc, RetriesExhausted):
            # a trial asked again after failing is expected to fail again: only first failures
            # of distinct trials in a row say the provider itself is down, and only while nothing
            # else got an answer since they started (a request the server always refuses fails
            # after its retries, so such trials finish together, after their neighbours' answers)
            if call.index not in cell.failures and state.successes == call.successes_at_start:
                state.lost_in_a_row += 1
            if cell.fail(call.index):
                plan.outcome.lost_trials += 1
                # answers of later trials were waiting for this one: count them now
                self._counted(
                    plan, cell, cell.count(plan.prompt.recall.threshold, plan.prompt.recall.early_stop)
                )
            if state.lost_in_a_row >= DEAD_AFTER:
                self._provider_dead(
                    key, f"{state.lost_in_a_row} trials in a row failed after every retry ({exc.message})"
                )
            return None
        if isinstance(exc, RequestRejected):
            cell.in_flight.discard(call.index)
            return self._stop(plan, exc.message)
        if isinstance(exc, ProviderUnavailable):
            cell.in_flight.discard(call.index)
            return self._provider_dead(key, exc.message)
        raise exc

    def _finish_marks(self, call: _Call, *, ok: bool) -> None:
        if call.writes or call.read is not None:
            self.marks.finished(
                id(call.plan.provider), call.read, call.writes, ok, _ladder(call.plan, call.cell)
            )

    def _stop(self, plan: PromptPlan, message: str) -> None:
        plan.outcome.provider_failed = True
        reason = plan.outcome.stop_reason
        if reason is None or not reason.startswith(PROVIDER_STOP_PREFIX):
            plan.outcome.stop_reason = f"{PROVIDER_STOP_PREFIX}{message}"

    def _provider_dead(self, key: int, message: str) -> None:
        self._providers[key].dead = message
        for plan in self.plans:
            if id(plan.provider) == key:
                self._stop(plan, message)

    def _record(self, call: _Call, completion: Completion) -> None:
        plan, cell, rs = call.plan, call.cell, call.plan.prompt.recall
        bill(plan, call.trial, completion)
        answer = judged(call.index, call.trial, completion.text, rs, tool_call=completion.tool_call)
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


def _ladder(plan: PromptPlan, cell: CellRun) -> tuple[int, int, bool]:
    """The prefix ladder CELL belongs to: its plan's cells of its size over the same hay. Gold
    trials' hay is the fixture's context without the gold item, so their text before the needle
    differs from the other styles' and they climb a ladder of their own."""
    return id(plan), cell.size, cell.style == "gold"


def trial_needles(plan: PromptPlan, cell: CellRun, index: int) -> tuple[Needle, Needle]:
    """(the needle of CELL's trial INDEX, the cell's reference needle: its first trial's, which
    fixes the cell's filler amount so every trial shares the text before the needle)."""
    rs, gold = plan.prompt.recall, plan.builder.gold_needle

    def needle(i: int) -> Needle:
        rng = trial_rng(rs.seed, plan.name, cell.size, cell.depth, i, style=cell.style)
        return make_needle(rs, rng, style=cell.style, gold=gold)

    return needle(index), needle(0)


def judged(
    index: int, trial: Trial, text: str, rs: RecallSettings, *, tool_call: str | None = None
) -> RecallAnswer:
    """TEXT, the answer to TRIAL, judged: hit, and whether a miss repeated a look-alike's value. A
    reply that called TOOL_CALL instead of answering is a miss of its own kind, whatever its text."""
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
