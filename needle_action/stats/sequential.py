"""The group-sequential comparison: look at planned fractions of the head's trials, block early on a
clear drop, pass early on a clear absence of one (docs/recall.md, "Looks").

Pure functions of the answers, so the scheduler (which decides when to stop asking) and the compare
stage (which re-derives the verdict from the results files) reach the same verdict by construction.

The design
----------
* **Looks** after ``ceil(f * planned)`` trials per cell for f in ``FRACTIONS`` (6/12/20 of 20).
  At a look before the last, the head's first ``n_k`` trials of every cell are tested against
  everything the base ran with the exact stratified test (strata = cells), on the **middle group
  only** (the group the trials are planned for; every group when the grid has no middle): one test
  per prompt and style instead of a family of nine, so an early look can block on a clear middle
  drop at a useful level. At the last look (every planned trial) every group is tested as in the
  fixed design: paired by trial index (exact stratified McNemar) when both sides asked the same
  needles (same seed, same trials, answers kept), else the stratified test.
* **Alpha spending** (block rule): look k tests at ``SPEND[k] * alpha`` (0.04, 0.08, 0.88 of the
  family alpha: .0004, .0008, .0088 at alpha .01), Holm over the groups every prompt and style of
  the pull request tests at that look. The looks are joined by Bonferroni (the spends add up to
  alpha), so the family-wise false-block rate is at most alpha whatever the correlation between
  looks and whatever the pass rule does. Chosen by simulation (bench/verdicts.py, docs/decisions.md).
* **Pass rule** (non-binding futility, stochastic curtailment): a prompt stops at a look, passing,
  when no group was blocked and, for every group, the chance that the last look's test flags it
  (one-sided Fisher at the last look's strictest Holm level, the base as it is, the head's
  remaining trials drawn at its rate so far) is below ``FUTILITY`` (1%). Unlike a bound on the
  drop, this stops groups far below the base rate too (their drop can never reach significance).
  It can only remove rejections, so it never raises the false-block rate; it costs a little power,
  measured in the benchmark.
* Both rules off (``stop_on_drop = false``, ``stop_on_no_change = false``): one look at the full
  plan, at alpha, every group: the fixed design, verdict for verdict.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from needle_action.results import RecallResult
from needle_action.stats.exact import holm_rejections, paired_drop_pvalue, stratified_drop_pvalue
from needle_action.stats.groups import CellKey, Group, cell_key, family, pooled, whole_grid
from needle_action.stats.intervals import wilson_interval
from needle_action.stats.power import FINAL_SPEND, conditional_power
from needle_action.stats.runs import RunSpread, contrast_pvalue, uniform_pvalue, whole_grid_tested

FRACTIONS = (0.3, 0.6, 1.0)
SPEND = (0.04, 0.08, FINAL_SPEND)  # share of alpha spent at each look (adds up to 1)
PASS_Z = 2.3263478740408408  # one-sided 99% normal quantile: the pass rule's upper bound
FUTILITY = 0.01  # pass a group when the last look's chance to flag it, on the trend, is below this

Answers = Mapping[CellKey, Sequence[tuple[int, bool]]]  # cell -> (trial index, hit) in trial order


def drop_floor(min_drop: float) -> float:
    """The smallest pooled drop ever flagged: half the drop a run is planned to catch."""
    return min_drop / 2


@dataclass(frozen=True)
class Design:
    """Which stop rules are on. Both off: the fixed design (one look, all of alpha)."""

    block: bool = True
    pass_early: bool = True

    @property
    def sequential(self) -> bool:
        return self.block or self.pass_early

    def looks(self, planned: int) -> tuple[int, ...]:
        """Trials per cell at each look (the last is PLANNED)."""
        if not self.sequential or planned <= 1:
            return (planned,)
        return tuple(sorted({max(1, math.ceil(f * planned - 1e-9)) for f in FRACTIONS}))

    def levels(self, planned: int, alpha: float) -> tuple[float, ...]:
        """Alpha spent at each look of :meth:`looks` (looks that coincide pool their spends)."""
        looks = self.looks(planned)
        if not self.block:
            return (*(0.0 for _ in looks[:-1]), alpha)
        spent = dict.fromkeys(looks, 0.0)
        for f, share in zip(FRACTIONS, SPEND, strict=True):
            spent[max(1, math.ceil(f * planned - 1e-9))] += share * alpha
        return tuple(spent[n] for n in looks)


FIXED = Design(block=False, pass_early=False)


@dataclass
class PromptData:
    """One compared prompt: per needle style, (base answers, head answers) per cell."""

    name: str
    grids: Mapping[str, tuple[Answers, Answers]]
    sizes: Sequence[int]
    depths: Sequence[float]
    planned: int  # head trials planned per cell
    floor: float  # smallest pooled drop ever tested
    paired: bool = False  # same seed and trial plan on both sides: pairs by trial index
    base_planned: int = 0  # base trials per cell (the pass rule's full plan)
    design: Design = Design()
    # None: base and head measured in one job (one run level). Else the base is another run's and
    # the groups are tested across runs (stats/runs.py): relative to the other cells, plus the
    # whole grid against the run-to-run spread; never paired
    spread: RunSpread | None = None
    # across runs: earlier runs of the base's fingerprint per style, each (cell -> (hits, trials))
    # one run with its own level; they join the base side of the contrast run by run
    history: Mapping[str, Sequence[Mapping[CellKey, tuple[int, int]]]] = field(default_factory=dict)
    # counts already read, per (style, side, trials): a look, its groups and the pass rule read the
    # same answers many times
    _read: dict[tuple[str, int, int | None], dict[CellKey, tuple[int, int]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def counts(self, style: str, side: int, n: int | None = None) -> dict[CellKey, tuple[int, int]]:
        """SIDE's (0: base, 1: head) counts of STYLE on its first N trials per cell (None: all)."""
        key = (style, side, n)
        if key not in self._read:
            self._read[key] = _truncate(self.grids[style][side], n)
        return self._read[key]


