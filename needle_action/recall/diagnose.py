"""Turn a grid of cell statuses into one diagnosis with a summary sentence and a concrete fix.

Kinds, checked in this order (docs/recall.md explains each):

* ``inconclusive``       — the run was cut short (cap, provider outage) and cells are undecided, or
  no cell ran at all: nothing can be concluded.
* ``all-pass``           — every cell passed.
* ``flaky``              — nothing failed, but some cells are undecided: their intervals straddle the
  threshold, so more trials are needed before anything can be said.
* ``size-limited``       — from some size on every depth is below the bar (no pass, at least one
  fail per size) and no smaller size fails: the context is simply too long for this model.
* ``lost-in-the-middle`` — failures only at interior depths, while the first and last depth of each
  affected size hold (a U-shaped curve).
* ``mixed-failure``      — failures that fit neither shape (e.g. the start of the context is lost,
  or the middle fails at small sizes and everything fails at large ones): the summary lists where.
"""

from __future__ import annotations

from collections.abc import Sequence

from needle_action.results import RecallCell, RecallDiagnosis

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
    "Raise recall.trials (e.g. to {trials}) so the intervals narrow enough to decide; if cells stay "
    "undecided, recall really sits near the threshold: treat it as a warning or trim the context."
)
FIX_INCONCLUSIVE = (
    "Rerun with a higher recall.max_calls / recall.max_cost_usd, fewer sizes or depths, or once the "
    "provider is reachable again."
)


def _pct(depth: float) -> str:
    return f"{depth * 100:.0f}%"


def _tokens(size: int) -> str:
    return f"{size:,} tokens"


def _join(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def diagnose(
    cells: Sequence[RecallCell],
    *,
    threshold: float,
    planned_trials: int,
    effective_context: int | None,
    partial: bool = False,
    partial_reason: str | None = None,
) -> RecallDiagnosis:
    sizes = sorted({c.size for c in cells})
    depths = sorted({c.depth for c in cells})
    grid = {(c.size, c.depth): c for c in cells}
    fails = [c for c in cells if c.status == "fail"]
    undecided = [c for c in cells if c.status == "undecided"]
    bar = f"{threshold:.0%}"

    if not cells or all(c.trials == 0 for c in cells) or (partial and undecided):
        why = partial_reason or "no trial could run"
        decided = len(cells) - len(undecided)
        return RecallDiagnosis(
            kind="inconclusive",
            summary=f"Run stopped early ({why}): {decided} of {len(cells)} cells decided, "
            f"{len(fails)} failing so far; not enough to diagnose.",
            fix=FIX_INCONCLUSIVE,
        )

    if not fails and not undecided:
        return RecallDiagnosis(
            kind="all-pass",
            summary=f"Recall holds at every depth and size tested (up to {_tokens(sizes[-1])}), "
            f"each cell at or above {bar}.",
            fix="Nothing to fix; keep this check in CI so a change that hurts recall is caught.",
        )

    if not fails:
        where = _join([f"{_pct(c.depth)} of {_tokens(c.size)}" for c in undecided[:4]])
        more = f" and {len(undecided) - 4} more" if len(undecided) > 4 else ""
        return RecallDiagnosis(
            kind="flaky",
            summary=f"No cell clearly fails, but {len(undecided)} cell(s) are too close to {bar} to "
            f"decide with {planned_trials} trials ({where}{more}).",
            fix=FIX_FLAKY.format(trials=max(20, planned_trials * 4)),
        )

    def failing_at(size: int) -> list[float]:
        return [d for d in depths if (size, d) in grid and grid[(size, d)].status == "fail"]

    def all_below(size: int) -> bool:
        row = [grid[(size, d)] for d in depths if (size, d) in grid]
        return bool(row) and all(c.status != "pass" for c in row) and any(c.status == "fail" for c in row)

    # size-limited: a cutoff from which every size is below the bar, and no failure before it
    for i, size in enumerate(sizes):
        if all(all_below(s) for s in sizes[i:]) and not any(failing_at(s) for s in sizes[:i]):
            if i == 0:
                summary = (
                    f"Recall is below {bar} at every depth already at the smallest size tested "
                    f"({_tokens(size)})."
                )
                limit = f"{_tokens(size)} (or test smaller sizes to find the limit)"
            else:
                eff = effective_context or sizes[i - 1]
                summary = (
                    f"Recall holds up to {_tokens(sizes[i - 1])} but every depth falls below {bar} "
                    f"from {_tokens(size)}; effective context length {_tokens(eff)}."
                )
                limit = _tokens(eff)
            return RecallDiagnosis(kind="size-limited", summary=summary, fix=FIX_SIZE.format(limit=limit))

    # lost in the middle: only interior depths fail, both edges of each affected size hold
    if len(depths) >= 3:
        first, last = depths[0], depths[-1]
        affected = [s for s in sizes if failing_at(s)]
        edges_hold = all(
            grid.get((s, first)) is not None
            and grid[(s, first)].status != "fail"
            and grid.get((s, last)) is not None
            and grid[(s, last)].status != "fail"
            for s in affected
        )
        if affected and edges_hold:
            middle = sorted({d for s in affected for d in failing_at(s)})
            return RecallDiagnosis(
                kind="lost-in-the-middle",
                summary=f"The edges hold but recall falls below {bar} in the middle of the context "
                f"(depth {_join([_pct(d) for d in middle])}) at {_join([_tokens(s) for s in affected])}: "
                "the model loses what sits in the middle.",
                fix=FIX_EDGES,
            )

    where = "; ".join(
        f"{_tokens(s)}: depth {_join([_pct(d) for d in failing_at(s)])}" for s in sizes if failing_at(s)
    )
    return RecallDiagnosis(
        kind="mixed-failure",
        summary=f"Recall falls below {bar} in a pattern that is neither purely positional nor purely "
        f"size-bound ({where}).",
        fix=f"{FIX_EDGES} If failures grow with size, also: "
        + FIX_SIZE.format(
            limit=_tokens(effective_context) if effective_context else "the smallest size tested"
        ),
    )
