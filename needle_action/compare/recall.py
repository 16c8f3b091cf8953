"""Recall, base -> head: groups of cells tested for a drop, with a known family-wise error rate.

The decision rule (docs/recall.md, "Comparing base and head"):

* cells are pooled into groups (:mod:`needle_action.stats.groups`: the middle depths, each depth,
  each size); a group is tested only when its observed drop (mean of its cells' drops) is at least
  the **floor**, ``min_drop / 2``;
* each tested group gets a one-sided exact stratified test (strata = cells), so rates that differ by
  size or depth keep the error rate exact;
* Holm's procedure over the whole family at ``alpha`` (default 0.01): the chance that a pull request
  which changes nothing is blocked is at most ``alpha``, however many groups there are;
* only cells with their **full** planned counts on both sides are tested: early stopping makes the
  number of trials depend on the answers, which breaks the test (curtailed cells are "untested");
* history (trials of earlier runs with the same fingerprint, other seeds) is shown and plans the
  trials, but is kept **out of the test**: a run's trials share its seed's needles and filler, so
  a run is a cluster, and pooling clusters as if they were independent trials blocked up to 17% of
  unchanged pull requests in simulation (docs/decisions.md, "History plans, the test does not pool");
* the comparison is **group-sequential** (:mod:`needle_action.stats.sequential`): looks at
  fractions of the planned trials with alpha spent across them, a non-binding pass rule, paired
  by trial index when both sides asked the same needles (same seed, same trials), and Holm over
  every group of every prompt the pull request tests (``compare.verdict`` builds the family).

A prompt with the same fingerprint on both sides is not tested (the pull request did not change
what recall measures). A head with no comparable base is judged against the threshold alone, on
pooled estimates (``RecallResult.status``).

Needle styles: each style a prompt runs is a grid of its own (cells pair by style, size and depth),
its groups are tested like a one-style grid's, and Holm runs over the groups of every style at once,
so the family-wise rate holds for the prompt. An ``absent`` group's rate is its abstention rate: a
drop there is a rise in hallucination and regresses the same way. A style the base did not run is
judged against the threshold alone (its pooled reading, ``StyleSummary.status``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from needle_action.compare.copying import same_named
from needle_action.compare.models import (
    AnswerSample,
    CellDelta,
    GroupDelta,
    RecallComparison,
    RecallSide,
    StyleLine,
)
from needle_action.core.names import GOLD_STYLE
from needle_action.results import CrossRun, PromptResult, RecallCell, RecallResult, StyleSummary
from needle_action.stats.exact import holm_rejections, stratified_drop_pvalue
from needle_action.stats.groups import CellKey, Group, cell_key, family, planning_group, pooled
from needle_action.stats.levels import base_digest, base_side_trials, compared_prompt, cross_run, spread_of
from needle_action.stats.pooling import testable_counts
from needle_action.stats.power import GroupDesign, across_detectable, detectable_drop
from needle_action.stats.runs import whole_grid_tested
from needle_action.stats.sequential import (
    Decision,
    Design,
    GroupResult,
    PromptData,
    answers_line_up,
    drop_floor,
    replay,
    result_answers,
)
from needle_action.stats.simulate import simulated_power

Counts = Mapping[CellKey, tuple[int, int]]  # cell -> (hits, trials)
StyledKey = tuple[str, int, float]  # (needle style, size, depth)


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
    style: str = ""


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
    return test_styled_groups({"": (base, head)}, sizes, depths, alpha=alpha, floor=floor)


def test_styled_groups(
    grids: Mapping[str, tuple[Counts, Counts]],
    sizes: Sequence[int],
    depths: Sequence[float],
    *,
    alpha: float,
    floor: float,
) -> list[GroupTest]:
    """:func:`test_groups` for several needle styles, each a grid of its own ((base, head) counts
    per style): every style's groups, with Holm at ALPHA over all of them together."""
    tagged = [(style, g) for style in grids for g in family(sizes, depths)]
    drops = [_mean_drop(*grids[style], g.cells) for style, g in tagged]
    pvalues: list[float | None] = []
    for (style, g), drop in zip(tagged, drops, strict=True):
        if drop is None or drop < floor or drop <= 0:
            pvalues.append(None)  # untested: treated as p = 1 by Holm (monotone, still valid)
            continue
        base, head = grids[style]
        strata = [(*base[k], *head[k]) for k in g.cells if k in base and k in head]
        pvalues.append(stratified_drop_pvalue(strata))
    as_tested = [1.0 if p is None else p for p in pvalues]
    rejected = holm_rejections(as_tested, alpha)
    ranks = {i: r for r, i in enumerate(sorted(range(len(tagged)), key=lambda i: as_tested[i]))}
    return [
        GroupTest(
            group=g,
            base=pooled(grids[style][0], g.cells),
            head=pooled(grids[style][1], g.cells),
            drop=drop,
            p_value=p,
            holm_bound=alpha / (len(tagged) - ranks[i]) if p is not None else None,
            regressed=rejected[i] and p is not None,
            style=style,
        )
        for i, ((style, g), drop, p) in enumerate(zip(tagged, drops, pvalues, strict=True))
    ]


