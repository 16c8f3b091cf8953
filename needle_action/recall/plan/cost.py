"""`needle plan`: what a compared recall run will cost, before any call (docs/recall.md, "Plan").

Per prompt, from the settings alone (no provider, no tokenizer call, no network):

* **planned calls**: the full plan (cells x trials per cell, as ``trials = "auto"`` plans them);
* **expected calls** of the group-sequential comparison when nothing changed and when the middle
  loses ``min_drop``: the real decision (:func:`needle_action.stats.sequential.replay`) on a
  fixed, seeded sample of simulated runs at the planned base rate;
* **input tokens** (every trial's prompt is filled to its cell's size) and **dollars** at list
  price (``data/prices.toml``): uncached, with the prompt cache (a cell's trials share the text
  before the needle: read at the cache price after one write per size), and through the batch API;
* the **detectable drop** of every group the comparison tests (95% power, Holm at alpha);
* what the **cache** and the **baseline's history** save: a prompt whose identical result (same
  settings hash) is in the baseline or the results cache costs no call (its no-change calls are
  saved); history plans the trials (it never enters the test): the calls saved are the planned
  calls of the base's own run alone minus those with its history pooled in (negative when the
  history shows a lower rate than the run alone).

``check_cost`` holds a run to ``recall.max_cost_usd`` before it starts.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from needle_action.assemble.render import render_case
from needle_action.assemble.templates.defaults import case_variables
from needle_action.config.model import Config, PromptConfig, RecallSettings
from needle_action.core.errors import ConfigError
from needle_action.core.names import GOLD_STYLE
from needle_action.core.paths import relative
from needle_action.providers.pricing import estimate_cost, price_of
from needle_action.recall.plan.prompt import (
    RecallOverrides,
    auto_sizes,
    context_window,
    effective_prompt,
    settings_hash,
)
from needle_action.recall.trials.probes.gold import answer_keys
from needle_action.results import CrossRun, RecallPower, RecallResult, Results, stored_recall
from needle_action.results.cache import ResultCache
from needle_action.stats.groups import CellKey, Group, cell_key, family, planning_group, pooled
from needle_action.stats.levels import history_counts, plan_terms, spread_of
from needle_action.stats.pooling import base_counts, testable_counts
from needle_action.stats.power import GroupDesign, across_detectable, detectable_drop, plan_for
from needle_action.stats.runs import RunSpread, whole_grid_tested
from needle_action.stats.sequential import Answers, Design, PromptData, drop_floor, replay, result_answers
from needle_action.stats.simulate import simulated_power

SIMULATED_RUNS = 40  # runs behind each expected-calls figure (seeded: the same every time)


@dataclass
class Usd:
    uncached: float | None
    cached: float | None
    batch: float | None


@dataclass
class PromptPlanSummary:
    """One prompt's plan (``--json`` writes these)."""

    name: str
    model: str
    sizes: list[int]
    depths: list[float]
    styles: list[str]
    trials_per_cell: int
    planned_calls: int
    expected_calls_no_change: int
    expected_calls_at_min_drop: int
    input_tokens: int
    usd: Usd
    detectable_drop: dict[str, float | None] = field(default_factory=dict)
    base_rate: float = 0.0
    base_rate_source: str = "assumed"
    history_runs: int = 0
    # calls this run will not make: an identical result is stored (in the baseline or the results
    # cache, CACHE_SOURCE), and the base's history planning fewer trials than its own run alone
    calls_saved_by_cache: int = 0
    cache_source: str | None = None
    calls_saved_by_history: int = 0
    # the chance the comparison catches a drop of min_drop in the planning group (what is tested:
    # across runs, the cross-run test with its spread) and what that spread rests on
    power: float = 0.0
    run_spread: str | None = None
    # "simulated": the comparison replayed (stats/simulate.py); "approximation": a design too large
    # to replay in time, the plan's normal approximation
    power_method: str = "simulated"


def _sizes(prompt: PromptConfig) -> list[int]:
    if prompt.recall.sizes == "auto":
        return auto_sizes(context_window(prompt), prompt.reserve_output_tokens)
    return list(prompt.recall.sizes)


