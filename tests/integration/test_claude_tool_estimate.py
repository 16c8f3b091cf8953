"""The offline estimate of a Claude request with many tools against count_tokens (the loopback
fake, which adds the documented tool-use system prompt by its own table): within 10%, for
tool_choice auto and for a forced tool, where leaving the tool-use prompt out read ~35% low."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from needle_action.config import ProviderSettings
from needle_action.request.prompt import Message, RenderedPrompt
from needle_action.request.wire import from_body
from needle_action.tokens import TiktokenCounter
from needle_action.tokens.anthropic_counter import AnthropicCounter
from needle_action.tokens.claude_offline import tool_prompt_tokens
from tests.builders import Project
from tests.needle_cli import invoke_in

MODEL = "claude-sonnet-5-5"


# a home-energy assistant's twelve tools (our own schemas, shaped like an agent's real ones): a
# tools file as an agent keeps it, which the budget test below hands to needle as it stands
TOOLS_FILE = Path(__file__).resolve().parents[1] / "data" / "energy_tools.json"
TOOLS = json.loads(TOOLS_FILE.read_text(encoding="utf-8"))


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
        .file("tools.json", TOOLS_FILE.read_text(encoding="utf-8"))
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


def _png(width: int, height: int) -> str:
    head = b"\x89PNG\r\n\x1a\n" + (13).to_bytes(4, "big") + b"IHDR"
    return base64.b64encode(head + width.to_bytes(4, "big") + height.to_bytes(4, "big") + b"\0" * 64).decode()


@pytest.mark.parametrize(("size", "cost"), [((800, 600), 640), ((4000, 3000), None)])
def test_an_image_costs_what_count_tokens_charges_for_its_pixels(anthropic_env, size, cost):
    """The offline estimate prices an image by the vision guide's rule; count_tokens (the fake,
    which reads the pixels by its own code) charges the same: 800 x 600 is 640 tokens, a photo too
    large is scaled down to the ceiling, never charged by its base64 length."""
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _png(*size)}}
    question = {"type": "text", "text": "Which meter reading is on this photo?"}
    with_image = from_body({"messages": [{"role": "user", "content": [image, question]}]})
    text_only = from_body({"messages": [{"role": "user", "content": [question]}]})
    api = AnthropicCounter(model=MODEL, provider_settings=ProviderSettings())
    charged = api.count_prompt(with_image) - api.count_prompt(text_only)
    offline = TiktokenCounter("o200k_base", model=MODEL)
    estimated = offline.count_prompt(with_image) - offline.count_prompt(text_only)
    assert charged == estimated, (charged, estimated)
    assert charged == cost if cost is not None else 1_500 <= charged <= 1_600
