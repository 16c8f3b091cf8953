"""Runs have levels (issue 31): the spread estimator, the cross-run tests and their error rates."""

from __future__ import annotations

import functools
import math
import random
from typing import Any

import pytest

from needle_action.stats.groups import CellKey, cell_key, family
from needle_action.stats.power import plan_run
from needle_action.stats.runs import (
    MIN_RUNS,
    PRIOR_TAU,
    RunSpread,
    contrast_power,
    contrast_pvalue,
    estimate_spread,
    run_shift,
    student_cdf,
    uniform_pvalue,
)

SIZES = [2000, 8000, 16000]
DEPTHS = [0.0, 0.25, 0.5, 0.75, 1.0]
CELLS = [cell_key(s, d) for s in SIZES for d in DEPTHS]
MIDDLE = [k for k in CELLS if 0 < k[1] < 1]


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def _run(
    rng: random.Random, rate: float, level: float, trials: int = 20, drop: float = 0.0
) -> dict[CellKey, tuple[int, int]]:
    """One run: every cell at RATE (less DROP in the middle) moved by LEVEL on the logit scale."""
    out = {}
    for k in CELLS:
        p = rate - (drop if k in MIDDLE else 0.0)
        q = 1 / (1 + math.exp(-(_logit(p) + level)))
        out[k] = (sum(rng.random() < q for _ in range(trials)), trials)
    return out


def test_fewer_than_three_runs_give_the_stated_prior_never_zero() -> None:
    rng = random.Random(3)
    spread = estimate_spread([_run(rng, 0.8, 0.0) for _ in range(MIN_RUNS - 1)])
    assert (spread.method, spread.tau, spread.runs) == ("prior", PRIOR_TAU, MIN_RUNS - 1)
    assert "prior" in spread.describe()
    assert "at least 3" in spread.describe()


@pytest.mark.parametrize("tau", [0.0, 0.3, 0.6])
def test_the_estimator_recovers_tau_from_many_runs(tau: float) -> None:
    rng = random.Random(int(tau * 10) + 7)
    runs = [_run(rng, 0.8, rng.gauss(0, tau), trials=40) for _ in range(60)]
    spread = estimate_spread(runs)
    assert spread.method == "moments"
    assert spread.runs == 60
    assert spread.raw_tau is not None
    assert abs(spread.raw_tau - tau) < 0.12
    assert abs(spread.tau - tau) < 0.12


def test_few_runs_are_shrunk_toward_the_prior() -> None:
    rng = random.Random(11)
    runs = [_run(rng, 0.8, 0.0) for _ in range(4)]
    spread = estimate_spread(runs)
    assert spread.raw_tau is not None
    assert spread.raw_tau < spread.tau < PRIOR_TAU


def test_a_run_shift_is_fitted_from_every_cell() -> None:
    reference = {k: _logit(0.8) for k in CELLS}
    level = 0.7
    q = 1 / (1 + math.exp(-(_logit(0.8) + level)))
    shifted = {k: (round(q * 1000), 1000) for k in CELLS}
    shift, info = run_shift(shifted, reference)
    assert shift == pytest.approx(level, abs=0.01)
    assert info > 0


def test_a_whole_run_moved_is_not_a_group_drop() -> None:
    """The head a full logit lower everywhere: the contrast sees nothing, the uniform test weighs
    the shift against the run-to-run spread."""
    base = {k: (160, 200) for k in CELLS}
    q = 1 / (1 + math.exp(-(_logit(0.8) - 1.0)))
    head = {k: (round(q * 200), 200) for k in CELLS}
    for g in family(SIZES, DEPTHS):
        assert contrast_pvalue(base, head, g.cells) > 0.3
    wide, narrow = RunSpread(0.6, 6, "moments"), RunSpread(0.05, 6, "moments")
    assert uniform_pvalue(base, head, wide) > 0.05
    assert uniform_pvalue(base, head, narrow) < 1e-4


def test_a_middle_drop_shows_through_any_run_shift() -> None:
    rng = random.Random(5)
    base = _run(rng, 0.8, 0.5, trials=30)
    head = _run(rng, 0.8, -0.5, trials=30, drop=0.35)
    middle = next(g for g in family(SIZES, DEPTHS) if g.kind == "middle")
    assert contrast_pvalue(base, head, middle.cells) < 1e-3
    assert contrast_pvalue(head, base, middle.cells) > 0.5  # a rise is no drop


def test_student_t_matches_its_table() -> None:
    assert student_cdf(-2.015, 5) == pytest.approx(0.05, abs=1e-4)
    assert student_cdf(-3.365, 5) == pytest.approx(0.01, abs=1e-4)
    assert student_cdf(1.96, math.inf) == pytest.approx(0.975, abs=1e-4)