def _costs(prompt: PromptConfig, sizes: Sequence[int], depths: Sequence[float], calls_per_cell: float) -> Usd:
    """List-price USD of CALLS_PER_CELL trials in every cell: uncached, prompt-cached, batch."""
    out = prompt.recall.max_output_tokens
    cells = [(s, d) for s in sizes for d in depths] * len(prompt.recall.styles)
    uncached = sum(estimate_cost(prompt.model, s, out, provider=prompt.provider) or 0.0 for s, _ in cells)
    p = price_of(prompt.model, prompt.provider)
    if p is None:
        return Usd(None, None, None)
    cached = 0.0
    for s, d in cells:
        prefix = int(s * d) if s * d >= p.cache_min_tokens else 0  # the text before the needle
        per = estimate_cost(prompt.model, s - prefix, out, provider=prompt.provider, cache_read_tokens=prefix)
        cached += per or 0.0
    writes = sum(  # one write of each size's longest prefix (its deepest cell)
        (
            estimate_cost(
                prompt.model, 0, 0, provider=prompt.provider, cache_write_tokens=int(s * max(depths))
            )
            or 0.0
        )
        for s in sizes
    )
    batch = sum(
        estimate_cost(prompt.model, s, out, provider=prompt.provider, batch=True) or 0.0 for s, _ in cells
    )
    return Usd(
        round(uncached * calls_per_cell, 4),
        round(cached * calls_per_cell + writes, 4),
        round(batch * calls_per_cell, 4),
    )


@functools.lru_cache(maxsize=256)
def expected_trials(
    sizes: tuple[int, ...],
    depths: tuple[float, ...],
    trials: int,
    rate: float,
    drop: float,
    alpha: float,
    min_drop: float,
    block: bool,
    pass_early: bool,
    base_trials: int = 0,
) -> float:
    """Mean head trials per cell the sequential comparison asks when the middle loses DROP from a
    flat RATE (the real decision on SIMULATED_RUNS seeded runs, paired as a same-seed run is)."""
    design = Design(block=block, pass_early=pass_early)
    if not design.sequential:
        return float(trials)
    rng = random.Random(21)  # stdlib: the image has no numpy, and these draws are few
    base_trials = base_trials or trials
    middle = set(planning_group(sizes, depths).cells)
    keys = [cell_key(s, d) for s in sizes for d in depths]
    head_p = [max(0.0, rate - drop) if k in middle else rate for k in keys]
    total = 0
    for _ in range(SIMULATED_RUNS):
        base = [[rng.random() < rate for _ in range(base_trials)] for _ in keys]
        head = [[rng.random() < p for _ in range(trials)] for p in head_p]
        data = PromptData(
            name="p",
            grids={"": (_answers(keys, base), _answers(keys, head))},
            sizes=sizes,
            depths=depths,
            planned=trials,
            floor=drop_floor(min_drop),
            paired=base_trials == trials,
            base_planned=base_trials,
            design=design,
        )
        total += replay([data], alpha)["p"].trials
    return total / SIMULATED_RUNS


def _answers(keys: list[CellKey], outcomes: list[list[bool]]) -> dict[CellKey, list[tuple[int, bool]]]:
    return {k: list(enumerate(row)) for k, row in zip(keys, outcomes, strict=True)}


def stored_source(
    config: Config,
    prompt: PromptConfig,
    sizes: list[int],
    baseline: Results | None,
    cache: ResultCache | None,
) -> str | None:
    """Where a complete result with the settings hash a compared run of PROMPT would look up is
    stored ("baseline" or "cache"; None: nowhere): such a run makes no call. The hash is the
    engine's (recall/engine.py): the rendered prompt's content hash, no tokenizer and no provider."""
    base_pr = baseline.prompt(prompt.name) if baseline is not None else None
    stored = base_pr.recall if base_pr is not None and base_pr.recall and not base_pr.recall.partial else None
    if stored is None and cache is None:
        return None  # nothing to look in: no need to render
    prompt = effective_prompt(prompt, RecallOverrides(full_trials=True))
    fixture_path = config.recall_fixture(prompt)
    fixture = relative(config.root, fixture_path, resolved=True) if fixture_path is not None else None
    keys = None
    if GOLD_STYLE in prompt.recall.styles and fixture_path is not None:
        keys = answer_keys(case_variables(config, prompt, fixture_path))
    content = render_case(config, prompt, fixture_path).content_hash()
    digest = settings_hash(
        config, prompt, content_hash=content, fixture=fixture, sizes=sizes, answer_keys=keys
    )
    if stored is not None and stored.settings_hash == digest:
        return "baseline"
    if cache is not None and cache.get(digest) is not None:
        return "cache"
    return None


