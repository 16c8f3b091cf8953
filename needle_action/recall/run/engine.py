"""The recall engine: for each prompt of each job (the action's head and base are two jobs), reuse a
stored result when one matches (the baseline, the cache, or the same settings hash measured by the
other side in this run), else plan the style x size x depth grid with its trials (``trials =
"auto"``: by power, :mod:`needle_action.stats.power`), run every job's cells through one scheduler
(:mod:`needle_action.recall.run.scheduler`), summarise and diagnose each style (pooled reading), add the
pooled history of earlier runs, and write ``PromptResult.recall``.

Caps and outages. ``max_calls`` / ``max_cost_usd`` (per prompt) and ``ProviderUnavailable`` stop
new calls; calls in flight finish; the result is marked partial with the reason and cells that were
not settled say "undecided". A prompt whose provider could not answer a single call gets no result
but a skip of kind ``provider-unavailable``, and ``results.totals.provider_unavailable`` is set so
the CLI can exit 3 when nothing at all could run.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from needle_action.assemble.render import render_case
from needle_action.assemble.templates.defaults import case_variables
from needle_action.config.model import Config, PromptConfig
from needle_action.core.errors import ProviderUnavailable
from needle_action.core.names import GOLD_STYLE
from needle_action.core.paths import relative
from needle_action.providers.base import Provider
from needle_action.providers.registry import import_ahead, make_provider
from needle_action.recall.plan.prompt import (
    RecallOverrides,
    auto_sizes,
    context_window,
    effective_prompt,
    pool_key,
    settings_hash,
    skip_reason,
)
from needle_action.recall.run.batch import run_batch
from needle_action.recall.run.cells import CellRun
from needle_action.recall.run.reorder import add_arm, edge_order_plan
from needle_action.recall.run.scheduler import (
    PROVIDER_STOP_PREFIX,
    ProgressFactory,
    PromptPlan,
    RunOutcome,
    Scheduler,
    price,
)
from needle_action.recall.run.shard import Shard
from needle_action.recall.summary import summarize_cells
from needle_action.recall.trials.haystack import HaystackBuilder
from needle_action.recall.trials.probes.gold import answer_keys
from needle_action.results import (
    CrossRun,
    PromptResult,
    RecallDiagnosis,
    RecallPower,
    RecallResult,
    Results,
    RunTotals,
    SkipKind,
    TokenUsage,
    stored_recall,
)
from needle_action.results.cache import ResultCache, default_cache_path
from needle_action.stats.groups import CellKey
from needle_action.stats.levels import base_digest, cross_run, plan_terms
from needle_action.stats.pooling import base_counts, pool_history
from needle_action.stats.power import plan_for
from needle_action.tokens import get_counter

CacheArg = ResultCache | str | Path | Literal[False] | None


def open_cache(cache: CacheArg) -> ResultCache | None:
    """``cache``: a ResultCache, a path, False (off), or None (the default location:
    ``$NEEDLE_CACHE_DIR`` or ``$XDG_CACHE_HOME/needle-action`` or ``~/.cache/needle-action``)."""
    if cache is False:
        return None
    if cache is None:
        return ResultCache(default_cache_path())
    if isinstance(cache, str | Path):
        return ResultCache(cache)
    return cache


def summarize(
    plan: PromptPlan, provider_name: str, outcome: RunOutcome, power: RecallPower | None = None
) -> RecallResult:
    """The RecallResult of a plan whose cells have run: diagnosis, effective context and status
    from the pooled reading of the grid (recall/diagnose.py), per needle style.

    Partial means cut short: a stop (cap, dead provider, rejected request) left cells unsettled.
    Lost trials alone do not make a run partial: every other trial was asked and counted, and the
    pooled reading works from the trials that were counted."""
    rs = plan.prompt.recall
    thr = rs.threshold
    stop_reason = outcome.stop_reason
    cells = [c.to_result(thr) for c in plan.cells]
    partial = stop_reason is not None and any(not c.settled for c in plan.cells)
    usage = TokenUsage(
        input_tokens=outcome.usage.input_tokens,
        cache_write_tokens=outcome.usage.cache_write_tokens,
        cache_read_tokens=outcome.usage.cache_read_tokens,
        output_tokens=outcome.usage.output_tokens,
        billed_input_tokens=round(outcome.usage.billed_input_tokens, 2),
        uncached_cost_usd=round(outcome.uncached_cost_usd, 6),
    )
    distractors = max(rs.distractor_count(s) for s in rs.styles)
    result = RecallResult(
        provider=provider_name,
        model=plan.prompt.model,
        fixture=plan.fixture,
        needle_style="+".join(rs.styles),
        scoring=rs.scoring,
        threshold=thr,
        seed=rs.seed,
        alpha=rs.alpha,
        min_drop=rs.min_drop,
        settings_hash=plan.settings_hash,
        cells=cells,
        effective_context=None,
        diagnosis=RecallDiagnosis(kind="inconclusive", summary="", fix=""),
        calls=outcome.calls,
        cached_calls=0,
        saved_calls=sum(c.saved for c in plan.cells),
        lost_trials=outcome.lost_trials,
        full_trials=not rs.early_stop,
        stop_on_drop=rs.stop_on_drop and not rs.early_stop,
        stop_on_no_change=rs.stop_on_no_change and not rs.early_stop,
        look=plan.look,
        cost_usd=round(outcome.cost_usd, 6),
        cost_known=price(plan.prompt, 1000, 100) is not None,
        partial=partial,
        partial_reason=stop_reason if partial else None,
        power=power,
        distractors=distractors,
        similarity=rs.similarity if distractors or "absent" in rs.styles else None,
        speculative_calls=outcome.speculative_calls,
        usage=usage,
        batch=plan.batch,
    )
    planned = power.trials if power else max((c.planned for c in plan.cells), default=0)
    return conclude(result, sizes=plan.sizes, planned_trials=planned, partial_reason=stop_reason)


def conclude(
    result: RecallResult, *, sizes: list[int], planned_trials: int, partial_reason: str | None = None
) -> RecallResult:
    """Fill RESULT's verdict from its cells: per-style summaries, effective length (with its
    range), diagnosis, status. The one place that turns cells into a verdict, for a run and for
    merged shards alike."""
    summary = summarize_cells(
        result.cells,
        sizes,
        threshold=result.threshold,
        alpha=result.alpha,
        planned_trials=planned_trials,
        partial=result.partial,
        partial_reason=partial_reason if partial_reason is not None else result.partial_reason,
    )
    result.effective_context = summary.effective_context
    result.effective_context_low = summary.effective_low
    result.effective_context_high = summary.effective_high
    result.effective_context_relative = summary.effective_context_relative
    result.diagnosis = summary.diagnosis
    result.styles = summary.styles
    result.status = "fail" if summary.fails else ("partial" if result.partial else "pass")
    return result


def reused(result: RecallResult, source: Literal["cache", "baseline"]) -> RecallResult:
    """A stored result handed back for this run: 0 new calls, its calls counted as cached."""
    out = result.model_copy(deep=True)
    out.cached_calls = result.calls + result.cached_calls
    out.calls = 0
    out.cost_usd = 0.0
    out.reused_from = source
    for cell in out.cells:
        for a in cell.answers:
            a.cached = True
    return out


class _Run:
    """Everything shared by the jobs of one ``run_recall_jobs`` call: providers (head and base on
    the same provider share one client and one adaptive window) and the results cache."""

    def __init__(self, *, cache: ResultCache | None, progress: ProgressFactory | None) -> None:
        self.cache = cache
        self.progress = progress
        self.providers: dict[str, Provider] = {}
        self.leaders: dict[str, PromptResult] = {}  # settings hash -> the prompt measuring it
        self.followers: list[tuple[RecallJob, PromptResult, str]] = []  # ...and those waiting on it

    def with_history(self, result: RecallResult, key: str) -> RecallResult:
        """RESULT with its pool key and the trials of earlier runs that share it (from the cache)."""
        result.pool_key = result.pool_key or key
        if self.cache is not None:
            history = pool_history(result, self.cache.pooled_with(key))
            if history is not None:
                result.history = history
        return result

    def provider_for(self, prompt: PromptConfig) -> Provider:
        """One provider per (provider, model, settings) for the whole run: one client, one window."""
        ps = prompt.providers.get(prompt.provider)
        key = json.dumps([prompt.provider, prompt.model, ps.model_dump(mode="json") if ps else None])
        if key not in self.providers:
            self.providers[key] = make_provider(prompt, model=prompt.model, provider=prompt.provider)
        return self.providers[key]

    async def close(self) -> None:
        """Close every provider's client."""
        for provider in self.providers.values():
            with contextlib.suppress(Exception):  # closing is best effort; the results are already written
                await provider.aclose()


