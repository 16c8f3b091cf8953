"""The labelled human view of a request (``needle render``, the assembled-prompt diff).

::

    --- system ---          the system text
    --- tools ---           one tool per block, canonical JSON (sorted keys, indented)
    --- user ---            text of a turn (string content, or a run of text blocks)
    --- tool_use NAME ---   the call's input, canonical JSON
    --- tool_result ---     the result's text
    --- document TITLE ---  the document's text
    [image: ...]            an image, one line inside its turn (never the base64)
    --- params ---          tool_choice and the request parameters, canonical JSON

With ``collapse_context`` the context slot becomes one line ``[context: N chars, K items]``.
"""

from __future__ import annotations

import json
from typing import Any

from needle_action.core.dataformats import JSON
from needle_action.request.blocks import block_text
from needle_action.request.prompt import Message, RenderedPrompt


def pretty(value: Any) -> str:
    """Canonical, diff-friendly JSON."""
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False)


def request_view(p: RenderedPrompt, *, collapse_context: bool = False) -> str:
    parts: list[str] = []
    if p.system is not None:
        parts.append(f"--- system ---\n{_part_text(p, -1, None, p.system, collapse_context)}")
    for tool in p.tools:
        parts.append(f"--- tools ---\n{pretty(tool)}")
    for i, m in enumerate(p.messages):
        parts.extend(_message_view(p, i, m, collapse_context))
    params = dict(p.params)
    if p.tool_choice is not None:
        params = {"tool_choice": p.tool_choice, **params}
    if params:
        parts.append(f"--- params ---\n{pretty(params)}")
    return "\n".join(parts) + "\n"


def _in_slot(p: RenderedPrompt, message: int, block: int | None) -> bool:
    slot = p.context_slot
    if slot is None or slot.message != message:
        return False
    if block is None or slot.block is None:
        return block is None and slot.block is None
    return slot.block <= block < slot.block + p.context_blocks


def _summary(p: RenderedPrompt) -> str:
    text = p.context_text() or ""
    items = p.meta.get("context_items", p.context_blocks) if isinstance(p.meta, dict) else p.context_blocks
    return f"[context: {len(text)} chars, {items} items]"


def _part_text(p: RenderedPrompt, message: int, block: int | None, text: str, collapse: bool) -> str:
    """TEXT (a string content, or one block's text) with the context span collapsed when asked."""
    if not collapse or not _in_slot(p, message, block):
        return text
    if block is not None:
        return _summary(p)
    start, end = p.context_span or (0, len(text))
    return text[:start] + _summary(p) + text[end:]


def _message_view(p: RenderedPrompt, index: int, m: Message, collapse: bool) -> list[str]:
    if isinstance(m.content, str):
        return [f"--- {m.role} ---\n{_part_text(p, index, None, m.content, collapse)}"]
    out: list[str] = []
    run: list[str] = []  # consecutive text blocks under one role header
    collapsed = False
    for j, b in enumerate(m.content):
        kind = b.get("type")
        if kind == "text":
            run.append(_part_text(p, index, j, b["text"], collapse))
            continue
        if kind == "image":  # part of the turn's text, as the user reads it: no header of its own
            run.append(_image_line(b))
            continue
        if run:
            out.append(f"--- {m.role} ---\n" + "\n".join(run))
            run = []
        if collapse and _in_slot(p, index, j):
            if p.context_span is not None and p.context_blocks == 1:  # the slot is part of this block
                start, end = p.context_span
                text = block_text(b)
                out.append(f"--- {kind} ---\n{text[:start]}{_summary(p)}{text[end:]}")
            elif not collapsed:
                out.append(f"--- {kind} ---\n{_summary(p)}")
                collapsed = True
            continue
        out.append(_block_view(b))
    if run:
        out.append(f"--- {m.role} ---\n" + "\n".join(run))
    return out


def _image_line(b: JSON) -> str:
    source = b.get("source") or {}
    if source.get("type") == "url":
        return f"[image: {source.get('url')}]"
    size = len(source.get("data") or "")
    return f"[image: {source.get('media_type', '?')}, {size} base64 chars]"


def _block_view(b: JSON) -> str:
    kind = b.get("type")
    if kind == "tool_use":
        return f"--- tool_use {b.get('name')} ---\n{pretty(b.get('input', {}))}"
    if kind == "document":
        title = f" {b['title']}" if b.get("title") else ""
        return f"--- document{title} ---\n{block_text(b)}"
    if kind == "tool_result":
        text = block_text(b)
        inner = b.get("content")
        images = sum(1 for x in inner if x.get("type") == "image") if isinstance(inner, list | tuple) else 0
        extra = f"\n[{images} image(s)]" if images else ""
        error = " (error)" if b.get("is_error") else ""
        return f"--- tool_result{error} ---\n{text}{extra}"
    return f"--- {kind} ---\n{block_text(b)}"


__all__ = ["pretty", "request_view"]
