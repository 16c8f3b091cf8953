"""A prompt's cells, style by style: rates, precision, hallucination, effective length, diagnosis.

A prompt may run several needle styles (``needle = ["codeword", "nonlexical", "absent"]``); every
cell carries its style. Each style's cells are one grid, read on its own by the pooled reading of
:mod:`needle_action.recall.diagnose` (groups of cells: depths, sizes; intervals over the family),
exactly as a one-style prompt is. This module sums the styles up and picks what the prompt as a
whole reports:

- ``effective_context`` (with its range, and the relative twin) over the recall styles only, the
  smallest of them: the prompt holds up to where its hardest probe holds. An ``absent`` grid's rate
  is an abstention rate, not recall, so it says nothing about how long a context can be;
- ``fails`` when any style's reading fails (an ``absent`` grid below the bar fails like recall);
- the ``diagnosis``: a single style's own; with several, the first style (in run order) with a
  failure, else the first inconclusive, else the first flaky one, named in the summary; else all-pass.

An ``absent`` style is diagnosed in its own words: ``hallucination`` when its reading fails (the
model invents answers the context does not hold), with the overall and worst hallucination rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from needle_action.recall.diagnose import GridReading, diagnose, read_grid
from needle_action.results import RecallCell, RecallDiagnosis, RecallStatus, StyleSummary
from needle_action.stats.cells import effective_context_relative

FIX_ABSTAIN = (
    'Tell the model what to do when the context does not hold the answer (e.g. "If the documents do '
    'not contain the answer, say so and stop."), keep that instruction close to the question, and keep '
    "near-duplicate documents about other subjects out of the context or ranked below the relevant ones."
)
_RANK = {"all-pass": 3, "flaky": 2, "inconclusive": 1}  # anything else is a failure: rank 0


@dataclass(frozen=True)
class Summary:
    """What a prompt's cells add up to: per style, and for the prompt as a whole."""

    styles: list[StyleSummary]
    effective_context: int | None
    effective_low: int | None
    effective_high: int | None
    effective_context_relative: int | None
    diagnosis: RecallDiagnosis
    fails: bool


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _absent_diagnosis(
    cells: Sequence[RecallCell], generic: RecallDiagnosis, threshold: float
) -> RecallDiagnosis:
    trials = sum(c.trials for c in cells)
    invented = sum(c.trials - c.hits for c in cells)
    overall = f"{invented} of {trials} trials ({invented / trials:.0%})" if trials else "no trial"
    if generic.kind == "all-pass":
        return RecallDiagnosis(
            kind="all-pass",
            summary=f"Says the answer is not in the context at every depth and size, pooled rates at or "
            f"above {threshold:.0%}; hallucination in {overall}.",
            fix="Nothing to fix; keep this check in CI so a change that makes the model invent answers is caught.",
        )
    if generic.kind in ("flaky", "inconclusive"):
        return generic
    worst = max((c for c in cells if c.trials), key=lambda c: (c.trials - c.hits) / c.trials)
    near = sum(c.distractor_answers for c in cells)
    return RecallDiagnosis(
        kind="hallucination",
        summary=f"Invents an answer the context does not hold: hallucination in {overall}, worst "
        f"{(worst.trials - worst.hits) / worst.trials:.0%} at depth {worst.depth * 100:.0f}% of "
        f"{worst.size:,} tokens; {near} of the invented answers repeat a near miss's value.",
        fix=FIX_ABSTAIN,
    )


def _style_summary(
    style: str, cells: list[RecallCell], reading: GridReading, diagnosis: RecallDiagnosis, partial: bool
) -> StyleSummary:
    hits, trials = sum(c.hits for c in cells), sum(c.trials for c in cells)
    near = sum(c.distractor_answers for c in cells)
    absent = cells[0].abstention
    status: RecallStatus = "fail" if reading.fails else ("partial" if partial else "pass")
    return StyleSummary(
        style=style,
        hits=hits,
        trials=trials,
        rate=_rate(hits, trials),
        status=status,
        effective_context=None if absent else reading.effective_context,
        diagnosis=diagnosis,
        distractor_answers=near,
        tool_call_answers=sum(c.tool_call_answers for c in cells),
        distractor_rate=_rate(near, trials),
        hallucination_rate=_rate(trials - hits, trials) if absent else None,
    )


def _overall(summaries: list[StyleSummary]) -> RecallDiagnosis:
    if len(summaries) == 1:
        return summaries[0].diagnosis
    pick = min(summaries, key=lambda s: _RANK.get(s.diagnosis.kind, 0))  # min is stable: run order
    d = pick.diagnosis
    named = pick.style if d.kind != "all-pass" else ", ".join(s.style for s in summaries)
    return RecallDiagnosis(kind=d.kind, summary=f"{named}: {d.summary}", fix=d.fix)


def _smallest(values: list[int | None]) -> int | None:
    """The smallest of VALUES, None (not even the smallest size) winning over any size."""
    return None if not values or None in values else min(v for v in values if v is not None)


def summarize_cells(
    cells: Sequence[RecallCell],
    sizes: Sequence[int],
    *,
    threshold: float,
    alpha: float,
    planned_trials: int,
    partial: bool,
    partial_reason: str | None,
) -> Summary:
    """Per-style summaries and the prompt's effective lengths, diagnosis and failure (module docstring)."""
    by_style: dict[str, list[RecallCell]] = {}
    for c in cells:
        by_style.setdefault(c.style, []).append(c)
    summaries: list[StyleSummary] = []
    readings: list[GridReading] = []
    for style, group in by_style.items():
        reading = read_grid(group, threshold=threshold, alpha=alpha, partial=partial)
        settled = sum(c.status != "undecided" for c in group)
        d = diagnose(
            reading,
            threshold=threshold,
            planned_trials=planned_trials,
            partial_reason=partial_reason,
            decided=(settled, len(group)),
        )
        if group[0].abstention:
            d = _absent_diagnosis(group, d, threshold)
        else:
            readings.append(reading)
        summaries.append(_style_summary(style, group, reading, d, partial))
    if not summaries:
        empty = read_grid([], threshold=threshold, alpha=alpha, partial=partial)
        d = diagnose(empty, threshold=threshold, planned_trials=planned_trials, partial_reason=partial_reason)
        return Summary([], None, None, None, None, d, False)
    recall = [c for c in cells if not c.abstention]
    return Summary(
        styles=summaries,
        effective_context=_smallest([r.effective_context for r in readings]) if readings else None,
        effective_low=_smallest([r.effective_low for r in readings]) if readings else None,
        effective_high=min(
            (r.effective_high for r in readings if r.effective_high is not None), default=None
        ),
        effective_context_relative=_relative(recall, sizes, threshold),
        diagnosis=_overall(summaries),
        fails=any(s.status == "fail" for s in summaries),
    )


def _relative(recall: Sequence[RecallCell], sizes: Sequence[int], threshold: float) -> int | None:
    """The relative effective length over the recall cells: worst depth per size (unknown when a
    depth has no trial) against the smallest size's."""
    if not recall:
        return None
    worst: dict[int, float | None] = {}
    for c in recall:
        prev = worst.get(c.size, 1.0)
        worst[c.size] = None if prev is None or c.rate is None else min(prev, c.rate)
    return effective_context_relative(sizes, worst, threshold)
