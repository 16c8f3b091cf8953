"""The budget gate: one prompt x fixture against its absolute budget and its growth vs the base.

Absolute: the request must leave room for the answer, so a case fails when
``tokens + reserve_output_tokens > max_input_tokens``; headroom is what is left
(negative = over). Growth: against the base branch's case for the same fixture, a case fails when
it grew by more than ``max_growth`` (a percentage of the base count or a number of tokens).
A prompt or fixture the base does not have is new: it has no growth check.

``max_input_tokens = "auto"`` takes the budget from the base's recall curve: the base's measured
effective context (the largest size at which recall holds), so a request plus its output reserve
must fit in it, i.e. the input may use the effective context minus the reserve. Without base
results there is no number to judge against, and the case says so instead of inventing one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from needle_action.config.model import Growth, PromptSettings
from needle_action.request.prompt import RenderedPrompt
from needle_action.request.view import request_view
from needle_action.results import AssembledView, BudgetCase, PromptResult, Results, TokenCount


@dataclass(frozen=True)
class Judgement:
    """The budget rule applied to one count: the numbers, and which limit (if any) it breaks."""

    headroom: int | None  # max_input_tokens - tokens - reserve; negative = over; None = no budget
    growth_tokens: int | None = None  # vs the base count; None when there is no base
    growth_percent: float | None = None
    growth_allowed: float | None = None  # tokens the limit allows over the base; None = no limit
    over_budget: bool = False
    over_growth: bool = False


def judge(
    tokens: int,
    *,
    reserve: int,
    max_input_tokens: int | None,
    max_growth: Growth | None,
    base_tokens: int | None,
) -> Judgement:
    """THE budget rule: absolute budget with the output reserve, and growth against the base.

    ``needle budget`` and the compare stage both call this, so they always agree.
    """
    headroom = max_input_tokens - tokens - reserve if max_input_tokens is not None else None
    if base_tokens is None:
        return Judgement(headroom, over_budget=headroom is not None and headroom < 0)
    growth = tokens - base_tokens
    percent = round(100.0 * growth / base_tokens, 2) if base_tokens > 0 else None
    allowed = max_growth.allowed(base_tokens) if max_growth is not None else None
    return Judgement(
        headroom,
        growth_tokens=growth,
        growth_percent=percent,
        growth_allowed=allowed,
        over_budget=headroom is not None and headroom < 0,
        over_growth=allowed is not None and growth > allowed,
    )


def _tokens(n: int) -> str:
    return f"{n:,} token{'' if n == 1 else 's'}"


def _stem(fixture: str | None) -> str | None:
    """The fixture's name without folder and extension; a case keeps its number (``cases:3``)."""
    if not fixture:
        return None
    name = PurePosixPath(fixture).name
    file, colon, number = name.rpartition(":")
    if colon and number.isdigit() and file.lower().endswith((".jsonl", ".csv")):
        return f"{PurePosixPath(file).stem}:{number}"
    return PurePosixPath(name).stem


def match_base_case(
    base: PromptResult | None,
    fixture: str | None,
    *,
    index: int | None = None,
    head_fixtures: Sequence[str | None] | None = None,
) -> BudgetCase | None:
    """The base case to compare FIXTURE's case with, or None when it is new.

    Same fixture path first; then the same file name with another extension or folder (a fixture
    converted from YAML to JSON is the same case). Failing that, a base case whose fixture the head
    no longer has (renamed) stands in: the one at the same INDEX, or the only one. Without
    HEAD_FIXTURES we cannot tell renamed from added, so those last two fallbacks are not used.
    """
    if base is None or not base.cases:
        return None
    for case in base.cases:
        if case.fixture == fixture:
            return case
    head = set(head_fixtures or ())
    same_stem = [
        c for c in base.cases if fixture and _stem(c.fixture) == _stem(fixture) and c.fixture not in head
    ]
    if len(same_stem) == 1:
        return same_stem[0]
    if head_fixtures is None:
        return None
    orphans = [c for c in base.cases if c.fixture not in head]
    if index is not None and index < len(base.cases) and base.cases[index] in orphans:
        return base.cases[index]
    if len(base.cases) == 1 and len(head_fixtures) == 1 and orphans:
        return orphans[0]
    return None


AUTO = "auto"
MINUS = "\u2212"  # the comment's typography: a minus sign, not a hyphen


def auto_budget(base: PromptResult | None, reserve: int, base_commit: str | None) -> tuple[int | None, str]:
    """The budget an "auto" prompt gets from BASE (its result on the base side), and where the
    number came from, for the comment ("auto: effective context 12,000 - 1,024 output reserve,
    from base abc1234"). None when the base has no measured effective context."""
    where = f"base {base_commit[:7]}" if base_commit else "the baseline"
    recall = base.recall if base is not None else None
    if base is None:
        return None, "auto: no base results to take the effective context from; no absolute budget this run"
    if recall is None:
        return None, f"auto: {where} has no recall results for this prompt; no absolute budget this run"
    if recall.effective_context is None:
        return None, (
            f"auto: recall on {where} held at none of the measured sizes (no effective context); "
            "no absolute budget this run"
        )
    eff = recall.effective_context
    return eff, f"auto: effective context {eff:,} {MINUS} {reserve:,} output reserve, from {where}"


