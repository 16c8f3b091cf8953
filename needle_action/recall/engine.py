"""The recall engine: for each prompt, reuse a stored result when one matches, else plan the size x
depth grid, run it (:mod:`needle_action.recall.scheduler`), summarise and diagnose it, and write
``PromptResult.recall``.

Caps and outages. ``max_calls`` / ``max_cost_usd`` (per prompt) and ``ProviderUnavailable`` stop
new calls; calls in flight finish; the result is marked partial with the reason and cells that were
not settled say "undecided". A prompt whose provider could not answer a single call gets no result
but a skip of kind ``provider-unavailable``, and ``results.totals.provider_unavailable`` is set so
the CLI can exit 3 when nothing at all could run.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Literal

from needle_action.assemble.fixtures import load_fixture
from needle_action.assemble.render import render_case
from needle_action.config.model import Config, PromptConfig
from needle_action.errors import ProviderUnavailable
from needle_action.paths import relative
from needle_action.providers.base import Provider
from needle_action.providers.registry import make_provider
from needle_action.recall.cache import ResultCache, default_cache_path
from needle_action.recall.haystack import HaystackBuilder
from needle_action.recall.history import base_counts, pool_history
from needle_action.recall.plan import (
    RecallOverrides,
    auto_sizes,
    context_window,
    effective_prompt,
    pool_key,
    settings_hash,
    skip_reason,
)
from needle_action.recall.power import plan_run
from needle_action.recall.probes.gold import answer_keys
from needle_action.recall.probes.summary import summarize_cells
from needle_action.recall.scheduler import (
    PROVIDER_STOP_PREFIX,
    CellRun,
    CellScheduler,
    ProgressFactory,
    PromptPlan,
    RunOutcome,
    price,
)
from needle_action.results import PromptResult, RecallPower, RecallResult, Results, RunTotals, SkipKind
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
    from the pooled reading of the grid (recall/diagnose.py)."""
    rs = plan.prompt.recall
    thr = rs.threshold
    stop_reason = outcome.stop_reason
    cells = [c.to_result(thr) for c in plan.cells]
    partial = stop_reason is not None and any(not c.complete(thr, rs.early_stop) for c in plan.cells)
    # per needle style (each its own grid), and for the prompt over its recall styles (probes/summary.py)
    summary = summarize_cells(
        cells,
        plan.sizes,
        threshold=thr,
        alpha=rs.alpha,
        planned_trials=power.trials if power else max((c.planned for c in plan.cells), default=0),
        partial=partial,
        partial_reason=stop_reason,
    )
    distractors = max(rs.distractor_count(s) for s in rs.styles)
    return RecallResult(
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
        effective_context=summary.effective_context,
        effective_context_low=summary.effective_low,
        effective_context_high=summary.effective_high,
        effective_context_relative=summary.effective_context_relative,
        diagnosis=summary.diagnosis,
        calls=outcome.calls,
        cached_calls=0,
        saved_calls=sum(c.saved for c in plan.cells),
        lost_trials=outcome.lost_trials,
        full_trials=not rs.early_stop,
        cost_usd=round(outcome.cost_usd, 6),
        cost_known=price(plan.prompt, 1000, 100) is not None,
        partial=partial,
        partial_reason=stop_reason if partial else None,
        status="fail" if summary.fails else ("partial" if partial else "pass"),
        power=power,
        distractors=distractors,
        similarity=rs.similarity if distractors or "absent" in rs.styles else None,
        styles=summary.styles,
    )


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
    """Everything shared by the prompts of one ``run_recall_for_prompts`` call."""

    def __init__(
        self,
        config: Config,
        results: Results,
        *,
        baseline: Results | None,
        cache: ResultCache | None,
        progress: ProgressFactory | None,
    ) -> None:
        self.config, self.results, self.baseline, self.cache = config, results, baseline, cache
        self.progress = progress
        self.providers: dict[str, Provider] = {}

    @property
    def totals(self) -> RunTotals:
        return self.results.totals

    def provider_for(self, prompt: PromptConfig) -> Provider:
        ps = prompt.providers.get(prompt.provider)
        key = json.dumps([prompt.provider, prompt.model, ps.model_dump(mode="json") if ps else None])
        if key not in self.providers:
            self.providers[key] = make_provider(prompt, model=prompt.model, provider=prompt.provider)
        return self.providers[key]

    async def close(self) -> None:
        for provider in self.providers.values():
            try:
                await provider.aclose()
            except Exception:  # closing is best effort; the results are already written
                pass

    def stored(self, prompt: PromptConfig, digest: str) -> RecallResult | None:
        """A complete result with this settings hash from the baseline or the cache, reused."""
        base_pr = self.baseline.prompt(prompt.name) if self.baseline is not None else None
        base = base_pr.recall if base_pr is not None else None
        if base is not None and base.settings_hash == digest and not base.partial:
            return reused(base, "baseline")
        if self.cache is not None and (hit := self.cache.get(digest)) is not None:
            return reused(hit, "cache")
        return None

    def known_base(self, prompt: PromptConfig) -> dict | None:
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

    def with_history(self, result: RecallResult, key: str) -> RecallResult:
        """RESULT with its pool key and the trials of earlier runs that share it (from the cache)."""
        result.pool_key = result.pool_key or key
        if self.cache is not None:
            history = pool_history(result, self.cache.pooled_with(key))
            if history is not None:
                result.history = history
        return result

    def outage(self, pr: PromptResult, message: str) -> None:
        pr.skip_recall(SkipKind.PROVIDER_UNAVAILABLE, f"{PROVIDER_STOP_PREFIX}{message}")
        self.totals.provider_unavailable = True
        self.totals.partial = True

    def record(self, pr: PromptResult, result: RecallResult) -> None:
        pr.recall = result
        pr.clear_skip()
        t = self.totals
        t.calls += result.calls
        t.saved_calls += result.saved_calls
        t.cost_usd = round(t.cost_usd + result.cost_usd, 6)
        t.partial = t.partial or result.partial
        if self.cache is not None and not result.partial:
            self.cache.put(result)


