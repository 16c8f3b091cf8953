"""Running one prompt's grid of cells against a provider: which trial goes next, how many are in
flight, when a cell stops, when the run caps stop everything.

The next trial always goes to the undecided cell with the fewest trials issued (rounds across
cells), and a cell never has more trials in flight than the fewest outcomes that could decide it
(:func:`stats.trials_to_decide`), so early stopping saves as many calls at concurrency 16 as it
would one call at a time. Trials of a cell are issued in index order and each trial's needle comes
from its own RNG (:func:`plan.trial_rng`), so which needles a run asks does not depend on timing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from needle_action.config.model import PromptConfig
from needle_action.errors import ProviderUnavailable
from needle_action.providers.base import Completion, Provider
from needle_action.providers.pricing import estimate_cost
from needle_action.providers.retry import RetriesExhausted
from needle_action.recall import stats
from needle_action.recall.haystack import HaystackBuilder, Trial
from needle_action.recall.needles import make_needle
from needle_action.recall.plan import trial_rng
from needle_action.recall.scoring import judge
from needle_action.results import ABSENT_STYLE, RecallAnswer, RecallCell

PROVIDER_STOP_PREFIX = "provider unavailable: "
# A call that exhausts its retries loses one trial and the run goes on; this many lost in a row
# (no answer in between) means the provider is down. At a 60% fault rate with 7 attempts a call is
# lost 2.8% of the time, so five in a row by chance is about 1 in 60 million.
LOST_IN_A_ROW_IS_DEAD = 5


class Progress(Protocol):
    """What the engine reports progress to (the CLI hands in a terminal bar)."""

    def advance(self, n: int = 1) -> None: ...

    def close(self) -> None: ...


ProgressFactory = Callable[[int, str], Progress]  # (planned calls, label) -> Progress


@dataclass
class CellRun:
    """One style x size x depth cell while it runs."""

    size: int
    depth: float
    planned: int
    style: str = "codeword"
    hits: int = 0
    distractor_answers: int = 0
    done: int = 0
    issued: int = 0
    in_flight: int = 0
    prompt_tokens: int | None = None
    token_offset: int | None = None
    answers: list[RecallAnswer] = field(default_factory=list)
    stopped_early: bool = False
    saved: int = 0
    lost: int = 0  # trials whose call failed after every retry

    def decided(self, threshold: float) -> bool:
        return stats.is_decided(self.hits, self.done, self.planned, threshold)

    def complete(self, threshold: float, early_stop: bool) -> bool:
        return self.done + self.lost >= self.planned or (early_stop and self.decided(threshold))

    def wants_trial(self, threshold: float, early_stop: bool) -> bool:
        if self.issued >= self.planned:
            return False
        if not early_stop:
            return True
        need = stats.trials_to_decide(self.hits, self.done, self.planned, threshold)
        return need > 0 and self.in_flight < need

    def to_result(self, threshold: float) -> RecallCell:
        n = self.done
        low, high = stats.wilson_interval(self.hits, n)
        absent = self.style == ABSENT_STYLE
        return RecallCell(
            style=self.style,
            size=self.size,
            depth=self.depth,
            prompt_tokens=self.prompt_tokens,
            token_offset=self.token_offset,
            hits=self.hits,
            trials=n,
            planned_trials=self.planned,
            rate=round(self.hits / n, 4) if n else None,
            ci_low=round(low, 4),
            ci_high=round(high, 4),
            status=stats.cell_status(self.hits, n, self.planned, threshold),
            stopped_early=self.stopped_early,
            distractor_answers=self.distractor_answers,
            hallucination_rate=round(1 - self.hits / n, 4) if absent and n else None,
            answers=sorted(self.answers, key=lambda a: a.trial),
        )


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


@dataclass
class RunOutcome:
    """What running a plan's cells produced, beyond the cells themselves."""

    calls: int = 0
    cost_usd: float = 0.0
    stop_reason: str | None = None
    provider_failed: bool = False
    lost_trials: int = 0


def price(prompt: PromptConfig, input_tokens: int, output_tokens: int) -> float | None:
    """Estimated USD of one call; None when the price table does not know the model."""
    return estimate_cost(prompt.model, input_tokens, output_tokens, provider=prompt.provider)


@dataclass
class _InFlight:
    cell: CellRun
    index: int
    trial: Trial
    estimate: float


