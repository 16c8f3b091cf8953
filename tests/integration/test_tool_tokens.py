"""tiktoken counts of requests with tools, tool calls and images (real encodings)."""

from __future__ import annotations

import base64
import struct

import pytest

from needle_action.request.wire import from_body
from needle_action.tokens import TiktokenCounter, load_encoding
from needle_action.tokens.openai_chat import chat_tokens, tools_tokens

# OpenAI cookbook, "How to count tokens with tiktoken", section 7: the example request and the
# prompt_tokens the API reported for it (101 for gpt-4o and gpt-4o-mini, 105 for gpt-3.5/gpt-4)
COOKBOOK_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given location",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {
                        "type": "string",
                        "description": "The city and state, e.g. San Francisco, CA",
                    },
                    "unit": {
                        "type": "string",
                        "description": "The unit of temperature to return",
                        "enum": ["celsius", "fahrenheit"],
                    },
                },
                "required": ["location"],
            },
        },
    }
]
COOKBOOK_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful assistant that can answer to questions about the weather.",
    },
    {"role": "user", "content": "What's the weather like in San Francisco?"},
]


def _count(encoding: str):
    enc = load_encoding(encoding)
    return lambda text: len(enc.encode_ordinary(text))


@pytest.mark.parametrize(
    ("model", "encoding", "expected"),
    [("gpt-4o", "o200k_base", 101), ("gpt-4o-mini", "o200k_base", 101), ("gpt-4", "cl100k_base", 105)],
)
def test_the_cookbook_example_counts_what_the_api_reported(model, encoding, expected):
    body = {"model": model, "messages": COOKBOOK_MESSAGES, "tools": COOKBOOK_TOOLS}
    assert chat_tokens(body, _count(encoding), model) == expected


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4o-mini"])
def test_the_counter_counts_the_cookbook_request_exactly(model):
    prompt = from_body({"model": model, "messages": COOKBOOK_MESSAGES, "tools": COOKBOOK_TOOLS})
    counter = TiktokenCounter("o200k_base", model=model)
    assert counter.count_prompt(prompt) == 101
    assert counter.exact_for(prompt) is True
    # the same request without its tools: the tools cost what num_tokens_for_tools says they cost
    bare = from_body({"model": model, "messages": COOKBOOK_MESSAGES})
    assert counter.count_prompt(bare) == 101 - tools_tokens(COOKBOOK_TOOLS, _count("o200k_base"), model)


def test_tools_on_an_undocumented_model_family_are_approximate():
    prompt = from_body({"model": "x", "messages": COOKBOOK_MESSAGES, "tools": COOKBOOK_TOOLS})
    assert TiktokenCounter("o200k_base", model="o3-mini").exact_for(prompt) is False


def test_tool_calls_and_tool_messages_are_counted():
    count = _count("o200k_base")
    call = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q": "zebra"}'}}
    messages = [
        {"role": "user", "content": "find it"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "the result text"},
    ]
    with_calls = chat_tokens({"messages": messages}, count, "gpt-4o")
    plain = chat_tokens({"messages": [messages[0]]}, count, "gpt-4o")
    assert with_calls - plain == (3 + count("assistant") + 3 + count("search") + count('{"q": "zebra"}')) + (
        3 + count("tool") + count("the result text") + count("call_1")
    )


def _png(width: int, height: int, padding: int = 1_000_000) -> str:
    head = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", width, height)
    return base64.b64encode(head + b"\0" * padding).decode()


def test_a_large_image_costs_its_pixels_not_its_base64_length():
    data = _png(1024, 1024)  # ~1.3M base64 characters
    prompt = from_body(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": data},
                        },
                        {"type": "text", "text": "What is in this picture?"},
                    ],
                }
            ]
        }
    )
    text_only = from_body({"messages": [{"role": "user", "content": "What is in this picture?"}]})
    gpt = TiktokenCounter("o200k_base", model="gpt-4o")
    assert gpt.count_prompt(prompt) - gpt.count_prompt(text_only) == 765  # 85 + 170 x 4 tiles
    claude = TiktokenCounter("o200k_base", model="claude-sonnet-5-5")
    assert claude.count_prompt(prompt) - claude.count_prompt(text_only) == 1399  # 1024 x 1024 / 750
