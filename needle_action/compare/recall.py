"""Recall, base -> head: each cell (style x size x depth) tested for a significant drop.

A **regression** needs both a one-sided Fisher exact p-value below ``recall.alpha`` (the drop is
unlikely to be noise) and a rate drop of at least ``recall.min_drop`` (the drop matters). A drop
that the trial counts could never prove significant, however extreme, is **inconclusive** instead
of guessed either way; a head cell with no base counterpart is judged against the threshold only.

Cells pair by needle style too: a style the base did not run is new on the head. An ``absent``
cell's rate is its abstention rate, so a drop there is a rise in hallucination and regresses the
same way.
"""

from __future__ import annotations

from needle_action.compare.models import AnswerSample, CellDelta, RecallComparison, RecallSide, StyleLine
from needle_action.recall.stats import fisher_drop_pvalue
from needle_action.results import PromptResult, RecallCell, RecallResult


def min_achievable_pvalue(base_n: int, head_n: int) -> float:
    """The smallest one-sided p-value these trial counts can ever produce (base all hits, head none)."""
    if base_n <= 0 or head_n <= 0:
        return 1.0
    return fisher_drop_pvalue(base_n, base_n, 0, head_n)


def _side(r: RecallResult) -> RecallSide:
    return RecallSide(
        provider=r.provider,
        model=r.model,
        threshold=r.threshold,
        diagnosis=r.diagnosis.kind,
        summary=r.diagnosis.summary,
        fix=r.diagnosis.fix,
        effective_context=r.effective_context,
        calls=r.calls,
        cached_calls=r.cached_calls,
        cost_usd=r.cost_usd,
        partial=r.partial,
        partial_reason=r.partial_reason,
        distractors=r.distractors,
        similarity=r.similarity,
        styles=[
            StyleLine(
                style=s.style,
                hits=s.hits,
                trials=s.trials,
                rate=s.rate,
                diagnosis=s.diagnosis.kind,
                summary=s.diagnosis.summary,
                effective_context=s.effective_context,
                distractor_answers=s.distractor_answers,
                distractor_rate=s.distractor_rate,
                hallucination_rate=s.hallucination_rate,
            )
            for s in r.styles
        ],
    )


def _cell_key(c: RecallCell) -> tuple[str, int, float]:
    return (c.style, c.size, round(c.depth, 6))


def _comparable(base: RecallResult, head: RecallResult) -> bool:
    """Same model, scoring and look-alikes: otherwise the rates are not the same quantity."""
    return (base.model, base.scoring, base.distractors, base.similarity) == (
        head.model,
        head.scoring,
        head.distractors,
        head.similarity,
    )


def _judge_cell(
    head: RecallCell | None, base: RecallCell | None, *, threshold: float, alpha: float, min_drop: float
) -> CellDelta:
    ref = head or base
    assert ref is not None
    d = CellDelta(style=ref.style, size=ref.size, depth=ref.depth, verdict="not-run")
    if base is not None:
        d.base_hits, d.base_trials, d.base_rate, d.base_status = (
            base.hits,
            base.trials,
            base.rate,
            base.status,
        )
    if head is not None:
        d.head_hits, d.head_trials, d.head_rate = head.hits, head.trials, head.rate
        d.head_ci_low, d.head_ci_high, d.head_status = head.ci_low, head.ci_high, head.status
        d.token_offset, d.head_distractor_answers = head.token_offset, head.distractor_answers
    if head is None:
        d.verdict = "removed"
        return d
    if head.trials == 0:
        d.verdict = "not-run"
        return d
    if base is None or base.trials == 0:
        d.verdict = (
            "below-threshold"
            if head.status == "fail"
            else ("inconclusive" if head.status == "undecided" else "new")
        )
        return d
    base_rate, head_rate = base.hits / base.trials, head.hits / head.trials
    d.drop = round(base_rate - head_rate, 4)
    d.p_value = fisher_drop_pvalue(base.hits, base.trials, head.hits, head.trials)
    if d.drop >= min_drop and d.drop > 0:
        powerless = min_achievable_pvalue(base.trials, head.trials) >= alpha
        stopped = base.trials < base.planned_trials or head.trials < head.planned_trials
        if d.p_value < alpha:
            d.verdict = "regressed"
        elif head.status != "pass" and (powerless or stopped):
            # the cell fell below the threshold but there are too few trials to call it: no outcome at
            # these counts could be significant, or early stopping ended the cell before it could be
            d.verdict = "inconclusive"
        else:
            d.verdict = "ok"  # a drop this size is within noise at these counts
    elif -d.drop >= min_drop and fisher_drop_pvalue(head.hits, head.trials, base.hits, base.trials) < alpha:
        d.verdict = "improved"
    else:
        d.verdict = "ok"
    return d


