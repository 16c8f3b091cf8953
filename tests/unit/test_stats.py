"""Recall statistics: Wilson intervals, the three-way cell rule, early stopping that never changes a
verdict, effective context length, and the one-sided Fisher exact test."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from needle_action.stats import cells as stat_cells
from needle_action.stats import exact as stat_exact
from needle_action.stats import intervals as stat_intervals

THRESHOLDS = (0.5, 0.6, 0.75, 0.8, 0.9, 1.0)


# -- Wilson ---------------------------------------------------------------------------------


def test_wilson_known_values():
    # 3/5: p=0.6, z=1.96 -> textbook Wilson interval (0.2307, 0.8824)
    low, high = stat_intervals.wilson_interval(3, 5)
    assert low == pytest.approx(0.23072, abs=1e-4)
    assert high == pytest.approx(0.88238, abs=1e-4)
    assert stat_intervals.wilson_interval(5, 5) == (pytest.approx(0.56552, abs=1e-4), 1.0)
    assert stat_intervals.wilson_interval(0, 5) == (0.0, pytest.approx(0.43448, abs=1e-4))
    assert stat_intervals.wilson_interval(0, 0) == (0.0, 1.0)


def test_wilson_matches_scipy():
    scipy_stats = pytest.importorskip("scipy.stats")
    for n in (1, 2, 5, 13, 200):
        for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            ref = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
            low, high = stat_intervals.wilson_interval(k, n)
            assert low == pytest.approx(ref.low, abs=1e-9)
            assert high == pytest.approx(ref.high, abs=1e-9)


def test_wilson_rejects_impossible_counts():
    with pytest.raises(ValueError, match="hits must be between 0 and n"):
        stat_intervals.wilson_interval(6, 5)


# -- the cell rule ----------------------------------------------------------------------------


def test_quota_is_not_fooled_by_floating_point():
    assert stat_cells.quota(0.8, 5) == 4  # 0.8 * 5 = 4.000000000000001 in binary floating point
    assert stat_cells.quota(0.7, 10) == 7
    assert stat_cells.quota(0.81, 5) == 5
    assert stat_cells.quota(0.0, 5) == 0


def test_final_status_with_five_trials_at_80_percent():
    # the rule as documented: 0-2 hits fail, 3 is undecided (interval reaches 0.8), 4-5 pass
    assert [stat_cells.final_status(h, 5, 0.8) for h in range(6)] == [
        "fail",
        "fail",
        "fail",
        "undecided",
        "pass",
        "pass",
    ]


def test_fail_needs_the_interval_below_the_threshold():
    for n in (3, 5, 10, 20, 50):
        for thr in THRESHOLDS:
            for h in range(n + 1):
                status = stat_cells.final_status(h, n, thr)
                _low, high = stat_intervals.wilson_interval(h, n)
                if status == "pass":
                    assert h / n >= thr - 1e-12
                elif status == "fail":
                    assert high < thr
                else:
                    assert h / n < thr <= high


def test_status_only_grows_with_hits():
    order = {"fail": 0, "undecided": 1, "pass": 2}
    for n in range(1, 30):
        for thr in THRESHOLDS:
            ranks = [order[stat_cells.final_status(h, n, thr)] for h in range(n + 1)]
            assert ranks == sorted(ranks), (n, thr, ranks)


def _sequential_stop(outcomes: tuple[int, ...], thr: float) -> tuple[int, str]:
    """Run trials one by one, stop as soon as the cell is decided: (trials run, status then)."""
    planned = len(outcomes)
    hits = 0
    for i, o in enumerate(outcomes, start=1):
        hits += o
        if stat_cells.is_decided(hits, i, planned, thr):
            return i, stat_cells.cell_status(hits, i, planned, thr)
    return planned, stat_cells.cell_status(hits, planned, planned, thr)


@pytest.mark.parametrize("planned", range(1, 11))
def test_early_stopping_gives_the_verdict_of_all_trials_exhaustively(planned):
    """Every possible outcome sequence: stopping early never changes the status, and it saves calls."""
    saved = 0
    for thr in THRESHOLDS:
        for outcomes in itertools.product((0, 1), repeat=planned):
            run, status = _sequential_stop(outcomes, thr)
            assert status == stat_cells.final_status(sum(outcomes), planned, thr), (outcomes, thr)
            saved += planned - run
    if planned >= 3:
        assert saved > 0


def test_binary_curtailment_is_the_pass_side_of_the_rule():
    # hits >= quota decides "pass" at once, whatever is left
    for planned in range(1, 15):
        for thr in THRESHOLDS:
            q = stat_cells.quota(thr, planned)
            if q <= planned:
                assert stat_cells.cell_status(q, q, planned, thr) == "pass"
                assert stat_cells.is_decided(q, q, planned, thr)


def test_trials_to_decide_is_the_fewest_outcomes_that_can_decide():
    for planned in range(1, 9):
        for thr in (0.6, 0.8, 1.0):
            for done in range(planned + 1):
                for hits in range(done + 1):
                    d = stat_cells.trials_to_decide(hits, done, planned, thr)
                    decided = stat_cells.is_decided(hits, done, planned, thr)
                    assert (d == 0) == decided
                    if decided:
                        continue
                    # no continuation shorter than d decides; some continuation of length d does
                    for k in range(1, d):
                        for extra in range(k + 1):
                            assert not stat_cells.is_decided(hits + extra, done + k, planned, thr)
                    assert any(
                        stat_cells.is_decided(hits + extra, done + d, planned, thr) for extra in range(d + 1)
                    )


def test_partial_cells_are_undecided_until_settled():
    # 3 of 3 hits with 5 planned at 0.8: could still end 3/5 (undecided) -> undecided now
    assert stat_cells.cell_status(3, 3, 5, 0.8) == "undecided"
    # 0 of 3 with 5 planned: at best 2/5 -> fail already
    assert stat_cells.cell_status(0, 3, 5, 0.8) == "fail"
    # nothing run yet
    assert stat_cells.cell_status(0, 0, 5, 0.8) == "undecided"


# -- effective context ----------------------------------------------------------------------


def test_effective_context_is_the_largest_prefix_of_passing_sizes():
    sizes = [2000, 8000, 32000]
    ok = ["pass"] * 5
    assert stat_cells.effective_context(sizes, {2000: ok, 8000: ok, 32000: ok}) == 32000
    assert stat_cells.effective_context(sizes, {2000: ok, 8000: ok, 32000: ["pass", "fail"]}) == 8000
    assert stat_cells.effective_context(sizes, {2000: ["undecided"], 8000: ok, 32000: ok}) is None
    # a pass above a failing size does not count (RULER: performance must hold up to the length)
    assert stat_cells.effective_context(sizes, {2000: ok, 8000: ["fail"], 32000: ok}) == 2000


def test_effective_context_relative_uses_the_short_context_score():
    sizes = [1000, 2000, 4000, 8000]
    worst = {1000: 0.5, 2000: 0.45, 4000: 0.3, 8000: 0.5}
    # 0.8 * 0.5 = 0.4: 1000 and 2000 keep it, 4000 does not
    assert stat_cells.effective_context_relative(sizes, worst, 0.8) == 2000
    assert stat_cells.effective_context_relative(sizes, {1000: 0.0, 2000: 0.0}, 0.8) is None
    assert (
        stat_cells.effective_context_relative(sizes, {1000: 1.0, 2000: 1.0, 4000: 0.8, 8000: 0.79}, 0.8)
        == 4000
    )


# -- Fisher -----------------------------------------------------------------------------------


def test_fisher_by_hand():
    # Fisher's tea-tasting table [[3, 1], [1, 3]]: one-sided p = 17/70
    assert stat_exact.fisher_drop_pvalue(3, 4, 1, 4) == pytest.approx(17 / 70)
    assert stat_exact.fisher_drop_pvalue(5, 5, 0, 5) == pytest.approx(1 / math.comb(10, 5))
    assert stat_exact.fisher_drop_pvalue(0, 5, 5, 5) == pytest.approx(1.0)
    assert stat_exact.fisher_drop_pvalue(3, 5, 3, 5) > 0.5
    assert stat_exact.fisher_drop_pvalue(0, 0, 3, 5) == 1.0


def _scipy_tables(seed: int, n: int, base_max: int, head_max: int):
    """N random (base hits, base trials, head hits, head trials) and scipy's one-sided Fisher p-value
    of each: rows head, base; columns hit, miss; "less": head's odds of a hit are lower."""
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = random.Random(seed)
    for _ in range(n):
        bn, hn = rng.randint(1, base_max), rng.randint(1, head_max)
        bh, hh = rng.randint(0, bn), rng.randint(0, hn)
        yield (
            (bh, bn, hh, hn),
            scipy_stats.fisher_exact([[hh, hn - hh], [bh, bn - bh]], alternative="less").pvalue,
        )


