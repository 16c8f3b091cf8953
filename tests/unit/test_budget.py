"""The budget gate on hand-built prompts and counts: absolute budget, growth, base matching."""

from __future__ import annotations

import pytest

from needle_action.config import PromptSettings
from needle_action.request.prompt import Message, RenderedPrompt
from needle_action.results import BudgetCase, PromptResult, TokenCount
from needle_action.tokens.budget import evaluate_case, match_base_case


def rendered(fixture: str | None = "fixtures/typical.yaml", text: str = "hello") -> RenderedPrompt:
    return RenderedPrompt(
        system="be brief", messages=(Message("user", text),), source="p.j2", fixture=fixture
    )


def count(tokens: int, *, counter: str = "tiktoken:o200k_base", factor: float = 1.0) -> TokenCount:
    return TokenCount(tokens=tokens, raw_tokens=tokens, counter=counter, exact=True, safety_factor=factor)


def settings(**kw) -> PromptSettings:
    return PromptSettings(**kw)


def base_with(*cases: tuple[str | None, int], counter: str = "tiktoken:o200k_base") -> PromptResult:
    return PromptResult(
        name="p",
        template="p.j2",
        model="m",
        cases=[
            BudgetCase(
                fixture=fx,
                content_hash="0" * 64,
                count=count(n, counter=counter),
                max_input_tokens=None,
                reserve_output_tokens=0,
                headroom=None,
                status="pass",
            )
            for fx, n in cases
        ],
    )


def test_fits_with_headroom():
    case = evaluate_case(
        settings(max_input_tokens=2000, reserve_output_tokens=500), rendered(), count(1200), None
    )
    assert case.status == "pass"
    assert case.headroom == 300
    assert case.reasons == []
    assert case.baseline_tokens is None
    assert case.growth_tokens is None
    assert case.content_hash == rendered().content_hash()


def test_exactly_full_passes():
    s = settings(max_input_tokens=2000, reserve_output_tokens=1024)
    assert evaluate_case(s, rendered(), count(976), None).status == "pass"


@pytest.mark.parametrize(
    ("budget", "reserve", "tokens", "reason"),
    [
        (2000, 1024, 977, "977 + 1,024 reserved > 2,000 budget by 1 token"),  # one token over full
        (2000, 1024, 1234, "1,234 + 1,024 reserved > 2,000 budget by 258 tokens"),
        (1000, 1000, 1, "1 + 1,000 reserved > 1,000 budget by 1 token"),  # the reserve alone
    ],
)
def test_over_budget_fails_with_a_sentence_of_the_numbers(budget, reserve, tokens, reason):
    case = evaluate_case(
        settings(max_input_tokens=budget, reserve_output_tokens=reserve), rendered(), count(tokens), None
    )
    assert case.status == "fail"
    assert case.headroom == budget - reserve - tokens
    assert case.reasons == [reason]


def test_no_budget_means_no_absolute_check():
    case = evaluate_case(settings(max_input_tokens=None), rendered(), count(10**6), None)
    assert case.status == "pass"
    assert case.headroom is None
    assert case.max_input_tokens is None


def test_budget_uses_tokens_after_the_safety_factor():
    c = TokenCount(
        tokens=1150, raw_tokens=1000, counter="tiktoken:o200k_base", exact=False, safety_factor=1.15
    )
    case = evaluate_case(settings(max_input_tokens=1600, reserve_output_tokens=500), rendered(), c, None)
    assert case.status == "fail"
    assert case.headroom == -50


def test_growth_percent_over_limit_fails():
    s = settings(max_growth="10%")
    case = evaluate_case(s, rendered(), count(1235), base_with(("fixtures/typical.yaml", 1000)))
    assert case.status == "fail"
    assert case.baseline_tokens == 1000
    assert case.growth_tokens == 235
    assert case.growth_percent == pytest.approx(23.5)
    assert str(case.max_growth) == "10%"
    assert case.reasons == ["grew 23.5% vs base (limit 10%)"]


def test_growth_at_the_limit_passes():
    s = settings(max_growth="10%")
    case = evaluate_case(s, rendered(), count(1100), base_with(("fixtures/typical.yaml", 1000)))
    assert case.status == "pass"
    assert case.growth_tokens == 100