class CellScheduler:
    """Issues PLAN's trials to PROVIDER under the concurrency limit and the run caps, collects
    their answers, and stops cells early when their verdict is settled."""

    def __init__(self, plan: PromptPlan, provider: Provider, progress: Progress | None = None) -> None:
        self.plan, self.provider, self.progress = plan, provider, progress
        self.rs = plan.prompt.recall
        self.outcome = RunOutcome()
        self._started = 0
        self._lost_in_a_row = 0
        self._in_flight_cost = 0.0
        self._pending: dict[asyncio.Task[Completion], _InFlight] = {}
        # Building a trial (render + token counting) is CPU work on the critical path of every
        # call. A trial depends only on its coordinates, so the next ones are built ahead, in the
        # order they will be asked for, while the calls in flight wait on the network.
        self._built: dict[tuple[int, int], asyncio.Future[Trial]] = {}

    async def run(self) -> RunOutcome:
        prefetcher = asyncio.create_task(self._prefetch())
        try:
            while True:
                await self._issue_ready()
                if not self._pending:
                    break
                done, _ = await asyncio.wait(self._pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    self._collect(task, self._pending.pop(task))
        finally:
            prefetcher.cancel()
            for task in self._pending:
                task.cancel()
            await asyncio.gather(prefetcher, *self._pending, *self._built.values(), return_exceptions=True)
        return self.outcome

    # ---- issuing --------------------------------------------------------------------------------
    def _pick(self) -> CellRun | None:
        rs = self.rs
        wanting = [c for c in self.plan.cells if c.wants_trial(rs.threshold, rs.early_stop)]
        return min(wanting, key=lambda c: c.issued) if wanting else None  # min is stable: grid order

    def _build(self, cell: CellRun, index: int) -> asyncio.Future[Trial]:
        key = (id(cell), index)
        if key not in self._built:
            rng = trial_rng(self.rs.seed, self.plan.name, cell.size, cell.depth, index, style=cell.style)
            needle = make_needle(self.rs, rng, style=cell.style, gold=self.plan.builder.gold_needle)
            build = asyncio.to_thread(self.plan.builder.build, cell.size, cell.depth, needle, index)
            self._built[key] = asyncio.ensure_future(build)
        return self._built[key]

    async def _prefetch(self) -> None:
        rs = self.rs
        for index in range(max((c.planned for c in self.plan.cells), default=0)):
            for cell in self.plan.cells:
                settled = rs.early_stop and cell.decided(rs.threshold)
                if index < cell.planned and index >= cell.issued and not settled:
                    try:
                        await self._build(cell, index)
                    except Exception:  # surfaces (once) when the engine itself asks for that trial
                        return

    async def _issue_ready(self) -> None:
        """Start calls until the concurrency limit, a cap, or no cell wants a trial."""
        rs = self.rs
        while self.outcome.stop_reason is None and len(self._pending) < rs.concurrency:
            cell = self._pick()
            if cell is None:
                return
            if rs.max_calls is not None and self._started >= rs.max_calls:
                self.outcome.stop_reason = f"max_calls ({rs.max_calls}) reached"
                return
            index = cell.issued
            trial = await self._build(cell, index)  # off the loop thread: a tokenizer may call an API
            estimate = price(self.plan.prompt, trial.prompt_tokens, rs.max_output_tokens)
            if rs.max_cost_usd is not None and estimate is not None:
                if self.outcome.cost_usd + self._in_flight_cost + estimate > rs.max_cost_usd:
                    self.outcome.stop_reason = f"max_cost_usd (${rs.max_cost_usd:g}) reached"
                    return
            self._start(cell, index, trial, estimate or 0.0)

    def _start(self, cell: CellRun, index: int, trial: Trial, estimate: float) -> None:
        if cell.prompt_tokens is None:
            cell.prompt_tokens, cell.token_offset = trial.prompt_tokens, trial.token_offset
        cell.issued += 1
        cell.in_flight += 1
        self._started += 1
        self._in_flight_cost += estimate
        call = self.provider.complete(trial.rendered, max_output_tokens=self.rs.max_output_tokens)
        self._pending[asyncio.create_task(call)] = _InFlight(cell, index, trial, estimate)

    # ---- collecting -----------------------------------------------------------------------------
    def _collect(self, task: asyncio.Task[Completion], job: _InFlight) -> None:
        job.cell.in_flight -= 1
        self._in_flight_cost -= job.estimate
        exc = task.exception()
        if isinstance(exc, RetriesExhausted):
            self._lose(job, exc)
            return
        if isinstance(exc, ProviderUnavailable):
            self._provider_down(exc.message)
            return
        if exc is not None:
            raise exc
        self._lost_in_a_row = 0
        self._record(job, task.result())
        self._maybe_stop_early(job.cell)

    def _provider_down(self, message: str) -> None:
        self.outcome.provider_failed = True
        reason = self.outcome.stop_reason
        if reason is None or not reason.startswith(PROVIDER_STOP_PREFIX):
            self.outcome.stop_reason = f"{PROVIDER_STOP_PREFIX}{message}"

    def _lose(self, job: _InFlight, exc: RetriesExhausted) -> None:
        """One trial lost to a call that kept failing; the rest of the run goes on."""
        job.cell.lost += 1
        self.outcome.lost_trials += 1
        self._lost_in_a_row += 1
        if self.progress is not None:
            self.progress.advance(1)
        if self._lost_in_a_row >= LOST_IN_A_ROW_IS_DEAD:
            self._provider_down(
                f"{self._lost_in_a_row} calls in a row failed after every retry ({exc.message})"
            )

    def _record(self, job: _InFlight, completion: Completion) -> None:
        rs, cell = self.rs, job.cell
        verdict = judge(completion.text, job.trial.needle, rs)
        self.outcome.calls += 1
        cell.done += 1
        cell.hits += int(verdict.hit)
        cell.distractor_answers += int(verdict.distractor)
        cell.answers.append(
            RecallAnswer(
                trial=job.index,
                needle=job.trial.needle.answer,
                answer=completion.text,
                hit=verdict.hit,
                distractor=verdict.distractor,
            )
        )
        spent = price(
            self.plan.prompt,
            _or(completion.input_tokens, job.trial.prompt_tokens),
            _or(completion.output_tokens, rs.max_output_tokens),
        )
        self.outcome.cost_usd += spent or 0.0
        if self.progress is not None:
            self.progress.advance(1)

    def _maybe_stop_early(self, cell: CellRun) -> None:
        rs = self.rs
        if not rs.early_stop or cell.done >= cell.planned or cell.in_flight or cell.stopped_early:
            return
        if cell.decided(rs.threshold):
            cell.stopped_early = True
            cell.saved = cell.planned - cell.issued
            if self.progress is not None:
                self.progress.advance(cell.saved)


def _or(value: Any, default: int) -> int:
    return value if value is not None else default