# -- from results files ------------------------------------------------------------------------


def _style_line(s: StyleSummary) -> StyleLine:
    shown = "style hits trials rate status effective_context distractor_answers tool_call_answers"
    return StyleLine(
        **same_named(s, f"{shown} distractor_rate hallucination_rate"),
        diagnosis=s.diagnosis.kind,
        summary=s.diagnosis.summary,
    )


def _side(r: RecallResult, *, with_history: bool) -> RecallSide:
    history = r.history if with_history else None
    shown = "provider model threshold effective_context calls cached_calls cost_usd partial"
    return RecallSide(
        **same_named(r, f"{shown} partial_reason lost_trials distractors similarity"),
        diagnosis=r.diagnosis.kind,
        summary=r.diagnosis.summary,
        fix=r.diagnosis.fix,
        trials=sum(c.trials for c in r.cells),
        history_trials=history.trials() if history else 0,
        history_runs=history.runs if history else 0,
        reorder_ab=list(r.reorder_ab or []),
        styles=[_style_line(s) for s in r.styles],
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
        style=t.style,
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
    key: StyledKey, head: RecallCell | None, base: RecallCell | None, pooled_base: Counts, *, compared: bool
) -> CellDelta:
    d = CellDelta(style=key[0], size=key[1], depth=key[2], verdict="not-run")
    if base is not None:
        d.base_hits, d.base_trials = pooled_base.get(key[1:], (base.hits, base.trials))
        d.base_rate = round(d.base_hits / d.base_trials, 4) if d.base_trials else None
        d.base_status = base.status
    if head is not None:
        d.head_hits, d.head_trials, d.head_rate = head.hits, head.trials, head.rate
        d.head_ci_low, d.head_ci_high, d.head_status = head.ci_low, head.ci_high, head.status
        d.token_offset, d.head_distractor_answers = head.token_offset, head.distractor_answers
    if head is None:
        d.verdict = "removed"
    elif base is None or not compared:
        d.verdict = "new" if head.trials > 0 else "not-run"
    elif head.trials > 0 and d.base_rate is not None and head.rate is not None:
        d.drop = round(d.base_rate - head.rate, 4)
        curtailed = head.stopped_early or base.stopped_early
        d.verdict = "inconclusive" if curtailed else "ok"
    return d


def same_fingerprint(head: RecallResult, base: RecallResult) -> bool:
    """Do HEAD and BASE measure the same recall (pool key, else settings hash)? Then there is
    nothing to test between them, and a drop between them is the model's, not the prompt's."""
    if head.pool_key and base.pool_key:
        return head.pool_key == base.pool_key
    return head.settings_hash == base.settings_hash


def _comparable(head: RecallResult, base: RecallResult | None) -> bool:
    """Same model, scoring and look-alikes, and a needle style in common: otherwise the rates are
    not the same quantity. Styles pair one by one; one the base did not run is new."""
    return (
        base is not None
        and (base.model, base.scoring, base.distractors, base.similarity)
        == (head.model, head.scoring, head.distractors, head.similarity)
        and bool(set(head.style_names()) & set(base.style_names()))
    )


def _detectable(
    base: Counts, head: Counts, sizes: Sequence[int], depths: Sequence[float], alpha: float, styles: int
) -> tuple[float | None, str]:
    """The drop in the planning group this comparison catches with 95% power."""
    group = planning_group(sizes, depths)
    base_hits, base_n = pooled(base, group.cells)
    _, head_n = pooled(head, group.cells)
    if not base_n or not head_n:
        return None, group.label
    design = GroupDesign(cells=len(group.cells), family_size=styles * len(family(sizes, depths)), alpha=alpha)
    return detectable_drop(design, base_n=base_n, head_n=head_n, base_rate=base_hits / base_n), group.label


