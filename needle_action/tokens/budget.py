"""The budget gate: one prompt x fixture against its absolute budget and its growth vs the base.

Absolute: the request must leave room for the answer, so a case fails when
``tokens + reserve_output_tokens > max_input_tokens``; headroom is what is left
(negative = over). Growth: against the base branch's case for the same fixture, a case fails when
it grew by more than ``max_growth`` (a percentage of the base count or a number of tokens).
A prompt or fixture the base does not have is new: it has no growth check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from needle_action.assemble.prompt import RenderedPrompt
from needle_action.config.model import Growth, PromptSettings
from needle_action.results import BudgetCase, PromptResult, TokenCount


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
    return PurePosixPath(fixture).stem if fixture else None


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


def evaluate_case(
    prompt_cfg: PromptSettings,
    rendered: RenderedPrompt,
    count: TokenCount,
    base_prompt_result: PromptResult | None,
    *,
    index: int | None = None,
    head_fixtures: Sequence[str | None] | None = None,
) -> BudgetCase:
    """Apply the absolute budget and the growth limit to one counted case."""
    tokens = count.tokens
    reserve = prompt_cfg.reserve_output_tokens
    budget = prompt_cfg.max_input_tokens
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
    reasons: list[str] = []
    if j.over_budget and budget is not None and j.headroom is not None:
        reasons.append(f"{tokens:,} + {reserve:,} reserved > {budget:,} budget by {_tokens(-j.headroom)}")
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

    return BudgetCase(
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
    )