def test_growth_absolute_tokens():
    s = settings(max_growth=500)
    ok = evaluate_case(s, rendered(), count(1500), base_with(("fixtures/typical.yaml", 1000)))
    bad = evaluate_case(s, rendered(), count(1501), base_with(("fixtures/typical.yaml", 1000)))
    assert ok.status == "pass"
    assert bad.status == "fail"
    assert bad.reasons == ["grew 501 tokens vs base (limit 500 tokens)"]


def test_shrinking_never_fails_growth():
    case = evaluate_case(
        settings(max_growth="0%"), rendered(), count(800), base_with(("fixtures/typical.yaml", 1000))
    )
    assert case.status == "pass"
    assert case.growth_tokens == -200
    assert case.growth_percent == pytest.approx(-20.0)


def test_growth_recorded_without_a_limit():
    case = evaluate_case(settings(), rendered(), count(3000), base_with(("fixtures/typical.yaml", 1000)))
    assert case.status == "pass"
    assert case.growth_tokens == 2000
    assert case.max_growth is None


def test_new_prompt_has_no_growth_check():
    case = evaluate_case(settings(max_growth="1%"), rendered(), count(5000), None)
    assert case.status == "pass"
    assert case.baseline_tokens is None


def test_new_fixture_is_not_compared_with_another_fixture():
    base = base_with(("fixtures/typical.yaml", 100))
    head = ["fixtures/typical.yaml", "fixtures/worst.yaml"]
    case = evaluate_case(
        settings(max_growth="10%"),
        rendered("fixtures/worst.yaml"),
        count(5000),
        base,
        index=1,
        head_fixtures=head,
    )
    assert case.status == "pass"
    assert case.baseline_tokens is None


def test_absolute_and_growth_failures_both_reported():
    s = settings(max_input_tokens=1000, reserve_output_tokens=0, max_growth="10%")
    case = evaluate_case(s, rendered(), count(1200), base_with(("fixtures/typical.yaml", 1000)))
    assert case.status == "fail"
    assert len(case.reasons) == 2
    assert case.reasons[0].startswith("1,200 + 0 reserved > 1,000 budget by 200")
    assert case.reasons[1] == "grew 20.0% vs base (limit 10%)"


def test_changed_counter_is_noted_in_the_growth_reason():
    base = base_with(("fixtures/typical.yaml", 1000), counter="tiktoken:cl100k_base")
    case = evaluate_case(settings(max_growth="5%"), rendered(), count(1100), base)
    assert case.status == "fail"
    assert "base was counted with tiktoken:cl100k_base" in case.reasons[0]


def test_zero_token_base_any_growth_beyond_absolute_limit():
    case = evaluate_case(
        settings(max_growth="10%"), rendered(), count(5), base_with(("fixtures/typical.yaml", 0))
    )
    assert case.status == "fail"
    assert case.growth_percent is None
    assert case.reasons == ["grew 5 tokens vs base (limit 10%)"]


# ------------------------------------------------------------------ which base case is "the same"


def test_match_exact_fixture_wins_over_index():
    base = base_with(("a.yaml", 1), ("b.yaml", 2))
    assert match_base_case(base, "b.yaml", index=0, head_fixtures=["b.yaml", "a.yaml"]).count.tokens == 2


def test_match_same_stem_other_format():
    base = base_with(("fixtures/typical.yaml", 7), ("fixtures/worst.yaml", 9))
    assert match_base_case(base, "fixtures/typical.json").count.tokens == 7


def test_match_renamed_fixture_by_index():
    base = base_with(("fixtures/small.yaml", 7), ("fixtures/large.yaml", 9))
    head = ["fixtures/typical.yaml", "fixtures/worst.yaml"]
    assert match_base_case(base, "fixtures/worst.yaml", index=1, head_fixtures=head).count.tokens == 9


def test_match_the_only_case_when_renamed():
    base = base_with(("fixtures/old.yaml", 7))
    assert (
        match_base_case(base, "fixtures/new.yaml", index=3, head_fixtures=["fixtures/new.yaml"]).count.tokens
        == 7
    )


def test_no_fallback_without_knowing_the_head_fixtures():
    base = base_with(("fixtures/old.yaml", 7))
    assert match_base_case(base, "fixtures/new.yaml", index=0) is None


def test_no_fixture_matches_no_fixture():
    base = base_with((None, 42))
    assert match_base_case(base, None).count.tokens == 42


def test_empty_base_matches_nothing():
    assert match_base_case(base_with(), "a.yaml", index=0, head_fixtures=["a.yaml"]) is None
    assert match_base_case(None, "a.yaml") is None
