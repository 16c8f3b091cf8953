"""One style x size x depth cell while it runs: which trial to ask next, which answers count, when it stops.

Answers may arrive in any order (many calls in flight, speculative ones among them), but they are
**counted in trial-index order**: trial i counts only once trials 0..i-1 are counted, and the
cell stops at the first prefix of outcomes after which its status cannot change. That is exactly
where one-call-at-a-time early stopping would have stopped, so the verdict never depends on timing,
concurrency or speculation; answers beyond that prefix are discarded (``speculative``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from needle_action.core.names import ABSENT_STYLE
from needle_action.recall.run.prefix import Mark
from needle_action.results import RecallAnswer, RecallCell
from needle_action.stats.cells import cell_status, is_decided, trials_to_decide
from needle_action.stats.intervals import wilson_interval

LOST_RETRIES = 1  # a trial whose call exhausted its retries is asked once more before it is lost

# pure and asked for at every pick: cached here rather than in stats
_trials_to_decide = functools.lru_cache(maxsize=65536)(trials_to_decide)


@dataclass
class CellRun:
    """One style x size x depth cell while it runs."""

    size: int
    depth: float
    planned: int
    style: str = "codeword"
    hits: int = 0
    distractor_answers: int = 0  # counted answers that repeated a look-alike's value
    tool_call_answers: int = 0  # counted answers that were a tool call instead of text
    done: int = 0  # outcomes counted (a prefix of the trial indices, lost ones skipped)
    next_count: int = 0  # the next trial index to count
    issued: int = 0  # the next new trial index to ask
    in_flight: set[int] = field(default_factory=set)
    received: dict[int, RecallAnswer] = field(default_factory=dict)  # answered, not counted yet
    requeue: list[int] = field(default_factory=list)  # lost once: asked again
    failures: dict[int, int] = field(default_factory=dict)
    lost: set[int] = field(default_factory=set)
    settled: bool = False
    stopped_early: bool = False
    saved: int = 0
    discarded: int = 0  # answers received beyond the counted prefix
    prompt_tokens: int | None = None
    token_offset: int | None = None
    mark: Mark | None = None
    answers: list[RecallAnswer] = field(default_factory=list)

    def horizon(self, threshold: float, early_stop: bool) -> int:
        """Trial indices below this are asked by sequential early stopping whatever the answers."""
        if not early_stop:
            return self.planned
        return min(
            self.planned, self.next_count + _trials_to_decide(self.hits, self.done, self.planned, threshold)
        )

    def next_index(self) -> int | None:
        """The trial to ask next: a lost one again, else the next new index; None when all asked."""
        if self.settled:
            return None
        if self.requeue:
            return self.requeue[0]
        return self.issued if self.issued < self.planned else None

    def take(self, index: int) -> None:
        """INDEX is being asked now."""
        if self.requeue and self.requeue[0] == index:
            self.requeue.pop(0)
        else:
            self.issued = index + 1
        self.in_flight.add(index)

    def fail(self, index: int) -> bool:
        """INDEX's call failed after its retries: ask it again once, then count it lost.
        Returns True when it is lost for good."""
        self.in_flight.discard(index)
        n = self.failures[index] = self.failures.get(index, 0) + 1
        if n > LOST_RETRIES:
            self.lost.add(index)
            return True
        self.requeue.append(index)
        return False

    def receive(self, answer: RecallAnswer, threshold: float, early_stop: bool) -> int:
        """Record ANSWER and count what can be counted; returns how many outcomes were counted."""
        self.in_flight.discard(answer.trial)
        if self.settled:
            self.discarded += 1
            return 0
        self.received[answer.trial] = answer
        return self.count(threshold, early_stop)

    def count(self, threshold: float, early_stop: bool) -> int:
        """Count received answers in index order; settle the cell when its status is fixed."""
        counted = 0
        while not self.settled:
            i = self.next_count
            if i >= self.planned:
                self.settled = True
                break
            if i in self.lost:
                self.next_count += 1
                continue
            answer = self.received.pop(i, None)
            if answer is None:
                break
            self.answers.append(answer)
            self.hits += int(answer.hit)
            self.distractor_answers += int(answer.distractor)
            self.tool_call_answers += int(answer.tool_call is not None)
            self.done += 1
            self.next_count += 1
            counted += 1
            if (
                early_stop
                and self.done < self.planned
                and is_decided(self.hits, self.done, self.planned, threshold)
            ):
                self.settled = self.stopped_early = True
                self.saved = self.planned - self.done - len(self.lost)
        if self.settled:
            self.discarded += len(self.received)
            self.received.clear()
        return counted

    def to_result(self, threshold: float) -> RecallCell:
        """The cell as the results file records it (answers in trial order)."""
        n = self.done
        low, high = wilson_interval(self.hits, n)
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
            status=cell_status(self.hits, n, self.planned, threshold),
            stopped_early=self.stopped_early,
            distractor_answers=self.distractor_answers,
            tool_call_answers=self.tool_call_answers,
            hallucination_rate=round(1 - self.hits / n, 4) if absent and n else None,
            answers=sorted(self.answers, key=lambda a: a.trial),
        )
