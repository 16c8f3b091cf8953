"""The offline estimate of a Claude request with many tools against count_tokens (the loopback
fake, which adds the documented tool-use system prompt by its own table): within 10%, for
tool_choice auto and for a forced tool, where leaving the tool-use prompt out read ~35% low."""

from __future__ import annotations

import json

import pytest

from needle_action.config import ProviderSettings
from needle_action.request.prompt import Message, RenderedPrompt
from needle_action.tokens import TiktokenCounter
from needle_action.tokens.anthropic_counter import AnthropicCounter
from needle_action.tokens.claude_offline import tool_prompt_tokens
from tests.builders import Project
from tests.needle_cli import invoke_in

MODEL = "claude-sonnet-5-5"


def _tool(name: str, description: str, **props: tuple[str, str]) -> dict:
    return {
        "name": name,
        "description": description,
        "input_schema": {
            "type": "object",
            "properties": {k: {"type": t, "description": d} for k, (t, d) in props.items()},
            "required": list(props)[:1],
        },
    }


# a home-energy assistant's twelve tools (our own schemas, shaped like an agent's real ones)
TOOLS = [
    _tool(
        "read_meter",
        "Read the latest value of an electricity, gas or water meter in the household.",
        meter_id=("string", "The meter's identifier as printed on the device"),
        unit=("string", "kWh, m3 or litres; defaults to the meter's own unit"),
    ),
    _tool(
        "list_appliances",
        "List the appliances registered for a room, with their rated power and schedule.",
        room=("string", "Room name, e.g. kitchen or garage"),
        include_idle=("boolean", "Whether appliances that are switched off are listed too"),
    ),
    _tool(
        "set_thermostat",
        "Set the target temperature of a heating zone for a period of time.",
        zone=("string", "The heating zone, e.g. upstairs"),
        celsius=("number", "Target temperature in degrees Celsius, between 5 and 28"),
        until=("string", "ISO 8601 time at which the previous schedule resumes"),
    ),
    _tool(
        "tariff_lookup",
        "Look up the household's current energy tariff and its price per unit by time of day.",
        fuel=("string", "electricity or gas"),
        date=("string", "The day to price, ISO 8601; today when left out"),
    ),
    _tool(
        "forecast_solar",
        "Forecast the rooftop solar yield in kWh for each hour of the coming days.",
        days=("integer", "How many days ahead, 1 to 7"),
        panel_group=("string", "Which array of panels; all of them when left out"),
    ),
    _tool(
        "battery_status",
        "Report the home battery's charge, health and the mode it is running in.",
        detail=("string", "summary or full"),
    ),
    _tool(
        "schedule_charge",
        "Schedule the electric car's charging within a window, cheapest hours first.",
        start=("string", "Earliest start, ISO 8601"),
        end=("string", "Time by which the car must be charged, ISO 8601"),
        target_percent=("integer", "Charge level to reach, 20 to 100"),
    ),
    _tool(
        "usage_history",
        "Return the household's consumption per day or per hour over a period, for one fuel.",
        fuel=("string", "electricity, gas or water"),
        start=("string", "First day, ISO 8601"),
        end=("string", "Last day, ISO 8601"),
        resolution=("string", "hour or day"),
    ),
    _tool(
        "compare_neighbours",
        "Compare the household's usage with similar homes in the same postcode area.",
        fuel=("string", "electricity or gas"),
        months=("integer", "How many months back to compare"),
    ),
    _tool(
        "open_ticket",
        "Open a support ticket with the energy supplier about a billing or metering problem.",
        subject=("string", "One line saying what is wrong"),
        body=("string", "The details, in the customer's words"),
        priority=("string", "low, normal or urgent"),
    ),
    _tool(
        "notify_household",
        "Send a notification to the household's phones, e.g. when a price spike is coming.",
        message=("string", "The text of the notification, at most 200 characters"),
        channel=("string", "push, sms or email"),
    ),
    _tool(
        "appliance_power",
        "Switch a smart plug on or off, or read the power it is drawing right now.",
        plug_id=("string", "The smart plug's identifier"),
        action=("string", "on, off or read"),
    ),
]


def _request(tool_choice: dict | None) -> RenderedPrompt:
    return RenderedPrompt(
        system="You are the household's energy assistant. Use the tools to answer; be brief.",
        messages=(
            Message("user", "Will the battery cover tonight's peak, or should I charge the car at noon?"),
        ),
        tools=tuple(TOOLS),
        tool_choice=tool_choice,
    )


@pytest.mark.parametrize(
    "choice", [None, {"type": "auto"}, {"type": "any"}, {"type": "tool", "name": "battery_status"}]
)
def test_offline_estimate_of_twelve_tools_is_within_ten_percent_of_count_tokens(anthropic_env, choice):
    prompt = _request(choice)
    exact = AnthropicCounter(model=MODEL, provider_settings=ProviderSettings()).count_prompt(prompt)
    offline = TiktokenCounter("o200k_base", model=MODEL)
    estimate = offline.count_prompt(prompt)
    assert 0.90 <= estimate / exact <= 1.10, (estimate, exact)
    assert offline.count_many([prompt]) == [estimate]  # the batched path counts the same
    # without the tool-use system prompt the estimate would be far lower
    assert (estimate - tool_prompt_tokens(MODEL, choice)) / exact < 0.90


def test_the_tool_use_prompt_follows_the_model_family_and_tool_choice():
    assert tool_prompt_tokens("claude-sonnet-4-5", {"type": "auto"}) == 346
    assert tool_prompt_tokens("claude-sonnet-4-5", None) == 346
    assert tool_prompt_tokens("claude-opus-4-1", {"type": "none"}) == 346
    assert tool_prompt_tokens("claude-opus-4-1", {"type": "any"}) == 313
    assert tool_prompt_tokens("claude-3-opus-20240229", {"type": "auto"}) == 530
    assert tool_prompt_tokens("claude-3-haiku-20240307", {"type": "tool", "name": "x"}) == 340
    assert tool_prompt_tokens("anthropic.claude-3-sonnet-20240229-v1:0", None) == 159


def test_the_budget_table_calls_an_offline_claude_count_an_estimate(tmp_path):
    project = (
        Project(tmp_path)
        .template("prompts/energy.j2", "system:\nYou are the energy assistant.\nuser:\n{{ ask }}\n")
        .fixture("fixtures/energy.yaml", {"ask": "Should I charge the car at noon?"})
        .file("tools.json", json.dumps(TOOLS))
        .config(
            f"""
            [defaults]
            model = "{MODEL}"
            tokenizer = "anthropic"

            [prompts.energy]
            template = "prompts/energy.j2"
            fixtures = ["fixtures/energy.yaml"]
            tools = "tools.json"
            max_input_tokens = 4000
            """
        )
    )
    result = invoke_in(project.root, "budget", "--offline")
    assert result.exit_code == 0, result.output
    assert "tiktoken:o200k_base (estimate, x1.15 safety factor)" in result.output
