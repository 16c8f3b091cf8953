"""A request up to a point: what lies before a needle, tools and parameters included."""

from __future__ import annotations

from dataclasses import replace

from needle_action.core.dataformats import JSON
from needle_action.request.blocks import block_text
from needle_action.request.prompt import Message, RenderedPrompt


def cut_before(rendered: RenderedPrompt, part: int, offset: int) -> RenderedPrompt:
    """RENDERED up to (PART, OFFSET) of its text: everything before that point, tools, tool choice
    and parameters included (what a needle's token offset counts). A message cut inside keeps its
    blocks before the point and the cut one up to it (a tool_result keeps its kind, so it still
    answers its tool_use)."""
    if part < 0:
        return replace(rendered, system=(rendered.system or "")[:offset], system_blocks=(), messages=())
    m = rendered.messages[part]
    content: str | tuple[JSON, ...] = (
        m.text[:offset] if isinstance(m.content, str) else _cut_blocks(m.blocks, offset)
    )
    return replace(rendered, messages=(*rendered.messages[:part], Message(m.role, content)))


def _cut_blocks(blocks: tuple[JSON, ...], offset: int) -> tuple[JSON, ...]:
    out: list[JSON] = []
    pos, first = 0, True
    for b in blocks:
        text = block_text(b)
        if not text:  # a tool_use or an image: before the point when the point is past it
            out.append(b)
            continue
        start = pos if first else pos + 2  # Message.text joins text-bearing blocks with "\n\n"
        if offset <= start:
            break
        if offset < start + len(text):
            out.append(_cut_block(b, offset - start))
            break
        out.append(b)
        pos, first = start + len(text), False
    return tuple(out)


def _cut_block(b: JSON, at: int) -> JSON:
    text = block_text(b)[:at]
    if b.get("type") == "tool_result":
        return {**b, "content": text}
    if b.get("type") == "document":
        return {**b, "source": {"type": "text", "media_type": "text/plain", "data": text}}
    return {"type": "text", "text": text}
