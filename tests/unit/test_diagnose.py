"""Diagnosis of a recall grid: each kind from a grid that has its shape, with a fix that fits it."""

from __future__ import annotations

from needle_action.recall import stats
from needle_action.recall.diagnose import diagnose
from needle_action.results import RecallCell

SIZES = [2000, 8000, 32000]
DEPTHS = [0.0, 0.25, 0.5, 0.75, 1.0]
THR = 0.8


def cell(size: int, depth: float, hits: int, trials: int = 5, planned: int = 5) -> RecallCell:
    low, high = stats.wilson_interval(hits, trials)
    return RecallCell(
        size=size,
        depth=depth,
        hits=hits,
        trials=trials,
        planned_trials=planned,
        rate=hits / trials if trials else None,
        ci_low=low,
        ci_high=high,
        status=stats.cell_status(hits, trials, planned, THR),
    )


def grid(hits_of) -> list[RecallCell]:
    return [cell(s, d, hits_of(s, d)) for s in SIZES for d in DEPTHS]


def run(cells, **kw):
    sizes = sorted({c.size for c in cells})
    by = {s: [c.status for c in cells if c.size == s] for s in sizes}
    kw.setdefault("effective_context", stats.effective_context(sizes, by))
    return diagnose(cells, threshold=THR, planned_trials=5, **kw)


def test_all_pass():
    d = run(grid(lambda s, d: 5))
    assert d.kind == "all-pass"
    assert "32,000 tokens" in d.summary


def test_lost_in_the_middle():
    d = run(grid(lambda s, d: 5 if d in (0.0, 1.0) else (1 if d == 0.5 else 4)))
    assert d.kind == "lost-in-the-middle"
    assert "50%" in d.summary
    assert "edge_order" in d.fix and "question last" in d.fix


def test_lost_in_the_middle_tolerates_undecided_edges_but_not_failing_ones():
    cells = grid(lambda s, d: 1 if d == 0.5 else (3 if d == 0.0 else 5))  # 3/5 at the start: undecided
    assert run(cells).kind == "lost-in-the-middle"
    cells = grid(lambda s, d: 1 if d in (0.0, 0.5) else 5)  # the start is lost too
    assert run(cells).kind == "mixed-failure"


def test_size_limited_names_the_effective_length():
    d = run(grid(lambda s, d: 5 if s < 32000 else 0))
    assert d.kind == "size-limited"
    assert "8,000 tokens" in d.summary and "from 32,000 tokens" in d.summary
    assert "8,000 tokens" in d.fix and "larger effective window" in d.fix


def test_size_limited_from_the_smallest_size():
    d = run(grid(lambda s, d: 0))
    assert d.kind == "size-limited"
    assert "smallest size" in d.summary


def test_size_limited_allows_undecided_cells_beyond_the_cutoff():
    d = run(grid(lambda s, d: 5 if s == 2000 else (3 if d == 0.0 else 1)))
    assert d.kind == "size-limited"
    assert "2,000 tokens" in d.summary


def test_flaky_when_nothing_fails_but_cells_cannot_be_decided():
    d = run(grid(lambda s, d: 3 if (s, d) in ((8000, 0.5), (32000, 0.25)) else 5))
    assert d.kind == "flaky"
    assert "2 cell(s)" in d.summary
    assert "recall.trials" in d.fix


def test_inconclusive_when_a_partial_run_left_cells_undecided():
    cells = [cell(s, d, 2, trials=2) for s in SIZES for d in DEPTHS]  # 2/2 of 5 planned: undecided
    d = run(cells, partial=True, partial_reason="max_calls (30) reached")
    assert d.kind == "inconclusive"
    assert "max_calls (30) reached" in d.summary
    assert "max_calls" in d.fix


def test_inconclusive_when_nothing_ran():
    d = run([cell(s, d, 0, trials=0) for s in SIZES for d in DEPTHS])
    assert d.kind == "inconclusive"


def test_a_partial_run_whose_cells_all_settled_is_diagnosed_normally():
    cells = grid(lambda s, d: 5 if s < 32000 else 0)
    assert run(cells, partial=True, partial_reason="max_calls (75) reached").kind == "size-limited"


def test_middle_fails_at_small_sizes_and_everything_at_large_is_mixed():
    def hits(s, d):
        if s == 32000:
            return 0
        return 1 if d == 0.5 else 5

    d = run(grid(hits))
    assert d.kind == "mixed-failure"
    assert "32,000 tokens: depth 0%" in d.summary
    assert "edge_order" in d.fix and "larger effective window" in d.fix
