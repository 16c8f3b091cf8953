"""Groups of cells: what the comparison tests and the diagnosis reads, instead of single cells.

A cell (size x depth) holds a few dozen trials at most: too few to say much alone, and a grid of
15 cells tested one by one adds up false alarms. So cells are pooled:

* one group per **depth** (that depth at every size): where in the context recall is lost;
* one group per **size** (that size at every depth): from which length recall is lost;
* the **middle** (every depth strictly between the first and the last, at every size): the
  lost-in-the-middle region, and the group a run's trials are planned for.

Groups with the same cells are kept once (one size: the size group is the whole grid). Pure
functions of the grid; ``needle_action.compare.recall`` and ``needle_action.recall.diagnose``
both build their groups here, so they always mean the same thing.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from needle_action.stats.intervals import family_z, wilson_interval

CellKey = tuple[int, float]  # (size, depth)
GroupKind = Literal["middle", "depth", "size", "all"]  # all: the whole grid (runs apart)
Standing = Literal["above", "near", "below"]  # interval wholly above / around / wholly below the bar


@dataclass(frozen=True)
class Group:
    kind: GroupKind
    label: str  # "middle depths (25%-75%)", "depth 50%", "8,000 tokens"
    cells: tuple[CellKey, ...]
    value: float = 0.0  # the depth or the size it stands for (0 for the middle)


def cell_key(size: int, depth: float) -> CellKey:
    return (int(size), round(float(depth), 6))


def _pct(depth: float) -> str:
    return f"{depth * 100:.0f}%"


def middle_depths(depths: Sequence[float]) -> list[float]:
    ordered = sorted(set(depths))
    return ordered[1:-1] if len(ordered) >= 3 else []


def family(sizes: Sequence[int], depths: Sequence[float]) -> list[Group]:
    """Every group one comparison tests: the middle, each depth, each size (duplicates dropped)."""
    return list(_family(tuple(sorted(set(sizes))), tuple(sorted(set(depths)))))


@functools.lru_cache(maxsize=256)
def _family(sizes: tuple[int, ...], depths: tuple[float, ...]) -> tuple[Group, ...]:
    groups: list[Group] = []
    middle = middle_depths(depths)
    if middle:
        label = (
            f"middle depths ({_pct(middle[0])}-{_pct(middle[-1])})"
            if len(middle) > 1
            else (f"middle depth ({_pct(middle[0])})")
        )
        groups.append(Group("middle", label, tuple(cell_key(s, d) for s in sizes for d in middle)))
    for d in depths:
        groups.append(Group("depth", f"depth {_pct(d)}", tuple(cell_key(s, d) for s in sizes), d))
    for s in sizes:
        groups.append(Group("size", f"{s:,} tokens", tuple(cell_key(s, d) for d in depths), s))
    unique: list[Group] = []
    seen: set[frozenset[CellKey]] = set()
    for g in groups:
        key = frozenset(g.cells)
        if key not in seen:
            seen.add(key)
            unique.append(g)
    return tuple(unique)


def planning_group(sizes: Sequence[int], depths: Sequence[float]) -> Group:
    """The group trials are planned for: the middle when the grid has one, else the whole grid."""
    groups = family(sizes, depths)
    middle = [g for g in groups if g.kind == "middle"]
    if middle:
        return middle[0]
    everything = tuple(cell_key(s, d) for s in sorted(set(sizes)) for d in sorted(set(depths)))
    return Group("size", "all cells", everything)


def whole_grid(sizes: Sequence[int], depths: Sequence[float]) -> Group:
    """Every cell as one group: what a change of the whole run's level moves (stats/runs.py)."""
    cells = tuple(cell_key(s, d) for s in sorted(set(sizes)) for d in sorted(set(depths)))
    return Group("all", "every cell (the run's level)", cells)


def pooled(counts: Mapping[CellKey, tuple[int, int]], cells: Sequence[CellKey]) -> tuple[int, int]:
    """(hits, trials) summed over CELLS (cells missing from COUNTS count as nothing)."""
    hits = trials = 0
    for key in cells:
        h, n = counts.get(key, (0, 0))
        hits, trials = hits + h, trials + n
    return hits, trials


@dataclass(frozen=True)
class Estimate:
    """A pooled rate with its family-corrected Wilson interval and where it stands to the bar."""

    hits: int
    trials: int
    rate: float | None
    low: float
    high: float
    standing: Standing


def estimate(hits: int, trials: int, *, threshold: float, z: float) -> Estimate:
    low, high = wilson_interval(hits, trials, z=z)
    if trials and high < threshold:
        standing: Standing = "below"
    elif trials and low >= threshold:
        standing = "above"
    else:
        standing = "near"
    return Estimate(hits, trials, hits / trials if trials else None, low, high, standing)


def estimates(
    counts: Mapping[CellKey, tuple[int, int]], groups: Sequence[Group], *, threshold: float, family_size: int
) -> list[Estimate]:
    """Each group's pooled estimate, with intervals that hold jointly over FAMILY_SIZE groups."""
    z = family_z(family_size)
    return [estimate(*pooled(counts, g.cells), threshold=threshold, z=z) for g in groups]