def test_fisher_matches_scipy_on_random_tables():
    for counts, ref in _scipy_tables(3, 300, 40, 40):
        assert stat_exact.fisher_drop_pvalue(*counts) == pytest.approx(ref, rel=1e-9, abs=1e-12)


def test_fisher_rejects_impossible_counts():
    with pytest.raises(ValueError, match="base: hits must be between 0 and n"):
        stat_exact.fisher_drop_pvalue(6, 5, 1, 5)


# -- groups: exact stratified test, Holm ----------------------------------------------------------


def _brute_force_stratified(strata) -> float:
    """P(total head hits <= observed) by enumerating every table of every stratum."""
    dists = []
    for bh, bn, hh, hn in strata:
        total, n = bh + hh, bn + hn
        dists.append(
            {
                k: math.comb(total, k) * math.comb(n - total, hn - k) / math.comb(n, hn)
                for k in range(max(0, total - bn), min(total, hn) + 1)
            }
        )
    observed = sum(s[2] for s in strata)
    p = 0.0
    for combo in itertools.product(*[d.items() for d in dists]):
        if sum(k for k, _ in combo) <= observed:
            p += math.prod(q for _, q in combo)
    return p


def test_stratified_test_is_fisher_for_one_stratum_and_exact_for_several():
    rng = random.Random(5)
    for _ in range(60):
        strata = []
        for _ in range(rng.randint(1, 3)):
            bn, hn = rng.randint(1, 7), rng.randint(1, 7)
            strata.append((rng.randint(0, bn), bn, rng.randint(0, hn), hn))
        assert stat_exact.stratified_drop_pvalue(strata) == pytest.approx(
            _brute_force_stratified(strata), rel=1e-9
        )
    assert stat_exact.stratified_drop_pvalue([(3, 4, 1, 4)]) == pytest.approx(17 / 70)
    assert stat_exact.stratified_drop_pvalue([(3, 0, 0, 0)][:0]) == 1.0
    assert stat_exact.stratified_drop_pvalue([(0, 0, 2, 5)]) == 1.0  # a side with no trial says nothing


