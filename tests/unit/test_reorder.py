"""The reorder A/B's words: what the comment and the terminal say about the edge_order arm."""

from __future__ import annotations

from needle_action.report.reorder import describe_reorder as describe
from needle_action.results import ReorderDepth


def row(depth: float, a: tuple[int, int], b: tuple[int, int], style: str = "codeword") -> ReorderDepth:
    return ReorderDepth(
        style=style,
        depth=depth,
        hits=a[0],
        trials=a[1],
        rate=a[0] / a[1] if a[1] else None,
        edge_hits=b[0],
        edge_trials=b[1],
        edge_rate=b[0] / b[1] if b[1] else None,
    )


def test_lift_lower_and_leave_are_told_apart_with_their_counts():
    text = describe([row(0.5, (8, 20), (17, 20)), row(0.25, (10, 10), (9, 10)), row(0.75, (5, 10), (5, 10))])
    assert text == (
        "edge_order would lift depth 0.5 from 40% to 85% (17/20 vs 8/20); "
        "lower depth 0.25 from 100% to 90% (9/10 vs 10/10); leave depth 0.75 at 50% (5/10 vs 5/10)"
    )


def test_an_arm_that_never_ran_says_nothing_and_styles_are_named_when_several():
    assert describe([row(0.5, (8, 20), (0, 0))]) == ""
    two = describe(
        [row(0.5, (1, 4), (3, 4)), row(0.5, (1, 4), (2, 4), style="gold")], style=lambda s: f"<{s}>"
    )
    assert "depth 0.5 (<codeword>) from 25% to 75%" in two
    assert "depth 0.5 (<gold>) from 25% to 50%" in two
