"""Recall, base -> head: groups of cells tested for a drop, with a known family-wise error rate.

The decision rule (docs/recall.md, "Comparing base and head"):

* cells are pooled into groups (:mod:`needle_action.recall.groups`: the middle depths, each depth,
  each size); a group is tested only when its observed drop (mean of its cells' drops) is at least
  the **floor**, ``min_drop / 2``;
* each tested group gets a one-sided exact stratified test (strata = cells), so rates that differ by
  size or depth keep the error rate exact;
* Holm's procedure over the whole family at ``alpha`` (default 0.01): the chance that a pull request
  which changes nothing is blocked is at most ``alpha``, however many groups there are;
* only cells with their **full** planned counts on both sides are tested: early stopping makes the
  number of trials depend on the answers, which breaks the test (curtailed cells are "untested");
* the base sample adds the trials of earlier runs with the same fingerprint (``history``).

A prompt with the same fingerprint on both sides is not tested (the pull request did not change
what recall measures). A head with no comparable base is judged against the threshold alone, on
pooled estimates (``RecallResult.status``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from needle_action.compare.models import (
    AnswerSample,
    CellDelta,
    GroupDelta,
    RecallComparison,
    RecallSide,
)
from needle_action.recall.groups import CellKey, Group, cell_key, family, planning_group, pooled
from needle_action.recall.history import base_counts, testable_counts
from needle_action.recall.power import GroupDesign, detectable_drop
from needle_action.recall.stats import holm_rejections, stratified_drop_pvalue
from needle_action.results import PromptResult, RecallCell, RecallResult

Counts = Mapping[CellKey, tuple[int, int]]  # cell -> (hits, trials)


def drop_floor(min_drop: float) -> float:
    """The smallest pooled drop ever flagged: half the drop a run is planned to catch."""
    return min_drop / 2


@dataclass(frozen=True)
class GroupTest:
    """One group's test: the pure result :func:`test_groups` returns."""

    group: Group
    base: tuple[int, int]  # pooled (hits, trials)
    head: tuple[int, int]
    drop: float | None
    p_value: float | None
    holm_bound: float | None
    regressed: bool


def _mean_drop(base: Counts, head: Counts, cells: Sequence[CellKey]) -> float | None:
    drops = [
        base[k][0] / base[k][1] - head[k][0] / head[k][1]
        for k in cells
        if base.get(k, (0, 0))[1] > 0 and head.get(k, (0, 0))[1] > 0
    ]
    return sum(drops) / len(drops) if drops else None


def test_groups(
    base: Counts, head: Counts, sizes: Sequence[int], depths: Sequence[float], *, alpha: float, floor: float
) -> list[GroupTest]:
    """Test every group of the SIZES x DEPTHS grid for a drop from BASE to HEAD (counts of the
    cells that may be tested; others absent); Holm at ALPHA over the whole family."""
    groups = family(sizes, depths)
    drops = [_mean_drop(base, head, g.cells) for g in groups]
    pvalues: list[float | None] = []
    for g, drop in zip(groups, drops, strict=True):
        if drop is None or drop < floor or drop <= 0:
            pvalues.append(None)  # untested: treated as p = 1 by Holm (monotone, still valid)
            continue
        strata = [(*base[k], *head[k]) for k in g.cells if k in base and k in head]
        pvalues.append(stratified_drop_pvalue(strata))
    as_tested = [1.0 if p is None else p for p in pvalues]
    rejected = holm_rejections(as_tested, alpha)
    ranks = {i: r for r, i in enumerate(sorted(range(len(groups)), key=lambda i: as_tested[i]))}
    return [
        GroupTest(
            group=g,
            base=pooled(base, g.cells),
            head=pooled(head, g.cells),
            drop=drop,
            p_value=p,
            holm_bound=alpha / (len(groups) - ranks[i]) if p is not None else None,
            regressed=rejected[i] and p is not None,
        )
        for i, (g, drop, p) in enumerate(zip(groups, drops, pvalues, strict=True))
    ]


# -- from results files ------------------------------------------------------------------------


def _side(r: RecallResult, *, with_history: bool) -> RecallSide:
    history = r.history if with_history else None
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
        trials=sum(c.trials for c in r.cells),
        history_trials=history.trials() if history else 0,
        history_runs=history.runs if history else 0,
        lost_trials=r.lost_trials,
    )


def _group_delta(t: GroupTest) -> GroupDelta:
    def rate(hits_n: tuple[int, int]) -> float | None:
        return round(hits_n[0] / hits_n[1], 4) if hits_n[1] else None

    if t.regressed:
        verdict = "regressed"
    elif t.drop is None:
        verdict = "untested"
    elif t.p_value is None and t.drop > 0:
        verdict = "below-floor"
    else:
        verdict = "ok"
    return GroupDelta(
        kind=t.group.kind,
        label=t.group.label,
        cells=len(t.group.cells),
        base_hits=t.base[0],
        base_trials=t.base[1],
        base_rate=rate(t.base),
        head_hits=t.head[0],
        head_trials=t.head[1],
        head_rate=rate(t.head),
        drop=round(t.drop, 4) if t.drop is not None else None,
        p_value=t.p_value,
        holm_bound=t.holm_bound,
        verdict=verdict,  # type: ignore[arg-type]
    )