@dataclass(frozen=True)
class GroupResult:
    style: str
    group: Group
    base: tuple[int, int]
    head: tuple[int, int]
    drop: float | None
    p_value: float | None
    level: float | None  # Holm's bound for this p-value at this look
    regressed: bool
    upper: float | None = None  # 99% upper bound on the drop (reported)
    conditional: float | None = None  # chance the last look flags it on the current trend

    def futile(self) -> bool:
        """Does the pass rule let this group stop: the last look would almost surely not flag it?"""
        return self.conditional is not None and self.conditional < FUTILITY


@dataclass
class Decision:
    """A prompt's state after a look: stopped (fail or pass) or going on."""

    look: int  # 1-based index of the look
    trials: int  # head trials per cell at that look
    stopped: bool
    status: str  # "fail", "pass" or "continue"
    paired: bool
    groups: list[GroupResult] = field(default_factory=list)


def result_answers(r: RecallResult, style: str) -> dict[CellKey, list[tuple[int, bool]]]:
    """R's testable cells of STYLE (run without threshold early stopping) as (trial, hit) in trial
    order; a cell stored without its answers reads as its counts in index order."""
    out: dict[CellKey, list[tuple[int, bool]]] = {}
    for c in r.cells:
        if c.style != style or c.trials <= 0 or c.stopped_early:
            continue
        if len(c.answers) == c.trials:
            ordered = sorted(c.answers, key=lambda a: a.trial)
            out[cell_key(c.size, c.depth)] = [(a.trial, a.hit) for a in ordered]
        else:
            out[cell_key(c.size, c.depth)] = [(i, i < c.hits) for i in range(c.trials)]
    return out


def answers_line_up(*results: RecallResult) -> bool:
    """Does every cell of RESULTS keep its answers (trial by trial)? Pairing needs them."""
    return all(len(c.answers) == c.trials for r in results for c in r.cells)


def _truncate(answers: Answers, n: int | None) -> dict[CellKey, tuple[int, int]]:
    out = {}
    for key, outcomes in answers.items():
        kept = [hit for index, hit in outcomes if n is None or index < n]
        if kept:
            out[key] = (sum(kept), len(kept))
    return out


