"""The recall engine: plan the size x depth grid of every prompt, run the needle trials against the
provider concurrently, stop each cell as soon as its verdict is settled, respect the run caps, reuse
cached results, and write ``PromptResult.recall``.

Scheduling. One asyncio loop, one provider per (provider, model, settings), at most
``recall.concurrency`` calls in flight. The next trial always goes to the undecided cell with the
fewest trials issued (rounds across cells), and a cell never has more trials in flight than the
fewest outcomes that could decide it (:func:`stats.trials_to_decide`), so early stopping saves as
many calls at concurrency 16 as it would one call at a time.

Reproducibility. Every trial's needle comes from its own RNG seeded by (seed, prompt, size, depth,
trial), and trials of a cell are issued in index order, so which needles a run asks does not depend
on timing, and a verdict is identical to the one running all planned trials would give.

Caps and outages. ``max_calls`` / ``max_cost_usd`` (per prompt) and ``ProviderUnavailable`` stop
new calls; calls in flight finish; the result is marked partial with the reason and cells that were
not settled say "undecided". A prompt whose provider could not answer a single call gets no result
but ``recall_skipped`` ("provider unavailable: ..."), and ``results.totals.provider_unavailable`` is
set so the CLI can exit 3 when nothing at all could run.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import random
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from needle_action import __version__
from needle_action.config.model import Config, PromptConfig
from needle_action.errors import ConfigError, ProviderUnavailable
from needle_action.paths import relative
from needle_action.recall import stats
from needle_action.recall.diagnose import diagnose
from needle_action.results import PromptResult, RecallAnswer, RecallCell, RecallResult, Results

# Recall settings that change how a run is bounded, not what a complete result contains: left out
# of the settings hash so raising a cap or the concurrency still finds the cached result.
_HASH_EXCLUDED = {"concurrency", "max_calls", "max_cost_usd"}
_LADDER_START = 2000
_LADDER_FACTOR = 4


# -- settings ---------------------------------------------------------------------------------


def effective_prompt(prompt: PromptConfig, overrides) -> PromptConfig:
    """PROMPT with the CLI overrides (seed, provider, model, trials) applied."""
    recall_updates: dict = {}
    if overrides is not None and overrides.seed is not None:
        recall_updates["seed"] = overrides.seed
    if overrides is not None and overrides.trials is not None:
        if overrides.trials < 1:
            raise ConfigError("--trials must be at least 1", hint="e.g. --trials 5")
        recall_updates["trials"] = overrides.trials
    updates: dict = {"recall": prompt.recall.model_copy(update=recall_updates)}
    if overrides is not None and overrides.provider:
        updates["provider"] = overrides.provider
    if overrides is not None and overrides.model:
        updates["model"] = overrides.model
    return prompt.model_copy(update=updates)


def skip_reason(prompt: PromptConfig) -> str | None:
    if not prompt.recall.enabled:
        return "recall.enabled = false"
    missing = [k for k in ("context_var", "question_var") if not getattr(prompt, k)]
    if missing:
        return f"{' and '.join(missing)} not set (recall needs the context slot and the question slot)"
    return None


def recall_fixture(config: Config, prompt: PromptConfig) -> Path | None:
    """The fixture recall runs on: ``recall.fixture`` if set, else the prompt's first fixture."""
    if prompt.recall.fixture:
        path = config.root / prompt.recall.fixture
        if not path.is_file():
            raise ConfigError(
                f"recall fixture not found: {prompt.recall.fixture}",
                file=config.path,
                line=config.line_of(f"prompts.{prompt.name}.recall.fixture")
                or config.line_of(f"prompts.{prompt.name}"),
                hint="a path relative to the threshold file's folder",
            )
        return path
    fixtures = config.fixture_paths(prompt)
    return fixtures[0] if fixtures else None


def _rel(config: Config, path: Path | None) -> str | None:
    return None if path is None else relative(config.root, path, resolved=True, default=str(path))


@functools.cache
def _context_windows() -> dict:
    return tomllib.loads(
        (Path(__file__).resolve().parent.parent / "data" / "context_windows.toml").read_text()
    )


