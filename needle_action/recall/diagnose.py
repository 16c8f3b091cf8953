"""Read a recall grid as a whole: one diagnosis with a summary and a fix, and the effective context
length as an estimate with its range, both from **pooled** estimates rather than single cells.

A cell holds a few dozen trials at most, so one unlucky cell must not change the class. The grid is
read through the groups of :mod:`needle_action.stats.groups` (each depth over every size, each size
over every depth), each with a Wilson interval that holds jointly over the whole family (Bonferroni
at two-sided 1 - 2 alpha: a grid sitting at the threshold is called below it at most alpha of the
time). A group is *below* the threshold when its whole interval is, *above* when its whole interval
is at or over it, *near* otherwise. Kinds, checked in this order (docs/recall.md explains each):

* ``inconclusive``       — the run was cut short (cap, provider outage) or nothing ran.
* ``size-limited``       — from some size on, every size is below the bar and every depth over those
  sizes is lost (rate under the bar, not demonstrably above it), while nothing is below the bar at
  the sizes before it.
* ``lost-in-the-middle`` — some interior depth is below the bar while the first and last depths are
  not, at any size (a U-shaped curve).
* ``mixed-failure``      — something is below the bar in another pattern (e.g. the start is lost).
* ``flaky``              — nothing is below the bar, but recall sits at it: some group's rate is
  under the bar, or the whole grid is not demonstrably above it.
* ``all-pass``           — nothing is below the bar, every group's rate is at or above it, and the
  whole grid is demonstrably above it (one-sided 95%); or every cell found every needle, however
  few its trials (the summary gives the whole grid's interval, which says how much that shows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from needle_action.results import Diagnosis, RecallCell, RecallDiagnosis
from needle_action.stats.groups import (
    CellKey,
    Estimate,
    Group,
    cell_key,
    family,
    pooled,
)
from needle_action.stats.groups import (
    estimate as group_estimate,
)
from needle_action.stats.intervals import family_z, wilson_interval

Z_ONE_SIDED_95 = 1.6448536269514722

FIX_EDGES = (
    "Move the key content to the edges of the context and put the question last: order retrieved "
    "chunks with needle_action.runtime.edge_order(chunks) so the most relevant sit at the start and "
    "the end, or trim the context so less of it sits in the middle."
)
FIX_SIZE = (
    "Keep the prompt under {limit}: trim the context or retrieve fewer chunks, chunk long inputs and "
    "process the pieces separately, or switch to a model with a larger effective window."
)
FIX_FLAKY = (
    "Recall sits at the threshold: raise recall.trials (e.g. to {trials}) to tell which side of it "
    "it is on, or treat it as a warning and trim the context."
)
FIX_INCONCLUSIVE = (
    "Rerun with a higher recall.max_calls / recall.max_cost_usd, fewer sizes or depths, or once the "
    "provider is reachable again."
)


@dataclass(frozen=True)
class GridReading:
    """What the pooled estimates say about one prompt's grid."""

    kind: Diagnosis
    sizes: list[int]
    depths: list[float]
    by_depth: dict[float, Estimate] = field(default_factory=dict)
    by_size: dict[int, Estimate] = field(default_factory=dict)
    effective_context: int | None = None
    # effective context range: demonstrably holds up to ``low``; demonstrably lost from ``high``
    effective_low: int | None = None
    effective_high: int | None = None
    cut: int | None = None  # size-limited: the first size from which every size is below the bar
    pooled: tuple[int, int] = (0, 0)  # (hits, trials) over the whole grid

    @property
    def fails(self) -> bool:
        """True when some group is below the threshold with family-wide confidence."""
        return self.kind in ("size-limited", "lost-in-the-middle", "mixed-failure")


def counts_of(cells: Sequence[RecallCell]) -> dict[CellKey, tuple[int, int]]:
    return {cell_key(c.size, c.depth): (c.hits, c.trials) for c in cells}


