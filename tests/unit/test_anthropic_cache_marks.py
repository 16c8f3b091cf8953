"""Needle's cache breakpoints on a request body: split where the shared prefix ends, text unchanged."""

from __future__ import annotations

from needle_action.providers.anthropic import build_request
from needle_action.providers.anthropic_cache import own_markers, split_content
from needle_action.providers.base import Breakpoint
from needle_action.request.prompt import Message, RenderedPrompt
from needle_action.request.wire import anthropic_body

EPHEMERAL = {"type": "ephemeral"}


def _agent(context: str) -> RenderedPrompt:
    return RenderedPrompt(
        system="be brief",
        messages=(
            Message("user", "find the code"),
            Message(
                "assistant", ({"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "code"}},)
            ),
            Message(
                "user",
                (
                    {"type": "tool_result", "tool_use_id": "t1", "content": context},
                    {"type": "text", "text": "What is the code?"},
                ),
            ),
        ),
        tools=({"name": "search", "description": "d", "input_schema": {"type": "object"}},),
    )


def test_a_point_inside_a_tool_result_splits_its_content():
    context = "filler one. The code is QZT-4821. filler two."
    at = context.index("The code")
    body = build_request("claude-sonnet-5-5", _agent(context), 64, (Breakpoint(2, at, cache=True),))
    assert body["tools"][0]["name"] == "search"
    assert body["system"] == "be brief"
    result, question = body["messages"][2]["content"]
    assert result["type"] == "tool_result"
    assert result["tool_use_id"] == "t1"
    assert result["content"] == [
        {"type": "text", "text": context[:at], "cache_control": EPHEMERAL},
        {"type": "text", "text": context[at:]},
    ]
    assert question == {"type": "text", "text": "What is the code?"}


def test_a_point_in_the_text_after_a_tool_result_counts_the_blank_line():
    blocks = (
        {"type": "tool_result", "tool_use_id": "t1", "content": "abc"},
        {"type": "text", "text": "defgh"},
    )
    # Message.text is "abc\n\ndefgh": offset 7 is after "de"
    assert Message("user", blocks).text[:7] == "abc\n\nde"
    out = split_content(blocks, [Breakpoint(0, 7, cache=True)], [4])
    assert out[1:] == [
        {"type": "text", "text": "de", "cache_control": EPHEMERAL},
        {"type": "text", "text": "fgh"},
    ]


def test_the_apps_own_markers_leave_fewer_for_needle():
    tools = tuple(
        {"name": f"t{i}", "input_schema": {"type": "object"}, "cache_control": EPHEMERAL} for i in range(3)
    )
    prompt = RenderedPrompt(system=None, messages=(Message("user", "x" * 100),), tools=tools)
    points = tuple(Breakpoint(0, n, cache=True) for n in (20, 40, 60))
    body = build_request("claude-sonnet-5-5", prompt, 16, points)
    assert own_markers(body) == 4  # the app's 3 plus one of needle's: the API's limit
    assert "".join(b["text"] for b in body["messages"][0]["content"]) == "x" * 100


def test_without_breakpoints_the_body_is_the_prompts_own():
    prompt = _agent("ctx")
    assert build_request("m", prompt, 10) == anthropic_body(prompt, "m", 10)


def test_sampling_parameters_of_the_template_are_left_out_of_the_call():
    prompt = RenderedPrompt(
        system="be brief",
        messages=(Message("user", "hi"),),
        params={"temperature": 0.2, "top_p": 0.9, "top_k": 5, "metadata": {"user_id": "u"}},
    )
    request = build_request("claude-sonnet-5-5", prompt, 64)
    assert not {"temperature", "top_p", "top_k"} & request.keys()
    assert request["metadata"] == {"user_id": "u"}  # other parameters are sent as declared
