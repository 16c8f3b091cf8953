"""Runs have levels, from results files: which stored runs a comparison across runs rests on, the
spread they give, and the record a head keeps of it (``RecallResult.cross_run``) so that
``needle report`` re-derives the verdict the run reached (docs/recall.md, "Runs have levels").

The stored runs of a base are the complete runs with its fingerprint (``pool_key``): a
``--history DIR`` of results files, the data branch's, or the base's own pooled history kept run by
run (``RecallHistory.by_run``). The base run itself joins the spread's estimate, never the history
twice (a run stored again, e.g. reused from the cache, counts once).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

from needle_action.results import CrossRun, HistoryCell, HistoryRun, RecallCell, RecallResult
from needle_action.stats.groups import CellKey, cell_key
from needle_action.stats.pooling import poolable, testable_counts
from needle_action.stats.runs import RunSpread, estimate_spread
from needle_action.stats.sequential import Answers, Design, PromptData

Counts = dict[CellKey, tuple[int, int]]


def _counts(cells: Iterable[HistoryCell | RecallCell], style: str) -> Counts:
    return {cell_key(c.size, c.depth): (c.hits, c.trials) for c in cells if c.style == style and c.trials > 0}


def _as_run(r: RecallResult) -> HistoryRun:
    cells = [
        HistoryCell(style=c.style, size=c.size, depth=c.depth, hits=c.hits, trials=c.trials)
        for c in r.cells
        if c.trials > 0 and not c.stopped_early
    ]
    return HistoryRun(seed=r.seed, cells=cells)


def _signature(run: HistoryRun) -> tuple[object, ...]:
    return (run.seed, tuple(sorted((c.style, c.size, c.depth, c.hits, c.trials) for c in run.cells)))


def stored_runs(base: RecallResult, history: Sequence[RecallResult] | None = None) -> list[HistoryRun]:
    """The stored runs BASE's side rests on: of HISTORY (results of earlier runs) those with BASE's
    fingerprint, complete and in full; without HISTORY, BASE's own pooled history run by run. The
    base run itself and repeated copies of one run are left out."""
    if history is None:
        candidates = list(base.history.by_run) if base.history is not None else []
    else:
        key = base.pool_key or base.settings_hash
        candidates = [_as_run(r) for r in history if (r.pool_key or r.settings_hash) == key and poolable(r)]
    seen = {_signature(_as_run(base))}
    out = []
    for run in candidates:
        sig = _signature(run)
        if sig not in seen and run.cells:
            seen.add(sig)
            out.append(run)
    return out


def cross_run(base: RecallResult, style: str, history: Sequence[RecallResult] | None = None) -> CrossRun:
    """The record of a comparison across runs against BASE: the spread estimated (in STYLE, the
    style trials are planned by) from its stored runs and the base run itself (fewer than three:
    the stated prior), and those stored runs."""
    runs = stored_runs(base, history)
    spread = estimate_spread([*(_counts(r.cells, style) for r in runs), testable_counts(base, style)])
    return CrossRun(
        tau=round(spread.tau, 4),
        runs=spread.runs,
        method=spread.method,
        raw_tau=spread.raw_tau,
        history=runs,
        base=base_digest(base),
    )


def base_digest(base: RecallResult) -> str:
    """A digest of BASE run's own cells: a head's record of a comparison across runs is reused only
    against the base it was made against."""
    return hashlib.sha256(repr(_signature(_as_run(base))).encode()).hexdigest()[:16]


def spread_of(record: CrossRun) -> RunSpread:
    return RunSpread(tau=record.tau, runs=record.runs, method=record.method, raw_tau=record.raw_tau)


def history_counts(record: CrossRun, styles: Iterable[str]) -> Mapping[str, Sequence[Counts]]:
    """Per style, the record's stored runs as counts (runs without the style left out)."""
    out: dict[str, list[Counts]] = {}
    for style in styles:
        runs = [_counts(r.cells, style) for r in record.history]
        out[style] = [r for r in runs if r]
    return out


def compared_prompt(
    name: str,
    grids: Mapping[str, tuple[Answers, Answers]],
    keys: Iterable[CellKey],
    *,
    planned: int,
    base_planned: int,
    floor: float,
    paired: bool,
    design: Design,
    levels: CrossRun | None = None,
) -> PromptData:
    """A compared prompt as the sequential comparison reads it: per style GRIDS (base answers, head
    answers), on the grid of both sides' cells KEYS. LEVELS: the base is another run's (its record
    of the cross-run tests): never paired, the record's spread, its stored runs on the base side."""
    cells = set(keys)
    data = PromptData(
        name=name,
        grids=grids,
        sizes=sorted({k[0] for k in cells}),
        depths=sorted({k[1] for k in cells}),
        planned=planned,
        floor=floor,
        paired=paired,
        base_planned=base_planned,
        design=design,
    )
    if levels is not None:
        data.paired = False  # two runs: their levels differ, trial pairs do not cancel them
        data.spread = spread_of(levels)
        data.history = history_counts(levels, grids)
    return data


def _per_cell(counts: Mapping[CellKey, tuple[int, int]]) -> float:
    return sum(n for _, n in counts.values()) / len(counts) if counts else 0.0


def base_side_trials(base: RecallResult, record: CrossRun, style: str) -> float:
    """Trials per cell the cross-run test has on the base side: the base run's and its stored runs'."""
    own = _per_cell(testable_counts(base, style))
    return own + sum(_per_cell(_counts(r.cells, style)) for r in record.history)


def plan_terms(
    base: RecallResult, style: str, history: Sequence[RecallResult] | None = None
) -> tuple[CrossRun, RunSpread, float]:
    """What a run planned against BASE (another run's) needs: the record, its spread, the base
    side's trials per cell."""
    record = cross_run(base, style, history)
    return record, spread_of(record), base_side_trials(base, record, style)
