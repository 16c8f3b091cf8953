"""Power of the base-vs-head recall comparison: how many trials a run needs to catch a drop, and
which drop a run with given trials can catch.

The comparison (``needle_action.compare.recall``) tests groups of cells with an exact stratified
test under a Holm correction. For planning, a group of ``cells`` cells is treated as one pooled
two-sample comparison: base and head trials of the group, base rate ``p``, head rate ``p - drop``,
tested with the one-sided Fisher exact test at the Bonferroni level ``alpha / family_size`` (the
strictest bound Holm applies). Its power is computed **exactly**, by summing the two binomial
distributions over the test's rejection region; no simulation, no normal approximation. The
stratified test is at least as powerful as this pooled picture when rates differ between strata
and about as powerful when they do not (``bench/verdicts.py`` compares the prediction with the
measured rate), and the Holm procedure only ever tests at a looser level than ``alpha / m``.

Everything is a pure function of integers and rates and is cached, so planning the same grid
twice costs nothing.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from needle_action.config.model import RecallSettings
from needle_action.results import RecallPower
from needle_action.stats.exact import _head_hits_pmf
from needle_action.stats.groups import CellKey, family, planning_group, pooled
from needle_action.stats.runs import RunSpread, contrast_power, whole_grid_tested

POWER_TARGET = 0.95  # the chance of catching a drop of min_drop that a run is planned for
MIN_TRIALS = 5  # below this a cell's own threshold verdict says nothing
MAX_TRIALS = 400
FINAL_SPEND = 0.88  # the share of alpha the last look of the sequential design spends (sequential.SPEND)


@functools.lru_cache(maxsize=4096)
def _binomial_pmf(n: int, p: float) -> tuple[float, ...]:
    if p <= 0.0:
        return tuple(1.0 if k == 0 else 0.0 for k in range(n + 1))
    if p >= 1.0:
        return tuple(1.0 if k == n else 0.0 for k in range(n + 1))
    lp, lq = math.log(p), math.log1p(-p)
    lgn = math.lgamma(n + 1)
    return tuple(
        math.exp(lgn - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * lp + (n - k) * lq)
        for k in range(n + 1)
    )


@functools.lru_cache(maxsize=1024)
def _rejection_bounds(base_n: int, head_n: int, level: float) -> tuple[int, ...]:
    """For each total number of hits t (both sides): the largest head count the one-sided Fisher
    test rejects at LEVEL (-1 when none)."""
    bounds = []
    for total in range(base_n + head_n + 1):
        lo, pmf = _head_hits_pmf(base_n + head_n, total, head_n)
        cumulative, bound = 0.0, -1
        for offset, prob in enumerate(pmf):
            cumulative += prob
            if cumulative > level * (1 + 1e-12):
                break
            bound = lo + offset
        bounds.append(bound)
    return tuple(bounds)


@functools.lru_cache(maxsize=8192)
def fisher_power(base_n: int, base_rate: float, head_n: int, head_rate: float, level: float) -> float:
    """Exact probability that the one-sided Fisher test at LEVEL flags a drop when the base has
    BASE_N trials at BASE_RATE and the head HEAD_N trials at HEAD_RATE."""
    if base_n <= 0 or head_n <= 0:
        return 0.0
    bounds = _rejection_bounds(base_n, head_n, level)
    base_pmf = _binomial_pmf(base_n, round(base_rate, 6))
    head_pmf = _binomial_pmf(head_n, round(head_rate, 6))
    power = 0.0
    for base_hits, pb in enumerate(base_pmf):
        if pb < 1e-15:
            continue
        tail = 0.0
        for head_hits, ph in enumerate(head_pmf):
            if head_hits > bounds[base_hits + head_hits]:
                break  # bounds grow by at most one per extra hit: no later head count rejects
            tail += ph
        power += pb * tail
    return min(1.0, power)


@functools.lru_cache(maxsize=65536)
def conditional_power(base: tuple[int, int], head: tuple[int, int], head_total: int, level: float) -> float:
    """Chance that the one-sided Fisher test at LEVEL flags a drop once the head has HEAD_TOTAL
    trials, given the BASE (hits, trials: all it will have) and the HEAD (hits, trials) so far, the
    head's remaining trials drawn at its current rate (stochastic curtailment under the trend)."""
    (base_hits, base_n), (hits, n) = base, head
    if base_n <= 0 or n <= 0 or head_total < n:
        return 0.0
    bounds = _rejection_bounds(base_n, head_total, level)
    power = 0.0
    for more, prob in enumerate(_binomial_pmf(head_total - n, round(hits / n, 6))):
        if hits + more > bounds[base_hits + hits + more]:
            break  # bounds grow by at most one per extra hit: no larger count rejects
        power += prob
    return min(1.0, power)


@dataclass(frozen=True)
class GroupDesign:
    """The group a run is planned for: how many cells it pools, the family it is tested in."""

    cells: int
    family_size: int
    alpha: float

    @property
    def level(self) -> float:
        return self.alpha / max(1, self.family_size)