def test_cross_run_power_grows_with_trials_and_drop() -> None:
    common: dict[str, Any] = {"level": 0.001, "spread": RunSpread.prior()}
    rates = ([0.8] * 9, [0.8] * 6)
    low = contrast_power(*rates, base_n=20, head_n=20, drop=0.2, **common)
    more = contrast_power(*rates, base_n=20, head_n=60, drop=0.2, **common)
    bigger = contrast_power(*rates, base_n=20, head_n=20, drop=0.3, **common)
    assert 0 < low < more < 1
    assert low < bigger


@pytest.mark.slow
@pytest.mark.parametrize(("rate", "tau"), [(0.8, 0.6), (0.95, 0.6), (0.8, 0.3)])
def test_cross_run_false_alarms_stay_within_alpha(rate: float, tau: float) -> None:
    """Unchanged prompts, base and head in their own runs, tau estimated from 6 stored runs: the
    family (every group's contrast and the uniform shift, Bonferroni at .01) blocks about 1%."""
    rng = random.Random(2026)
    prs, blocked = 300, 0
    groups = family(SIZES, DEPTHS)
    for _ in range(prs):
        spread = estimate_spread([_run(rng, rate, rng.gauss(0, tau)) for _ in range(6)])
        base, head = _run(rng, rate, rng.gauss(0, tau)), _run(rng, rate, rng.gauss(0, tau))
        pvalues = [contrast_pvalue(base, head, g.cells) for g in groups] + [
            uniform_pvalue(base, head, spread)
        ]
        blocked += min(pvalues) <= 0.01 / len(pvalues)
    assert blocked <= 9  # 3% of 300: a 1% rate exceeds it with probability below 0.2%


def test_history_joins_the_base_run_by_run_and_sharpens_the_contrast() -> None:
    rng = random.Random(8)
    history = [_run(rng, 0.8, rng.gauss(0, 0.6)) for _ in range(6)]
    base = _run(rng, 0.8, 0.4)
    head = _run(rng, 0.8, -0.4, drop=0.25)
    middle = next(g for g in family(SIZES, DEPTHS) if g.kind == "middle")
    alone = contrast_pvalue(base, head, middle.cells)
    joined = contrast_pvalue(base, head, middle.cells, history)
    assert joined < alone
    assert joined < 1e-3


@pytest.mark.slow
def test_cross_run_false_alarms_with_history_stay_within_alpha() -> None:
    """As above with the six stored runs in the contrast, each at its own level (sd 0.6)."""
    rng = random.Random(31)
    prs, blocked = 300, 0
    groups = family(SIZES, DEPTHS)
    for _ in range(prs):
        history = [_run(rng, 0.8, rng.gauss(0, 0.6)) for _ in range(6)]
        base, head = _run(rng, 0.8, rng.gauss(0, 0.6)), _run(rng, 0.8, rng.gauss(0, 0.6))
        spread = estimate_spread([*history, base])
        pvalues = [contrast_pvalue(base, head, g.cells, history) for g in groups]
        pvalues.append(uniform_pvalue(base, head, spread))
        blocked += min(pvalues) <= 0.01 / len(pvalues)
    assert blocked <= 9


def test_a_u_shaped_base_is_priced_cell_by_cell() -> None:
    """Edges near 1 carry little information: the contrast against them has less power than a
    flat base at the middle's rate would promise."""
    common: dict[str, Any] = {
        "base_n": 140,
        "head_n": 60,
        "drop": 0.2,
        "level": 0.0008,
        "spread": RunSpread.prior(),
    }
    flat = contrast_power([0.65] * 9, [0.65] * 6, **common)
    u_shape = contrast_power([0.65] * 9, [0.95] * 6, **common)
    assert u_shape < flat


def test_a_plan_against_a_lone_base_from_another_run_states_its_lower_power() -> None:
    plan = functools.partial(
        plan_run,
        sizes=SIZES,
        depths=DEPTHS,
        trials="auto",
        threshold=0.8,
        alpha=0.01,
        min_drop=0.2,
        base={k: (19, 20) for k in CELLS},
    )
    lone = plan(spread=RunSpread.prior(), base_trials=20)
    stored = plan(spread=RunSpread(0.3, 7, "moments"), base_trials=140)
    assert lone.trials == 40  # twice the base side's trials: more would buy little
    assert lone.power < 0.95
    assert stored.power >= 0.95
    assert stored.detectable_drop is not None
    assert lone.detectable_drop is not None
    assert stored.detectable_drop < lone.detectable_drop
