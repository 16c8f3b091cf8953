"""Every part of a request the context variable's text landed in, whatever its shape.

The context slot (``RenderedPrompt.context_slot``) is the one part recall hides its needle in.
The context itself can spread wider: a chat history renders one message per turn, nested
``{inputs, outputs}`` turns two, a builder puts retrieved chunks in a ``tool_result`` or in
``document`` blocks. To count every token of it as context (``tokens/sections.py``), the render
keeps the first and last line of each string the variable holds (:func:`anchors_of`, in
``RenderedPrompt.meta["context_anchors"]``), and :func:`context_parts` finds them in every part:
the system text, string contents, text blocks, tool_result contents and documents. In each part
the context runs from the first anchor found to the end of the last one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from needle_action.request.blocks import block_text
from needle_action.request.prompt import SYSTEM_PART, RenderedPrompt

ANCHORS_KEY = "context_anchors"
MIN_LEAF = 12  # shorter strings (a role name, "ok") would be found by chance
MAX_LEAVES = 2000  # more strings than this (recall's filler): only the slot is the context
Anchor = tuple[str, str]
Part = tuple[int, int | None, int, int]  # (message or SYSTEM_PART, block or None, start, end)


def anchors_of(value: Any) -> list[Anchor] | None:
    """(first line, last line) of every string of at least MIN_LEAF characters VALUE holds, at any
    depth (lists, mappings); None when it holds more than MAX_LEAVES of them."""
    out: list[Anchor] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            lines = [ln.strip() for ln in item.splitlines() if ln.strip()]
            if lines and len(item.strip()) >= MIN_LEAF:
                out.append((lines[0][:200], lines[-1][-200:]))
                if len(out) > MAX_LEAVES:
                    return None
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))
    return out


def _parts(p: RenderedPrompt) -> Iterator[tuple[int, int | None, str]]:
    if p.system:
        if len(p.system_blocks) > 1:
            for j, b in enumerate(p.system_blocks):
                yield SYSTEM_PART, j, block_text(b)
        else:
            yield SYSTEM_PART, None, p.system
    for i, m in enumerate(p.messages):
        if isinstance(m.content, str):
            yield i, None, m.content
            continue
        for j, b in enumerate(m.content):
            if b.get("type") in ("text", "tool_result", "document"):
                yield i, j, block_text(b)


def _span(text: str, anchors: list[Anchor]) -> tuple[int, int] | None:
    start, end = -1, -1
    for first, last in anchors:
        s = text.find(first)
        if s < 0:
            continue
        e = text.find(last, s)
        stop = e + len(last) if e >= 0 else s + len(first)
        start = s if start < 0 else min(start, s)
        end = max(end, stop)
    return (start, end) if start >= 0 else None


def context_parts(p: RenderedPrompt) -> list[Part] | None:
    """Every part holding the context's text, with its span; None when the render kept no
    anchors (the slot alone is then the context)."""
    anchors = p.meta.get(ANCHORS_KEY) if isinstance(p.meta, dict) else None
    if not anchors:
        return None
    found: list[Part] = []
    for message, block, text in _parts(p):
        span = _span(text, [(str(a[0]), str(a[1])) for a in anchors])
        if span is not None:
            found.append((message, block, *span))
    return found


__all__ = ["ANCHORS_KEY", "anchors_of", "context_parts"]
