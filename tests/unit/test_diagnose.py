"""Diagnosis of a recall grid from pooled estimates: each kind from a grid that has its shape, one
unlucky cell does not change the class, and the effective context comes with its range."""

from __future__ import annotations

import pytest

from needle_action.recall.diagnose import diagnose, read_grid
from needle_action.results import RecallCell
from needle_action.stats import cells as stat_cells
from needle_action.stats import intervals as stat_intervals

SIZES = [2000, 8000, 32000]
DEPTHS = [0.0, 0.25, 0.5, 0.75, 1.0]
THR = 0.8
ALPHA = 0.01
N = 20


def cell(size: int, depth: float, hits: int, trials: int = N, planned: int = N) -> RecallCell:
    low, high = stat_intervals.wilson_interval(hits, trials)
    return RecallCell(
        size=size,
        depth=depth,
        hits=hits,
        trials=trials,
        planned_trials=planned,
        rate=hits / trials if trials else None,
        ci_low=low,
        ci_high=high,
        status=stat_cells.cell_status(hits, trials, planned, THR),
    )


def grid(hits_of) -> list[RecallCell]:
    return [cell(s, d, hits_of(s, d)) for s in SIZES for d in DEPTHS]


def run(cells, partial: bool = False, reason: str | None = None):
    reading = read_grid(cells, threshold=THR, alpha=ALPHA, partial=partial)
    return reading, diagnose(reading, threshold=THR, planned_trials=N, partial_reason=reason)


def test_all_pass():
    reading, d = run(grid(lambda s, d: 19))
    assert d.kind == "all-pass"
    assert not reading.fails
    assert "32,000 tokens" in d.summary
    assert reading.effective_context == 32000
    assert reading.effective_high is None


def test_one_unlucky_cell_does_not_change_the_class():
    # 13/20 alone would be a failing cell; pooled with its neighbours the depth holds
    _reading, d = run(grid(lambda s, d: 13 if (s, d) == (8000, 0.25) else 20))
    assert d.kind == "all-pass"


def test_lost_in_the_middle():
    reading, d = run(grid(lambda s, d: 19 if d in (0.0, 1.0) else (3 if d == 0.5 else 12)))
    assert d.kind == "lost-in-the-middle"
    assert reading.fails
    assert "50%" in d.summary
    assert "n=60" in d.summary
    assert "edge_order" in d.fix
    assert "question last" in d.fix
    assert reading.effective_context is None  # the middle fails already at the smallest size


def test_a_lost_start_is_mixed_not_lost_in_the_middle():
    _, d = run(grid(lambda s, d: 3 if d in (0.0, 0.5) else 19))
    assert d.kind == "mixed-failure"


def test_size_limited_names_the_effective_length_with_its_range():
    reading, d = run(grid(lambda s, d: 19 if s < 32000 else 1))
    assert d.kind == "size-limited"
    assert reading.effective_context == 8000
    assert reading.effective_high == 32000
    assert reading.effective_low == 8000  # 2,000 and 8,000 are demonstrably above the bar
    assert "8,000 tokens" in d.summary
    assert "from 32,000 tokens" in d.summary
    assert "8,000 tokens" in d.fix
    assert "larger effective window" in d.fix


def test_size_limited_from_the_smallest_size():
    reading, d = run(grid(lambda s, d: 2))
    assert d.kind == "size-limited"
    assert reading.effective_context is None
    assert "smallest size" in d.summary


def test_edges_that_hold_at_large_sizes_are_not_size_limited():
    # every size's row is low because the middle is lost, but the edges hold everywhere
    _, d = run(grid(lambda s, d: 19 if d in (0.0, 1.0) else 4))
    assert d.kind == "lost-in-the-middle"


def test_flaky_when_recall_sits_at_the_threshold():
    _, d = run(grid(lambda s, d: 16 if d != 0.5 else 15))
    assert d.kind == "flaky"
    assert "recall.trials" in d.fix


def test_inconclusive_when_the_run_was_cut_short():
    cells = [cell(s, d, 2, trials=2) for s in SIZES for d in DEPTHS]
    reading, d = run(cells, partial=True, reason="max_calls (30) reached")
    assert d.kind == "inconclusive"
    assert not reading.fails
    assert "max_calls (30) reached" in d.summary
    assert "max_calls" in d.fix


def test_inconclusive_when_nothing_ran():
    _, d = run([cell(s, d, 0, trials=0) for s in SIZES for d in DEPTHS])
    assert d.kind == "inconclusive"


def test_middle_fails_at_small_sizes_and_everything_at_large_is_mixed():
    def hits(s, d):
        if s == 32000:
            return 0
        return 2 if d == 0.5 else 20

    _, d = run(grid(hits))
    assert d.kind == "mixed-failure"
    assert "32,000 tokens 0%" in d.summary
    assert "edge_order" in d.fix
    assert "larger effective window" in d.fix


@pytest.mark.parametrize(
    ("hits", "trials", "kind", "said", "not_said"),
    [
        # every cell 3/3: the whole grid's interval cannot clear 80% at one-sided 95% with n=3 a
        # cell over a 1x3 grid, yet nothing sits at the bar: all-pass, saying how much the trials show
        pytest.param(3, 3, "all-pass", ["100% (at least", "n=9"], [], id="perfect-few-trials-all-pass"),
        # no group under the bar by its rate, but the grid is too small to be shown above it: flaky,
        # with the whole grid's rate as the reason instead of an empty list
        pytest.param(4, 5, "flaky", ["whole grid", "n=15"], [": ."], id="flaky-never-an-empty-list"),
    ],
)
def test_a_small_grid_above_the_bar_says_what_its_trials_show(hits, trials, kind, said, not_said):
    cells = [cell(2000, d, hits, trials=trials, planned=trials) for d in (0.0, 0.5, 1.0)]
    _, d = run(cells)
    assert d.kind == kind
    for text in said:
        assert text in d.summary
    for text in not_said:
        assert text not in d.summary
