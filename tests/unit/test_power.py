"""Power of the base-vs-head comparison: exact against brute force and against simulation, trial
planning that reaches its target and no more, and the detectable drop."""

from __future__ import annotations

import math
import random

import pytest

from needle_action.stats import power
from needle_action.stats.exact import fisher_drop_pvalue


def _brute_power(base_n: int, pb: float, head_n: int, ph: float, level: float) -> float:
    def pmf(n, p, k):
        return math.comb(n, k) * p**k * (1 - p) ** (n - k)

    return sum(
        pmf(base_n, pb, x) * pmf(head_n, ph, y)
        for x in range(base_n + 1)
        for y in range(head_n + 1)
        if fisher_drop_pvalue(x, base_n, y, head_n) <= level
    )


@pytest.mark.parametrize(
    ("bn", "pb", "hn", "ph", "level"),
    [(8, 0.9, 8, 0.4, 0.05), (12, 0.7, 9, 0.3, 0.01), (5, 0.5, 15, 0.5, 0.1)],
)
def test_fisher_power_is_exact(bn, pb, hn, ph, level):
    assert power.fisher_power(bn, pb, hn, ph, level) == pytest.approx(
        _brute_power(bn, pb, hn, ph, level), abs=1e-9
    )


def test_fisher_power_agrees_with_simulation():
    rng = random.Random(4)
    bn = hn = 60
    hits = 0
    for _ in range(3000):
        x = sum(rng.random() < 0.9 for _ in range(bn))
        y = sum(rng.random() < 0.65 for _ in range(hn))
        hits += fisher_drop_pvalue(x, bn, y, hn) <= 0.005
    predicted = power.fisher_power(bn, 0.9, hn, 0.65, 0.005)
    assert abs(hits / 3000 - predicted) < 4 * math.sqrt(predicted * (1 - predicted) / 3000)


def test_plan_trials_is_the_fewest_that_reach_the_target():
    design = power.GroupDesign(cells=9, family_size=9, alpha=0.01)
    n = power.plan_trials(design, base_rate=0.9, drop=0.2)
    assert power.group_power(design, trials=n, base_rate=0.9, drop=0.2) >= power.POWER_TARGET
    assert power.group_power(design, trials=n - 1, base_rate=0.9, drop=0.2) < power.POWER_TARGET
    # a lower base rate (more variance) needs more trials; a larger base sample needs fewer
    assert power.plan_trials(design, base_rate=0.8, drop=0.2) > n
    assert power.plan_trials(design, base_rate=0.9, drop=0.2, base_n=9 * n * 4) < n


def test_detectable_drop_is_where_power_reaches_the_target():
    design = power.GroupDesign(cells=9, family_size=9, alpha=0.01)
    drop = power.detectable_drop(design, base_n=180, head_n=180, base_rate=0.9)
    assert drop is not None
    assert power.fisher_power(180, 0.9, 180, 0.9 - drop, design.level) >= power.POWER_TARGET
    assert power.fisher_power(180, 0.9, 180, 0.9 - drop + 0.01, design.level) < power.POWER_TARGET
    assert power.detectable_drop(design, base_n=3, head_n=3, base_rate=0.9) is None  # nothing is catchable


def test_plan_run_on_the_default_grid():
    plan = power.plan_run(
        sizes=[2000, 8000, 16000],
        depths=[0.0, 0.25, 0.5, 0.75, 1.0],
        trials="auto",
        threshold=0.8,
        alpha=0.01,
        min_drop=0.2,
    )
    assert plan.auto
    assert plan.base_rate_source == "assumed"
    assert plan.base_rate == 0.9
    assert plan.group == "middle depths (25%-75%)"
    assert plan.power >= power.POWER_TARGET
    assert 15 * plan.trials <= 320
    fixed = power.plan_run(sizes=[2000], depths=[0.0, 1.0], trials=5, threshold=0.8, alpha=0.01, min_drop=0.2)
    assert fixed.trials == 5
    assert not fixed.auto
    assert fixed.group == "all cells"
    assert fixed.power < 0.95
    known = power.plan_run(
        sizes=[2000],
        depths=[0.0, 0.5, 1.0],
        trials="auto",
        threshold=0.8,
        alpha=0.01,
        min_drop=0.2,
        base={(2000, 0.5): (95, 100)},
    )
    assert known.base_rate_source == "baseline"
    assert known.base_rate == 0.95


def test_conditional_power_follows_the_trend_and_is_certain_when_already_settled():
    level = 0.01 / 9
    base = (171, 180)  # 95% over 9 cells x 20
    assert power.conditional_power(base, (43, 45), 180, level) < 0.001  # on the base's trend
    assert power.conditional_power(base, (29, 45), 180, level) > 0.99  # 30 points down
    middle = power.conditional_power(base, (36, 45), 180, level)
    assert 0.001 < middle < 0.99
    # every head trial already asked: the answer is the test's own verdict
    done = power.conditional_power(base, (140, 180), 180, level)
    assert done == 1.0
    assert power.fisher_power(180, 0.95, 180, 140 / 180, level) > 0.5
    assert power.conditional_power(base, (0, 0), 180, level) == 0.0