def context_window(prompt: PromptConfig, provider=None) -> int:
    """The model's context window: the provider's own figure when it has one (the local model's
    n_ctx), else ``data/context_windows.toml`` (longest matching model-id prefix)."""
    for attr in ("context_window", "max_ctx"):  # max_ctx: the local provider's largest window
        own = getattr(provider, attr, None)
        if isinstance(own, int) and own > 0:
            return own
    if prompt.provider == "local":
        ps = prompt.providers.get("local")
        if ps is not None and ps.n_ctx:
            return ps.n_ctx
    table = _context_windows()
    matches = [p for p in table.get("models", {}) if prompt.model.startswith(p)]
    if matches:
        return int(table["models"][max(matches, key=len)])
    return int(table["default"])


def auto_sizes(window: int, reserve: int, *, min_size: int = 0) -> list[int]:
    """Geometric ladder 2k, 8k, 32k, ... up to WINDOW - RESERVE (which is added as the top rung
    when it is well beyond the last one); rungs below MIN_SIZE (the prompt without context) drop."""
    top = window - reserve
    sizes: list[int] = []
    s = _LADDER_START
    while s <= top:
        sizes.append(s)
        s *= _LADDER_FACTOR
    if top >= 64 and (not sizes or top >= sizes[-1] * 1.5):
        sizes.append(top)
    return [s for s in sizes if s > min_size]