def _pairs(base: Answers, head: Answers, key: CellKey, n: int | None) -> tuple[int, int]:
    """(base hit and head miss, base miss and head hit) over the trial indices both sides answered."""
    b = dict(base.get(key, ()))
    worse = better = 0
    for index, hit in head.get(key, ()):
        if (n is None or index < n) and index in b:
            worse += b[index] and not hit
            better += hit and not b[index]
    return worse, better


def _mean_drop(
    base: Mapping[CellKey, tuple[int, int]], head: Mapping[CellKey, tuple[int, int]], cells: Sequence[CellKey]
) -> float | None:
    drops = [base[k][0] / base[k][1] - head[k][0] / head[k][1] for k in cells if k in base and k in head]
    return sum(drops) / len(drops) if drops else None


def drop_upper(base: tuple[int, int], head: tuple[int, int], z: float = PASS_Z) -> float | None:
    """One-sided upper bound on base rate - head rate (Newcombe's hybrid score interval)."""
    if not base[1] or not head[1]:
        return None
    pb, ph = base[0] / base[1], head[0] / head[1]
    _, high_b = wilson_interval(*base, z=z)
    low_h, _ = wilson_interval(*head, z=z)
    return pb - ph + math.sqrt((high_b - pb) ** 2 + (ph - low_h) ** 2)


def final_groups(data: PromptData) -> list[Group]:
    """The groups the last look tests: every group of the grid; across runs, the whole grid too
    (:func:`~needle_action.stats.runs.whole_grid_tested`)."""
    groups = family(data.sizes, data.depths)
    return [*groups, whole_grid(data.sizes, data.depths)] if whole_grid_tested(data.spread) else groups


def family_size(data: PromptData) -> int:
    return len(data.grids) * len(final_groups(data))


def early_groups(data: PromptData) -> list[Group]:
    """The groups a look before the last tests: the middle (the group the trials are planned for,
    where a drop is looked for first), or every group when the grid has no middle. The last look
    tests every group, as the fixed design does."""
    groups = family(data.sizes, data.depths)
    middle = [g for g in groups if g.kind == "middle"]
    return middle or groups


def look_family_size(data: PromptData, final: bool) -> int:
    """Groups of DATA tested at a look (the last look: all of them)."""
    return family_size(data) if final else len(data.grids) * len(early_groups(data))


def _tests(data: PromptData, n: int | None, final: bool) -> list[tuple[Any, ...]]:
    """(style, group, base pooled, head pooled, drop, p-value or None) for every group of DATA on
    the head's first N trials per cell (None: all); only the groups tested at this look get a
    p-value (:func:`early_groups` before the final look). Before the final look: the exact
    stratified test against everything the base ran (more base trials, more power early); at the
    final look the paired test when the trials line up (``data.paired``), else the same test.
    A base from another run (``data.spread``): the cross-run tests instead (:func:`_cross_p`)."""
    out = []
    paired = data.paired and final and data.spread is None
    tested = final_groups(data) if final else early_groups(data)
    for style, (base_answers, head_answers) in data.grids.items():
        head = data.counts(style, 1, n)
        base = data.counts(style, 0)
        for g in final_groups(data):
            drop = _mean_drop(base, head, g.cells)
            p = None
            if data.spread is not None:
                p = _cross_p(data, style, base, head, g) if g in tested else None
            elif g in tested and drop is not None and drop >= data.floor and drop > 0:
                if paired:
                    pairs = [_pairs(base_answers, head_answers, k, n) for k in g.cells]
                    p = paired_drop_pvalue(sum(w for w, _ in pairs), sum(b for _, b in pairs))
                else:
                    strata = [(*base[k], *head[k]) for k in g.cells if k in base and k in head]
                    p = stratified_drop_pvalue(strata)
            out.append((style, g, pooled(base, g.cells), pooled(head, g.cells), drop, p))
    return out


def relative_drop(
    base: Mapping[CellKey, tuple[int, int]], head: Mapping[CellKey, tuple[int, int]], g: Group
) -> float | None:
    """G's mean drop beyond the other cells' (the whole grid: its own mean drop): the drop a run
    shift does not explain, which the cross-run floor applies to."""
    drop = _mean_drop(base, head, g.cells)
    if g.kind == "all" or drop is None:
        return drop
    rest = _mean_drop(base, head, [k for k in base if k not in set(g.cells)])
    return None if rest is None else drop - rest


