"""The request model (request/prompt.py): blocks, tools, params, wire bodies both ways, views."""

from __future__ import annotations

import json

import pytest

from needle_action.request.blocks import RequestShapeError
from needle_action.request.prompt import ContextSlot, Message, RenderedPrompt
from needle_action.request.toolformats import item_line, to_anthropic_tools, to_openai_tools
from needle_action.request.view import request_view
from needle_action.request.wire import anthropic_body, from_body, openai_body
from needle_action.tokens.sections import PLACEHOLDER, variants, without_context
from tests.samples import weather_agent

WEATHER_OPENAI = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def agent_prompt(**extra) -> RenderedPrompt:
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "12 C, rain"}
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    return weather_agent(
        (result, {"type": "text", "text": "Summarise."}), (WEATHER,), params=thinking, **extra
    )


def test_plain_prompt_keeps_the_old_api_and_hash_shape():
    p = RenderedPrompt(system="S", messages=(Message("user", "hi"),))
    assert p.system_blocks == ({"type": "text", "text": "S"},)
    assert p.texts() == ["S", "hi"]
    assert request_view(p) == "--- system ---\nS\n--- user ---\nhi\n"
    assert p.to_json() == {"system": "S", "messages": [{"role": "user", "content": "hi"}]}
    assert p.messages[0].text == "hi"


def test_system_from_blocks_and_cache_control_reach_the_body():
    blocks = (
        {"type": "text", "text": "A"},
        {"type": "text", "text": "B", "cache_control": {"type": "ephemeral"}},
    )
    p = RenderedPrompt(system=None, messages=(Message("user", "q"),), system_blocks=blocks)
    assert p.system == "A\n\nB"
    body = anthropic_body(p, "claude-x", 100)
    assert body["system"] == list(blocks)
    assert body["max_tokens"] == 100
    assert body["model"] == "claude-x"


def test_message_text_joins_text_result_and_document_blocks():
    m = Message(
        "user",
        (
            {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "R"}]},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "D"}},
            {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
            {"type": "text", "text": "T"},
        ),
    )
    assert m.text == "R\n\nD\n\nT"


def test_content_hash_covers_tools_choice_and_params():
    base = agent_prompt()
    hashes = {
        base.content_hash(),
        RenderedPrompt(system=base.system, messages=base.messages, tools=base.tools).content_hash(),
        RenderedPrompt(
            system=base.system, messages=base.messages, tools=(), params=base.params
        ).content_hash(),
        RenderedPrompt(
            system=base.system, messages=base.messages, tools=base.tools, tool_choice={"type": "any"}
        ).content_hash(),
    }
    assert len(hashes) == 4


def test_anthropic_body_is_the_model_itself():
    body = anthropic_body(agent_prompt(), "claude-x", 256)
    assert body["tools"] == [WEATHER]
    assert body["tool_choice"] == {"type": "auto"}
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["messages"][1]["content"][1]["type"] == "tool_use"
    assert body["system"] == "You are terse."


def test_openai_body_translates_tools_calls_and_results():
    body = openai_body(agent_prompt(), "gpt-4o", 256)
    assert body["tools"] == [WEATHER_OPENAI]
    assert body["tool_choice"] == "auto"
    assert "thinking" not in body
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "user"]
    call = body["messages"][2]["tool_calls"][0]
    assert call["function"] == {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "toolu_1", "content": "12 C, rain"}
    assert body["messages"][4]["content"] == "Summarise."


def test_both_bodies_read_back_to_the_same_request():
    p = agent_prompt()
    from_anthropic = from_body(anthropic_body(p, "m", 1))
    assert from_anthropic.content_hash() == p.content_hash()
    from_openai = from_body(openai_body(p, "m", 1))
    assert from_openai.tools == p.tools
    assert from_openai.tool_choice == {"type": "auto"}
    assert [m.role for m in from_openai.messages] == ["user", "assistant", "user", "user"]
    assert from_openai.messages[2].content[0]["tool_use_id"] == "toolu_1"


def test_structured_output_is_translated_both_ways():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    p = RenderedPrompt(
        system=None,
        messages=(Message("user", "q"),),
        params={"output_config": {"format": {"type": "json_schema", "schema": schema}}},
    )
    rf = openai_body(p, "m", 1)["response_format"]
    assert rf["type"] == "json_schema"
    assert rf["json_schema"]["schema"] == schema
    back = RenderedPrompt(system=None, messages=p.messages, params={"response_format": rf})
    assert anthropic_body(back, "m", 1)["output_config"] == {
        "format": {"type": "json_schema", "schema": schema}
    }


def test_unknown_params_pass_through_to_both():
    p = RenderedPrompt(system=None, messages=(Message("user", "q"),), params={"frobnicate": 3})
    assert anthropic_body(p, "m", 1)["frobnicate"] == 3
    assert openai_body(p, "m", 1)["frobnicate"] == 3


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messages": [{"role": "user", "content": [{"type": "video"}]}]}, "messages[0].content[0].type"),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "r"}]}
                ]
            },
            "messages[0].content[0].tool_use_id",
        ),
        ({"messages": [{"role": "user", "content": "q"}], "tools": [{"description": "no name"}]}, "tools[0]"),
        ({"messages": [{"role": "tool", "content": "r"}]}, "messages[0].tool_call_id"),
        ({"messages": "nope"}, "messages"),
    ],
)
def test_from_body_names_the_bad_field(body, field):
    with pytest.raises(RequestShapeError) as info:
        from_body(body)
    assert info.value.field_path == field
    assert isinstance(info.value, ValueError)


