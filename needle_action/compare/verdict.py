"""Base vs head: what changed, and is it bad enough to block the pull request?

Input: two :class:`~needle_action.results.Results` (the base may be missing: first run, no
threshold file on the base branch, base could not be checked out). Output: a :class:`Comparison`
that the report renders and the action turns into an exit code.

Verdict rules (tolerances come from the threshold file):

* tokens: a case fails when tokens + output reserve exceed ``max_input_tokens`` (absolute budget)
  or when growth against the base case exceeds ``max_growth``;
* recall: groups of cells (the middle depths, each depth, each size) are tested for a drop with an
  exact stratified test under Holm's correction at the family alpha, only when the pooled drop
  reaches the floor ``min_drop / 2`` (:mod:`needle_action.compare.recall`);
* a prompt with no comparable base is judged against the absolute threshold on pooled estimates;
* a run cut short (cap, outage) that shows no regression is **underpowered**, never a pass.

Policy (fail on budget / on recall regression / on provider outage) is applied by the action; this
module only reports the flags separately.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from needle_action.compare.copying import same_named
from needle_action.compare.diff import case_diff, token_change
from needle_action.compare.misses import group_misses
from needle_action.compare.models import (
    Comparison,
    Failure,
    FailureKind,
    PromptComparison,
    PromptStatus,
    RecallComparison,
    RecallSide,
    SideTotals,
    TokenDelta,
    Verdict,
)
from needle_action.compare.recall import compare_recall, head_end, prompt_data, run_levels
from needle_action.compare.tokens import budget_reason, growth_reason, token_delta
from needle_action.core.names import ABSENT_STYLE
from needle_action.results import CrossRun, PromptResult, Results, SkipKind, stored_recall
from needle_action.stats.sequential import Decision, family_size, replay


def _case_hashes(p: PromptResult) -> set[str]:
    return {c.content_hash for c in p.cases}


def _match_renames(base: Results, head: Results) -> dict[str, str]:
    """head name -> base name for prompts renamed in the threshold file.

    A rename is a head prompt with no base prompt of that name whose assembled content (any case)
    or template path equals a base prompt that disappeared.
    """
    head_names = {p.name for p in head.prompts}
    gone = [p for p in base.prompts if p.name not in head_names]
    base_names = {p.name for p in base.prompts}
    out: dict[str, str] = {}
    for hp in head.prompts:
        if hp.name in base_names:
            continue
        for bp in gone:
            if bp.name in out.values():
                continue
            if (_case_hashes(hp) & _case_hashes(bp)) or hp.template == bp.template:
                out[hp.name] = bp.name
                break
    return out


def _compare_prompt(
    head: PromptResult,
    base: PromptResult | None,
    renamed_from: str | None,
    decision: Decision | None = None,
    family: tuple[int, int] = (0, 0),
    levels: CrossRun | None = None,
) -> PromptComparison:
    if base is None:
        status: PromptStatus = "new"
    elif renamed_from:
        status = "renamed"
    elif _case_hashes(head) == _case_hashes(base) and head.template == base.template:
        status = "unchanged"
    else:
        status = "changed"
    pc = PromptComparison(
        name=head.name,
        status=status,
        renamed_from=renamed_from,
        template=head.template,
        base_template=base.template if base else None,
        template_line=head.template_line,
        model=head.model,
        error=head.error,
    )
    base_cases = {c.fixture: c for c in base.cases} if base else {}
    seen: set[str | None] = set()
    for hc in head.cases:
        bc = base_cases.get(hc.fixture)
        seen.add(hc.fixture)
        pc.tokens.append(token_delta(hc, bc))
        changed = case_diff(hc, bc)
        if changed is not None:
            pc.diffs.append(changed)
    for fx, bc in base_cases.items():
        if fx not in seen:
            pc.tokens.append(token_delta(None, bc))
    pc.recall = compare_recall(head, base, decision, levels)
    if pc.recall is not None and head.recall is not None:
        pc.recall.misses = group_misses(pc.recall, head.recall, base.recall if base else None)
    if pc.recall is not None and decision is not None:
        pc.recall.family_prompts = family[0]
        pc.recall.family_groups = family[1]
    return pc


Levels = dict[str, CrossRun | None]  # head prompt name -> what its cross-run test rests on


def across_runs(base: Results | None, head: Results) -> bool:
    """Were BASE and HEAD measured in different jobs (each its own run level)? Files that do not
    name their job (older ones, hand-built ones) count as one job, as before."""
    return base is not None and bool(base.run_id and head.run_id) and base.run_id != head.run_id


def pair_levels(
    pairs: list[tuple[PromptResult, PromptResult | None]],
    *,
    across: bool,
    history: Sequence[Results] | None = None,
) -> Levels:
    """Per head prompt, the cross-run record its test uses (None: same job, today's tests)."""
    out: Levels = {}
    for head, base in pairs:
        stored = stored_recall(history, base.name) if base is not None else None
        out[head.name] = run_levels(head, base, across=across or history is not None, history=stored)
    return out


def recall_decisions(
    pairs: list[tuple[PromptResult, PromptResult | None]], levels: Levels | None = None
) -> tuple[dict[str, Decision], tuple[int, int], float]:
    """The group-sequential decision of every prompt the pull request tests, with Holm over all of
    their groups at once: ({head name: decision}, (prompts, groups) in the family, family alpha).
    LEVELS: the prompts whose base is another run's (:func:`pair_levels`)."""
    datas, ends, alphas = [], {}, []
    for head, base in pairs:
        data = prompt_data(head, base, (levels or {}).get(head.name))
        if data is None or head.recall is None:
            continue
        datas.append(data)
        ends[data.name] = head_end(head.recall)
        alphas.append(head.recall.alpha)
    alpha = min(alphas, default=0.01)
    family = (len(datas), sum(family_size(d) for d in datas))
    return replay(datas, alpha, ends=ends), family, alpha


def _failures_of(pc: PromptComparison) -> list[Failure]:
    out: list[Failure] = []
    loc: dict[str, Any] = {"prompt": pc.name, "file": pc.template, "line": 1, "config_line": pc.template_line}
    if pc.error:
        out.append(
            Failure(kind="error", title=f"needle: {pc.name} could not be measured", message=pc.error, **loc)
        )
    for t in pc.tokens:
        where = f" [{t.fixture}]" if t.fixture else ""
        checks: tuple[tuple[bool, FailureKind, str, Callable[[TokenDelta], str | None]], ...] = (
            (t.budget_ok, "budget", "over token budget", budget_reason),
            (t.growth_ok, "growth", "grew beyond max_growth", growth_reason),
        )
        for ok, kind, title, reason in checks:
            if not ok:
                message = f"{pc.name}{where}: {reason(t)}"
                out.append(Failure(kind=kind, title=f"needle: {pc.name} {title}", message=message, **loc))
    rc = pc.recall
    if rc is not None:
        out.extend(_recall_failures(pc, rc, loc))
    return out


def _measure(rc: RecallComparison, style: str) -> tuple[str, str]:
    """(what a style's rate measures, named with the style when it needs naming; why it matters):
    ``recall``, ``recall [nonlexical]``, ``abstention [absent]``."""
    if style == ABSENT_STYLE:
        return f"abstention [{style}]", " (the model invents answers the context does not hold)"
    return ("recall" if len(rc.styles) <= 1 else f"recall [{style}]"), ""


def _recall_failures(pc: PromptComparison, rc: RecallComparison, loc: dict[str, Any]) -> list[Failure]:
    out: list[Failure] = []
    for g in rc.groups:
        if g.verdict != "regressed":
            continue
        what, why = _measure(rc, g.style)
        out.append(
            Failure(
                kind="recall-regression",
                title=f"needle: {pc.name} {what.split(' ')[0]} regressed",
                message=(
                    f"{pc.name}: {what} at {g.label} fell from {g.base_hits}/{g.base_trials} to "
                    f"{g.head_hits}/{g.head_trials}{why} (mean drop {g.drop * 100 if g.drop else 0:.0f} pt; "
                    f"exact stratified test p={g.p_value:.3g} <= {g.holm_bound:.3g}, Holm at family "
                    f"alpha {rc.alpha:g})"
                ),
                **loc,
            )
        )
    if rc.status == "fail" and rc.head is not None:
        out += _threshold_failures(pc, rc, rc.head, loc)
    return out


def _threshold_failures(
    pc: PromptComparison, rc: RecallComparison, head: RecallSide, loc: dict[str, Any]
) -> list[Failure]:
    """One failure per style judged against the threshold alone (no comparable base) that fails
    (HEAD: the comparison's head side)."""
    below = list(dict.fromkeys(c.style for c in rc.cells if c.verdict == "below-threshold"))
    if not below and not rc.groups:
        below = [""]  # a result without cell styles: the prompt's own summary says it
    out = []
    for style in below:
        line = head.style(style)
        what, why = _measure(rc, style) if style else ("recall", "")
        summary = line.summary if line is not None else head.summary
        out.append(
            Failure(
                kind="recall-threshold",
                title=f"needle: {pc.name} {what.split(' ')[0]} below threshold",
                message=f"{pc.name}: {'' if what == 'recall' else f'{what}: '}{summary}{why} (no comparable base result)",
                **loc,
            )
        )
    return out


def _totals(r: Results) -> SideTotals:
    t = r.totals
    return SideTotals(
        **same_named(t, "calls cached_calls saved_calls cost_usd seconds partial speculative_calls"),
        **same_named(t.usage, "prompt_tokens billed_input_tokens uncached_cost_usd"),
    )


def _is_outage(p: PromptResult) -> bool:
    # a partial run cut short by the provider also sets results.totals.provider_unavailable
    return p.recall_skip_kind == SkipKind.PROVIDER_UNAVAILABLE


def compare(
    base: Results | None,
    head: Results,
    *,
    provider_outage: bool | None = None,
    history: Sequence[Results] | None = None,
) -> Comparison:
    """Compare HEAD with BASE (None: no baseline, every prompt is new). HISTORY: stored runs of the
    base's prompts (``--history DIR``, the data branch): the base counts as another run's and the
    cross-run tests rest on them (docs/recall.md, "Runs have levels")."""
    renames = _match_renames(base, head) if base is not None else {}
    pairs = [
        (hp, base.prompt(renames.get(hp.name, hp.name)) if base is not None else None) for hp in head.prompts
    ]
    levels = pair_levels(pairs, across=across_runs(base, head), history=history)
    decisions, family, alpha = recall_decisions(pairs, levels)
    prompts = [
        _compare_prompt(hp, bp, renames.get(hp.name), decisions.get(hp.name), family, levels.get(hp.name))
        for hp, bp in pairs
    ]
    if base is not None:
        prompts += _deleted(base, head, renames)
    failures = [f for pc in prompts for f in _failures_of(pc)]
    if provider_outage is None:
        provider_outage = bool(getattr(head.totals, "provider_unavailable", False)) or any(
            _is_outage(p) for p in head.prompts
        )
    comp = Comparison(
        verdict="pass",
        headline="",
        has_base=base is not None,
        base_commit=base.commit if base else None,
        head_commit=head.commit,
        budget_failed=any(f.kind in ("budget", "growth") for f in failures),
        recall_regressed=any(f.kind in ("recall-regression", "recall-threshold") for f in failures),
        recall_inconclusive=any(p.recall is not None and p.recall.status == "inconclusive" for p in prompts),
        recall_underpowered=any(p.recall is not None and p.recall.status == "underpowered" for p in prompts),
        provider_outage=provider_outage,
        errors=any(f.kind == "error" for f in failures),
        prompts=prompts,
        failures=failures,
        head_totals=_totals(head),
        base_totals=_totals(base) if base else None,
        recall_family_prompts=family[0],
        recall_alpha=alpha if family[0] else None,
    )
    if base is None:
        comp.notes.append(
            "No base results: every prompt is judged on its own (absolute budgets and thresholds)."
        )
    if provider_outage:
        comp.notes.append(
            "The model provider was unavailable: recall could not be measured for some prompts."
        )
    comp.verdict, comp.headline = _headline(comp)
    comp.token_change = token_change(prompts) if base is not None else None
    return comp


def _deleted(base: Results, head: Results, renames: dict[str, str]) -> list[PromptComparison]:
    """BASE's prompts that HEAD no longer has (renamed ones excepted)."""
    head_names = {p.name for p in head.prompts}
    return [
        PromptComparison(
            name=bp.name,
            status="deleted",
            template=bp.template,
            base_template=bp.template,
            template_line=None,
            model=bp.model,
            tokens=[token_delta(None, c) for c in bp.cases],
        )
        for bp in base.prompts
        if bp.name not in head_names and bp.name not in renames.values()
    ]


def _headline(c: Comparison) -> tuple[Verdict, str]:
    if c.errors:
        return "fail", "❌ Some prompts could not be measured"
    if c.budget_failed and c.recall_regressed:
        return "fail", "❌ Token budget exceeded and recall regressed"
    if c.budget_failed:
        return "fail-budget", "❌ Token budget exceeded"
    if c.recall_regressed:
        return "fail-recall", "❌ Positional recall regressed"
    if c.recall_underpowered:
        return "underpowered", "⚠️ Underpowered: a cap or an outage stopped the planned recall trials"
    if c.recall_inconclusive:
        return (
            "inconclusive",
            "❔ Inconclusive: recall was measured with early stopping and cannot be compared",
        )
    if c.provider_outage:
        return "inconclusive", "⚠️ Budgets pass; recall could not run (provider unavailable)"
    return "pass", "✅ Prompts within budget, no recall regression"
