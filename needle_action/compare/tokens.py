"""Token deltas, base -> head, judged by the one budget rule (:func:`needle_action.tokens.budget.judge`)."""

from __future__ import annotations

from needle_action.compare.models import (
    YELLOW_GROWTH_SHARE,
    YELLOW_HEADROOM_SHARE,
    Tier,
    TokenDelta,
)
from needle_action.results import BudgetCase
from needle_action.tokens.budget import judge


def _tier(t: TokenDelta) -> Tier:
    if not (t.budget_ok and t.growth_ok):
        return "red"
    if (
        t.growth_allowed is not None
        and t.delta is not None
        and t.delta > 0
        and (t.growth_allowed == 0 or t.delta > YELLOW_GROWTH_SHARE * t.growth_allowed)
    ):
        return "yellow"
    if (
        t.headroom is not None
        and t.max_input_tokens
        and t.headroom < YELLOW_HEADROOM_SHARE * t.max_input_tokens
    ):
        return "yellow"
    return "green"


def _sections(case: BudgetCase) -> dict[str, int] | None:
    """Tokens per section of the request (``BudgetCase.sections``), when the measuring side split them."""
    sections: object = getattr(case, "sections", None)  # written by needle versions that count them
    dump = getattr(sections, "model_dump", None)
    if callable(dump):
        sections = dump()
    if not isinstance(sections, dict):
        return None
    return {str(k): int(v) for k, v in sections.items() if isinstance(v, int | float)}


def token_delta(head: BudgetCase | None, base: BudgetCase | None) -> TokenDelta:
    if head is None:
        assert base is not None
        return TokenDelta(
            fixture=base.fixture,
            base_tokens=base.count.tokens,
            head_tokens=None,
            counter=base.count.counter,
            exact=base.count.exact,
            base_sections=_sections(base),
        )
    j = judge(
        head.count.tokens,
        reserve=head.reserve_output_tokens,
        max_input_tokens=head.max_input_tokens,
        max_growth=head.max_growth,
        base_tokens=base.count.tokens if base else None,
    )
    t = TokenDelta(
        fixture=head.fixture,
        base_tokens=base.count.tokens if base else None,
        head_tokens=head.count.tokens,
        counter=head.count.counter,
        exact=head.count.exact,
        max_input_tokens=head.max_input_tokens,
        reserve_output_tokens=head.reserve_output_tokens,
        headroom=j.headroom,
        max_growth=str(head.max_growth) if head.max_growth is not None else None,
        delta=j.growth_tokens,
        percent=j.growth_percent,
        growth_allowed=round(j.growth_allowed, 2) if j.growth_allowed is not None else None,
        budget_ok=not j.over_budget,
        growth_ok=not j.over_growth,
        budget_source=head.budget_source,
        same_request_as=head.same_request_as,
        base_sections=_sections(base) if base else None,
        head_sections=_sections(head),
    )
    t.reasons = [r for r in (budget_reason(t), growth_reason(t)) if r]
    t.tier = _tier(t)
    return t


def budget_reason(t: TokenDelta) -> str | None:
    if t.budget_ok or t.headroom is None:
        return None
    return (
        f"{t.head_tokens} tokens + {t.reserve_output_tokens} reserved for output exceed "
        f"max_input_tokens {t.max_input_tokens} by {-t.headroom}"
    )


def growth_reason(t: TokenDelta) -> str | None:
    if t.growth_ok or t.growth_allowed is None:
        return None
    pct = f" (+{t.percent:g}%)" if t.percent is not None else ""
    return (
        f"grew by {t.delta} tokens{pct} vs base, more than max_growth {t.max_growth} "
        f"(= {t.growth_allowed:g} tokens)"
    )