class _Reader:
    """Estimates of any set of cells of one grid, with the family's z."""

    def __init__(
        self,
        counts: Mapping[CellKey, tuple[int, int]],
        sizes: Sequence[int],
        depths: Sequence[float],
        threshold: float,
        alpha: float,
    ) -> None:
        self.counts, self.sizes, self.depths, self.threshold = counts, sizes, depths, threshold
        # two-sided 1 - 2 alpha over the family: a grid at the threshold is called below it (and a
        # new prompt fails) at most alpha of the time, the comparison's own family-wise rate
        self.z = family_z(len(family(sizes, depths)), confidence=1.0 - 2.0 * alpha)

    def of(self, cells: Sequence[CellKey]) -> Estimate:
        return group_estimate(*pooled(self.counts, cells), threshold=self.threshold, z=self.z)

    def depth(self, d: float, sizes: Sequence[int]) -> Estimate:
        return self.of([cell_key(s, d) for s in sizes])

    def size(self, s: int) -> Estimate:
        return self.of([cell_key(s, d) for d in self.depths])

    def size_holds(self, i: int) -> bool:
        """Size i is not below the bar, and no depth is below it over the sizes up to i."""
        prefix = self.sizes[: i + 1]
        if self.size(self.sizes[i]).standing == "below":
            return False
        return all(self.depth(d, prefix).standing != "below" for d in self.depths)

    def whole_grid_above(self) -> bool:
        """The whole grid's pooled rate is above the bar at one-sided 95% (one interval, no family:
        one claim), which a grid sitting at the threshold almost never shows."""
        hits, trials = pooled(self.counts, [cell_key(s, d) for s in self.sizes for d in self.depths])
        return trials > 0 and wilson_interval(hits, trials, z=Z_ONE_SIDED_95)[0] >= self.threshold

    def perfect(self) -> bool:
        """Every cell that ran found every needle."""
        ran = [(h, t) for h, t in self.counts.values() if t]
        return bool(ran) and all(h == t for h, t in ran)

    def edges_hold(self) -> bool:
        """At every size, the first and last depths together are not below the bar."""
        if len(self.depths) < 3:
            return False
        first, last = self.depths[0], self.depths[-1]
        return all(self.of([cell_key(s, first), cell_key(s, last)]).standing != "below" for s in self.sizes)

    def _lost(self, e: Estimate) -> bool:
        """Below the bar by its point estimate and not demonstrably above it (a depth with few
        trials left by early stopping can be lost without its interval clearing the bar)."""
        return e.rate is not None and e.rate < self.threshold and e.standing != "above"

    def size_cut(self) -> int | None:
        """First size index from which every size is below the bar and every depth over those sizes
        is lost, while nothing is below the bar before it; None when there is no such cut."""
        for i in range(len(self.sizes)):
            tail, head = self.sizes[i:], self.sizes[:i]
            if any(self.size(s).standing != "below" for s in tail):
                continue
            if not all(self._lost(self.depth(d, tail)) for d in self.depths):
                continue
            if head and not self.size_holds(i - 1):
                continue
            return i
        return None

    def effective(self) -> tuple[int | None, int | None, int | None]:
        """(estimate, low, high): the largest size up to which every size holds; the largest up
        to which every size is demonstrably above the bar; the first size that does not hold."""
        best = low = high = None
        demonstrated = True
        for i, s in enumerate(self.sizes):
            if not self.size_holds(i):
                high = s
                break
            best = s
            demonstrated = demonstrated and self.size(s).standing == "above"
            low = s if demonstrated else low
        return best, low, high


def read_grid(
    cells: Sequence[RecallCell], *, threshold: float, alpha: float, partial: bool = False
) -> GridReading:
    """The diagnosis kind and effective context of a grid, from pooled estimates whose intervals
    hold jointly over the family at 1 - 2 ALPHA (two-sided)."""
    sizes = sorted({c.size for c in cells})
    depths = sorted({round(c.depth, 6) for c in cells})
    if not cells or all(c.trials == 0 for c in cells):
        return GridReading("inconclusive", sizes, depths)
    reader = _Reader(counts_of(cells), sizes, depths, threshold, alpha)
    by_depth = {d: reader.depth(d, sizes) for d in depths}
    by_size = {s: reader.size(s) for s in sizes}
    eff, low, high = reader.effective()
    whole = pooled(reader.counts, [cell_key(s, d) for s in sizes for d in depths])
    base = GridReading("all-pass", sizes, depths, by_depth, by_size, eff, low, high, pooled=whole)
    return _with_kind(base, reader, partial)


def _with_kind(reading: GridReading, reader: _Reader, partial: bool) -> GridReading:

    if partial:
        return replace(reading, kind="inconclusive")
    cut = reader.size_cut()
    if cut is not None:
        return replace(reading, kind="size-limited", cut=reading.sizes[cut])
    below = [d for d, e in reading.by_depth.items() if e.standing == "below"]
    if below and reader.edges_hold() and not set(below) & {reading.depths[0], reading.depths[-1]}:
        return replace(reading, kind="lost-in-the-middle")
    groups: list[Estimate] = [*reading.by_depth.values(), *reading.by_size.values()]
    if below or any(e.standing == "below" for e in groups):
        return replace(reading, kind="mixed-failure")
    if reader.perfect():  # every cell at its maximum: nothing sits at the bar, however few the trials
        return reading
    if not reader.whole_grid_above() or any(e.rate is not None and e.rate < reader.threshold for e in groups):
        return replace(reading, kind="flaky")
    return reading


# -- words -------------------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


def _tokens(size: int) -> str:
    return f"{size:,} tokens"


