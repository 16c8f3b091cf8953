"""The base model's plain transcript renders tool turns as readable text."""

from __future__ import annotations

from needle_action.providers.local.provider import transcript


def test_tool_turns_read_as_text():
    messages = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Find the code."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "code"}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "The code is QZT-4821."},
                {"type": "document", "title": "Notes", "source": {"type": "text", "data": "More notes."}},
                {"type": "text", "text": "What is the code?"},
            ],
        },
    ]
    text = transcript(messages)
    assert 'Answer: Tool call search: {"q": "code"}' in text
    assert "Tool result:\nThe code is QZT-4821." in text
    assert "Document Notes:\nMore notes." in text
    assert text.endswith("What is the code?\nAnswer:")
    assert "{'type'" not in text
    assert '"tool_result"' not in text


def test_an_openai_tool_message_reads_as_a_tool_result():
    text = transcript([{"role": "tool", "content": "42"}, {"role": "user", "content": "and?"}])
    assert text.startswith("Tool result:\n42")