@dataclass
class RecallJob:
    """One side of a run: a config, the prompts of it to measure, and the Results they fill.
    Several jobs (the action's head and base) share one scheduler: one queue, one limit."""

    config: Config
    prompts: list[PromptConfig]
    results: Results
    baseline: Results | None = None
    overrides: RecallOverrides | None = None
    # stored runs of the baseline's prompts (--history DIR, the data branch): the baseline is
    # another run's, and the cross-run tests rest on them (docs/recall.md, "Runs have levels")
    history: list[Results] | None = None
    levels: dict[str, CrossRun] = field(default_factory=dict)  # prompt -> what its test rests on
    planned_levels: dict[str, CrossRun] = field(default_factory=dict)  # prompt -> what planned its trials

    def stored_runs(self, name: str) -> list[RecallResult] | None:
        """The recall of prompt NAME in every stored run (None: no history given)."""
        return stored_recall(self.history, name)

    @property
    def totals(self) -> RunTotals:
        """This job's run totals."""
        return self.results.totals

    def stored(self, cache: ResultCache | None, prompt: PromptConfig, digest: str) -> RecallResult | None:
        """A complete result with this settings hash from the baseline or the cache, reused."""
        base_pr = self.baseline.prompt(prompt.name) if self.baseline is not None else None
        base = base_pr.recall if base_pr is not None else None
        if base is not None and base.settings_hash == digest and not base.partial:
            return reused(base, "baseline")
        if cache is not None and (hit := cache.get(digest)) is not None:
            return reused(hit, "cache")
        return None

    def known_base(self, prompt: PromptConfig) -> dict[CellKey, tuple[int, int]] | None:
        """The baseline's sample of PROMPT (history included) when it measured the same model and
        needles: its rates plan this run's trials (recall/power.py). With several needle styles the
        first one's rates plan them (every style runs the same trials per cell)."""
        base_pr = self.baseline.prompt(prompt.name) if self.baseline is not None else None
        base = base_pr.recall if base_pr is not None else None
        styles = prompt.recall.styles
        if base is None or (base.model, base.needle_style, base.scoring) != (
            prompt.model,
            "+".join(styles),
            prompt.recall.scoring,
        ):
            return None
        return base_counts(base, style=styles[0])

    def plan(self, prompt: PromptConfig, sizes: list[int]) -> RecallPower:
        """PROMPT's trials: against the baseline's rates when it has them; the baseline is another
        run's, so the trials and the power stated are the cross-run test's (stats/runs.py)."""
        rs = prompt.recall
        known = self.known_base(prompt)
        base_pr = self.baseline.prompt(prompt.name) if self.baseline is not None else None
        if known is None or base_pr is None or base_pr.recall is None:
            return plan_for(rs, sizes, base=known)
        record, spread, base_trials = plan_terms(base_pr.recall, rs.styles[0], self.stored_runs(prompt.name))
        self.planned_levels[prompt.name] = record  # the test reuses it (_schedule)
        return plan_for(rs, sizes, base=known, spread=spread, base_trials=base_trials)

    def outage(self, pr: PromptResult, message: str) -> None:
        """PR's recall could not run at all: the provider is unavailable."""
        pr.skip_recall(SkipKind.PROVIDER_UNAVAILABLE, f"{PROVIDER_STOP_PREFIX}{message}")
        self.totals.provider_unavailable = True
        self.totals.partial = True

    def record(self, pr: PromptResult, result: RecallResult, cache: ResultCache | None) -> None:
        """Give PR its RESULT, add it to the totals and store it when complete."""
        pr.recall = result
        pr.clear_skip()
        t = self.totals
        t.calls += result.calls
        t.saved_calls += result.saved_calls
        t.speculative_calls += result.speculative_calls
        t.cost_usd = round(t.cost_usd + result.cost_usd, 6)
        t.usage.add(result.usage)
        t.partial = t.partial or result.partial
        if cache is not None and not result.partial and result.shard is None and result.look is None:
            cache.put(result)


