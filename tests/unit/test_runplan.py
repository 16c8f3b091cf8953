"""`needle plan` (recall/plan/cost.py): calls, tokens, dollars and detectable drops from the settings alone,
and the max_cost_usd check before a compared run starts."""

from __future__ import annotations

import pytest

from needle_action.config.model import PromptConfig, RecallSettings
from needle_action.core.errors import ConfigError
from needle_action.recall.plan.cost import as_json, check_cost, format_plans, one_line, plan_prompt


def _prompt(**recall) -> PromptConfig:
    settings = RecallSettings(sizes=[2000, 8000, 16000], depths=[0.0, 0.25, 0.5, 0.75, 1.0], **recall)
    return PromptConfig(
        name="rag",
        template="prompts/rag.j2",
        model="claude-sonnet-5-5",
        provider="anthropic",
        recall=settings,
    )


def test_the_plan_of_the_default_grid():
    p = plan_prompt(_prompt())
    assert p.trials_per_cell == 20
    assert p.planned_calls == 300
    assert p.input_tokens == (2000 + 8000 + 16000) * 5 * 20
    assert p.expected_calls_no_change < 0.65 * p.planned_calls  # the pass rule stops most no-change runs
    assert p.expected_calls_no_change <= p.expected_calls_at_min_drop <= p.planned_calls
    assert p.usd.batch == pytest.approx(p.usd.uncached / 2, rel=0.01)
    assert p.usd.cached < p.usd.uncached
    # $3/M input on 2.6M tokens ($7.80) + 300 x 64 output tokens at $15/M ($0.29)
    assert p.usd.uncached == pytest.approx(8.088, abs=0.01)
    assert p.detectable_drop["middle depths (25%-75%)"] == pytest.approx(0.2, abs=0.02)
    doc = as_json([p])["prompts"][0]
    assert set(doc["usd"]) == {"uncached", "cached", "batch"}
    assert doc["planned_calls"] == 300
    assert "full plan 300 calls" in one_line([p])
    assert "rag" in format_plans([p])


def test_both_stop_rules_off_expect_the_full_plan():
    p = plan_prompt(_prompt(stop_on_drop=False, stop_on_no_change=False))
    assert p.expected_calls_no_change == p.expected_calls_at_min_drop == p.planned_calls


def test_max_cost_names_the_cheapest_settings_that_fit():
    prompt = _prompt(max_cost_usd=0.5, prompt_cache=False)
    with pytest.raises(ConfigError) as err:
        check_cost(prompt, plan_prompt(prompt))
    text = str(err.value) + (err.value.hint or "")
    assert "max_cost_usd" in text
    assert "recall.trials = " in text
    roomy = _prompt(max_cost_usd=100.0)
    check_cost(roomy, plan_prompt(roomy))  # fits: no error


def test_the_plan_states_the_power_the_comparison_replays(monkeypatch):
    """The figure is the comparison's design replayed at the assumed rate (0.9): the plan's normal
    approximation says 95.5%; the replay, with its looks and pass rule, a little more (a flat 0.9
    grid at 20 trials is paired and caught often), and fewer trials catch less."""
    from needle_action.stats import simulate

    p = plan_prompt(_prompt())
    assert p.power_method == "simulated"
    assert 0.85 <= p.power <= 1.0
    fewer = plan_prompt(_prompt(trials=6))
    assert fewer.power < p.power - 0.2
    assert "replayed on simulated pull requests" in format_plans([p])
    monkeypatch.setattr(simulate, "WORK", 1)  # a design too large to replay: the approximation, said
    approx = plan_prompt(_prompt(trials=7))
    assert approx.power_method == "approximation"
    assert "normal approximation" in format_plans([approx])