def _result_delta(t: GroupResult) -> GroupDelta:
    return _group_delta(
        GroupTest(t.group, t.base, t.head, t.drop, t.p_value, t.level, t.regressed, style=t.style)
    )


def _detectable_across(
    hr: RecallResult,
    br: RecallResult,
    sizes: Sequence[int],
    depths: Sequence[float],
    style: str,
    levels: CrossRun,
) -> tuple[float | None, str]:
    """:func:`_detectable` for a base from another run: the cross-run test's, the base side being
    the base run and its stored runs."""
    group = planning_group(sizes, depths)
    base = testable_counts(br, style)
    base_hits, base_n = pooled(base, group.cells)
    head_n = pooled(testable_counts(hr, style), group.cells)[1]
    if not base_n or not head_n:
        return None, group.label
    styles = len(hr.style_names())
    spread, rate = spread_of(levels), round(base_hits / base_n, 2)
    tested = len(family(sizes, depths)) + whole_grid_tested(spread)
    design = GroupDesign(cells=len(group.cells), family_size=styles * tested, alpha=hr.alpha)
    side = round(base_side_trials(br, levels, style) * len(group.cells))
    other = len(set(sizes)) * len(set(depths)) - len(group.cells)
    found = across_detectable(
        design, other_cells=other, base_n=side, head_n=head_n, base_rate=rate, spread=spread
    )
    return found, group.label


def _test_against_base(
    rc: RecallComparison,
    hr: RecallResult,
    br: RecallResult,
    decision: Decision,
    design: Design,
    levels: CrossRun | None = None,
) -> None:
    """Fill RC's groups from the sequential DECISION (recall/sequential.py) of this prompt."""
    rc.groups = [_result_delta(t) for t in decision.groups]
    rc.test = "cross-run" if levels is not None else "paired" if decision.paired else "unpaired"
    rc.looks = list(design.looks(_planned(hr)))
    rc.look, rc.stopped_early = decision.look, decision.look < len(rc.looks)
    rc.planned_calls = rc.looks[-1] * len(hr.cells)
    flagged = {(t.style, *k) for t in decision.groups if t.regressed for k in t.group.cells}
    for d in rc.cells:
        if (d.style, *cell_key(d.size, d.depth)) in flagged and d.drop is not None and d.drop > 0:
            d.verdict = "regressed"
    if rc.stopped_early:
        why = "a drop was clear" if decision.status == "fail" else "no group could hide the planned drop"
        rc.notes.append(
            f"Stopped at look {decision.look} of {len(rc.looks)} ({decision.trials} of {rc.looks[-1]} trials "
            f"per cell): {why}. Rates and drops are from the stopped run: a run stopped on a drop tends "
            "to overstate it, one stopped passing to understate it; read them as estimates, the verdict "
            "is exact."
        )
    styles = [s for s in hr.style_names() if s in {t.style for t in decision.groups}]
    if styles and levels is not None:
        rc.detectable_drop, rc.detectable_in = _detectable_across(
            hr, br, rc.sizes, rc.depths, styles[0], levels
        )
    elif styles:
        base = testable_counts(br, styles[0])
        rc.detectable_drop, rc.detectable_in = _detectable(
            base, testable_counts(hr, styles[0]), rc.sizes, rc.depths, hr.alpha, len(styles)
        )


def stated_power(rc: RecallComparison, data: PromptData, hr: RecallResult) -> None:
    """The power RC states: DATA's design (the head's planned trials, its stop rules, the base as
    measured, across runs its stored runs and spread) replayed on draws from the base's fitted model
    with a drop of min_drop in the planning group (:mod:`~needle_action.stats.simulate`), next to the
    figure the head's plan stated at an assumed rate, when it had no base."""
    figure = simulated_power(data, hr.alpha, hr.min_drop)
    if figure is None:
        return
    rc.power, rc.power_replays = figure.power, figure.reps
    if hr.power is not None and hr.power.base_rate_source == "assumed":
        rc.planned_power, rc.planned_base_rate = hr.power.power, hr.power.base_rate


def _planned(r: RecallResult) -> int:
    if r.power is not None:
        return r.power.trials
    return max((c.planned_trials or c.trials for c in r.cells), default=0)


def design_of(r: RecallResult) -> Design:
    """The stop rules the head ran with (older results files: the fixed design)."""
    return Design(block=r.stop_on_drop, pass_early=r.stop_on_no_change)


