"""A request's count split into sections by counting its variants (tokens/sections.py)."""

from __future__ import annotations

from needle_action.request.prompt import ContextSlot, Message, RenderedPrompt
from needle_action.tokens.sections import (
    PLACEHOLDER,
    SECTIONS,
    by_difference,
    scaled,
    variants,
    without_context,
)

TOOL = {
    "name": "search",
    "description": "Search the docs",
    "input_schema": {"type": "object", "properties": {}},
}


def _words(p: RenderedPrompt) -> int:
    """A stand-in counter: words of every part (tools as their JSON), additive like tiktoken."""
    import json

    parts = [*(json.dumps(t) for t in p.tools), p.system or "", *(m.text for m in p.messages)]
    parts += [json.dumps(p.params)] if p.params else []
    return sum(len(x.split()) for x in parts)


def _agent() -> RenderedPrompt:
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "alpha beta gamma delta"}
    return RenderedPrompt(
        system="be brief",
        messages=(
            Message("user", "look it up"),
            Message("assistant", ({"type": "tool_use", "id": "t1", "name": "search", "input": {}},)),
            Message("user", (result, {"type": "text", "text": "what is it?"})),
        ),
        tools=(TOOL,),
        params={"thinking": {"type": "enabled", "budget_tokens": 2048}},
        context_slot=ContextSlot(2, 0),
    )


def test_sections_add_up_and_name_what_each_part_costs():
    p = _agent()
    total = _words(p)
    sections = by_difference(p, total, lambda vs: [_words(v) for v in vs])
    assert set(sections) == set(SECTIONS)
    assert sum(sections.values()) == total
    assert sections["system"] == 2
    assert sections["context"] == 4 - 1
    assert sections["tools"] == _words(p) - _words(variants(p)["tools"]) > 0
    assert sections["params"] > 0
    assert sections["messages"] > 0


def test_the_emptied_tool_result_still_answers_its_tool_use():
    emptied = without_context(_agent())
    assert emptied is not None
    block = emptied.messages[2].content[0]
    assert block["type"] == "tool_result"
    assert block["tool_use_id"] == "t1"
    assert block["content"] == PLACEHOLDER
    emptied.validate()  # still a valid request (the API would refuse an orphan tool_result)


def test_a_context_span_in_a_plain_message():
    text = "Context: one two three. Question: why?"
    start = text.index("one")
    p = RenderedPrompt(
        system=None,
        messages=(Message("user", text),),
        context_slot=ContextSlot(0),
        context_span=(start, start + len("one two three")),
    )
    emptied = without_context(p)
    assert emptied is not None
    assert emptied.messages[0].content == f"Context: {PLACEHOLDER}. Question: why?"
    assert variants(p).keys() == {"context"}


def test_scaling_by_the_safety_factor_keeps_the_sum():
    out = scaled({"system": 10, "tools": 33, "messages": 50, "context": 7, "params": 0}, 100, 115)
    assert sum(out.values()) == 115
    assert out["tools"] == 38
