"""One recall cell's verdict: the pass/fail/undecided rule, early stopping, effective context length.

Stdlib only. Every function is pure, so the engine, the report and the compare stage agree.

The cell rule (documented in docs/recall.md)
--------------------------------------------
A cell (size x depth) plans ``planned`` trials and has a ``threshold`` (minimum recall rate).
Judged on the *planned* trials, with ``quota = ceil(threshold * planned)``:

* **pass**      — hits >= quota (the cell met the bar on its planned trials);
* **fail**      — below the quota *and* the Wilson 95% upper bound of hits/planned is below the
  threshold, i.e. the rate is demonstrably below the bar, not just unlucky;
* **undecided** — below the quota but the interval still reaches the threshold (too few trials to
  tell); also any cell whose remaining trials could still change its status (a capped or
  interrupted run).

The status only grows with hits (fail < undecided < pass), so once the worst case (every remaining
trial misses) and the best case (every remaining trial hits) give the same status, no remaining
trial can change it: that is when a cell stops early. The verdict is therefore identical to the one
running every planned trial would give. For a binary pass/fail rule this is the classical
curtailment (``hits >= quota`` -> pass, ``misses > planned - quota`` -> fail); the three-way rule
stops a failing cell a little later, when its failure is also statistically clear.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence

from needle_action.results.base import CellStatus
from needle_action.stats.intervals import wilson_interval

_EPS = 1e-9  # threshold * planned is computed in floating point: 0.8 * 5 must give quota 4, not 5


def quota(threshold: float, planned: int) -> int:
    """Hits needed out of ``planned`` trials to reach ``threshold``."""
    return max(0, math.ceil(threshold * planned - _EPS))


@functools.lru_cache(maxsize=65536)  # pure and hot: the scheduler asks it for every pick
def final_status(hits: int, planned: int, threshold: float) -> CellStatus:
    """Status of a cell that ran all its ``planned`` trials."""
    if hits >= quota(threshold, planned):
        return "pass"
    if wilson_interval(hits, planned)[1] < threshold:
        return "fail"
    return "undecided"


def _bounds(hits: int, trials: int, planned: int, threshold: float) -> tuple[CellStatus, CellStatus]:
    remaining = max(0, planned - trials)
    return final_status(hits, planned, threshold), final_status(hits + remaining, planned, threshold)


def cell_status(hits: int, trials: int, planned: int, threshold: float) -> CellStatus:
    """Status now: the final status when the remaining trials cannot change it, else undecided."""
    worst, best = _bounds(hits, trials, planned, threshold)
    return worst if worst == best else "undecided"


def is_decided(hits: int, trials: int, planned: int, threshold: float) -> bool:
    """True once no outcome of the remaining planned trials can change the cell's status."""
    worst, best = _bounds(hits, trials, planned, threshold)
    return worst == best


def _segments(planned: int, threshold: float) -> list[tuple[int, int]]:
    """Final hit counts grouped by status: inclusive (low, high) ranges, fail then undecided then pass."""
    out: list[tuple[int, int]] = []
    start = 0
    for h in range(1, planned + 2):
        if h > planned or final_status(h, planned, threshold) != final_status(start, planned, threshold):
            out.append((start, h - 1))
            start = h
    return out


def trials_to_decide(hits: int, trials: int, planned: int, threshold: float) -> int:
    """Fewest further outcomes after which the cell could be decided (0 when already decided).

    The scheduler never has more trials of a cell in flight than this, so no call is spent that
    sequential early stopping would have saved. A cell can settle on any status, "undecided"
    included (e.g. hits that can neither reach the quota nor fall clearly below the threshold).
    """
    remaining = max(0, planned - trials)
    if is_decided(hits, trials, planned, threshold):
        return 0
    segments = _segments(planned, threshold)
    for k in range(1, remaining + 1):
        left = remaining - k  # trials still open after k more outcomes
        # decided after k outcomes with x hits in total iff x and x + left share a status segment
        for low, high in segments:
            if max(low, hits) <= min(hits + k, high - left):
                return k
    return remaining


def effective_context(sizes: Sequence[int], status_by_size: Mapping[int, Iterable[str]]) -> int | None:
    """RULER-style effective length: the largest size such that it and every smaller size pass at
    every depth. ``None`` when even the smallest size does not."""
    best = None
    for size in sorted(sizes):
        statuses = list(status_by_size.get(size, ()))
        if not statuses or any(s != "pass" for s in statuses):
            break
        best = size
    return best


def effective_context_relative(
    sizes: Sequence[int], worst_rate_by_size: Mapping[int, float | None], threshold: float
) -> int | None:
    """Largest size (contiguous from the smallest) whose worst-depth rate stays at or above
    ``threshold`` times the smallest size's worst-depth rate: how far the model keeps its own
    short-context performance, meaningful even for a model that misses the absolute bar."""
    ordered = sorted(sizes)
    if not ordered:
        return None
    ref = worst_rate_by_size.get(ordered[0])
    if ref is None or ref <= 0:
        return None
    best = None
    for size in ordered:
        rate = worst_rate_by_size.get(size)
        if rate is None or rate + _EPS < threshold * ref:
            break
        best = size
    return best
