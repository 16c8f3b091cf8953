"""A prompt's cells, style by style: rates, precision, hallucination, effective length, diagnosis.

A prompt may run several needle styles (``needle = ["codeword", "nonlexical", "absent"]``); every
cell carries its style and is judged by the same cell rule. This module sums them up per style and
picks what the prompt as a whole reports:

- ``effective_context`` (and its relative twin) over the recall styles only: an ``absent`` cell's
  rate is an abstention rate, not recall, so it says nothing about how long a context can be;
- the ``diagnosis``: a single style's own; with several, the first style (in run order) with a
  failure, else the first inconclusive, else the first flaky one, named in the summary; else all-pass.

An ``absent`` style is diagnosed in its own words: ``hallucination`` when a cell fails (the model
invents answers the context does not hold), with the overall and worst hallucination rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from needle_action.recall import stats
from needle_action.recall.diagnose import diagnose
from needle_action.results import RecallCell, RecallDiagnosis, StyleSummary

FIX_ABSTAIN = (
    'Tell the model what to do when the context does not hold the answer (e.g. "If the documents do '
    'not contain the answer, say so and stop."), keep that instruction close to the question, and keep '
    "near-duplicate documents about other subjects out of the context or ranked below the relevant ones."
)
_RANK = {"all-pass": 3, "flaky": 2, "inconclusive": 1}  # anything else is a failure: rank 0


@dataclass(frozen=True)
class Summary:
    styles: list[StyleSummary]
    effective_context: int | None
    effective_context_relative: int | None
    diagnosis: RecallDiagnosis


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
            summary=f"Says the answer is not in the context at every depth and size, each cell at or above "
            f"{threshold:.0%}; hallucination in {overall}.",
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
    style: str, cells: list[RecallCell], sizes: Sequence[int], diagnosis: RecallDiagnosis
) -> StyleSummary:
    hits, trials = sum(c.hits for c in cells), sum(c.trials for c in cells)
    near = sum(c.distractor_answers for c in cells)
    absent = bool(cells) and cells[0].abstention
    return StyleSummary(
        style=style,
        hits=hits,
        trials=trials,
        rate=_rate(hits, trials),
        status="fail" if any(c.status == "fail" for c in cells) else "pass",
        effective_context=None if absent else stats.effective_context(sizes, _statuses(cells)),
        diagnosis=diagnosis,
        distractor_answers=near,
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


def summarize_cells(
    cells: Sequence[RecallCell],
    sizes: Sequence[int],
    *,
    threshold: float,
    planned_trials: int,
    partial: bool,
    partial_reason: str | None,
) -> Summary:
    """Per-style summaries and the prompt's effective lengths and diagnosis (module docstring)."""
    by_style: dict[str, list[RecallCell]] = {}
    for c in cells:
        by_style.setdefault(c.style, []).append(c)
    summaries = []
    for style, group in by_style.items():
        eff = stats.effective_context(sizes, _statuses(group))
        d = diagnose(
            group,
            threshold=threshold,
            planned_trials=planned_trials,
            effective_context=eff,
            partial=partial,
            partial_reason=partial_reason,
        )
        if group[0].abstention:
            d = _absent_diagnosis(group, d, threshold)
        summaries.append(_style_summary(style, group, sizes, d))
    recall = [c for c in cells if not c.abstention]
    if not summaries:
        empty = diagnose([], threshold=threshold, planned_trials=planned_trials, effective_context=None)
        return Summary([], None, None, empty)
    return Summary(
        styles=summaries,
        effective_context=stats.effective_context(sizes, _statuses(recall)) if recall else None,
        effective_context_relative=_relative(recall, sizes, threshold),
        diagnosis=_overall(summaries),
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
    return stats.effective_context_relative(sizes, worst, threshold)


def _statuses(cells: Sequence[RecallCell]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for c in cells:
        out.setdefault(c.size, []).append(c.status)
    return out