def tested_styles(head: PromptResult, base: PromptResult | None) -> set[str]:
    """The needle styles of HEAD's recall tested against BASE's (empty: no test)."""
    hr, br = head.recall, base.recall if base is not None else None
    if hr is None or br is None or not _comparable(hr, br) or same_fingerprint(hr, br):
        return set()
    return _paired_styles(hr, br)[0]


def _paired_styles(hr: RecallResult, br: RecallResult) -> tuple[set[str], bool]:
    """(the needle styles both comparable sides ran, whether gold was left out of them because
    the fixture's answer changed: another quantity, judged against the threshold alone)."""
    both = set(hr.style_names()) & set(br.style_names())
    if GOLD_STYLE in both and _gold_target(br) != _gold_target(hr):
        both.discard(GOLD_STYLE)
        return both, True
    return both, False


def run_levels(
    head: PromptResult,
    base: PromptResult | None,
    *,
    across: bool,
    history: Sequence[RecallResult] | None = None,
) -> CrossRun | None:
    """What HEAD's comparison with BASE rests on when they come from different runs (ACROSS: their
    results files name different jobs; None: one job, today's tests): HISTORY's runs of the base's
    fingerprint when given (``--history DIR``), else the record the head's run kept, else the base's
    own history run by run (fewer than three runs: the stated prior)."""
    hr, br = head.recall, base.recall if base is not None else None
    styles = [s for s in (hr.style_names() if hr else []) if s in tested_styles(head, base)]
    if hr is None or br is None or not styles:
        return None
    if history is not None:
        return cross_run(br, styles[0], history)
    if not across:
        return None
    if hr.cross_run is not None and hr.cross_run.base == base_digest(br):
        return hr.cross_run  # what the head's run rested on, against this very base
    return cross_run(br, styles[0])


def prompt_data(
    head: PromptResult, base: PromptResult | None, levels: CrossRun | None = None
) -> PromptData | None:
    """HEAD's recall as the sequential comparison sees it (None: not tested against BASE). The base
    side is the base run's own trials: its pooled history stays out of the test. LEVELS: the base
    is another run's (:func:`run_levels`): the cross-run tests, its stored runs on the base side."""
    styles = tested_styles(head, base)
    if not styles or head.recall is None or base is None or base.recall is None:
        return None
    hr, br = head.recall, base.recall
    grids = {s: (result_answers(br, s), result_answers(hr, s)) for s in hr.style_names() if s in styles}
    planned, base_planned = _planned(hr), _planned(br)
    paired = (
        hr.seed == br.seed and head.name == base.name and planned == base_planned and answers_line_up(hr, br)
    )
    return compared_prompt(
        head.name,
        grids,
        (cell_key(c.size, c.depth) for c in (*hr.cells, *br.cells)),
        planned=planned,
        base_planned=base_planned,
        floor=drop_floor(hr.min_drop),
        paired=paired,
        design=design_of(hr),
        levels=levels,
    )


def head_end(r: RecallResult) -> int:
    """Trials per cell the head's data run to (less than planned when a look stopped it)."""
    return max(
        (a.trial + 1 for c in r.cells for a in c.answers), default=max((c.trials for c in r.cells), default=0)
    )


def _judge_alone(rc: RecallComparison, hr: RecallResult, styles: set[str]) -> None:
    """Cells of STYLES (no comparable base) judged against the threshold: a failing cell of a style
    whose pooled reading fails is below the threshold."""
    status = {s.style: s.status for s in hr.styles}
    for d in rc.cells:
        failing = status.get(d.style, hr.status) == "fail"
        if d.style in styles and failing and d.head_status == "fail":
            d.verdict = "below-threshold"


def _status(rc: RecallComparison, hr: RecallResult, br: RecallResult | None, tested: bool) -> str:
    if any(g.verdict == "regressed" for g in rc.groups):
        return "fail"
    if not tested and not rc.unchanged and hr.status == "fail":
        return "fail"  # no comparable base: judged against the threshold, on pooled estimates
    if tested and any(c.verdict == "below-threshold" for c in rc.cells):
        return "fail"  # a style the base did not run, below the threshold
    if hr.partial or (tested and br is not None and br.partial):
        return "underpowered"
    if any(c.verdict == "inconclusive" for c in rc.cells) or (tested and not hr.full_trials):
        return "inconclusive"
    return "pass"