def _cell_delta(
    key: CellKey, head: RecallCell | None, base: RecallCell | None, pooled_base: Counts, *, compared: bool
) -> CellDelta:
    d = CellDelta(size=key[0], depth=key[1], verdict="not-run")
    if base is not None:
        d.base_hits, d.base_trials = pooled_base.get(key, (base.hits, base.trials))
        d.base_rate = round(d.base_hits / d.base_trials, 4) if d.base_trials else None
        d.base_status = base.status
    if head is not None:
        d.head_hits, d.head_trials, d.head_rate = head.hits, head.trials, head.rate
        d.head_ci_low, d.head_ci_high, d.head_status = head.ci_low, head.ci_high, head.status
        d.token_offset = head.token_offset
    if head is None:
        d.verdict = "removed"
    elif base is None or not compared:
        d.verdict = "new" if head.trials > 0 else "not-run"
    elif head.trials > 0 and d.base_rate is not None and head.rate is not None:
        d.drop = round(d.base_rate - head.rate, 4)
        curtailed = head.stopped_early or base.stopped_early
        d.verdict = "inconclusive" if curtailed else "ok"
    return d


def _is_unchanged(head: RecallResult, base: RecallResult) -> bool:
    if head.pool_key and base.pool_key:
        return head.pool_key == base.pool_key
    return head.settings_hash == base.settings_hash


def _comparable(head: RecallResult, base: RecallResult | None) -> bool:
    return base is not None and (base.model, base.needle_style, base.scoring) == (
        head.model,
        head.needle_style,
        head.scoring,
    )


def _detectable(base: Counts, head: Counts, sizes, depths, alpha: float) -> tuple[float | None, str]:
    """The drop in the planning group this comparison catches with 95% power."""
    group = planning_group(sizes, depths)
    base_hits, base_n = pooled(base, group.cells)
    _, head_n = pooled(head, group.cells)
    if not base_n or not head_n:
        return None, group.label
    design = GroupDesign(cells=len(group.cells), family_size=len(family(sizes, depths)), alpha=alpha)
    return detectable_drop(design, base_n=base_n, head_n=head_n, base_rate=base_hits / base_n), group.label


def _test_against_base(rc: RecallComparison, hr: RecallResult, br: RecallResult, base: Counts) -> None:
    head = testable_counts(hr)
    tests = test_groups(base, head, rc.sizes, rc.depths, alpha=rc.alpha or hr.alpha, floor=rc.floor or 0.0)
    rc.groups = [_group_delta(t) for t in tests]
    flagged = {k for t in tests if t.regressed for k in t.group.cells}
    for d in rc.cells:
        if cell_key(d.size, d.depth) in flagged and d.drop is not None and d.drop > 0:
            d.verdict = "regressed"
    rc.detectable_drop, rc.detectable_in = _detectable(base, head, rc.sizes, rc.depths, hr.alpha)


def _status(rc: RecallComparison, hr: RecallResult, br: RecallResult | None, tested: bool) -> str:
    if any(g.verdict == "regressed" for g in rc.groups):
        return "fail"
    if not tested and not rc.unchanged and hr.status == "fail":
        return "fail"  # no comparable base: judged against the threshold, on pooled estimates
    if hr.partial or (tested and br is not None and br.partial):
        return "underpowered"
    if any(c.verdict == "inconclusive" for c in rc.cells) or (tested and not hr.full_trials):
        return "inconclusive"
    return "pass"


def compare_recall(head: PromptResult, base: PromptResult | None) -> RecallComparison | None:
    """The recall comparison of one prompt (None when neither side has recall to show)."""
    hr = head.recall
    br = base.recall if base is not None else None
    if hr is None:
        if head.recall_skipped:
            side = _side(br, with_history=True) if br else None
            return RecallComparison(status="skipped", skipped_reason=head.recall_skipped, base=side)
        return None
    comparable = _comparable(hr, br)
    rc = RecallComparison(
        status="pass",
        threshold=hr.threshold,
        alpha=hr.alpha,
        min_drop=hr.min_drop,
        floor=drop_floor(hr.min_drop),
        head=_side(hr, with_history=False),
        base=_side(br, with_history=comparable) if br else None,
        comparable=comparable or br is None,
    )
    head_cells = {cell_key(c.size, c.depth): c for c in hr.cells}
    base_cells = {cell_key(c.size, c.depth): c for c in br.cells} if br else {}
    keys = sorted(set(head_cells) | set(base_cells))
    rc.sizes = sorted({k[0] for k in keys})
    rc.depths = sorted({k[1] for k in keys})
    rc.unchanged = br is not None and comparable and _is_unchanged(hr, br)
    tested = br is not None and comparable and not rc.unchanged
    pooled_base = base_counts(br) if br is not None and comparable else {}
    for key in keys:
        base_cell = base_cells.get(key) if br is not None else None
        rc.cells.append(_cell_delta(key, head_cells.get(key), base_cell, pooled_base, compared=comparable))
    if tested and br is not None:
        _test_against_base(rc, hr, br, pooled_base)
    elif hr.status == "fail":
        for d in rc.cells:
            if d.head_status == "fail":
                d.verdict = "below-threshold"
    rc.status = _status(rc, hr, br, tested)  # type: ignore[assignment]
    rc.samples = _samples(hr.cells)
    return rc


def _samples(cells: Sequence[RecallCell], limit: int = 12) -> list[AnswerSample]:
    out: list[AnswerSample] = []
    for c in cells:
        for a in c.answers:
            if not a.hit and len(out) < limit:
                out.append(AnswerSample(size=c.size, depth=c.depth, expected=a.needle, answer=a.answer))
    return out
