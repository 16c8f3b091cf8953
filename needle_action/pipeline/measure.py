"""config -> assemble -> measure (tokens, recall) -> results. Written once; CLI and action call it.

Nothing here prints or talks to GitHub: the faces (``cli``, ``action``) do that with the Results.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import gc
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from needle_action.assemble.render import render_case
from needle_action.assemble.slots import check_slots
from needle_action.assemble.templates import isolate
from needle_action.config.model import Config, PromptConfig
from needle_action.core.errors import ConfigError, NeedleError
from needle_action.providers.registry import prestart
from needle_action.providers.specs import missing_key
from needle_action.recall.plan.cost import check_cost, plan_prompt
from needle_action.recall.plan.prompt import RecallOverrides, effective_prompt
from needle_action.recall.run.engine import CacheArg, RecallJob, run_recall_jobs
from needle_action.recall.run.scheduler import ProgressFactory
from needle_action.recall.run.shard import Shard
from needle_action.request.prompt import RenderedPrompt
from needle_action.results import PromptResult, Results, SkipKind, new_run_id
from needle_action.tokens import count_prompts
from needle_action.tokens.budget import evaluate_case, mark_repeats

NO_OVERRIDES = RecallOverrides()
NO_FIXTURE: list[Path | None] = [None]  # a prompt without fixtures renders once, with no variables

__all__ = [
    "Measure",
    "RecallOverrides",
    "Shard",
    "freeze_at_exit",
    "measure",
    "measure_sides",
    "run_budget",
    "run_check",
    "run_recall",
    "select_prompts",
]


def select_prompts(config: Config, only: list[str] | None) -> list[PromptConfig]:
    """The prompts ONLY names (all of them by default)."""
    unknown = [n for n in only or [] if n not in config.prompts]
    if unknown:
        raise ConfigError(
            f"no prompt named {', '.join(repr(n) for n in unknown)}",
            file=config.path,
            hint=f"prompts in this file: {', '.join(config.prompts) or '(none)'}",
        )
    return [config.prompts[n] for n in only] if only else list(config.prompts.values())


def check_recall_slots(config: Config, only: list[str] | None) -> None:
    """Before anything runs: every selected prompt with recall on names, in context_var and
    question_var, variables its template reads (a ConfigError at the setting's line otherwise)."""
    for prompt in select_prompts(config, only):
        if prompt.recall.enabled:
            check_slots(config, prompt)


def render_prompt_cases(config: Config, name: str, *, fixture: str | None = None) -> Iterator[RenderedPrompt]:
    """Each fixture of prompt NAME rendered (or just FIXTURE); for ``needle render``."""
    (prompt,) = select_prompts(config, [name])
    fixtures = config.fixture_paths(prompt)
    if fixture is not None:
        wanted = (config.root / fixture).resolve()
        fixtures = [f for f in fixtures if f.resolve() == wanted] or [config.root / fixture]
    for fx in fixtures or NO_FIXTURE:
        yield render_case(config, prompt, fx)


def _prompt_shell(config: Config, prompt: PromptConfig) -> PromptResult:
    return PromptResult(
        name=prompt.name,
        template=prompt.source_file,
        template_line=config.line_of(f"prompts.{prompt.name}"),
        model=prompt.model,
    )


def run_budget(config: Config, *, baseline: Results | None = None, only: list[str] | None = None) -> Results:
    """Render every prompt x fixture, count tokens, apply budgets (absolute and growth vs baseline)."""
    started = time.perf_counter()
    results = Results(config=str(config.path), run_id=new_run_id())
    for prompt in select_prompts(config, only):
        pr = _prompt_shell(config, prompt)
        fixtures = config.fixture_paths(prompt) or NO_FIXTURE
        rendered = [render_case(config, prompt, fx) for fx in fixtures]
        counts = count_prompts(rendered, prompt)
        base_prompt = baseline.prompt(prompt.name) if baseline else None
        head_fixtures = [r.fixture for r in rendered]  # lets the gate tell a renamed fixture from a new one
        for i, (fx_rendered, count) in enumerate(zip(rendered, counts, strict=True)):
            pr.cases.append(
                evaluate_case(
                    prompt,
                    fx_rendered,
                    count,
                    base_prompt,
                    index=i,
                    head_fixtures=head_fixtures,
                    base_commit=baseline.commit if baseline else None,
                )
            )
        mark_repeats(pr.cases)
        results.prompts.append(pr)
    results.totals.seconds = round(time.perf_counter() - started, 3)
    return results


def check_costs(
    prompts: list[PromptConfig],
    baseline: Results | None,
    overrides: RecallOverrides,
    history: list[Results] | None = None,
) -> None:
    """Refuse, before any call, a compared run whose plan costs more than a prompt's
    ``recall.max_cost_usd`` (``needle plan`` shows the same figures)."""
    for raw in prompts:
        prompt = effective_prompt(raw, overrides)
        if prompt.recall.enabled and prompt.recall.max_cost_usd is not None:
            check_cost(prompt, plan_prompt(prompt, baseline, history=history, replay_power=False))


def run_recall(
    config: Config,
    *,
    baseline: Results | None = None,
    only: list[str] | None = None,
    overrides: RecallOverrides = NO_OVERRIDES,
    progress: ProgressFactory | None = None,
    results: Results | None = None,
    cache: CacheArg = None,
    shard: Shard | None = None,
    batch: bool = False,
    history: list[Results] | None = None,
) -> Results:
    """Run positional recall for every selected prompt with recall enabled; extends RESULTS.
    SHARD measures one deterministic slice of the cells (join them with ``needle merge``); BATCH
    goes through the provider's batch API. HISTORY: stored runs of the BASELINE's prompts (the
    cross-run test rests on them)."""
    started = time.perf_counter()
    results = results or Results(config=str(config.path), run_id=new_run_id())
    prompts = select_prompts(config, only)
    check_recall_slots(config, only)
    if overrides.full_trials:
        check_costs(prompts, baseline, overrides, history)
    job = RecallJob(config, prompts, results, baseline=baseline, overrides=overrides, history=history)
    run_recall_jobs([job], progress=progress, cache=cache, shard=shard, batch=batch)
    results.totals.seconds = round(results.totals.seconds + time.perf_counter() - started, 3)
    return results


def _prestart_models(prompts: Callable[[], list[PromptConfig]]) -> None:
    """Let the embedded model load while the budgets are counted. Only a head start: a setting
    that cannot work (an unknown prompt, ``--trials 0``) is reported by the stage that uses it."""
    with contextlib.suppress(NeedleError):
        prestart(prompts())


def run_check(
    config: Config,
    *,
    baseline: Results | None = None,
    only: list[str] | None = None,
    overrides: RecallOverrides = NO_OVERRIDES,
    recall: bool = True,
    progress: ProgressFactory | None = None,
    cache: CacheArg = None,
    shard: Shard | None = None,
    batch: bool = False,
    after_budget: Callable[[Results], None] | None = None,
) -> Results:
    """Budgets, then recall (unless RECALL is false): what ``needle check`` runs, on either side of
    a comparison, so every planned recall trial runs (no early stopping). AFTER_BUDGET gets the
    results as soon as the budgets are decided (the CLI prints and writes them before recall)."""
    if recall:
        check_recall_slots(config, only)
        _prestart_models(lambda: [effective_prompt(p, overrides) for p in select_prompts(config, only)])
    results = run_budget(config, baseline=baseline, only=only)
    if after_budget is not None:
        after_budget(results)
    if recall:
        run_recall(
            config,
            baseline=baseline,
            only=only,
            overrides=dataclasses.replace(overrides, full_trials=True),
            progress=progress,
            results=results,
            cache=cache,
            shard=shard,
            batch=batch,
        )
    return results


@dataclass(frozen=True)
class Measure:
    """How one side of a pull request is measured (the action's inputs, typed once)."""

    recall: bool = True  # the action's `recall` input
    overrides: RecallOverrides = NO_OVERRIDES
    batch: bool = False  # through the provider's batch API (pushes to the default branch)


def measure(
    config: Config,
    how: Measure,
    *,
    env: Mapping[str, str],
    cache: CacheArg = None,
    baseline: Results | None = None,
    history: list[Results] | None = None,
) -> Results:
    """Budgets for every prompt, recall for those that can run it: one side of a pull request.

    Unlike ``needle check``, a prompt whose provider key is missing from ENV is skipped with a note
    (pull requests from forks get no secrets) instead of counting as a provider outage.
    """
    return measure_sides([config], how, env=env, cache=cache, baseline=baseline, history=history)[0]


def measure_sides(
    configs: list[Config],
    how: Measure,
    *,
    env: Mapping[str, str],
    cache: CacheArg = None,
    baseline: Results | None = None,
    history: list[Results] | None = None,
) -> list[Results]:
    """:func:`measure` for several configs at once (the action's head and base): budgets for each,
    then the recall of all of them through one scheduler, so both sides' calls share one queue and
    one limit and the run takes about as long as one side alone."""
    started = time.perf_counter()
    if how.recall:
        _prestart_models(
            lambda: [effective_prompt(p, how.overrides) for c in configs for p in c.prompts.values()]
        )
    sides = []
    job = new_run_id()  # the sides measured here share one run level: the same-job tests hold
    for config in configs:
        sides.append(run_budget(config))
        sides[-1].run_id = job
        isolate.prestart()  # recall renders concurrently: the next render workers start meanwhile
    # the sides of a pull request are compared: every planned trial runs (no early stopping)
    overrides = dataclasses.replace(how.overrides, full_trials=True)
    jobs = []
    for config, results in zip(configs, sides, strict=True):
        runnable = _runnable(config, results, how, env)
        if runnable:
            prompts = select_prompts(config, runnable)
            check_costs(prompts, baseline, overrides, history)
            # BASELINE (a stored base, e.g. from the data branch) lets the head stop at a look; it is
            # another run's, tested across runs on HISTORY (the data branch's runs)
            jobs.append(
                RecallJob(config, prompts, results, baseline=baseline, overrides=overrides, history=history)
            )
    if jobs:
        run_recall_jobs(jobs, cache=cache, batch=how.batch)
    elapsed = time.perf_counter() - started
    for results in sides:
        results.totals.seconds = round(results.totals.seconds + elapsed, 3)
    return sides


def _runnable(config: Config, results: Results, how: Measure, env: Mapping[str, str]) -> list[str]:
    """Names of the prompts whose recall can run; the others get their skip reason."""
    if not how.recall:
        for pr in results.prompts:
            pr.skip_recall(SkipKind.INPUT_OFF, "recall disabled (input `recall: false`)")
        return []
    runnable = []
    for name, prompt in config.prompts.items():
        var = _missing_key_var(prompt, how.overrides, env)
        skipped = results.prompt(name)
        if var is None:
            runnable.append(name)
        elif skipped is not None:
            skipped.skip_recall(
                SkipKind.NO_KEY,
                f"recall skipped: {var} is not set (pull requests from forks get no secrets); "
                "budgets still ran offline",
            )
    return runnable


def _missing_key_var(prompt: PromptConfig, overrides: RecallOverrides, env: Mapping[str, str]) -> str | None:
    name = overrides.provider or prompt.provider
    ps = prompt.providers.get(name)
    return missing_key(
        name,
        api_key_env=ps.api_key_env if ps else None,
        base_url=ps.base_url if ps else None,
        env=env,
    )


_freeze_registered = False


def freeze_at_exit() -> None:
    """End the process without the interpreter's last garbage collections. They walk every object
    the SDK's types, pydantic and the tokenizer left behind: 0.7-1.0 s after the last answer of a
    bench run (~15% of it), 0.05-0.1 s with ``gc.freeze`` run at exit. atexit handlers, ``with``
    blocks and refcount finalizers still run; only cyclic garbage left at exit is not collected.
    For the faces (CLI, action) only: a library must not decide how its host exits."""
    global _freeze_registered
    if not _freeze_registered:
        _freeze_registered = True
        atexit.register(gc.freeze)  # registered first, so it runs after every later atexit handler
