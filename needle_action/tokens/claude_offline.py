"""An offline estimate of a Claude request's count, with tiktoken standing in for Claude's tokenizer.

Read from the Messages body itself (``request.wire.anthropic_body``, what count_tokens would be
sent), not from a chat-completions translation:

* each tool costs its JSON definition (name, description, input_schema), and a request with tools
  the **tool-use system prompt** the API adds, by model family and ``tool_choice``
  (:func:`tool_prompt_tokens`; Anthropic's "tool use pricing" table: auto/none vs any/tool);
* the system text, and each message: :data:`TOKENS_PER_TURN` framing, its role, and its blocks'
  text (text, a tool_use's name and input JSON, a tool_result's content, a document's title and
  text): a request of plain text counts as OpenAI's chat formula counts it (tokens/openai_chat.py);
* an image by its pixels after Claude's resizing (:mod:`needle_action.tokens.images`), its
  ceiling when unreadable; a PDF document :data:`PDF_PAGE_TOKENS` per page (the docs give 1,500 to
  3,000 tokens a page: text plus the page's image);
* :data:`TOKENS_REPLY_PRIMING` for the assistant turn the reply opens.

It remains an estimate (tiktoken is not Claude's tokenizer): the budget table says so and applies
``tokenizer_safety_factor``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from needle_action.core.dataformats import JSON
from needle_action.tokens.images import (
    ANTHROPIC_MAX_TOKENS,
    anthropic_image_tokens,
    decode_base64_head,
    image_block_size,
)

TOKENS_PER_TURN = 3  # a turn's role framing (not documented: like OpenAI's 3 per message)
TOKENS_REPLY_PRIMING = 3
PDF_PAGE_TOKENS = 2_250  # the middle of the documented 1,500-3,000 tokens per page
PDF_MAX_BYTES = 32 * 1024 * 1024  # the API's request limit: a PDF is never read beyond it

# (family, tool_choice auto or none, tool_choice any or tool): Anthropic's documented tool-use
# system prompt, first match wins; anything newer gets the latest family's numbers
TOOL_PROMPT: tuple[tuple[str, int, int], ...] = (
    ("claude-3-opus", 530, 281),
    ("claude-3-sonnet", 159, 235),
    ("claude-3-haiku", 264, 340),
    ("claude-3-5-haiku", 264, 340),
    ("claude-3-5-sonnet-20240620", 294, 261),
)
LATEST_TOOL_PROMPT = (346, 313)  # Claude 3.5 Sonnet (Oct), 3.7 Sonnet, the Claude 4 families

Encode = Callable[[str], int]  # text -> tokens; only ever added (see tokens/openai_chat.py)


def tool_prompt_tokens(model: str, tool_choice: JSON | None) -> int:
    """The tool-use system prompt the API adds for MODEL with TOOL_CHOICE (a request with tools)."""
    forced = isinstance(tool_choice, dict) and tool_choice.get("type") in ("any", "tool")
    m = model.lower()
    for family, auto, chosen in TOOL_PROMPT:
        if family in m:
            return chosen if forced else auto
    auto, chosen = LATEST_TOOL_PROMPT
    return chosen if forced else auto


def _canonical(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def pdf_pages(data: str) -> int:
    """Pages of a base64 PDF (its ``/Type /Page`` objects), at least 1."""
    raw = decode_base64_head(data, min(PDF_MAX_BYTES, len(data)))
    return max(1, len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", raw)))


def block_tokens(block: JSON, count: Encode) -> int:
    """One content block: its text, or an image/PDF by its documented cost."""
    kind = block.get("type")
    if kind == "text":
        return count(str(block.get("text", "")))
    if kind == "tool_use":
        return count(str(block.get("name", ""))) + count(_canonical(block.get("input", {})))
    if kind == "tool_result":
        inner = block.get("content", "")
        if isinstance(inner, str):
            return count(inner)
        return sum(block_tokens(b, count) for b in inner if isinstance(b, dict))
    if kind == "image":
        size = image_block_size(block)
        return anthropic_image_tokens(*size) if size else ANTHROPIC_MAX_TOKENS
    if kind == "document":
        return _document_tokens(block, count)
    return 0


def _document_tokens(block: JSON, count: Encode) -> int:
    source = block.get("source") or {}
    title = count(str(block["title"])) if block.get("title") else 0
    if source.get("type") == "base64" and str(source.get("media_type", "")).endswith("pdf"):
        return title + PDF_PAGE_TOKENS * pdf_pages(str(source.get("data", "")))
    if source.get("type") == "text":
        return title + count(str(source.get("data", "")))
    inner = source.get("content")
    if isinstance(inner, str):
        return title + count(inner)
    return title + sum(block_tokens(b, count) for b in inner or [] if isinstance(b, dict))


def claude_tokens(body: JSON, count: Encode, model: str) -> int:
    """BODY (a Messages request) as Claude would count it, estimated (see the module docstring)."""
    total = TOKENS_REPLY_PRIMING
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    for tool in tools:
        total += count(_canonical({k: v for k, v in tool.items() if k != "cache_control"}))
    if tools:
        total += tool_prompt_tokens(model, body.get("tool_choice"))
    system = body.get("system")
    if system:  # framed like a turn, as OpenAI's formula frames it (so plain text counts the same)
        total += TOKENS_PER_TURN + count("system")
    if isinstance(system, str):
        total += count(system)
    elif isinstance(system, list):
        total += sum(block_tokens(b, count) for b in system if isinstance(b, dict))
    fmt = (body.get("output_config") or {}).get("format")
    if isinstance(fmt, dict) and fmt.get("schema"):  # structured output: its schema (approximate)
        total += count(_canonical(fmt["schema"]))
    for m in body.get("messages") or []:
        content = m.get("content")
        total += TOKENS_PER_TURN + count(str(m.get("role", "")))
        if isinstance(content, str):
            total += count(content)
        else:
            total += sum(block_tokens(b, count) for b in content or [] if isinstance(b, dict))
    return total


__all__ = ["LATEST_TOOL_PROMPT", "TOOL_PROMPT", "claude_tokens", "pdf_pages", "tool_prompt_tokens"]