def compare_recall(head: PromptResult, base: PromptResult | None) -> RecallComparison | None:
    hr = head.recall
    br = base.recall if base is not None else None
    if hr is None:
        if head.recall_skipped:
            return RecallComparison(
                status="skipped", skipped_reason=head.recall_skipped, base=_side(br) if br else None
            )
        return None
    rc = RecallComparison(
        status="pass", threshold=hr.threshold, head=_side(hr), base=_side(br) if br else None
    )
    settings = _recall_tolerances(hr)
    rc.alpha, rc.min_drop = settings
    head_cells = {_cell_key(c): c for c in hr.cells}
    base_cells = {_cell_key(c): c for c in br.cells} if br else {}
    if br is not None and not _comparable(br, hr):
        rc.comparable = False  # other model, scoring or look-alikes: judge the head alone
        base_cells_for_test: dict = {}
    else:
        base_cells_for_test = base_cells
    order = {
        s: i for i, s in enumerate(dict.fromkeys([c.style for c in hr.cells] + [k[0] for k in base_cells]))
    }
    keys = sorted(set(head_cells) | set(base_cells), key=lambda k: (order[k[0]], k[1], k[2]))
    rc.styles = list(order)
    rc.sizes = sorted({k[1] for k in keys})
    rc.depths = sorted({k[2] for k in keys})
    for key in keys:
        rc.cells.append(
            _judge_cell(
                head_cells.get(key),
                base_cells_for_test.get(key),
                threshold=hr.threshold,
                alpha=rc.alpha,
                min_drop=rc.min_drop,
            )
        )
        if key in base_cells and key not in base_cells_for_test and rc.cells[-1].verdict != "removed":
            b = base_cells[key]  # keep the base numbers visible even when not tested
            rc.cells[-1].base_hits, rc.cells[-1].base_trials, rc.cells[-1].base_rate = (
                b.hits,
                b.trials,
                b.rate,
            )
    verdicts = {c.verdict for c in rc.cells}
    if verdicts & {"regressed", "below-threshold"}:
        rc.status = "fail"
    elif "inconclusive" in verdicts or hr.partial:
        rc.status = "inconclusive"
    rc.samples = _samples(hr)
    return rc


def _samples(r: RecallResult, limit: int = 12) -> list[AnswerSample]:
    """Up to LIMIT wrong answers, shared fairly between the styles (each gets its turn in order)."""
    per_style: dict[str, list[AnswerSample]] = {}
    for c in r.cells:
        for a in c.answers:
            if not a.hit:
                sample = AnswerSample(
                    style=c.style, size=c.size, depth=c.depth, expected=a.needle, answer=a.answer
                )
                per_style.setdefault(c.style, []).append(sample)
    out: list[AnswerSample] = []
    queues = list(per_style.values())
    while len(out) < limit and any(queues):
        for q in queues:
            if q and len(out) < limit:
                out.append(q.pop(0))
    return out


def _recall_tolerances(r: RecallResult) -> tuple[float, float]:
    """alpha and min_drop of the head run (the threshold file's RecallSettings, recorded in the result)."""
    return float(r.alpha), float(r.min_drop)