def _plan_prompt(
    run: _Run, job: RecallJob, prompt: PromptConfig, pr: PromptResult, shard: Shard | None
) -> PromptPlan | None:
    """The plan of PROMPT's cells (this shard's), or None when it needs no call (skipped, reused)."""
    config = job.config
    fixture_path = config.recall_fixture(prompt)
    fixture = relative(config.root, fixture_path, resolved=True) if fixture_path is not None else None
    base = render_case(config, prompt, fixture_path)

    provider = None
    if prompt.recall.sizes == "auto":
        try:
            provider = run.provider_for(prompt)
        except ProviderUnavailable as exc:
            job.outage(pr, exc.message)
            return None
        # the full ladder goes into the hash; rungs below the prompt's own size drop out below
        sizes = auto_sizes(context_window(prompt, provider), prompt.reserve_output_tokens)
    else:
        sizes = list(prompt.recall.sizes)

    # reuse before any counting: an unchanged prompt costs no model call and no tokenizer call
    keys = None
    if GOLD_STYLE in prompt.recall.styles and fixture_path is not None:  # not rendered, yet decide the result
        keys = answer_keys(case_variables(config, prompt, fixture_path))
    content = base.content_hash()
    digest = settings_hash(
        config, prompt, content_hash=content, fixture=fixture, sizes=sizes, answer_keys=keys
    )
    key = pool_key(config, prompt, content_hash=content, fixture=fixture, answer_keys=keys)
    stored = job.stored(run.cache, prompt, digest) if shard is None else None
    if stored is not None:
        pr.recall = run.with_history(stored, key)
        pr.clear_skip()
        job.totals.cached_calls += stored.cached_calls
        return None
    if digest in run.leaders:  # the same measurement is already planned in this run (an unchanged
        run.followers.append((job, pr, digest))  # prompt on both sides of a PR): reuse it after
        return None
    run.leaders[digest] = pr
    plan = _grid(run, job, prompt, pr, sizes, provider, fixture_path)
    if plan is not None:
        plan.fixture, plan.settings_hash, plan.pool_key = fixture, digest, key
    return plan