def _cross_p(
    data: PromptData,
    style: str,
    base: Mapping[CellKey, tuple[int, int]],
    head: Mapping[CellKey, tuple[int, int]],
    g: Group,
) -> float | None:
    """G's cross-run p-value (None: below the floor): the contrast with the other cells, or for the
    whole grid the run shift against the spread of runs."""
    drop = relative_drop(base, head, g)
    if drop is None or drop < data.floor or drop <= 0 or data.spread is None:
        return None
    history = tuple(tuple(sorted(h.items())) for h in data.history.get(style, ()))
    return _cross_pvalue(tuple(sorted(base.items())), tuple(sorted(head.items())), g, data.spread, history)


Frozen = tuple[tuple[CellKey, tuple[int, int]], ...]


@functools.lru_cache(maxsize=4096)  # a look's test and its pass rule ask the same question
def _cross_pvalue(
    base: Frozen, head: Frozen, g: Group, spread: RunSpread, history: tuple[Frozen, ...]
) -> float:
    if g.kind == "all":
        return uniform_pvalue(dict(base), dict(head), spread)
    return contrast_pvalue(dict(base), dict(head), g.cells, [dict(h) for h in history])


def _look(data: PromptData, look: int) -> tuple[int, tuple[int, ...]]:
    """(index of LOOK in DATA's own looks, clamped to its last; those looks)."""
    looks = data.design.looks(data.planned)
    return min(look, len(looks) - 1), looks


def evaluate_look(
    prompts: Sequence[PromptData],
    look: int,
    alpha: float,
    *,
    last: Mapping[str, bool] | None = None,
    decided: Sequence[PromptData] = (),
) -> dict[str, Decision]:
    """Decisions at LOOK (0-based) for PROMPTS still running: Holm at this look's level over every
    group every prompt tests at this look (the pull request's family), then each prompt's pass
    rule. LAST: prompts whose data end here (their run stopped or this is their final look) are
    decided now. DECIDED: the prompts of the pull request decided at an earlier look; their groups
    stay in the family with p = 1 (a family that shrank as prompts pass would be chosen by the
    data and let noise through)."""
    tests: list[tuple[int, tuple[Any, ...]]] = []  # (prompt index, test row)
    levels: list[float] = []
    fam = 0
    upto: list[int | None] = []  # head trials per cell each prompt is looked at with (None: all)
    for i, data in enumerate(prompts):
        k, looks = _look(data, look)
        final = k == len(looks) - 1
        upto.append(None if final else looks[k])
        tests += [(i, t) for t in _tests(data, upto[-1], final)]
        levels.append(data.design.levels(data.planned, alpha)[k])
        fam += look_family_size(data, final)
    for data in decided:
        k, looks = _look(data, look)
        fam += look_family_size(data, k == len(looks) - 1)
    level = min(levels, default=alpha)  # one level for the whole family at this look
    as_tested = [t[5] for _, t in tests if t[5] is not None]
    as_tested += [1.0] * max(0, fam - len(as_tested))
    pvalue_index: dict[int, int] = {}  # row of TESTS -> index in AS_TESTED
    for j, (_, t) in enumerate(tests):
        if t[5] is not None:
            pvalue_index[j] = len(pvalue_index)
    size = len(as_tested)
    rejected = holm_rejections(as_tested, level) if level > 0 else [False] * size
    rank = {j: r for r, j in enumerate(sorted(range(size), key=lambda j: as_tested[j]))}
    full = sum(family_size(d) for d in [*prompts, *decided])  # the last look's family
    groups: list[list[GroupResult]] = [[] for _ in prompts]
    for j, (i, (style, g, b, h, drop, p)) in enumerate(tests):
        x = pvalue_index.get(j)
        bound = level / (size - rank[x]) if x is not None and level > 0 else None
        regressed = x is not None and rejected[x]
        upper, cp = _pass_terms(prompts[i], g, style, h, alpha, full, upto[i])
        groups[i].append(GroupResult(style, g, b, h, drop, p, bound, regressed, upper, cp))
    return {
        data.name: _decide(data, look, groups[i], bool(last and last.get(data.name)))
        for i, data in enumerate(prompts)
    }


