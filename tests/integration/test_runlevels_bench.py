"""The cross-run replay of issue 31 (``bench/runlevels.py``): its generator gives every run its own
level, and on a seeded sample the decisions it replays show what the benchmark table says: today's
test blocks unchanged prompts when the base comes from another run, the run-level model does not."""

from __future__ import annotations

import math

import numpy as np
import pytest

import bench.runlevels as runlevels
from bench.runlevels import (
    CROSS,
    CURVES,
    HISTORY,
    HISTORY_RUNS,
    MIDDLE_CELLS,
    SAME,
    Row,
    RowTally,
    draw_head,
    draw_runs,
    gap_stderr,
    pooled_tally,
    power_companion,
    run_row,
)
from bench.verdicts import CELLS


def test_the_same_job_shares_a_level_and_another_run_does_not():
    flat8 = CURVES[0]
    rng = np.random.default_rng(3)
    same = draw_runs(rng, Row(flat8, 0.6, SAME), 4000)
    cross = draw_runs(np.random.default_rng(3), Row(flat8, 0.6, CROSS), 4000)
    # same job: the head's logit offset is the base's level + the shared seed effect, so the base's
    # mean hit rate follows it; another run: it does not (beyond the shared seed effect)
    base_rate_same = same.base.mean(axis=(1, 2))
    base_rate_cross = cross.base.mean(axis=(1, 2))
    corr_same = np.corrcoef(base_rate_same, same.head_logit[:, 0, 0])[0, 1]
    corr_cross = np.corrcoef(base_rate_cross, cross.head_logit[:, 0, 0])[0, 1]
    assert corr_same > 0.8, corr_same
    assert corr_cross < 0.6 * corr_same, (corr_cross, corr_same)
    assert same.history is None


def test_history_runs_each_have_their_own_level():
    d = draw_runs(np.random.default_rng(5), Row(CURVES[0], 0.6, HISTORY), 1500)
    assert d.history is not None
    assert d.history.shape[:2] == (1500, HISTORY_RUNS)
    rates = d.history.mean(axis=(2, 3))  # [pr, run]
    # runs of one PR differ by more than binomial noise: sd of a run's rate ~ 0.6 * 0.8 * 0.2 on the
    # rate scale from the level alone, against sqrt(0.16 / 300) ~ 0.023 from 300 trials
    assert rates.std(axis=1).mean() > 0.06
    flat = draw_runs(np.random.default_rng(5), Row(CURVES[0], 0.0, HISTORY), 1500)
    assert flat.history is not None
    # without a run level only the seed effect (sd 0.3) and binomial noise remain
    assert flat.history.mean(axis=(2, 3)).std(axis=1).mean() < rates.std(axis=1).mean()


@pytest.mark.slow
def test_todays_test_blocks_unchanged_prompts_against_another_runs_base():
    t = run_row(Row(CURVES[0], 0.6, CROSS), 300, seed=11, decider="today", stated_prs=0)
    assert t.blocked / t.prs > 0.08, t  # the benchmark: 21.5% on 2,000 PRs


@pytest.mark.slow
def test_the_run_level_model_keeps_false_blocks_down_with_history():
    t = run_row(Row(CURVES[0], 0.6, HISTORY), 150, seed=12, decider="runs", stated_prs=3)
    assert t.stated_prs == 3
    assert 0.5 < t.stated_power / t.stated_prs <= 1.0  # the comparison's simulated figure
    # at most 1% by design: not significantly above it (one-sided binomial test at 0.001)
    tail = sum(math.comb(t.prs, i) * 0.01**i * 0.99 ** (t.prs - i) for i in range(t.blocked, t.prs + 1))
    assert tail > 0.001, t


@pytest.mark.parametrize("run_sd", [0.0, 0.6])
def test_a_power_companion_drops_20_points_at_the_head_runs_own_level(run_sd):
    """What the stated power is for: 20 probability points off every middle trial of the head,
    whatever level its run answers at (taken off the curve before the level, a run answering better
    would lose fewer points and one answering worse more)."""
    flat8 = CURVES[0]
    companion = Row(power_companion(flat8, 0.2), run_sd, CROSS, flat8.name, 0.2)
    rng = np.random.default_rng(21)
    d = draw_runs(rng, companion, 3000)
    draw_head(rng, d, 40)
    middle = np.array([k in set(MIDDLE_CELLS) for k in CELLS])
    rates = d.head.mean(axis=2)  # [pr, cell]
    gap = rates[:, ~middle].mean(axis=1) - rates[:, middle].mean(axis=1)  # per PR: at its own level
    assert abs(gap.mean() - 0.2) < 0.01
    unchanged = Row(flat8, run_sd, CROSS)
    plain = draw_runs(np.random.default_rng(21), unchanged, 3000)
    draw_head(np.random.default_rng(21), plain, 40)
    assert abs(plain.head.mean(axis=2)[:, middle].mean() - plain.head.mean(axis=2)[:, ~middle].mean()) < 0.01


def test_two_seeds_of_a_row_pool_into_one_tally():
    """More PRs a row from runs at other seeds: the pooled tally is the two runs' sums, so its rates
    are the PR-weighted mean of theirs."""
    a = run_row(Row(CURVES[2], 0.0, SAME), 40, seed=5, decider="today", stated_prs=0)
    b = run_row(Row(CURVES[2], 0.0, SAME), 60, seed=6, decider="today", stated_prs=0)
    both = pooled_tally(a, b)
    assert both.prs == 100
    assert both.blocked == a.blocked + b.blocked
    assert both.head_calls == a.head_calls + b.head_calls
    assert both.planned == a.planned + b.planned
    assert math.isclose(both.planned_power, a.planned_power + b.planned_power)


def test_the_gap_between_stated_and_measured_power_has_its_standard_error():
    stated = RowTally(stated_power=0.5 + 0.7, stated_prs=2, stated_squares=0.25 + 0.49, squared_prs=2)
    assert math.isclose(stated.stated_stderr() or 0.0, 0.1)  # sample sd 0.1414 over sqrt(2)
    companion = RowTally(prs=100, blocked=50)
    assert math.isclose(gap_stderr(stated, companion) or 0.0, math.sqrt(0.01 + 0.0025))
    assert RowTally(stated_power=1.2, stated_prs=2).stated_stderr() is None  # saved without squares


def test_without_seed_effects_a_run_at_sd_0_answers_exactly_on_the_curve(monkeypatch):
    """``--seed-sd 0``: a run's offset is its level alone, so with run sd 0 the head sits on the curve
    and the stored runs' spread is nothing but their trials; with seed effects it is not."""
    u_shape = CURVES[1]
    monkeypatch.setattr(runlevels, "SEED_SD", 0.0)
    plain = draw_runs(np.random.default_rng(5), Row(u_shape, 0.0, HISTORY), 200)
    curve = runlevels._curve(u_shape.head)
    assert np.allclose(plain.head_logit, np.broadcast_to(curve, plain.head_logit.shape))
    monkeypatch.setattr(runlevels, "SEED_SD", 0.3)
    seeded = draw_runs(np.random.default_rng(5), Row(u_shape, 0.0, HISTORY), 200)
    offsets = (seeded.head_logit - curve)[:, 0, 0]
    assert 0.2 < offsets.std() < 0.4  # the seed's effect, shared by the base and the head