def _grid(
    run: _Run,
    job: RecallJob,
    prompt: PromptConfig,
    pr: PromptResult,
    sizes: list[int],
    provider: Provider | None,
    fixture_path: Path | None,
) -> PromptPlan | None:
    """PROMPT's style x size x depth cells with the trials planned for them (trials = "auto": by
    power, recall/power.py), or None (and PR's skip) when nothing can run."""
    counter = get_counter(prompt.tokenizer, model=prompt.model, settings=prompt)
    builder = HaystackBuilder(job.config, prompt, counter, seed=prompt.recall.seed, fixture_path=fixture_path)
    if prompt.recall.sizes == "auto":
        sizes = [s for s in sizes if s > builder.base_tokens()]
        if not sizes:
            pr.skip_recall(
                SkipKind.NO_SIZE,
                f'sizes = "auto": the model\'s window minus reserve_output_tokens leaves no size above '
                f"the prompt's own {builder.base_tokens()} tokens",
            )
            return None
    if provider is None:
        try:
            provider = run.provider_for(prompt)
        except ProviderUnavailable as exc:
            job.outage(pr, exc.message)
            return None
    rs = prompt.recall
    power = job.plan(prompt, sizes)
    cells = [
        CellRun(size, depth, power.trials, style=style)
        for style in rs.styles
        for size in sizes
        for depth in rs.depths
    ]
    return PromptPlan(prompt.name, prompt, None, sizes, builder, "", cells, provider=provider, power=power)