def test_stratified_test_matches_scipy_fisher_on_one_stratum():
    for counts, ref in _scipy_tables(8, 100, 300, 60):
        assert stat_exact.stratified_drop_pvalue([counts]) == pytest.approx(ref, rel=1e-7, abs=1e-13)


def test_stratification_keeps_rates_that_differ_by_size_apart():
    # base: 20/20 at small, 0/20 at large; head the same: no drop in either stratum
    strata = [(20, 20, 20, 20), (0, 20, 0, 20)]
    assert stat_exact.stratified_drop_pvalue(strata) == pytest.approx(1.0)
    # a real drop in one stratum is seen through the other
    assert stat_exact.stratified_drop_pvalue([(20, 20, 8, 20), (0, 20, 0, 20)]) < 1e-4


def test_holm_step_down():
    assert stat_exact.holm_rejections([0.001, 0.02, 0.04], 0.05) == [True, True, True]
    assert stat_exact.holm_rejections([0.001, 0.03, 0.04], 0.05) == [True, False, False]  # 0.03 > 0.05/2
    assert stat_exact.holm_rejections([0.02, 0.001], 0.05) == [True, True]
    assert stat_exact.holm_rejections([0.2, 0.5], 0.05) == [False, False]
    assert stat_exact.holm_rejections([], 0.05) == []


def test_family_z_widens_with_the_family():
    assert stat_intervals.family_z(1) == pytest.approx(stat_intervals.Z95, abs=1e-6)
    assert stat_intervals.family_z(9) > stat_intervals.family_z(3) > stat_intervals.family_z(1)
