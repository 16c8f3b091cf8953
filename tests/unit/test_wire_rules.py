"""The Messages API's rules (request/rules.py): the normaliser keeps the text the model reads and
leaves nothing the API refuses; the checker names what it cannot mend."""

from __future__ import annotations

from needle_action.request import rules
from needle_action.request.prompt import Message, RenderedPrompt
from needle_action.request.wire import anthropic_body

MARK = {"type": "ephemeral"}


def text(t: str, **extra) -> dict:
    return {"type": "text", "text": t, **extra}


def joined(content) -> str:
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def test_whitespace_blocks_join_the_next_text_block_and_their_marker_moves_back():
    body = {
        "messages": [
            {
                "role": "user",
                "content": [text("Bay three."), text("\n    ", cache_control=MARK), text("Which bay?")],
            }
        ]
    }
    out = rules.normalise(body)
    content = out["messages"][0]["content"]
    assert [b["text"] for b in content] == ["Bay three.", "\n    Which bay?"]
    assert content[0]["cache_control"] == MARK
    assert "cache_control" not in content[1]
    assert joined(content) == joined(body["messages"][0]["content"])  # the text read is unchanged
    assert body["messages"][0]["content"][1]["text"] == "\n    "  # the input is not changed


def test_trailing_whitespace_joins_the_block_before_and_empty_blocks_go():
    out = rules.normalise({"messages": [{"role": "user", "content": [text(""), text("q"), text("  \n")]}]})
    assert out["messages"][0]["content"] == [text("q  \n")]


def test_whitespace_between_other_blocks_is_dropped_and_inside_a_tool_result_too():
    result = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [text("chunk one"), text("   ", cache_control=MARK), text("chunk two")],
    }
    image = {"type": "image", "source": {"type": "url", "url": "https://example.test/a.png"}}
    out = rules.normalise({"messages": [{"role": "user", "content": [result, text(" \n "), image]}]})
    blocks = out["messages"][0]["content"]
    assert [b["type"] for b in blocks] == ["tool_result", "image"]
    inner = blocks[0]["content"]
    assert [b["text"] for b in inner] == ["chunk one", "   chunk two"]
    assert inner[0]["cache_control"] == MARK


def test_turns_and_system_without_content_are_dropped():
    body = {
        "system": [text("  ")],
        "messages": [
            {"role": "user", "content": "   "},
            {"role": "assistant", "content": [text("\n")]},
            {"role": "user", "content": "Which bay?"},
        ],
    }
    out = rules.normalise(body)
    assert "system" not in out
    assert out["messages"] == [{"role": "user", "content": "Which bay?"}]
    assert rules.violations(out) == []


def test_violations_name_what_cannot_be_mended():
    assert [r.code for r in rules.violations({"messages": []})] == ["no-messages"]
    last = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    assert [r.code for r in rules.violations(last)] == ["last-turn"]
    many = [text(f"part {i}", cache_control=MARK) for i in range(5)]
    assert [r.code for r in rules.violations({"messages": [{"role": "user", "content": many}]})] == [
        "cache-breakpoints"
    ]


def test_rule_of_reads_the_apis_message():
    found = rules.rule_of("messages: text content blocks must contain non-whitespace text")
    assert found is not None
    assert found.code == "whitespace-text"
    found = rules.rule_of("A maximum of 4 blocks with cache_control may be provided. Found 5.")
    assert found is not None
    assert found.code == "cache-breakpoints"
    assert rules.rule_of("prompt is too long: 9 tokens > 5 maximum") is None


def test_the_wire_body_is_normalised_where_it_is_built():
    prompt = RenderedPrompt(
        system="Answer briefly.",
        messages=(Message("user", (text("Bay three is free."), text("\n  "), text("Which bay?"))),),
    )
    body = anthropic_body(prompt, "claude-sonnet-5-5", 16)
    assert body["messages"][0]["content"] == [text("Bay three is free."), text("\n  Which bay?")]
    # a system-only prompt is not padded with a turn it does not hold
    alone = anthropic_body(RenderedPrompt(system="Answer.", messages=()), "claude-sonnet-5-5", 16)
    assert alone["messages"] == []
    assert [r.code for r in rules.violations(alone)] == ["no-messages"]


def test_a_marker_at_the_start_of_a_turn_moves_to_the_end_of_the_turn_before():
    body = {
        "messages": [
            {"role": "user", "content": "Thursday at two, bay three."},
            {"role": "assistant", "content": "Booked."},
            {"role": "user", "content": [text("    ", cache_control=MARK), text("Which bay?")]},
        ]
    }
    out = rules.normalise(body)
    assert out["messages"][1]["content"] == [text("Booked.", cache_control=MARK)]
    assert out["messages"][2]["content"] == [text("    Which bay?")]


def test_pdf_pages_and_images_in_the_claude_estimate():
    import base64

    from needle_action.tokens.claude_offline import PDF_PAGE_TOKENS, block_tokens, pdf_pages

    pdf = (
        b"%PDF-1.4\n1 0 obj << /Type /Pages /Count 2 >>\n2 0 obj << /Type /Page >>\n3 0 obj <</Type/Page>>\n"
    )
    data = base64.b64encode(pdf).decode()
    assert pdf_pages(data) == 2
    block = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}}
    assert block_tokens(block, len) == 2 * PDF_PAGE_TOKENS
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + (750).to_bytes(4, "big") + (100).to_bytes(4, "big")
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(png).decode()},
    }
    assert block_tokens(image, len) == 100  # 750 x 100 pixels / 750


def test_a_prefill_loses_its_trailing_whitespace():
    body = {"messages": [{"role": "user", "content": "Which bay?"}, {"role": "assistant", "content": "Bay "}]}
    out = rules.normalise(body)
    assert out["messages"][1]["content"] == "Bay"
    blocks = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [text("The bay is\n")]},
        ]
    }
    assert rules.normalise(blocks)["messages"][1]["content"] == [text("The bay is")]
    found = rules.rule_of("messages: final assistant content cannot end with trailing whitespace")
    assert found is not None
    assert found.code == "prefill-whitespace"


def test_a_refused_turn_order_is_named_not_rewritten():
    """Bedrock's words for an assistant-first request and for two turns of one role are named."""
    first = rules.rule_of('messages: first message must use the "user" role')
    assert first is not None
    assert first.code == "first-turn"
    alternate = rules.rule_of(
        'messages: roles must alternate between "user" and "assistant", but found multiple "user" roles in a row'
    )
    assert alternate is not None
    assert alternate.code == "alternating-turns"
    body = {
        "model": "m",
        "max_tokens": 5,
        "messages": [{"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Hi"}],
    }
    assert rules.normalise(body)["messages"] == body["messages"]  # the user's turns, as rendered