def _prompt_result(config: Config, results: Results, prompt: PromptConfig) -> PromptResult:
    pr = results.prompt(prompt.name)
    if pr is None:
        pr = PromptResult(
            name=prompt.name,
            template=prompt.source_file,
            template_line=config.line_of(f"prompts.{prompt.name}"),
            model=prompt.model,
        )
        results.prompts.append(pr)
    return pr


def _todo(job: RecallJob) -> list[tuple[PromptConfig, PromptResult]]:
    todo = []
    for raw in job.prompts:
        prompt = effective_prompt(raw, job.overrides)
        pr = _prompt_result(job.config, job.results, prompt)
        skip = skip_reason(prompt)
        if skip:
            pr.skip_recall(*skip)
            continue
        todo.append((prompt, pr))
    return todo


def _finish(
    run: _Run, job: RecallJob, plan: PromptPlan, pr: PromptResult, shard: Shard | None, arm: PromptPlan | None
) -> None:
    if plan.progress is not None:
        plan.progress.close()
    outcome = plan.outcome
    if outcome.provider_failed:
        job.totals.provider_unavailable = True
        if outcome.calls == 0:
            return job.outage(pr, (outcome.stop_reason or "").removeprefix(PROVIDER_STOP_PREFIX))
    result = summarize(plan, getattr(plan.provider, "name", plan.prompt.provider), outcome, plan.power)
    if shard is not None:
        result.shard = str(shard)
    if arm is not None:  # recall.reorder_ab: the edge_order arm ran beside the cells
        add_arm(result, arm)
    result.cross_run = job.levels.get(plan.name)
    job.record(pr, run.with_history(result, plan.pool_key or ""), run.cache)


def run_recall_jobs(
    jobs: list[RecallJob],
    *,
    progress: ProgressFactory | None = None,
    cache: CacheArg = None,
    shard: Shard | None = None,
    batch: bool = False,
) -> None:
    """Fill ``PromptResult.recall`` (or its skip reason) of every job's prompts, all through one
    scheduler. SHARD measures a deterministic slice of the cells; BATCH sends the work through the
    provider's batch API (:mod:`needle_action.recall.run.batch`)."""
    run = _Run(cache=open_cache(cache), progress=progress)
    todos = [[(job, prompt, pr) for prompt, pr in _todo(job)] for job in jobs]
    # planned in turns across jobs (head's first prompt, base's first, ...): every side starts early
    work = [item for turn in itertools.zip_longest(*todos) for item in turn if item is not None]
    if not work:
        return
    # the SDKs load while the first prompts render and count (measured: 0.27 s sooner to the first
    # call on the bench workload; a run that turns out fully cached pays ~0.1 s of shared CPU)
    import_ahead({prompt.provider for _, prompt, _ in work})
    # one scheduler for every prompt: the widest window any of them asks for
    bounds = [prompt.recall.concurrency_bounds for _, prompt, _ in work]
    start, ceiling = max(b[0] for b in bounds), max(b[1] for b in bounds)
    asyncio.run(_run_all(run, work, (start, ceiling), shard, batch))


async def _run_all(
    run: _Run,
    work: list[tuple[RecallJob, PromptConfig, PromptResult]],
    window: tuple[int, int],
    shard: Shard | None,
    batch: bool,
) -> None:
    scheduler = Scheduler(window[1], start=window[0])
    planned: list[tuple[RecallJob, PromptPlan, PromptResult]] = []
    arms: dict[int, PromptPlan] = {}  # id(plan) -> its recall.reorder_ab arm, in the same scheduler
    runner = asyncio.create_task(scheduler.run()) if not batch else None
    try:
        for job, prompt, pr in work:
            # planning renders and counts (CPU): in a thread, while earlier prompts' calls run
            plan = await asyncio.to_thread(_plan_prompt, run, job, prompt, pr, shard)
            if plan is None:
                continue
            if shard is not None:
                plan.cells = shard.select(plan.name, plan.cells)
            if run.progress is not None:
                plan.progress = run.progress(sum(c.planned for c in plan.cells), f"recall {plan.name}")
            planned.append((job, plan, pr))
            arm = await asyncio.to_thread(edge_order_plan, plan) if shard is None else None
            if arm is not None:
                arms[id(plan)] = arm
            if runner is not None:
                _schedule(scheduler, job, plan, arm, shard)
        if runner is not None:
            scheduler.close()
            await runner
        else:
            await run_batch([plan for _, plan, _ in planned] + list(arms.values()), cache_dir=_batch_dir(run))
    finally:
        if runner is not None and not runner.done():
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        await run.close()
    for job, plan, pr in planned:
        _finish(run, job, plan, pr, shard, arms.get(id(plan)))
    for job, pr, digest in run.followers:
        _follow(job, pr, run.leaders[digest])


