"""Needle's own prompt-cache breakpoints on an Anthropic request body.

A :class:`~needle_action.providers.base.Breakpoint` is a character offset into a part's plain
text: the system text (``part = -1``) or ``RenderedPrompt.messages[part].text``, which joins the
text-bearing blocks (``text``, ``tool_result``, ``document``) with a blank line. Applying one
splits the block holding that offset in two, so the text sent is unchanged and a prefix ends
exactly there, and (``cache``) puts ``cache_control`` on the piece before it:

* a ``text`` block is split into two text blocks;
* a ``tool_result`` block (the agent shape's context) has its content split into text blocks,
  inside the tool_result; a point at its very end marks the tool_result itself;
* a block that cannot be split (a ``document``, an image) moves the point back to the end of the
  block before it: a shorter shared prefix, still a correct one.

The application's own ``cache_control`` markers stay where they are and count against the API's
four per request: needle only uses what they leave.
"""

from __future__ import annotations

import copy
from typing import Any

from needle_action.core.dataformats import JSON
from needle_action.providers.base import Breakpoint
from needle_action.request.blocks import block_text

MAX_BREAKPOINTS = 4  # cache_control blocks the Messages API accepts per request
EPHEMERAL = {"type": "ephemeral"}
_SEPARATOR = 2  # Message.text joins text-bearing blocks with "\n\n"


def own_markers(body: JSON) -> int:
    """How many cache_control markers the request carries already (tools, system, messages)."""
    n = sum(1 for t in body.get("tools") or [] if isinstance(t, dict) and "cache_control" in t)
    system = body.get("system")
    parts = [system] if isinstance(system, list) else []
    parts += [m.get("content") for m in body.get("messages") or []]
    for content in parts:
        for b in content if isinstance(content, list) else []:
            n += "cache_control" in b
            inner = b.get("content") if b.get("type") == "tool_result" else None
            n += sum("cache_control" in x for x in inner) if isinstance(inner, list) else 0
    return n


def split_content(
    content: str | list[Any] | tuple[Any, ...], cuts: list[Breakpoint], budget: list[int]
) -> str | list[JSON]:
    """CONTENT split at the CUTS' offsets (into its plain text); BUDGET[0] counts the cache markers
    left for the request and is decreased for every marker placed."""
    points = sorted({(bp.offset, bp.cache) for bp in cuts if bp.offset > 0})
    if not points:
        return content if isinstance(content, str) else list(content)
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else copy.deepcopy(list(content))
    spans = _spans(blocks)
    out: list[JSON] = []
    for i, block in enumerate(blocks):
        span = spans[i]
        inner = [(o - span[0], c) for o, c in points if span and span[0] < o <= span[1]]
        if not inner:
            out.append(block)
            continue
        out.extend(_split_block(block, inner, budget, out))
    return out


def _spans(blocks: list[JSON]) -> list[tuple[int, int] | None]:
    """(start, end) of each block's text in the joined text; None for a block without text."""
    spans: list[tuple[int, int] | None] = []
    pos, first = 0, True
    for b in blocks:
        text = block_text(b)
        if not text:
            spans.append(None)
            continue
        start = pos if first else pos + _SEPARATOR
        spans.append((start, start + len(text)))
        pos, first = start + len(text), False
    return spans


def _mark(block: JSON, budget: list[int]) -> None:
    if budget[0] > 0 and "cache_control" not in block:
        block["cache_control"] = dict(EPHEMERAL)
        budget[0] -= 1


def _split_block(
    block: JSON, points: list[tuple[int, bool]], budget: list[int], before: list[JSON]
) -> list[JSON]:
    """BLOCK split at POINTS (offsets into its own text); BEFORE: the blocks already out, where a
    point in an unsplittable block moves to."""
    kind = block.get("type")
    text = block_text(block)
    if kind == "text":
        return _split_text(text, points, budget, block)
    if kind == "tool_result":
        if all(o >= len(text) for o, _ in points):
            if any(c for _, c in points):
                _mark(block, budget)
            return [block]
        pieces = _split_text(text, points, budget, {"type": "text", "text": text})
        return [{**block, "content": pieces}]
    if before and any(c for _, c in points):  # a document or an image: mark the block before it
        _mark(before[-1], budget)
    return [block]


def _split_text(text: str, points: list[tuple[int, bool]], budget: list[int], template: JSON) -> list[JSON]:
    """TEXT as text blocks cut at POINTS; the last piece keeps TEMPLATE's other keys."""
    pieces: list[JSON] = []
    start = 0
    for offset, cache in points:
        offset = min(offset, len(text))
        if offset > start:
            pieces.append({"type": "text", "text": text[start:offset]})
            start = offset
        if cache and pieces:
            _mark(pieces[-1], budget)
    if start < len(text):
        pieces.append({"type": "text", "text": text[start:]})
    extra = {k: v for k, v in template.items() if k not in ("type", "text", "cache_control")}
    if extra and pieces:
        pieces[-1].update(extra)
    if "cache_control" in template and pieces and "cache_control" not in pieces[-1]:
        pieces[-1]["cache_control"] = template["cache_control"]
    return pieces