def group_power(
    design: GroupDesign, *, trials: int, base_rate: float, drop: float, base_n: int | None = None
) -> float:
    """Power to catch DROP in the group when every cell runs TRIALS on the head; the base runs
    the same unless BASE_N (its trials over the whole group, history included) is known."""
    head_n = design.cells * trials
    base_total = head_n if base_n is None else base_n
    return fisher_power(base_total, base_rate, head_n, max(0.0, base_rate - drop), design.level)


def plan_trials(design: GroupDesign, *, base_rate: float, drop: float, base_n: int | None = None) -> int:
    """Fewest trials per cell (MIN_TRIALS..MAX_TRIALS) whose power to catch DROP reaches
    POWER_TARGET; MAX_TRIALS when none does."""
    for trials in range(MIN_TRIALS, MAX_TRIALS + 1):
        if group_power(design, trials=trials, base_rate=base_rate, drop=drop, base_n=base_n) >= POWER_TARGET:
            return trials
    return MAX_TRIALS


def detectable_drop(design: GroupDesign, *, base_n: int, head_n: int, base_rate: float) -> float | None:
    """Smallest drop (rounded up to a whole point) that a group with BASE_N and HEAD_N trials in
    total catches with POWER_TARGET; None when not even a drop to zero would be."""
    if head_n <= 0 or base_n <= 0:
        return None
    base_rate = round(base_rate, 2)  # a whole-point answer needs no finer rate (and it caches well)

    def power(drop: float) -> float:
        return fisher_power(base_n, base_rate, head_n, max(0.0, base_rate - drop), design.level)

    if power(base_rate) < POWER_TARGET:
        return None
    low, high = 0, max(1, math.ceil(base_rate * 100))  # in points: power(high) reaches the target
    while high - low > 1:
        mid = (low + high) // 2
        if power(mid / 100) >= POWER_TARGET:
            high = mid
        else:
            low = mid
    return high / 100


def assumed_base_rate(threshold: float) -> float:
    """The base rate planned for when no base result is known: halfway between the threshold and
    perfect recall (0.9 at the default threshold of 0.8), where a prompt that passes usually sits."""
    return round((1.0 + threshold) / 2.0, 6)


def plan_for(
    rs: RecallSettings,
    sizes: Sequence[int],
    *,
    depths: Sequence[float] | None = None,
    base: Mapping[CellKey, tuple[int, int]] | None = None,
    spread: RunSpread | None = None,
    base_trials: float | None = None,
) -> RecallPower:
    """:func:`plan_run` with a prompt's recall settings: the run, ``needle capture`` and
    ``needle plan`` plan from the same fields (DEPTHS: the settings' own unless given)."""
    return plan_run(
        sizes=sizes,
        depths=rs.depths if depths is None else depths,
        trials=rs.trials,
        threshold=rs.threshold,
        alpha=rs.alpha,
        min_drop=rs.min_drop,
        base=base,
        styles=len(rs.styles),
        spread=spread,
        base_trials=base_trials,
        final_share=FINAL_SPEND if rs.stop_on_drop else 1.0,
    )


def plan_run(
    *,
    sizes: Sequence[int],
    depths: Sequence[float],
    trials: int | Literal["auto"],
    threshold: float,
    alpha: float,
    min_drop: float,
    base: Mapping[CellKey, tuple[int, int]] | None = None,
    styles: int = 1,
    spread: RunSpread | None = None,
    base_trials: float | None = None,
    final_share: float = 1.0,
) -> RecallPower:
    """The trials a run plans per cell and what they can catch in the planning group (the middle
    depths, else the whole grid). BASE: the base's counts (history included) when known, which
    gives its rate; BASE_TRIALS: the base trials per cell the test uses (its own run's in one job;
    across runs, its own and its stored runs'), else BASE's trials. Otherwise
    :func:`assumed_base_rate` with equal trials. STYLES: needle styles the prompt runs; each is a
    grid of its own, so the comparison's family (and the Holm correction the plan must survive) is
    that many times larger. SPREAD: the base is another run's (stats/runs.py): the trials and the
    power are the cross-run test's, at FINAL_SHARE of alpha (what the last look spends)."""
    group = planning_group(sizes, depths)
    family_size = styles * (len(family(sizes, depths)) + whole_grid_tested(spread))
    design = GroupDesign(cells=len(group.cells), family_size=family_size, alpha=alpha)
    base_hits, base_n = pooled(base or {}, group.cells)
    known = base_n > 0
    rate = base_hits / base_n if known else assumed_base_rate(threshold)
    if known and base_trials is not None:
        base_n = round(base_trials * len(group.cells))  # what the test uses, not what planned the rate
    if spread is not None:
        rates = _cell_rates(base, group.cells, sizes, depths) if known else None
        across = GroupDesign(design.cells, design.family_size, alpha * final_share)
        return _plan_across(
            across, sizes, depths, trials, rate, min_drop, base_n if known else None, spread, rates
        )
    fixed_base = base_n if known else None
    n = plan_trials(design, base_rate=rate, drop=min_drop, base_n=fixed_base) if trials == "auto" else trials
    power = group_power(design, trials=n, base_rate=rate, drop=min_drop, base_n=fixed_base)
    head_n = design.cells * n
    return RecallPower(
        trials=n,
        auto=trials == "auto",
        group=group.label,
        base_rate=round(rate, 4),
        base_rate_source="baseline" if known else "assumed",
        min_drop=min_drop,
        power=round(power, 4),
        detectable_drop=detectable_drop(design, base_n=fixed_base or head_n, head_n=head_n, base_rate=rate),
    )


