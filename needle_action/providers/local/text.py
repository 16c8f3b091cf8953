"""The embedded model's prompt text: pure functions shared by the provider (parent), the model
worker (:mod:`.local_infer`) and the local token counter. Stdlib only: the worker imports it, and
its start-up time is every run's."""

from __future__ import annotations

import json
from typing import Any

from needle_action.core.dataformats import JSON


def round_ctx(tokens: int) -> int:
    """Round up to a multiple of 1024 (llama.cpp allocates the KV cache for the whole window)."""
    return max(1024, -(-int(tokens) // 1024) * 1024)


def transcript(messages: list[JSON]) -> str:
    """Plain-text rendering of a chat for a base model: system text, user turns as written,
    assistant turns as ``Answer: ...``, ending with ``Answer:`` for the model to complete.

    Content may be a string or Anthropic content blocks: a tool call reads ``Tool call NAME:
    {input}``, a tool result ``Tool result:`` then its text, a document ``Document TITLE:`` then its
    text, an image ``[image]``; an OpenAI ``tool`` message reads as a tool result."""
    parts: list[str] = []
    for m in messages:
        text = _readable(m.get("content"))
        if m["role"] == "assistant":
            parts.append(f"Answer: {text}")
        elif m["role"] == "tool":
            parts.append(f"Tool result:\n{text}")
        else:
            parts.append(text)
    return "\n\n".join(parts).rstrip() + "\nAnswer:"


def _readable(content: Any) -> str:
    """CONTENT (a string or content blocks) as plain text for a base model."""
    if isinstance(content, str):
        return content
    out: list[str] = []
    for b in content or ():
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text":
            out.append(str(b.get("text", "")))
        elif kind == "tool_use":
            out.append(f"Tool call {b.get('name', '')}: {json.dumps(b.get('input', {}), ensure_ascii=False)}")
        elif kind == "tool_result":
            out.append(f"Tool result:\n{_readable(b.get('content', ''))}")
        elif kind == "document":
            source = b.get("source") or {}
            body = source.get("data") if source.get("type") == "text" else _readable(source.get("content"))
            out.append(f"Document {b.get('title') or ''}:\n{body or ''}".replace("Document :", "Document:"))
        elif kind in ("image", "image_url"):
            out.append("[image]")
    return "\n\n".join(out)


def first_line(text: str) -> str:
    """The first non-empty line, stripped (a base model keeps writing after its answer)."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def has_chat_template(llm: Any) -> bool:
    """Whether the loaded GGUF carries a chat template (instruction models do)."""
    return "tokenizer.chat_template" in (getattr(llm, "metadata", None) or {})
