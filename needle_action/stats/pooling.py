"""Pooling earlier runs into a result's sample: a base that gets better for free.

Runs whose ``pool_key`` matches asked the same model the same kind of needle in the same assembled
prompt: their trials are samples of the same recall and may be added together. Which runs count:

* **complete** runs only (not partial), with every cell run **in full** (no early stopping: a
  curtailed count depends on its answers and would bias the pool);
* **one run per seed**. A trial's needle and filler are a pure function of (seed, prompt, size,
  depth, trial index), so two runs with the same seed asked the same questions: pooling both would
  count the same evidence twice. Of several runs with a seed, the one with the most trials is kept
  (a run with more trials asked a superset of the other's questions); the result's own seed is
  never pooled again.

New trials therefore come from new seeds: a main-branch run with another ``seed`` (for example a
scheduled workflow with ``seed: ${{ github.run_number }}``) adds a fresh sample to the cache, and
every later pull request whose base has that fingerprint pools it at zero calls (docs/recall.md).
"""

from __future__ import annotations

from collections.abc import Iterable

from needle_action.results import HistoryCell, HistoryRun, RecallHistory, RecallResult
from needle_action.stats.groups import CellKey, cell_key

MAX_POOLED_RUNS = 20  # bounds the results file; twenty runs already dwarf one run's trials


def poolable(result: RecallResult) -> bool:
    """A run whose counts may join a pool: complete, every cell in full (a run a sequential look
    stopped is a complete verdict but not a full sample)."""
    return (
        not result.partial
        and result.full_trials
        and result.look is None
        and not any(c.stopped_early for c in result.cells)
    )


def pool_history(result: RecallResult, earlier: Iterable[RecallResult]) -> RecallHistory | None:
    """The trials of EARLIER runs that may be pooled with RESULT's own (None when there are none)."""
    if not result.pool_key:
        return None
    best: dict[int, RecallResult] = {}
    for run in earlier:
        if run.pool_key != result.pool_key or run.seed == result.seed or not poolable(run):
            continue
        kept = best.get(run.seed)
        if kept is None or _trials(run) > _trials(kept):
            best[run.seed] = run
    chosen = sorted(best.values(), key=lambda r: r.seed)[:MAX_POOLED_RUNS]
    if not chosen:
        return None
    totals: dict[tuple[str, int, float], list[int]] = {}
    for run in chosen:
        for c in run.cells:
            hits_trials = totals.setdefault((c.style, *cell_key(c.size, c.depth)), [0, 0])
            hits_trials[0] += c.hits
            hits_trials[1] += c.trials
    return RecallHistory(
        runs=len(chosen),
        seeds=[r.seed for r in chosen],
        by_run=[
            HistoryRun(
                seed=run.seed,
                cells=[
                    HistoryCell(style=c.style, size=c.size, depth=c.depth, hits=c.hits, trials=c.trials)
                    for c in run.cells
                    if c.trials > 0
                ],
            )
            for run in chosen
        ],
        cells=[
            HistoryCell(style=k[0], size=k[1], depth=k[2], hits=h, trials=n)
            for k, (h, n) in sorted(totals.items())
        ],
    )


def testable_counts(
    result: RecallResult,
    style: str | None = None,  # noqa: PT028 - not a test: the cells a test may use
) -> dict[CellKey, tuple[int, int]]:
    """Cells (of STYLE, when given: each needle style is its own grid) whose counts can be tested:
    run in full (not stopped early) with at least one trial."""
    return {
        cell_key(c.size, c.depth): (c.hits, c.trials)
        for c in result.cells
        if c.trials > 0 and not c.stopped_early and (style is None or c.style == style)
    }


def base_counts(result: RecallResult, style: str | None = None) -> dict[CellKey, tuple[int, int]]:
    """The sample RESULT gives as a base (of STYLE, when given): its own testable cells plus its
    pooled history."""
    counts = testable_counts(result, style)
    if result.history is not None:
        for h in result.history.cells:
            if style is not None and (h.style or result.needle_style) != style:
                continue
            key = cell_key(h.size, h.depth)
            hits, trials = counts.get(key, (0, 0))
            counts[key] = (hits + h.hits, trials + h.trials)
    return counts


def _trials(result: RecallResult) -> int:
    return sum(c.trials for c in result.cells)
