"""The scheduler's tail rule: once every needed trial of the run is in flight, idle slots take a
cell's remaining trials speculatively (instead of one), so a cell that needs all its trials does not
add a round of latency; the counted answers and verdicts stay the sequential ones."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from needle_action.config import load_config
from needle_action.providers.base import Completion
from needle_action.recall.run.scheduler import CellRun, PromptPlan, Scheduler
from needle_action.recall.trials.haystack import Trial
from needle_action.request.prompt import Message, RenderedPrompt
from tests.integration.recall_helpers import write_project


class Builder:
    gold_needle = None

    def build(self, size, depth, needle, index, reference):
        rendered = RenderedPrompt(None, (Message("user", f"{index}: {needle.facts[0]}"),))
        return Trial(rendered, size, depth, 100, 10, needle)


class Provider:
    """Answers trial i right when HITS[i]; records how many calls were in flight at each start."""

    name, model = "stub", "claude-sonnet-5-5"

    def __init__(self, hits, latency=0.05):
        self.hits, self.latency = hits, latency
        self.in_flight = 0
        self.peak = 0
        self.started: list[int] = []

    async def complete(self, rendered, *, max_output_tokens, breakpoints=()):
        index = int(rendered.messages[0].content.split(":")[0])
        self.started.append(index)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.latency)
        finally:
            self.in_flight -= 1
        return Completion(self.answers[index] if self.hits[index] else "no idea")


def _run(tmp_path, hits, limit, early_stop=True, latency=0.02):
    extra = "" if early_stop else "early_stop = false"
    config = load_config(write_project(tmp_path, sizes=(400,), depths=(0.5,), recall_extra=extra))
    prompt = next(iter(config.prompts.values()))
    provider = Provider(hits, latency)
    cell = CellRun(size=400, depth=0.5, planned=len(hits))
    plan = PromptPlan("qa", prompt, None, [400], Builder(), "h", [cell], provider=provider)

    async def main():
        scheduler = Scheduler(limit)
        scheduler.add(plan)
        # the right answer of each trial: its needle's, known once it is built
        original = scheduler._built_one

        def built(c, index, fut):
            if not fut.cancelled() and fut.exception() is None:
                provider.answers[index] = fut.result().needle.answer
            original(c, index, fut)

        provider.answers = {}
        scheduler._built_one = built
        scheduler.close()
        await scheduler.run()

    asyncio.run(main())
    return cell, plan, provider


@pytest.mark.parametrize("hits", list(itertools.product([True, False], repeat=5)))
def test_the_tail_speculates_and_counts_what_sequential_early_stopping_counts(tmp_path, hits):
    cell, plan, provider = _run(tmp_path, hits, limit=64)
    one, _, _ = _run(tmp_path / "one", hits, limit=1)  # one call at a time: no speculation
    assert [(a.trial, a.hit) for a in cell.answers] == [(a.trial, a.hit) for a in one.answers]
    assert cell.stopped_early == one.stopped_early
    assert cell.saved == one.saved
    assert plan.outcome.calls == one.done == cell.done
    assert len(provider.started) <= len(hits)  # never more requests than without early stopping


@pytest.mark.parametrize(
    "hits",
    [
        (True, False, True, True, True),  # 4 of 5 at threshold 0.8: only the 5th answer decides
        (False, False, False, True, True),  # decided after 3 misses: the speculative 4th, 5th are cancelled
    ],
)
def test_idle_slots_take_every_trial_that_might_be_needed(tmp_path, hits):
    # a round (0.5 s) is far longer than building five stub trials: every trial goes out at once,
    # where one speculative call per cell would leave the 5th for a second round
    cell, _plan, provider = _run(tmp_path, hits, limit=64, latency=0.5)
    assert provider.peak == 5
    assert sorted(provider.started) == [0, 1, 2, 3, 4]
    off, _, _ = _run(tmp_path / "off", hits, limit=64, early_stop=False, latency=0.01)
    assert [a.hit for a in cell.answers] == [a.hit for a in off.answers][: cell.done]
    assert cell.done == (5 if hits[0] else 3)
