"""config -> assemble -> measure (tokens, recall) -> results. Written once; CLI and action call it.

Nothing here prints or talks to GitHub: the faces (``cli``, ``action``) do that with the Results.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from needle_action.assemble.prompt import RenderedPrompt
from needle_action.config.model import Config, PromptConfig
from needle_action.errors import ConfigError
from needle_action.results import PromptResult, Results


@dataclass(frozen=True)
class RecallOverrides:
    seed: int | None = None
    provider: str | None = None
    model: str | None = None
    trials: int | None = None


def select_prompts(config: Config, only: list[str] | None) -> list[PromptConfig]:
    if not only:
        return list(config.prompts.values())
    unknown = [n for n in only if n not in config.prompts]
    if unknown:
        raise ConfigError(
            f"no prompt named {', '.join(repr(n) for n in unknown)}",
            file=config.path,
            hint=f"prompts in this file: {', '.join(config.prompts) or '(none)'}",
        )
    return [config.prompts[n] for n in only]


def render_prompt_cases(config: Config, name: str, *, fixture: str | None = None) -> Iterator[RenderedPrompt]:
    """Each fixture of prompt NAME rendered (or just FIXTURE); for ``needle render``."""
    from needle_action.assemble.render import render_case

    (prompt,) = select_prompts(config, [name])
    fixtures = config.fixture_paths(prompt)
    if fixture is not None:
        wanted = (config.root / fixture).resolve()
        fixtures = [f for f in fixtures if f.resolve() == wanted] or [config.root / fixture]
    for fx in fixtures or [None]:
        yield render_case(config, prompt, fx)


def _prompt_shell(config: Config, prompt: PromptConfig) -> PromptResult:
    return PromptResult(
        name=prompt.name,
        template=prompt.template,
        template_line=config.line_of(f"prompts.{prompt.name}"),
        model=prompt.model,
    )


def run_budget(config: Config, *, baseline: Results | None = None, only: list[str] | None = None) -> Results:
    """Render every prompt x fixture, count tokens, apply budgets (absolute and growth vs baseline)."""
    from needle_action.assemble.render import render_case
    from needle_action.budget import evaluate_case
    from needle_action.tokens.counters import count_prompts

    started = time.perf_counter()
    results = Results(config=str(config.path))
    for prompt in select_prompts(config, only):
        pr = _prompt_shell(config, prompt)
        fixtures = config.fixture_paths(prompt) or [None]
        rendered = [render_case(config, prompt, fx) for fx in fixtures]
        counts = count_prompts(rendered, prompt)
        base_prompt = baseline.prompt(prompt.name) if baseline else None
        head_fixtures = [r.fixture for r in rendered]  # lets the gate tell a renamed fixture from a new one
        for i, (fx_rendered, count) in enumerate(zip(rendered, counts, strict=True)):
            pr.cases.append(
                evaluate_case(prompt, fx_rendered, count, base_prompt, index=i, head_fixtures=head_fixtures)
            )
        results.prompts.append(pr)
    results.totals.seconds = round(time.perf_counter() - started, 3)
    return results


def run_recall(
    config: Config,
    *,
    baseline: Results | None = None,
    only: list[str] | None = None,
    overrides: RecallOverrides = RecallOverrides(),
    progress: bool = False,
    results: Results | None = None,
    cache=None,
) -> Results:
    """Run positional recall for every selected prompt with recall enabled; extends RESULTS."""
    from needle_action.recall.engine import run_recall_for_prompts

    started = time.perf_counter()
    results = results or Results(config=str(config.path))
    prompts = select_prompts(config, only)
    run_recall_for_prompts(
        config, prompts, results, baseline=baseline, overrides=overrides, progress=progress, cache=cache
    )
    results.totals.seconds = round(results.totals.seconds + time.perf_counter() - started, 3)
    return results


def run_check(
    config: Config,
    *,
    baseline: Results | None = None,
    only: list[str] | None = None,
    overrides: RecallOverrides = RecallOverrides(),
    recall: bool = True,
    progress: bool = False,
    cache=None,
) -> Results:
    results = run_budget(config, baseline=baseline, only=only)
    if recall:
        run_recall(
            config,
            baseline=baseline,
            only=only,
            overrides=overrides,
            progress=progress,
            results=results,
            cache=cache,
        )
    return results