def _filler_digest(config: Config, prompt: PromptConfig) -> str:
    h = hashlib.sha256()
    for pattern in prompt.recall.filler_globs:
        for path in sorted(config.root.glob(pattern)):
            if path.is_file():
                h.update(_rel(config, path).encode() + b"\0")
                h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def settings_hash(
    config: Config, prompt: PromptConfig, *, content_hash: str, fixture: str | None, sizes: list[int]
) -> str:
    """sha256 over everything that decides a complete recall result: the assembled prompt with its
    fixture (content hash), the fixture's name, provider, model, tokenizer, the provider settings
    that change answers, the recall settings (seed included, sizes resolved), the filler files'
    contents and the tool's major version. Paths are relative, so a git worktree of the base branch
    hashes the same as the head."""
    recall = prompt.recall.model_dump(mode="json", exclude=_HASH_EXCLUDED)
    recall["sizes"] = sizes
    ps = prompt.providers.get(prompt.provider)
    payload = {
        "tool_major": __version__.split(".")[0],
        "prompt": content_hash,
        "fixture": fixture,
        "provider": prompt.provider,
        "model": prompt.model,
        "tokenizer": [prompt.tokenizer, prompt.tokenizer_safety_factor],
        "provider_settings": ps.model_dump(mode="json", include={"base_url", "model_path", "n_ctx"})
        if ps
        else None,
        "recall": recall,
        "filler": _filler_digest(config, prompt) if prompt.recall.filler_globs else None,
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def trial_rng(seed: int, prompt_name: str, size: int, depth: float, trial: int) -> random.Random:
    """The RNG of one trial: a pure function of its coordinates, never of scheduling order."""
    return random.Random(f"needle:{seed}:{prompt_name}:{size}:{depth!r}:{trial}")


def open_cache(config: Config, cache):
    """``cache``: a ResultCache, a path, False (off), or None (the default location:
    ``$NEEDLE_CACHE_DIR`` or ``$XDG_CACHE_HOME/needle-action`` or ``~/.cache/needle-action``)."""
    from needle_action.recall.cache import ResultCache, default_cache_path

    if cache is False:
        return None
    if cache is None:
        return ResultCache(default_cache_path())
    if isinstance(cache, str | Path):
        return ResultCache(cache)
    return cache


# -- one cell, one prompt ---------------------------------------------------------------------


@dataclass
class CellRun:
    size: int
    depth: float
    planned: int
    hits: int = 0
    done: int = 0
    issued: int = 0
    in_flight: int = 0
    prompt_tokens: int | None = None
    token_offset: int | None = None
    answers: list[RecallAnswer] = field(default_factory=list)
    stopped_early: bool = False
    saved: int = 0

    def decided(self, threshold: float) -> bool:
        return stats.is_decided(self.hits, self.done, self.planned, threshold)

    def complete(self, threshold: float, early_stop: bool) -> bool:
        return self.done >= self.planned or (early_stop and self.decided(threshold))

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
        return RecallCell(
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
            answers=sorted(self.answers, key=lambda a: a.trial),
        )


@dataclass
class PromptPlan:
    name: str
    prompt: PromptConfig
    fixture: str | None
    sizes: list[int]
    builder: object
    settings_hash: str
    cells: list[CellRun]


def summarize(
    plan: PromptPlan, provider_name: str, *, calls: int, cost: float, stop_reason: str | None
) -> RecallResult:
    rs = plan.prompt.recall
    thr = rs.threshold
    cells = [c.to_result(thr) for c in plan.cells]
    partial = stop_reason is not None and any(not c.complete(thr, rs.early_stop) for c in plan.cells)
    by_size: dict[int, list[str]] = {}
    rates: dict[int, list[float | None]] = {}
    for c in cells:
        by_size.setdefault(c.size, []).append(c.status)
        rates.setdefault(c.size, []).append(c.rate)
    # worst depth per size; unknown when some depth has no trial at all
    worst = {s: (None if None in r else min(r)) for s, r in rates.items()}
    eff = stats.effective_context(plan.sizes, by_size)
    eff_rel = stats.effective_context_relative(plan.sizes, worst, thr)
    diagnosis = diagnose(
        cells,
        threshold=thr,
        planned_trials=rs.trials,
        effective_context=eff,
        partial=partial,
        partial_reason=stop_reason,
    )
    return RecallResult(
        provider=provider_name,
        model=plan.prompt.model,
        fixture=plan.fixture,
        needle_style=rs.needle,
        scoring=rs.scoring,
        threshold=thr,
        seed=rs.seed,
        alpha=rs.alpha,
        min_drop=rs.min_drop,
        settings_hash=plan.settings_hash,
        cells=cells,
        effective_context=eff,
        effective_context_relative=eff_rel,
        diagnosis=diagnosis,
        calls=calls,
        cached_calls=0,
        saved_calls=sum(c.saved for c in plan.cells),
        cost_usd=round(cost, 6),
        cost_known=_price(plan.prompt, 1000, 100) is not None,
        partial=partial,
        partial_reason=stop_reason if partial else None,
        status="fail" if any(c.status == "fail" for c in cells) else "pass",
    )


def _reused(result: RecallResult, source: str) -> RecallResult:
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

    def __init__(self, config: Config, results: Results, progress: bool) -> None:
        self.config = config
        self.results = results
        self.progress = progress
        self.providers: dict[str, object] = {}

    async def provider_for(self, prompt: PromptConfig):
        from needle_action.providers.registry import make_provider

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


def _price(prompt: PromptConfig, input_tokens: int, output_tokens: int) -> float | None:
    """Estimated USD of one call; None when the price table does not know the model."""
    from needle_action.providers.pricing import estimate_cost

    return estimate_cost(prompt.model, input_tokens, output_tokens, provider=prompt.provider)


async def run_cells(plan: PromptPlan, provider, *, progress=None) -> tuple[int, float, str | None, bool]:
    """Run the trials of PLAN's cells. Returns (calls, cost_usd, stop_reason, provider_failed)."""
    from needle_action.recall.needles import make_needle
    from needle_action.recall.scoring import score

    rs = plan.prompt.recall
    thr, early = rs.threshold, rs.early_stop
    calls_started = 0
    calls = 0
    cost = 0.0
    in_flight_cost = 0.0
    stop_reason: str | None = None
    provider_failed = False
    pending: dict[asyncio.Task, tuple] = {}

    def pick() -> CellRun | None:
        wanting = [c for c in plan.cells if c.wants_trial(thr, early)]
        return min(wanting, key=lambda c: c.issued) if wanting else None  # min is stable: grid order

    # Building a trial (render + token counting) is CPU work on the critical path of every call.
    # A trial's content depends only on its coordinates, so the next ones are built ahead, in the
    # order they will be asked for, while the calls in flight wait on the network.
    built: dict[tuple[int, int], asyncio.Future] = {}

    def build(cell: CellRun, index: int) -> asyncio.Future:
        key = (id(cell), index)
        if key not in built:
            needle = make_needle(rs, trial_rng(rs.seed, plan.name, cell.size, cell.depth, index))
            built[key] = asyncio.ensure_future(
                asyncio.to_thread(plan.builder.build, cell.size, cell.depth, needle, index)
            )
        return built[key]

    async def prefetch() -> None:
        for index in range(max((c.planned for c in plan.cells), default=0)):
            for cell in plan.cells:
                if index < cell.planned and index >= cell.issued and not (early and cell.decided(thr)):
                    try:
                        await build(cell, index)
                    except Exception:  # surfaces (once) when the engine itself asks for that trial
                        return

    prefetcher = asyncio.create_task(prefetch())

    try:
        while True:
            while stop_reason is None and len(pending) < rs.concurrency:
                cell = pick()
                if cell is None:
                    break
                if rs.max_calls is not None and calls_started >= rs.max_calls:
                    stop_reason = f"max_calls ({rs.max_calls}) reached"
                    break
                index = cell.issued
                trial = await build(cell, index)  # off the loop thread: a tokenizer may even call an API
                estimate = _price(plan.prompt, trial.prompt_tokens, rs.max_output_tokens)
                if rs.max_cost_usd is not None and estimate is not None:
                    if cost + in_flight_cost + estimate > rs.max_cost_usd:
                        stop_reason = f"max_cost_usd (${rs.max_cost_usd:g}) reached"
                        break
                if cell.prompt_tokens is None:
                    cell.prompt_tokens, cell.token_offset = trial.prompt_tokens, trial.token_offset
                cell.issued += 1
                cell.in_flight += 1
                calls_started += 1
                in_flight_cost += estimate or 0.0
                task = asyncio.create_task(
                    provider.complete(trial.rendered, max_output_tokens=rs.max_output_tokens)
                )
                pending[task] = (cell, index, trial, estimate or 0.0)
            if not pending:
                break
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                cell, index, trial, estimate = pending.pop(task)
                cell.in_flight -= 1
                in_flight_cost -= estimate
                exc = task.exception()
                if isinstance(exc, ProviderUnavailable):
                    provider_failed = True
                    if stop_reason is None or not stop_reason.startswith("provider unavailable"):
                        stop_reason = f"provider unavailable: {exc.message}"
                    continue
                if exc is not None:
                    raise exc
                completion = task.result()
                hit = score(completion.text, trial.needle, rs)
                calls += 1
                cell.done += 1
                cell.hits += int(hit)
                cell.answers.append(
                    RecallAnswer(trial=index, needle=trial.needle.answer, answer=completion.text, hit=hit)
                )
                spent = _price(
                    plan.prompt,
                    completion.input_tokens if completion.input_tokens is not None else trial.prompt_tokens,
                    completion.output_tokens
                    if completion.output_tokens is not None
                    else rs.max_output_tokens,
                )
                cost += spent or 0.0
                if progress is not None:
                    progress.advance(1)
                if early and cell.done < cell.planned and cell.in_flight == 0 and cell.decided(thr):
                    if not cell.stopped_early:
                        cell.stopped_early = True
                        cell.saved = cell.planned - cell.issued
                        if progress is not None:
                            progress.advance(cell.saved)
    finally:
        prefetcher.cancel()
        for task in pending:
            task.cancel()
        await asyncio.gather(prefetcher, *pending, *built.values(), return_exceptions=True)
    return calls, cost, stop_reason, provider_failed


async def _recall_prompt(run: _Run, prompt: PromptConfig, pr: PromptResult, *, baseline, cache) -> None:
    from needle_action.assemble.render import render_case
    from needle_action.recall.haystack import HaystackBuilder
    from needle_action.tokens.counters import get_counter

    config, totals = run.config, run.results.totals
    fixture_path = recall_fixture(config, prompt)
    fixture = _rel(config, fixture_path)
    base = render_case(config, prompt, fixture_path)

    provider = None
    if prompt.recall.sizes == "auto":
        try:
            provider = await run.provider_for(prompt)
        except ProviderUnavailable as exc:
            return _outage(pr, totals, exc.message)
        # the full ladder goes into the hash; rungs below the prompt's own size drop out below
        sizes = auto_sizes(context_window(prompt, provider), prompt.reserve_output_tokens)
    else:
        sizes = list(prompt.recall.sizes)

    # reuse before any counting: an unchanged prompt costs no model call and no tokenizer call
    digest = settings_hash(config, prompt, content_hash=base.content_hash(), fixture=fixture, sizes=sizes)
    base_pr = baseline.prompt(prompt.name) if baseline is not None else None
    if (
        base_pr is not None
        and base_pr.recall is not None
        and base_pr.recall.settings_hash == digest
        and not base_pr.recall.partial
    ):
        pr.recall = _reused(base_pr.recall, "baseline")
    elif cache is not None and (hit := cache.get(digest)) is not None:
        pr.recall = _reused(hit, "cache")
    if pr.recall is not None:
        pr.recall_skipped = None
        totals.cached_calls += pr.recall.cached_calls
        return

    counter = get_counter(prompt.tokenizer, model=prompt.model, settings=prompt)
    builder = HaystackBuilder(config, prompt, counter, seed=prompt.recall.seed, fixture_path=fixture_path)
    if prompt.recall.sizes == "auto":
        sizes = [s for s in sizes if s > builder.base_tokens()]
        if not sizes:
            pr.recall_skipped = (
                f'sizes = "auto": the model\'s window minus reserve_output_tokens leaves no size above '
                f"the prompt's own {builder.base_tokens()} tokens"
            )
            return

    if provider is None:
        try:
            provider = await run.provider_for(prompt)
        except ProviderUnavailable as exc:
            return _outage(pr, totals, exc.message)

    depths = prompt.recall.depths
    plan = PromptPlan(
        name=prompt.name,
        prompt=prompt,
        fixture=fixture,
        sizes=sizes,
        builder=builder,
        settings_hash=digest,
        cells=[CellRun(size, depth, prompt.recall.trials) for size in sizes for depth in depths],
    )
    bar = None
    if run.progress:
        from needle_action.report.terminal import recall_progress

        bar = recall_progress(len(plan.cells) * prompt.recall.trials, label=f"recall {prompt.name}")
    try:
        calls, cost, stop_reason, failed = await run_cells(plan, provider, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    if failed:
        totals.provider_unavailable = True
    if calls == 0 and failed:
        return _outage(pr, totals, stop_reason.removeprefix("provider unavailable: "))
    result = summarize(
        plan, getattr(provider, "name", prompt.provider), calls=calls, cost=cost, stop_reason=stop_reason
    )
    pr.recall = result
    pr.recall_skipped = None
    totals.calls += result.calls
    totals.saved_calls += result.saved_calls
    totals.cost_usd = round(totals.cost_usd + result.cost_usd, 6)
    totals.partial = totals.partial or result.partial
    if cache is not None and not result.partial:
        cache.put(result)


def _outage(pr: PromptResult, totals, message: str) -> None:
    pr.recall = None
    pr.recall_skipped = f"provider unavailable: {message}"
    totals.provider_unavailable = True
    totals.partial = True


def run_recall_for_prompts(
    config: Config,
    prompts,
    results: Results,
    *,
    baseline=None,
    overrides=None,
    progress: bool = False,
    cache=None,
) -> None:
    """Fill ``PromptResult.recall`` (or ``recall_skipped``) of RESULTS for each of PROMPTS."""
    store = open_cache(config, cache)
    run = _Run(config, results, progress)
    todo: list[tuple[PromptConfig, PromptResult]] = []
    for raw in prompts:
        prompt = effective_prompt(raw, overrides)
        pr = results.prompt(prompt.name)
        if pr is None:
            pr = PromptResult(
                name=prompt.name,
                template=prompt.template,
                template_line=config.line_of(f"prompts.{prompt.name}"),
                model=prompt.model,
            )
            results.prompts.append(pr)
        reason = skip_reason(prompt)
        if reason:
            pr.recall, pr.recall_skipped = None, reason
            continue
        todo.append((prompt, pr))
    if not todo:
        return

    async def main() -> None:
        try:
            for prompt, pr in todo:
                await _recall_prompt(run, prompt, pr, baseline=baseline, cache=store)
        finally:
            await run.close()

    asyncio.run(main())