def _schedule(
    scheduler: Scheduler, job: RecallJob, plan: PromptPlan, arm: PromptPlan | None, shard: Shard | None
) -> None:
    """Hand PLAN (and its reorder arm) to the scheduler; a compared run asks look by look."""
    other = comparable_base(job, plan) if shard is None else None  # a shard sees some cells only
    if other is not None:  # a baseline is another run's: the test is across runs
        styles = [s for s in plan.prompt.recall.styles if s in other.style_names()]
        record = job.planned_levels.get(plan.name)
        planned_by = plan.prompt.recall.styles[0]  # the style plan_terms estimated the spread in
        if record is None or record.base != base_digest(other) or styles[0] != planned_by:
            record = cross_run(other, styles[0], job.stored_runs(plan.name))
        job.levels[plan.name] = record
        if compared_base(job, plan) is not None:
            scheduler.gate.add(plan, other, styles, job.levels[plan.name])
    scheduler.add(plan)
    if arm is not None:
        scheduler.add(arm)


def compared_base(job: RecallJob, plan: PromptPlan) -> RecallResult | None:
    """The baseline's complete result PLAN will be compared with, when the comparison may stop at a
    look (recall/sequential.py): same model, scoring and look-alikes, a needle style in common, not
    the same fingerprint, and at least one stop rule on in a run that asks every planned trial."""
    rs = plan.prompt.recall
    if rs.early_stop or not (rs.stop_on_drop or rs.stop_on_no_change):
        return None
    return comparable_base(job, plan)


def comparable_base(job: RecallJob, plan: PromptPlan) -> RecallResult | None:
    """The baseline's complete result PLAN's head will be tested against (another run's): same
    model, scoring and look-alikes, a needle style in common, not the same fingerprint."""
    rs = plan.prompt.recall
    if job.baseline is None:
        return None
    base_pr = job.baseline.prompt(plan.name)
    br = base_pr.recall if base_pr is not None else None
    if br is None or br.partial or not br.full_trials:
        return None
    distractors = max(rs.distractor_count(s) for s in rs.styles)
    similarity = rs.similarity if distractors or "absent" in rs.styles else None
    if (br.model, br.scoring, br.distractors, br.similarity) != (
        plan.prompt.model,
        rs.scoring,
        distractors,
        similarity,
    ):
        return None
    if not set(rs.styles) & set(br.style_names()):
        return None
    same = (
        br.pool_key == plan.pool_key
        if br.pool_key and plan.pool_key
        else br.settings_hash == plan.settings_hash
    )
    return None if same else br


def _follow(job: RecallJob, pr: PromptResult, leader: PromptResult) -> None:
    """PR has the same settings hash as LEADER, measured in this run: the same result, reused (0
    calls), or the same skip when the leader could not run."""
    if leader.recall is not None and not leader.recall.partial:
        pr.recall = reused(leader.recall, "cache")
        pr.clear_skip()
        job.totals.cached_calls += pr.recall.cached_calls
    elif leader.recall is not None:
        job.record(pr, reused(leader.recall, "cache"), None)
    elif leader.recall_skip_kind is not None:
        pr.skip_recall(leader.recall_skip_kind, leader.recall_skipped or "")
        if leader.recall_skip_kind == SkipKind.PROVIDER_UNAVAILABLE:
            job.totals.provider_unavailable = job.totals.partial = True


def _batch_dir(run: _Run) -> Path:
    return (run.cache.path.parent if run.cache is not None else default_cache_path().parent) / "batches"