async def _recall_prompt(run: _Run, prompt: PromptConfig, pr: PromptResult) -> None:
    config = run.config
    fixture_path = config.recall_fixture(prompt)
    fixture = relative(config.root, fixture_path, resolved=True) if fixture_path is not None else None
    base = render_case(config, prompt, fixture_path)

    provider = None
    if prompt.recall.sizes == "auto":
        try:
            provider = run.provider_for(prompt)
        except ProviderUnavailable as exc:
            return run.outage(pr, exc.message)
        # the full ladder goes into the hash; rungs below the prompt's own size drop out below
        sizes = auto_sizes(context_window(prompt, provider), prompt.reserve_output_tokens)
    else:
        sizes = list(prompt.recall.sizes)

    # reuse before any counting: an unchanged prompt costs no model call and no tokenizer call
    keys = None
    if "gold" in prompt.recall.styles and fixture_path is not None:  # not rendered, yet decide the result
        keys = answer_keys(load_fixture(fixture_path))
    digest = settings_hash(
        config, prompt, content_hash=base.content_hash(), fixture=fixture, sizes=sizes, answer_keys=keys
    )
    key = pool_key(config, prompt, content_hash=base.content_hash(), fixture=fixture, answer_keys=keys)
    stored = run.stored(prompt, digest)
    if stored is not None:
        pr.recall = run.with_history(stored, key)
        pr.clear_skip()
        run.totals.cached_calls += stored.cached_calls
        return

    counter = get_counter(prompt.tokenizer, model=prompt.model, settings=prompt)
    builder = HaystackBuilder(config, prompt, counter, seed=prompt.recall.seed, fixture_path=fixture_path)
    if prompt.recall.sizes == "auto":
        sizes = [s for s in sizes if s > builder.base_tokens()]
        if not sizes:
            return pr.skip_recall(
                SkipKind.NO_SIZE,
                f'sizes = "auto": the model\'s window minus reserve_output_tokens leaves no size above '
                f"the prompt's own {builder.base_tokens()} tokens",
            )
    if provider is None:
        try:
            provider = run.provider_for(prompt)
        except ProviderUnavailable as exc:
            return run.outage(pr, exc.message)

    rs = prompt.recall
    power = plan_run(
        sizes=sizes,
        depths=rs.depths,
        trials=rs.trials,
        threshold=rs.threshold,
        alpha=rs.alpha,
        min_drop=rs.min_drop,
        base=run.known_base(prompt),
        styles=len(rs.styles),
    )
    cells = [
        CellRun(size, depth, power.trials, style=style)
        for style in rs.styles
        for size in sizes
        for depth in rs.depths
    ]
    plan = PromptPlan(prompt.name, prompt, fixture, sizes, builder, digest, cells)
    result = await _run_plan(run, plan, provider, pr, power)
    if result is not None:
        run.record(pr, run.with_history(result, key))


async def _run_plan(
    run: _Run, plan: PromptPlan, provider: Provider, pr: PromptResult, power: RecallPower
) -> RecallResult | None:
    """Run PLAN's cells; the summarised result, or None when the provider answered nothing."""
    bar = None
    if run.progress is not None:
        bar = run.progress(sum(c.planned for c in plan.cells), f"recall {plan.name}")
    try:
        outcome = await CellScheduler(plan, provider, bar).run()
    finally:
        if bar is not None:
            bar.close()
    if outcome.provider_failed:
        run.totals.provider_unavailable = True
        if outcome.calls == 0:
            run.outage(pr, (outcome.stop_reason or "").removeprefix(PROVIDER_STOP_PREFIX))
            return None
    return summarize(plan, getattr(provider, "name", plan.prompt.provider), outcome, power)


def _prompt_result(config: Config, results: Results, prompt: PromptConfig) -> PromptResult:
    pr = results.prompt(prompt.name)
    if pr is None:
        pr = PromptResult(
            name=prompt.name,
            template=prompt.template,
            template_line=config.line_of(f"prompts.{prompt.name}"),
            model=prompt.model,
        )
        results.prompts.append(pr)
    return pr


def run_recall_for_prompts(
    config: Config,
    prompts: list[PromptConfig],
    results: Results,
    *,
    baseline: Results | None = None,
    overrides: RecallOverrides | None = None,
    progress: ProgressFactory | None = None,
    cache: CacheArg = None,
) -> None:
    """Fill ``PromptResult.recall`` (or its skip reason) of RESULTS for each of PROMPTS."""
    run = _Run(config, results, baseline=baseline, cache=open_cache(cache), progress=progress)
    todo: list[tuple[PromptConfig, PromptResult]] = []
    for raw in prompts:
        prompt = effective_prompt(raw, overrides)
        pr = _prompt_result(config, results, prompt)
        skip = skip_reason(prompt)
        if skip:
            pr.skip_recall(*skip)
            continue
        todo.append((prompt, pr))
    if not todo:
        return

    async def main() -> None:
        try:
            for prompt, pr in todo:
                await _recall_prompt(run, prompt, pr)
        finally:
            await run.close()

    asyncio.run(main())