def _cell_rates(
    base: Mapping[CellKey, tuple[int, int]] | None,
    group: Sequence[CellKey],
    sizes: Sequence[int],
    depths: Sequence[float],
) -> tuple[list[float], list[float]]:
    """(the group's cells' base rates, the other cells'), each half a trial from 0 and 1."""
    counts = base or {}
    inside = set(group)
    every = [(int(s), round(float(d), 6)) for s in sorted(set(sizes)) for d in sorted(set(depths))]
    rate = {k: (h + 0.5) / (n + 1.0) for k, (h, n) in counts.items() if n > 0}
    known = [k for k in every if k in rate]
    return [rate[k] for k in known if k in inside], [rate[k] for k in known if k not in inside]


def across_power(
    design: GroupDesign,
    *,
    other_cells: int,
    base_n: int | None,
    head_n: int,
    base_rate: float,
    drop: float,
    spread: RunSpread,
    rates: tuple[Sequence[float], Sequence[float]] | None = None,
) -> float:
    """Power of the cross-run tests to catch DROP in DESIGN's group, BASE_N and HEAD_N trials over
    the group (BASE_N None: as many as the head), the grid's OTHER_CELLS unchanged; RATES: each
    cell's own base rate (the group's, the others'), else BASE_RATE everywhere."""
    per_cell = (base_n if base_n is not None else head_n) / design.cells
    if rates is None or not rates[0]:
        rates = ([base_rate] * design.cells, [base_rate] * other_cells)
    return contrast_power(
        rates[0],
        rates[1],
        base_n=per_cell,
        head_n=head_n / design.cells,
        drop=drop,
        level=design.level,
        spread=spread,
    )


def across_detectable(
    design: GroupDesign,
    *,
    other_cells: int,
    base_n: int | None,
    head_n: int,
    base_rate: float,
    spread: RunSpread,
    rates: tuple[Sequence[float], Sequence[float]] | None = None,
) -> float | None:
    """Smallest drop (whole points) DESIGN's group catches across runs with POWER_TARGET
    (:func:`across_power`'s terms); None when not even a drop to zero would be."""

    def power(points: int) -> float:
        terms = {"base_n": base_n, "head_n": head_n, "base_rate": base_rate, "spread": spread, "rates": rates}
        return across_power(design, other_cells=other_cells, drop=points / 100, **terms)  # type: ignore[arg-type]

    low, high = 0, max(1, math.ceil(base_rate * 100))
    if power(high) < POWER_TARGET:
        return None
    while high - low > 1:  # the power grows with the drop
        mid = (low + high) // 2
        low, high = (low, mid) if power(mid) >= POWER_TARGET else (mid, high)
    return high / 100


def _plan_across(
    design: GroupDesign,
    sizes: Sequence[int],
    depths: Sequence[float],
    trials: int | Literal["auto"],
    rate: float,
    min_drop: float,
    base_n: int | None,
    spread: RunSpread,
    rates: tuple[list[float], list[float]] | None = None,
) -> RecallPower:
    """:func:`plan_run` for a base from another run: the power of the cross-run tests (each cell at
    its own base rate when the base is known)."""
    group = planning_group(sizes, depths)
    other = len(set(sizes)) * len(set(depths)) - design.cells

    terms = {"other_cells": other, "base_n": base_n, "base_rate": rate, "spread": spread, "rates": rates}

    def power(n: int) -> float:
        return across_power(design, head_n=design.cells * n, drop=min_drop, **terms)  # type: ignore[arg-type]

    if trials == "auto":  # the target; when the base side's trials cap the power below it, twice
        # the base side's trials a cell (two thirds of what infinitely many head trials would give:
        # more buy little; stored runs or a base measured in the same job buy more)
        n = next((t for t in range(MIN_TRIALS, MAX_TRIALS + 1) if power(t) >= POWER_TARGET), 0)
        if not n:
            side = (base_n / design.cells) if base_n is not None else MAX_TRIALS / 2
            n = min(MAX_TRIALS, max(MIN_TRIALS, round(2 * side)))
    else:
        n = trials
    detect = across_detectable(design, head_n=design.cells * n, **terms)  # type: ignore[arg-type]
    return RecallPower(
        trials=n,
        auto=trials == "auto",
        group=group.label,
        base_rate=round(rate, 4),
        base_rate_source="baseline" if base_n is not None else "assumed",
        min_drop=min_drop,
        power=round(power(n), 4),
        detectable_drop=detect,
    )