def plan_prompt(
    prompt: PromptConfig,
    baseline: Results | None = None,
    *,
    config: Config | None = None,
    cache: ResultCache | None = None,
    history: Sequence[Results] | None = None,
    replay_power: bool = True,
) -> PromptPlanSummary:
    """PROMPT's plan; BASELINE (a base results file, another run's) gives the base rate and, with
    its history or HISTORY (stored runs), the spread the cross-run test uses. With CONFIG, what the
    results cache saves: the baseline or CACHE holding an identical result. REPLAY_POWER: state the
    power by replaying the comparison (seconds; the cost check before a run needs only dollars),
    else the plan's approximation."""
    rs = prompt.recall
    sizes, depths = _sizes(prompt), list(rs.depths)
    base_pr = baseline.prompt(prompt.name) if baseline is not None else None
    br = base_pr.recall if base_pr is not None else None
    counts, own, base_trials, spread, side_trials, record = _base_terms(prompt, br, history)
    history_runs = len(record.history) if record is not None else 0
    power = plan_for(rs, sizes, depths=depths, base=counts, spread=spread, base_trials=side_trials)
    base = br if counts is not None else None
    stated = _stated_power(prompt, sizes, depths, power, base, record) if replay_power else None
    cells = len(sizes) * len(depths) * len(rs.styles)
    saved_by_history = 0
    if history_runs and own:  # the trials the base's own run alone (the prior, no history) would plan
        alone = plan_for(
            rs, sizes, depths=depths, base=own, spread=RunSpread.prior(), base_trials=base_trials
        )
        saved_by_history = cells * (alone.trials - power.trials)
    args = (tuple(sizes), tuple(depths), power.trials, round(power.base_rate, 2))
    rules = (rs.alpha, rs.min_drop, rs.stop_on_drop, rs.stop_on_no_change)
    no_change = expected_trials(*args, 0.0, *rules, base_trials)
    at_drop = expected_trials(*args, rs.min_drop, *rules, base_trials)
    source = stored_source(config, prompt, sizes, baseline, cache) if config is not None else None
    detect = _detectable_drops(rs, sizes, depths, power, own, spread, side_trials)
    return PromptPlanSummary(
        name=prompt.name,
        model=prompt.model,
        sizes=sizes,
        depths=depths,
        styles=list(rs.styles),
        trials_per_cell=power.trials,
        planned_calls=cells * power.trials,
        expected_calls_no_change=round(cells * no_change),
        expected_calls_at_min_drop=round(cells * at_drop),
        input_tokens=sum(sizes) * len(depths) * len(rs.styles) * power.trials,
        usd=_costs(prompt, sizes, depths, power.trials),
        detectable_drop=detect,
        base_rate=power.base_rate,
        base_rate_source=power.base_rate_source,
        history_runs=history_runs,
        # an identical result means nothing changed: the run would have cost its no-change calls
        calls_saved_by_cache=round(cells * no_change) if source else 0,
        cache_source=source,
        calls_saved_by_history=saved_by_history,
        power=stated if stated is not None else power.power,
        power_method="simulated" if stated is not None else "approximation",
        run_spread=spread.describe() if spread is not None else None,
    )


def _base_terms(
    prompt: PromptConfig, br: RecallResult | None, history: Sequence[Results] | None
) -> tuple[
    dict[CellKey, tuple[int, int]] | None,
    dict[CellKey, tuple[int, int]] | None,
    int,
    RunSpread | None,
    float | None,
    CrossRun | None,
]:
    """(counts giving the rate, the base run's own counts, its trials per cell, the run spread, the
    base side's trials per cell across runs, the record of its stored runs) of a base BR of
    PROMPT's model."""
    if br is None or br.model != prompt.model:
        return None, None, 0, None, None, None
    style = prompt.recall.styles[0]
    own = testable_counts(br, style)
    base_trials = round(sum(n for _, n in own.values()) / len(own)) if own else 0
    record, spread, side_trials = plan_terms(br, style, stored_recall(history, prompt.name))
    return base_counts(br, style=style), own, base_trials, spread, side_trials, record