def compare_recall(
    head: PromptResult,
    base: PromptResult | None,
    decision: Decision | None = None,
    levels: CrossRun | None = None,
) -> RecallComparison | None:
    """The recall comparison of one prompt (None when neither side has recall to show). DECISION:
    this prompt's sequential decision in the pull request's family (``compare.verdict``); computed
    for this prompt alone when not given."""
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
    rc.unchanged = br is not None and comparable and same_fingerprint(hr, br)
    both = _compared_styles(rc, hr, br) if br is not None and comparable else set()
    _fill_cells(rc, hr, br, both)
    tested = br is not None and comparable and not rc.unchanged
    data = prompt_data(head, base, levels) if tested else None
    if data is not None and decision is None:
        decision = replay([data], hr.alpha, ends={data.name: head_end(hr)})[data.name]
    if tested and br is not None and decision is not None:
        _test_against_base(rc, hr, br, decision, design_of(hr), levels)
        if data is not None:
            stated_power(rc, data, hr)
        _judge_alone(rc, hr, set(hr.style_names()) - both)
    elif hr.status == "fail":
        _judge_alone(rc, hr, set(hr.style_names()))
    if tested and levels is not None:
        rc.notes.append(levels_note(levels))
    rc.status = _status(rc, hr, br, tested)  # type: ignore[assignment]
    rc.samples = _samples(hr.cells)
    return rc


def levels_note(levels: CrossRun) -> str:
    """What a comparison across runs says about the figure it used."""
    said = spread_of(levels).describe()
    if levels.method == "prior":
        return (
            f"The base comes from another run, and runs differ in level: {said}. Groups are tested "
            "against the other cells (a run's level cancels there); a drop of the whole grid at once "
            "only when it stands out of that widest spread. Store main-branch runs (`--history DIR`, "
            "the data branch: 3 or more) or measure the base in the same job (the action's default) "
            "for a sharper test."
        )
    return (
        f"The base comes from another run, and runs differ in level: {said}. Groups are tested against "
        f"the other cells with the {len(levels.history)} stored run(s) beside the base (each at its own "
        "level), the whole grid against that spread."
    )


def _compared_styles(rc: RecallComparison, hr: RecallResult, br: RecallResult) -> set[str]:
    """The styles of comparable sides compared cell by cell (RC notes gold left out)."""
    both, gold_changed = _paired_styles(hr, br)
    if gold_changed:
        rc.notes.append(
            f"This pull request changes what the gold fixture counts as right ({_gold_target(br)} → "
            f"{_gold_target(hr)}): gold is judged against the threshold alone, not compared with the base."
        )
    return both


def _fill_cells(rc: RecallComparison, hr: RecallResult, br: RecallResult | None, both: set[str]) -> None:
    """RC's grid (styles in order of appearance, sizes, depths) and a delta per cell of either side;
    the cells of styles in BOTH compared with the base's own trials (its history, other seeds and
    other clusters, plans runs: it is not tested)."""
    head_cells = {_key(c): c for c in hr.cells}
    base_cells = {_key(c): c for c in br.cells} if br else {}
    order = {
        s: i for i, s in enumerate(dict.fromkeys([k[0] for k in head_cells] + [k[0] for k in base_cells]))
    }
    keys = sorted(set(head_cells) | set(base_cells), key=lambda k: (order[k[0]], k[1], k[2]))
    rc.styles = list(order)
    rc.sizes = sorted({k[1] for k in keys})
    rc.depths = sorted({k[2] for k in keys})
    pooled_base = {s: testable_counts(br, s) for s in both} if br is not None else {}
    for key in keys:
        base_cell = base_cells.get(key) if br is not None else None
        rc.cells.append(
            _cell_delta(
                key, head_cells.get(key), base_cell, pooled_base.get(key[0], {}), compared=key[0] in both
            )
        )


def _gold_target(r: RecallResult) -> str:
    """The expected answer the gold cells scored against (the fixture's ``expected``, as shown)."""
    return " / ".join(sorted({a.needle for c in r.cells if c.style == GOLD_STYLE for a in c.answers}))


def _key(c: RecallCell) -> StyledKey:
    return (c.style, *cell_key(c.size, c.depth))


def _samples(cells: Sequence[RecallCell], limit: int = 12) -> list[AnswerSample]:
    """Up to LIMIT wrong answers, shared fairly between the styles (each gets its turn in order)."""
    per_style: dict[str, list[AnswerSample]] = {}
    for c in cells:
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