def _over_budget_reason(tokens: int, reserve: int, budget: int, headroom: int) -> str:
    return f"{tokens:,} + {reserve:,} reserved > {budget:,} budget by {_tokens(-headroom)}"


def apply_auto_budget(case: BudgetCase, base: PromptResult | None, base_commit: str | None) -> None:
    """Give an "auto" CASE (``budget_source`` set, no budget yet) its budget from BASE, judged by
    the one rule. Cases with a budget already (or not "auto") are left alone."""
    if case.budget_source is None or case.max_input_tokens is not None:
        return
    budget, case.budget_source = auto_budget(base, case.reserve_output_tokens, base_commit)
    if budget is None:
        return
    j = judge(
        case.count.tokens,
        reserve=case.reserve_output_tokens,
        max_input_tokens=budget,
        max_growth=None,
        base_tokens=None,
    )
    case.max_input_tokens, case.headroom = budget, j.headroom
    if j.over_budget and j.headroom is not None:
        reason = _over_budget_reason(case.count.tokens, case.reserve_output_tokens, budget, j.headroom)
        case.reasons.insert(0, reason)
        case.status = "fail"


def _reasons(
    j: Judgement,
    count: TokenCount,
    reserve: int,
    budget: int | None,
    growth: Growth | None,
    base_case: BudgetCase | None,
) -> list[str]:
    """Why a case counted COUNT fails J (empty: it passes), in the words the terminal shows."""
    reasons: list[str] = []
    if j.over_budget and budget is not None and j.headroom is not None:
        reasons.append(_over_budget_reason(count.tokens, reserve, budget, j.headroom))
    if j.over_growth and base_case is not None:
        if growth is not None and growth.percent is not None and j.growth_percent is not None:
            reasons.append(f"grew {j.growth_percent:.1f}% vs base (limit {growth})")
        else:
            reasons.append(f"grew {_tokens(j.growth_tokens or 0)} vs base (limit {growth})")
        if base_case.count.counter != count.counter:
            # a changed tokenizer also moves the count; say so rather than blame the template alone
            reasons[-1] += (
                f"; note: base was counted with {base_case.count.counter}, this with {count.counter}"
            )
    return reasons


def mark_repeats(cases: Sequence[BudgetCase]) -> None:
    """Name, on each case whose assembled request an earlier fixture's already is, that fixture.
    Three fixtures whose keys the template never reads render one request three times: the table
    would show three passing rows for one test, so the case says so."""
    first: dict[str, str] = {}
    for case in cases:
        if case.fixture is None:
            continue
        earlier = first.setdefault(case.content_hash, case.fixture)
        case.same_request_as = earlier if earlier != case.fixture else None


def evaluate_case(
    prompt_cfg: PromptSettings,
    rendered: RenderedPrompt,
    count: TokenCount,
    base_prompt_result: PromptResult | None,
    *,
    index: int | None = None,
    head_fixtures: Sequence[str | None] | None = None,
    base_commit: str | None = None,
) -> BudgetCase:
    """Apply the absolute budget and the growth limit to one counted case ("auto" budgets: from
    BASE_PROMPT_RESULT's recall, measured at BASE_COMMIT)."""
    tokens = count.tokens
    reserve = prompt_cfg.reserve_output_tokens
    auto = prompt_cfg.max_input_tokens == AUTO
    budget = prompt_cfg.max_input_tokens if isinstance(prompt_cfg.max_input_tokens, int) else None
    growth = prompt_cfg.max_growth
    base_case = match_base_case(
        base_prompt_result, rendered.fixture, index=index, head_fixtures=head_fixtures
    )
    j = judge(
        tokens,
        reserve=reserve,
        max_input_tokens=budget,
        max_growth=growth,
        base_tokens=base_case.count.tokens if base_case is not None else None,
    )
    reasons = _reasons(j, count, reserve, budget, growth, base_case)
    case = BudgetCase(
        fixture=rendered.fixture,
        content_hash=rendered.content_hash(),
        count=count,
        max_input_tokens=budget,
        reserve_output_tokens=reserve,
        headroom=j.headroom,
        baseline_tokens=base_case.count.tokens if base_case is not None else None,
        growth_tokens=j.growth_tokens,
        growth_percent=j.growth_percent,
        max_growth=growth,
        status="fail" if reasons else "pass",
        reasons=reasons,
        budget_source=AUTO if auto else None,
        assembled=AssembledView.of(request_view(rendered, collapse_context=True)),
        sections=count.sections,
    )
    if auto:
        apply_auto_budget(case, base_prompt_result, base_commit)
    return case


def resolve_auto_budgets(head: Results, base: Results | None) -> None:
    """Give every "auto" case of HEAD its budget from BASE's recall (the action measures both sides
    before either is compared, so the head's cases were counted without a base)."""
    for prompt in head.prompts:
        base_prompt = base.prompt(prompt.name) if base is not None else None
        for case in prompt.cases:
            apply_auto_budget(case, base_prompt, base.commit if base is not None else None)
