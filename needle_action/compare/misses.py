"""The model's own answers where recall fell: a few sampled misses of the head in each group that
regressed or is below the threshold, each beside a hit of the base at the same cell.

The fastest way for a reviewer to see *how* it fails: it abstains, answers a look-alike, or invents a
value. Raw text here; the report caps and sanitises it.
"""

from __future__ import annotations

from collections.abc import Sequence

from needle_action.compare.models import GroupMisses, MissSample, RecallComparison
from needle_action.results import RecallCell, RecallResult
from needle_action.stats.groups import CellKey, cell_key, family

MISSES_PER_GROUP = 3
BELOW_LABEL = "cells below the threshold"


def _cells(result: RecallResult | None) -> dict[tuple[str, int, float], RecallCell]:
    if result is None:
        return {}
    return {(c.style, *cell_key(c.size, c.depth)): c for c in result.cells}


def _sample(
    style: str,
    keys: Sequence[CellKey],
    head: dict[tuple[str, int, float], RecallCell],
    base: dict[tuple[str, int, float], RecallCell],
) -> list[MissSample]:
    """Up to three misses, one cell at a time (worst head rate first) so they show different cells."""
    cells = [head[(style, *k)] for k in keys if (style, *k) in head]
    cells.sort(key=lambda c: (c.rate if c.rate is not None else 1.0, c.size, c.depth))
    queues = [[a for a in c.answers if not a.hit] for c in cells]
    out: list[MissSample] = []
    while len(out) < MISSES_PER_GROUP and any(queues):
        for cell, queue in zip(cells, queues, strict=True):
            if queue and len(out) < MISSES_PER_GROUP:
                a = queue.pop(0)
                twin = base.get((style, *cell_key(cell.size, cell.depth)))
                hit = next((b.answer for b in twin.answers if b.hit), None) if twin is not None else None
                out.append(
                    MissSample(
                        size=cell.size, depth=cell.depth, expected=a.needle, answer=a.answer, base_hit=hit
                    )
                )
    return out


def group_misses(rc: RecallComparison, head: RecallResult, base: RecallResult | None) -> list[GroupMisses]:
    """Sampled misses per regressed group, then per style with cells below the threshold."""
    h, b = _cells(head), _cells(base if rc.comparable else None)
    groups = {(g.kind, g.label): g.cells for g in family(rc.sizes, rc.depths)}
    out: list[GroupMisses] = []
    for g in rc.groups:
        keys = groups.get((g.kind, g.label))
        if g.verdict == "regressed" and keys:
            out.append(GroupMisses(style=g.style, label=g.label, misses=_sample(g.style, keys, h, b)))
    below: dict[str, list[CellKey]] = {}
    for c in rc.cells:
        if c.verdict == "below-threshold":
            below.setdefault(c.style, []).append(cell_key(c.size, c.depth))
    for style, cells in below.items():
        out.append(GroupMisses(style=style, label=BELOW_LABEL, misses=_sample(style, cells, h, b)))
    return [g for g in out if g.misses]


__all__ = ["MISSES_PER_GROUP", "group_misses"]