def test_tool_formats_convert_both_ways_and_names_stay_unique():
    assert to_anthropic_tools([WEATHER_OPENAI]) == (WEATHER,)
    assert to_anthropic_tools({"tools": [WEATHER]}) == (WEATHER,)
    flat = {"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True}
    assert to_anthropic_tools([flat]) == ({"name": "f", "input_schema": {"type": "object"}, "strict": True},)
    assert to_openai_tools(to_anthropic_tools([WEATHER_OPENAI])) == [WEATHER_OPENAI]
    with pytest.raises(RequestShapeError) as info:
        to_anthropic_tools([WEATHER, WEATHER_OPENAI])
    assert info.value.field_path == "tools[1].name"


def test_item_line_finds_the_top_level_item():
    text = '[\n  {"name": "a", "input_schema": {}},\n  {"x": [1, 2]},\n  {"name": "c"}\n]'
    assert item_line(text, "tools[0].name") == 2
    assert item_line(text, "tools[1]") == 3
    assert item_line(text, "tools[2]") == 4


def text_context_prompt() -> RenderedPrompt:
    return RenderedPrompt(
        system="Answer from the sources.",
        messages=(Message("user", "Sources:\nDOC ONE\nDOC TWO\nQuestion: why?"),),
        context_slot=ContextSlot(0, None),
        context_span=(9, 24),
        meta={"context_items": 2},
    )


def test_sections_partition_the_request_around_the_context():
    p = text_context_prompt()
    assert p.context_text() == "DOC ONE\nDOC TWO"
    emptied = without_context(p)
    assert emptied is not None
    assert emptied.messages[0].text == "Sources:\n" + PLACEHOLDER + "\nQuestion: why?"
    assert emptied.system == "Answer from the sources."
    a = variants(agent_prompt())
    assert a["tools"].tools == ()
    assert a["tools"].tool_choice is None
    assert a["params"].params == {}
    assert a["params"].tools == agent_prompt().tools
    assert "context" not in a  # no slot: nothing to empty


def test_view_collapses_the_context_slot():
    p = text_context_prompt()
    assert "DOC ONE" in request_view(p)
    collapsed = request_view(p, collapse_context=True)
    assert "DOC ONE" not in collapsed
    assert "Sources:\n[context: 15 chars, 2 items]\nQuestion: why?" in collapsed


def test_view_labels_tools_tool_turns_and_params():
    v = request_view(agent_prompt())
    assert '--- tools ---\n{\n  "description": "Weather for a city"' in v
    assert '--- assistant ---\nLet me look.\n--- tool_use get_weather ---\n{\n  "city": "Paris"\n}' in v
    assert "--- tool_result ---\n12 C, rain\n--- user ---\nSummarise." in v
    assert v.rstrip().endswith('"type": "enabled"\n  },\n  "tool_choice": {\n    "type": "auto"\n  }\n}')


def test_block_slot_context_and_collapse():
    docs = tuple(
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": d}, "title": d}
        for d in ("one", "two")
    )
    p = RenderedPrompt(
        system=None,
        messages=(Message("user", (*docs, {"type": "text", "text": "Q?"})),),
        context_slot=(0, 0),
        context_blocks=2,
    )
    assert p.context_slot == ContextSlot(0, 0)
    assert p.context_text() == "one\n\ntwo"
    emptied = without_context(p)
    assert emptied is not None
    assert [b.get("type") for b in emptied.messages[0].blocks] == ["document", "text"]
    assert emptied.messages[0].blocks[-1] == {"type": "text", "text": "Q?"}
    assert (
        request_view(p, collapse_context=True)
        == "--- document ---\n[context: 8 chars, 2 items]\n--- user ---\nQ?\n"
    )


def test_validate_rejects_a_result_without_its_call():
    p = RenderedPrompt(
        system=None,
        messages=(Message("user", ({"type": "tool_result", "tool_use_id": "nope", "content": "x"},)),),
    )
    with pytest.raises(RequestShapeError, match="no tool_use"):
        p.validate()
    assert agent_prompt().validate() is not None


def test_locate_spans_first_to_last_item_and_stays_cheap_on_big_contexts():
    from needle_action.assemble.context import locate

    items = [{"title": f"t{i}", "text": f"Fact number {i} is here."} for i in range(3000)]
    body = "Docs:\n" + "\n".join(f"<{d['title']}>{d['text']}</{d['title']}>" for d in items) + "\nQ?"
    p = locate(RenderedPrompt(system="S", messages=(Message("user", body),)), items)
    assert p.context_slot == ContextSlot(0, None)
    start, end = p.context_span
    assert body[start:end].startswith("Fact number 0 ")
    assert body[start:end].endswith("Fact number 2999 is here.")
    assert p.meta["context_items"] == 3000
    titles_only = RenderedPrompt(system=None, messages=(Message("user", "t1 t2"),))
    assert locate(titles_only, items).context_slot is None


def test_an_empty_system_sends_no_system():
    p = RenderedPrompt(system="", messages=(Message("user", "q"),))
    assert p.system_blocks == ()
    assert "system" not in anthropic_body(p, "m", 1)
    assert openai_body(p, "m", 1)["messages"] == [{"role": "user", "content": "q"}]