def _decide(data: PromptData, look: int, groups: list[GroupResult], ends: bool) -> Decision:
    """DATA's decision at LOOK from its GROUPS: fail on a rejection, pass on the pass rule or at its
    last look (ENDS: its data end here), else go on."""
    k, looks = _look(data, look)
    final = k == len(looks) - 1 or ends
    passes = data.design.pass_early and all(g.futile() for g in groups)
    if any(g.regressed for g in groups):  # noqa: SIM108 - a nested conditional expression reads worse
        status = "fail"
    else:
        status = "pass" if passes or final else "continue"
    paired = data.paired and k == len(looks) - 1
    return Decision(k + 1, looks[k], status != "continue", status, paired, groups)


def _pass_terms(
    data: PromptData,
    g: Group,
    style: str,
    head: tuple[int, int],
    alpha: float,
    fam: int,
    n: int | None = None,
) -> tuple[float | None, float | None]:
    """(99% upper bound on G's drop, the chance that the last look flags G if the head's remaining
    trials go as its trials so far): the pass rule's terms (FAM: the last look's family; N: the
    head's trials per cell at this look, None: all)."""
    full_base = pooled(data.counts(style, 0), g.cells)
    upper = drop_upper(full_base, head)  # against everything the base ran: the tightest bound
    if not full_base[1] or not head[1]:
        return upper, None
    final = data.design.levels(data.planned, alpha)[-1] / max(1, fam)  # Holm's strictest step
    if data.spread is not None:
        return upper, _cross_conditional(data, g, style, n, final)
    return upper, conditional_power(full_base, head, len(g.cells) * data.planned, final)


def _cross_conditional(data: PromptData, g: Group, style: str, n: int | None, level: float) -> float | None:
    """The pass rule across runs: the chance that G's cross-run test at LEVEL rejects at the last
    look if the trend so far holds (the B-value form of conditional power; the information grows
    as 1 / (1 / base trials + 1 / head trials) per cell)."""
    base = data.counts(style, 0)
    head = data.counts(style, 1, n)
    p = _cross_p(data, style, base, head, g)
    if p is None:
        return 0.0  # below the floor now: the trend stays below it
    z = NormalDist().inv_cdf(min(max(p, 1e-12), 1 - 1e-12))  # a drop: negative
    if n is None or n >= data.planned:
        return 1.0 if p <= level else 0.0
    runs = data.history.get(style, ())  # the stored runs are on the base side too
    stored = sum(sum(n for _, n in r.values()) / len(r) for r in runs if r)
    base_n = max(1.0, (data.base_planned or data.planned) + stored)
    t = (1 / base_n + 1 / data.planned) / (1 / base_n + 1 / max(1, n))
    crit = NormalDist().inv_cdf(level)  # negative
    return NormalDist().cdf((crit - z / math.sqrt(t)) / math.sqrt(1 - t))


def replay(
    prompts: Sequence[PromptData], alpha: float, *, ends: Mapping[str, int] | None = None
) -> dict[str, Decision]:
    """Every prompt's decision, look by look, as the scheduler reached it. ENDS: head trials per cell
    each prompt's data run to (a prompt whose data end at a look is decided there)."""
    running = list(prompts)
    decided: list[PromptData] = []
    out: dict[str, Decision] = {}
    look = 0
    while running:
        last = {}
        for d in running:
            looks = d.design.looks(d.planned)
            end = (ends or {}).get(d.name, d.planned)
            last[d.name] = look >= len(looks) - 1 or looks[min(look, len(looks) - 1)] >= end
        decisions = evaluate_look(running, look, alpha, last=last, decided=decided)
        for d in list(running):
            dec = decisions[d.name]
            if dec.stopped or last[d.name]:
                if not dec.stopped:
                    dec.status, dec.stopped = "pass", True
                out[d.name] = dec
                running.remove(d)
                decided.append(d)
        look += 1
    return out