def _stated_power(
    prompt: PromptConfig,
    sizes: Sequence[int],
    depths: Sequence[float],
    power: RecallPower,
    br: RecallResult | None,
    record: CrossRun | None,
) -> float | None:
    """The power the comparison will state for this plan (:mod:`needle_action.stats.simulate`):
    against BR's answers (another run's: across runs, with RECORD's stored runs and spread), else
    against a base run in the same job at the plan's assumed rate, paired as a same-seed run is."""
    rs = prompt.recall
    planned = power.trials
    grids: dict[str, tuple[Answers, Answers]]
    if br is not None:
        grids = {s: (result_answers(br, s), {}) for s in rs.styles if s in br.style_names()}
        base_planned = br.power.trials if br.power is not None else planned
    else:
        keys = [cell_key(s, d) for s in sizes for d in depths]
        hits = round(power.base_rate * planned)
        grids = {s: (_answers(keys, [[i < hits for i in range(planned)]] * len(keys)), {}) for s in rs.styles}
        base_planned = planned
    data = PromptData(
        name=prompt.name,
        grids=grids,
        sizes=sizes,
        depths=depths,
        planned=planned,
        floor=drop_floor(rs.min_drop),
        paired=br is None,
        base_planned=base_planned,
        design=Design(block=rs.stop_on_drop, pass_early=rs.stop_on_no_change),
    )
    if record is not None:
        data.spread = spread_of(record)
        data.history = history_counts(record, grids)
    figure = simulated_power(data, rs.alpha, rs.min_drop)
    return figure.power if figure is not None else None


def _detectable_drops(
    rs: RecallSettings,
    sizes: Sequence[int],
    depths: Sequence[float],
    power: RecallPower,
    own: Mapping[CellKey, tuple[int, int]] | None,
    spread: RunSpread | None,
    side_trials: float | None,
) -> dict[str, float | None]:
    """Per group, the smallest drop caught with 95% power as tested: in one job against the base
    run's own trials; across runs (SPREAD) by the cross-run test, the base side's SIDE_TRIALS a cell."""
    fam = len(rs.styles) * len(family(sizes, depths))
    detect: dict[str, float | None] = {}
    for g in family(sizes, depths):
        n = len(g.cells) * power.trials
        if spread is not None:  # across runs: the base side is the base run and its stored runs
            side = round((side_trials or power.trials) * len(g.cells))
            detect[g.label] = across_drop(
                g,
                sizes,
                depths,
                fam + len(rs.styles) * whole_grid_tested(spread),
                rs.alpha,
                side,
                n,
                power.base_rate,
                spread,
            )
            continue
        base_n = pooled(own or {}, g.cells)[1] or n  # the test's base: the base run's own trials
        design = GroupDesign(cells=len(g.cells), family_size=fam, alpha=rs.alpha)
        detect[g.label] = detectable_drop(design, base_n=base_n, head_n=n, base_rate=power.base_rate)
    return detect


def across_drop(
    g: Group,
    sizes: Sequence[int],
    depths: Sequence[float],
    fam: int,
    alpha: float,
    base_n: int,
    head_n: int,
    rate: float,
    spread: RunSpread,
) -> float | None:
    """The smallest drop (whole points) group G catches with 95% power across runs."""
    design = GroupDesign(cells=len(g.cells), family_size=fam, alpha=alpha)
    other = len(set(sizes)) * len(set(depths)) - len(g.cells)
    return across_detectable(
        design, other_cells=other, base_n=base_n, head_n=head_n, base_rate=rate, spread=spread
    )


def as_json(plans: Sequence[PromptPlanSummary]) -> dict[str, Any]:
    """The ``--json`` document: per prompt, the fields above."""
    return {"prompts": [asdict(p) for p in plans]}