def _join(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _rate(e: Estimate) -> str:
    if e.rate is None:
        return "not run"
    return f"{_pct(e.rate)} ({_pct(e.low)}-{_pct(e.high)}, n={e.trials})"


def _whole(r: GridReading) -> str:
    """The whole grid's pooled rate with its one-sided 95% bound: '100% (at least 94%, one-sided 95%, n=45)'."""
    hits, trials = r.pooled
    if not trials:
        return "no trial"
    low = wilson_interval(hits, trials, z=Z_ONE_SIDED_95)[0]
    return f"{_pct(hits / trials)} (at least {_pct(low)}, one-sided 95%, n={trials})"


def effective_words(r: GridReading) -> str:
    """'8,000 tokens (holds up to 8,000, lost from 16,000)' and the like."""
    if r.effective_context is None:
        first = f"below {_tokens(r.sizes[0])}" if r.sizes else "unknown"
        return first
    text = _tokens(r.effective_context)
    if r.effective_high is not None:
        text += f" (recall is lost by {r.effective_high:,})"
    else:
        text += " (the largest size tested)"
    return text


def diagnose(
    reading: GridReading,
    *,
    threshold: float,
    planned_trials: int,
    partial_reason: str | None = None,
    decided: tuple[int, int] | None = None,
) -> RecallDiagnosis:
    """The diagnosis of READING in words, with a fix that fits it."""
    bar = _pct(threshold)
    kind = reading.kind
    if kind == "inconclusive":
        why = partial_reason or "no trial could run"
        so_far = f": {decided[0]} of {decided[1]} cells settled" if decided else ""
        return RecallDiagnosis(
            kind=kind,
            summary=f"Run stopped early ({why}){so_far}; not enough to diagnose.",
            fix=FIX_INCONCLUSIVE,
        )
    if kind == "all-pass":
        top = _tokens(reading.sizes[-1])
        return RecallDiagnosis(
            kind=kind,
            summary=f"Recall holds at every depth and size tested (up to {top}), pooled rates at or "
            f"above {bar}: {_whole(reading)} over the whole grid.",
            fix="Nothing to fix; keep this check in CI so a change that hurts recall is caught.",
        )
    if kind == "flaky":
        return _flaky(reading, threshold, planned_trials)
    if kind == "size-limited":
        return _size_limited(reading, bar)
    if kind == "lost-in-the-middle":
        return _lost_in_the_middle(reading, bar)
    return _mixed(reading, bar)


def _flaky(reading: GridReading, threshold: float, planned_trials: int) -> RecallDiagnosis:
    near = [(f"depth {_pct(d)}", e) for d, e in reading.by_depth.items()]
    near += [(_tokens(s), e) for s, e in reading.by_size.items()]
    under = [f"{name} {_rate(e)}" for name, e in near if e.rate is not None and e.rate < threshold]
    where = (
        f"{_join(under[:4])}{' and more' if len(under) > 4 else ''}"
        if under
        else f"the whole grid's {_whole(reading)} does not clear it"
    )
    return RecallDiagnosis(
        kind="flaky",
        summary=f"Nothing is clearly below {_pct(threshold)}, but recall sits at it: {where}.",
        fix=FIX_FLAKY.format(trials=max(40, planned_trials * 2)),
    )


def _size_limited(reading: GridReading, bar: str) -> RecallDiagnosis:
    cut = reading.cut
    assert cut is not None
    lost = _rate(reading.by_size[cut])
    if reading.effective_context is None:
        summary = f"Recall is below {bar} at every depth already at the smallest size tested ({_tokens(cut)}: {lost})."
        limit = f"{_tokens(cut)} (or test smaller sizes to find the limit)"
    else:
        held = _rate(reading.by_size[reading.effective_context])
        summary = (
            f"Recall holds up to {_tokens(reading.effective_context)} ({held}) but every depth falls "
            f"below {bar} from {_tokens(cut)} ({lost}); effective context length "
            f"{_tokens(reading.effective_context)}."
        )
        limit = _tokens(reading.effective_context)
    return RecallDiagnosis(kind="size-limited", summary=summary, fix=FIX_SIZE.format(limit=limit))


def _lost_in_the_middle(reading: GridReading, bar: str) -> RecallDiagnosis:
    middle = [f"{_pct(d)} {_rate(e)}" for d, e in reading.by_depth.items() if e.standing == "below"]
    first, last = reading.depths[0], reading.depths[-1]
    edges = f"{_pct(first)} {_rate(reading.by_depth[first])}, {_pct(last)} {_rate(reading.by_depth[last])}"
    return RecallDiagnosis(
        kind="lost-in-the-middle",
        summary=f"The edges hold ({edges}) but recall falls below {bar} in the middle of the context "
        f"(depth {_join(middle)}, pooled over every size): the model loses what sits in the middle.",
        fix=FIX_EDGES,
    )


def _mixed(reading: GridReading, bar: str) -> RecallDiagnosis:
    where = [f"depth {_pct(d)} {_rate(e)}" for d, e in reading.by_depth.items() if e.standing == "below"]
    where += [f"{_tokens(s)} {_rate(e)}" for s, e in reading.by_size.items() if e.standing == "below"]
    limit = _tokens(reading.effective_context) if reading.effective_context else "the smallest size tested"
    return RecallDiagnosis(
        kind="mixed-failure",
        summary=f"Recall falls below {bar} in a pattern that is neither purely positional nor purely "
        f"size-bound ({'; '.join(where)}).",
        fix=f"{FIX_EDGES} If failures grow with size, also: " + FIX_SIZE.format(limit=limit),
    )


def groups_of(reading: GridReading) -> list[Group]:
    """The family the reading's intervals hold jointly over."""
    return family(reading.sizes, reading.depths)
