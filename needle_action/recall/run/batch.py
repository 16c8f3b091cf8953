"""``needle recall --batch``: every planned trial through the provider's batch API (Anthropic's
Message Batches: half price, results within 24 hours).

A batch cannot stop early (it is all sent at once), so every planned trial is asked; the answers
are then counted exactly as a live run counts them: in trial order, stopping at the prefix where
the cell's status is settled (:mod:`needle_action.recall.run.cells`). The verdicts are therefore those
of the live run with the same seed; answers beyond that prefix are reported as speculative calls.
The batch id is kept in the cache folder (``<cache>/batches/``) under a digest of the requests, so
an interrupted run picks the same batch up again instead of paying twice.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import defaultdict
from pathlib import Path

from needle_action.core.errors import ConfigError
from needle_action.providers.base import Breakpoint, Completion
from needle_action.providers.retry import RequestInvalid
from needle_action.recall.run.cells import CellRun
from needle_action.recall.run.prebuild import every_trial
from needle_action.recall.run.prefix import find_mark
from needle_action.recall.run.scheduler import PromptPlan, bill, judged, located, trial_needles
from needle_action.recall.trials.haystack import Trial, needle_anchor


def custom_id(plan: PromptPlan, cell: CellRun, index: int) -> str:
    """A stable id per trial (the API allows 1-64 of ``[a-zA-Z0-9_-]``)."""
    raw = f"{plan.settings_hash}:{cell.style}:{cell.size}:{cell.depth!r}:{index}"
    return "t" + hashlib.sha256(raw.encode()).hexdigest()[:40]


def _build_all(plan: PromptPlan) -> list[tuple[str, CellRun, int, Trial, tuple[Breakpoint, ...]]]:
    """Every planned trial of PLAN: each cell's first (which fixes its filler), then, for a prompt
    built in code, every other trial's inputs to the builder in one batch, then those trials."""
    rs = plan.prompt.recall
    out: list[tuple[str, CellRun, int, Trial, tuple[Breakpoint, ...]]] = []
    for cell, index in every_trial(plan, trial_needles):
        needle, reference = trial_needles(plan, cell, index)
        trial = plan.builder.build(cell.size, cell.depth, needle, index, reference)
        if index == 0:
            cell.prompt_tokens, cell.token_offset = trial.prompt_tokens, trial.token_offset
        mark = find_mark(trial.rendered, needle_anchor(needle.facts[0]), trial.token_offset)
        cached: tuple[Breakpoint, ...] = ()
        if mark is not None and rs.prompt_cache:
            cached = (Breakpoint(mark.part, mark.offset, cache=True),)
        out.append((custom_id(plan, cell, index), cell, index, trial, cached))
    rank = {id(cell): i for i, cell in enumerate(plan.cells)}
    out.sort(key=lambda item: (rank[id(item[1])], item[2]))  # the requests in cell order, as before
    return out


async def run_batch(plans: list[PromptPlan], *, cache_dir: Path) -> None:
    """Ask every planned trial of PLANS through their providers' batch API and count the answers."""
    by_provider: dict[int, list[PromptPlan]] = defaultdict(list)
    for plan in plans:
        plan.batch = True
        if not hasattr(plan.provider, "complete_batch"):
            raise ConfigError(
                f"provider {plan.prompt.provider!r} has no batch API",
                hint='--batch needs a provider with a batch API (provider = "anthropic"); run without --batch',
            )
        by_provider[id(plan.provider)].append(plan)
    for group in by_provider.values():
        await _run_group(group, cache_dir)


async def _run_group(plans: list[PromptPlan], cache_dir: Path) -> None:
    items = []
    for plan in plans:
        for cid, cell, index, trial, bps in await asyncio.to_thread(_build_all, plan):
            items.append((cid, plan, cell, index, trial, bps))
    provider = plans[0].provider
    requests = [
        (cid, trial.rendered, plan.prompt.recall.max_output_tokens, bps)
        for cid, plan, _, _, trial, bps in items
    ]
    answers = await provider.complete_batch(requests, state_dir=cache_dir)
    for cid, plan, cell, index, trial, _ in sorted(items, key=lambda it: it[3]):
        got = answers.get(cid)
        rs = plan.prompt.recall
        if isinstance(got, RequestInvalid):  # the API refused the request itself: exit 2, named
            raise located(got, plan)
        if not isinstance(got, Completion):
            cell.lost.add(index)  # a batch request that errored or expired: that trial is lost
            plan.outcome.lost_trials += 1
            plan.outcome.calls += cell.count(rs.threshold, rs.early_stop)
            continue
        bill(plan, trial, got)  # the live run's billing rule, at the batch price
        before = cell.discarded
        counted = cell.receive(
            judged(index, trial, got.text, rs, tool_call=got.tool_call, tool_input=got.tool_input),
            rs.threshold,
            rs.early_stop,
        )
        plan.outcome.calls += counted
        plan.outcome.speculative_calls += cell.discarded - before