def one_line(plans: Sequence[PromptPlanSummary], calls: int | None = None, usd: float | None = None) -> str:
    """The comment's line: "this run: 128 calls, ~$2.10; full plan 300 calls"."""
    full = sum(p.planned_calls for p in plans)
    if calls is None:
        calls = sum(p.expected_calls_no_change - p.calls_saved_by_cache for p in plans)
    cost = f", ~${usd:.2f}" if usd is not None else ""
    return f"this run: {calls} calls{cost}; full plan {full} calls"


def check_cost(prompt: PromptConfig, plan: PromptPlanSummary) -> None:
    """Refuse, before any call, a run whose full plan would cost more than ``recall.max_cost_usd``;
    the error names the cheapest settings that fit."""
    cap = prompt.recall.max_cost_usd
    cost = plan.usd.cached if prompt.recall.prompt_cache else plan.usd.uncached
    if cap is None or cost is None or cost <= cap:
        return
    per_trial = cost / max(1, plan.trials_per_cell)
    fits = math.floor(cap / per_trial) if per_trial else 0
    options = []
    if fits >= 1:
        options.append(f"recall.trials = {fits} (from {plan.trials_per_cell})")
    if plan.usd.batch is not None and plan.usd.batch <= cap:
        options.append(f"--batch (${plan.usd.batch:.2f})")
    if len(plan.sizes) > 1:
        options.append(f"sizes = {plan.sizes[:-1]}")
    raise ConfigError(
        f"prompt {plan.name!r}: the planned recall run costs about ${cost:.2f} at list price, above "
        f"recall.max_cost_usd = ${cap:g}",
        hint="cheapest settings that fit: " + (", or ".join(options) if options else "raise max_cost_usd"),
    )


def power_line(p: PromptPlanSummary) -> str:
    """'  power: 85% to catch a drop of min_drop in the middle, replayed on simulated pull requests
    (base in the same job, at an assumed base rate of 90%: the comparison states it again at the
    base's measured rates)'."""
    how = (
        "replayed on simulated pull requests"
        if p.power_method == "simulated"
        else "a normal approximation (the design is too large to replay in time)"
    )
    base = f"base from another run; {p.run_spread}" if p.run_spread else "base in the same job"
    if p.base_rate_source == "assumed":
        base += (
            f", at an assumed base rate of {p.base_rate:.0%}: the comparison states it again at the base's"
            " measured rates"
        )
    return f"  power: {p.power:.0%} to catch a drop of min_drop in the middle, {how} ({base})"


def format_plans(plans: Sequence[PromptPlanSummary]) -> str:
    """The terminal table of `needle plan`."""
    lines = []
    for p in plans:
        usd = p.usd
        money = (
            f"${usd.uncached:.2f} uncached, ${usd.cached:.2f} with the prompt cache, ${usd.batch:.2f} batch"
            if usd.uncached is not None
            else "no list price for this model"
        )
        lines += [
            f"{p.name} ({p.model}): {len(p.sizes)} sizes x {len(p.depths)} depths x {len(p.styles)} styles, "
            f"{p.trials_per_cell} trials per cell (base rate {p.base_rate:.0%}, {p.base_rate_source})",
            power_line(p),
            f"  calls: {p.planned_calls} planned; expected {p.expected_calls_no_change} if nothing changed, "
            f"{p.expected_calls_at_min_drop} at a middle drop of min_drop",
            f"  input tokens: {p.input_tokens:,}; {money} (full plan)",
            "  detectable drop: "
            + ", ".join(
                f"{k} {v * 100:.0f} pt" if v is not None else f"{k} -" for k, v in p.detectable_drop.items()
            ),
        ]
        if p.cache_source:
            where = "the baseline" if p.cache_source == "baseline" else "the results cache"
            lines.append(
                f"  saved by the cache: {p.calls_saved_by_cache} calls (an identical result is in {where})"
            )
        if p.history_runs:
            lines.append(
                f"  saved by history: {p.calls_saved_by_history} calls ({p.history_runs} earlier base runs, "
                "each at its own level, join the base side of the cross-run test)"
            )
    lines.append(one_line(plans))
    return "\n".join(lines)
