"""A request's tokens by section: system, tools, messages, context, params.

Every counter counts the whole request, exactly as it is sent. The sections come from counting
variants of that request, each without one section (:func:`variants`):

* ``tools``: without the tools and the tool_choice (with them goes the tool-use system prompt the
  API adds, which is billed because of the tools);
* ``system``: without the system text (and system-role turns), less the context when the context
  slot is in the system text;
* ``params``: without the request parameters (``thinking``, ``output_config``, ...);
* ``context``: with the context slot's text replaced by one character (the API refuses empty
  text), so the count is within a token of the slot's own cost;
* ``messages``: the rest, so the sections add up to the total.

A section is the difference the section makes to the count: exact for the Anthropic counter (each
variant goes to count_tokens) up to that one character of ``context``; for tiktoken, where the
formula is additive, it is the section's own tokens plus its framing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from needle_action.core.dataformats import JSON
from needle_action.request.blocks import block_text
from needle_action.request.contextparts import Part, context_parts
from needle_action.request.prompt import SYSTEM_PART, ContextSlot, Message, RenderedPrompt

SECTIONS = ("system", "tools", "messages", "context", "params")
PLACEHOLDER = "."  # stands for an emptied context slot: the APIs refuse empty text


def variants(prompt: RenderedPrompt) -> dict[str, RenderedPrompt]:
    """PROMPT without each of its non-empty sections (see the module docstring)."""
    out: dict[str, RenderedPrompt] = {}
    if prompt.tools or prompt.tool_choice is not None:
        out["tools"] = replace(prompt, tools=(), tool_choice=None)
    if prompt.system or any(m.role == "system" for m in prompt.messages):
        out["system"] = _without_system(prompt)  # a slot in the system goes too: see by_difference
    if prompt.params:
        out["params"] = replace(prompt, params={})
    emptied = without_context(prompt)
    if emptied is not None:
        out["context"] = emptied
    return out


def _without_system(prompt: RenderedPrompt) -> RenderedPrompt:
    kept = tuple(m for m in prompt.messages if m.role != "system")
    slot = prompt.context_slot
    if slot is not None and slot.message == SYSTEM_PART:
        slot = None
    elif slot is not None and kept != prompt.messages:  # message indices shift past removed turns
        removed = sum(1 for m in prompt.messages[: slot.message] if m.role == "system")
        slot = ContextSlot(slot.message - removed, slot.block)
    return replace(prompt, system=None, system_blocks=(), messages=kept, context_slot=slot)


def without_context(prompt: RenderedPrompt) -> RenderedPrompt | None:
    """PROMPT with its context's text replaced by :data:`PLACEHOLDER` in every part it landed in
    (:func:`~needle_action.request.contextparts.context_parts`: every turn of a history, nested
    turns, tool_result and document blocks), else in its slot; None without either."""
    parts = context_parts(prompt)
    if parts:
        return _without_parts(prompt, parts)
    slot = prompt.context_slot
    if slot is None or not prompt.context_text():
        return None
    if slot.message == SYSTEM_PART:
        if slot.block is None:
            text = prompt.system or ""
            start, end = prompt.context_span or (0, len(text))
            return replace(prompt, system=text[:start] + PLACEHOLDER + text[end:], system_blocks=())
        blocks = _emptied(prompt.system_blocks, slot.block, prompt.context_blocks)
        return replace(prompt, system=None, system_blocks=blocks)
    m = prompt.messages[slot.message]
    if slot.block is None or isinstance(m.content, str):
        text = m.text
        start, end = prompt.context_span or (0, len(text))
        content: str | tuple[JSON, ...] = text[:start] + PLACEHOLDER + text[end:]
    else:
        content = _emptied(m.content, slot.block, prompt.context_blocks)
    messages = list(prompt.messages)
    messages[slot.message] = Message(m.role, content)
    return replace(prompt, messages=tuple(messages))


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + PLACEHOLDER + text[end:]
    return text


def _cut_block(block: JSON, spans: list[tuple[int, int]]) -> JSON:
    kind = block.get("type")
    text = _cut(block_text(block), spans)
    if kind == "tool_result":
        return {**block, "content": text}
    if kind == "document":
        source = {k: v for k, v in (block.get("source") or {}).items() if k != "content"}
        return {**block, "source": {**source, "type": "text", "data": text, "media_type": "text/plain"}}
    return {**block, "text": text}


def _without_parts(prompt: RenderedPrompt, parts: list[Part]) -> RenderedPrompt:
    """PROMPT with every span of PARTS replaced by the placeholder."""
    spans: dict[tuple[int, int | None], list[tuple[int, int]]] = {}
    for message, block, start, end in parts:
        spans.setdefault((message, block), []).append((start, end))
    out = prompt
    for (message, block), cut in spans.items():
        if message == SYSTEM_PART:
            if block is None:
                out = replace(out, system=_cut(out.system or "", cut), system_blocks=())
            else:
                blocks = list(out.system_blocks)
                blocks[block] = _cut_block(blocks[block], cut)
                out = replace(out, system=None, system_blocks=tuple(blocks))
            continue
        m = out.messages[message]
        if block is None or isinstance(m.content, str):
            content: str | tuple[JSON, ...] = _cut(m.text, cut)
        else:
            content = tuple(_cut_block(b, cut) if j == block else b for j, b in enumerate(m.content))
        messages = list(out.messages)
        messages[message] = Message(m.role, content)
        out = replace(out, messages=tuple(messages))
    return out


def _emptied(blocks: tuple[JSON, ...], first: int, count: int) -> tuple[JSON, ...]:
    """BLOCKS with the COUNT slot blocks from FIRST reduced to one placeholder: the first keeps its
    kind (a tool_result must still answer its tool_use), the others go."""
    head = dict(blocks[first])
    kind = head.get("type")
    if kind == "tool_result":
        head["content"] = PLACEHOLDER
    elif kind == "document":
        source = {**(head.get("source") or {}), "type": "text", "data": PLACEHOLDER}
        source.setdefault("media_type", "text/plain")
        source.pop("content", None)
        head["source"] = source
    else:
        head = {"type": "text", "text": PLACEHOLDER}
    return (*blocks[:first], head, *blocks[first + count :])


def by_difference(
    prompt: RenderedPrompt, total: int, count: Callable[[list[RenderedPrompt]], list[int]]
) -> dict[str, int]:
    """PROMPT's TOTAL split into sections, COUNT giving the counts of the variants."""
    found = variants(prompt)
    return from_counts(prompt, total, dict(zip(found, count(list(found.values())), strict=True)))


def from_counts(prompt: RenderedPrompt, total: int, counted: dict[str, int]) -> dict[str, int]:
    """PROMPT's TOTAL split into sections, COUNTED holding the count of each of its
    :func:`variants` by name (counted already, e.g. in one batch with many other requests)."""
    out = {name: 0 for name in SECTIONS}
    for name, n in counted.items():
        out[name] = max(0, total - n)
    if _context_in_system(prompt):  # the system variant lost the context too
        out["system"] = max(0, out["system"] - out["context"])
    out["messages"] = total - sum(v for k, v in out.items() if k != "messages")
    if out["messages"] < 0:  # sections that interact (a tokenizer merge across a boundary)
        out["context"] = max(0, out["context"] + out["messages"])
        out["messages"] = total - sum(v for k, v in out.items() if k != "messages")
    return out


def _context_in_system(prompt: RenderedPrompt) -> bool:
    parts = context_parts(prompt)
    if parts:
        return any(message == SYSTEM_PART for message, *_ in parts)
    slot = prompt.context_slot
    return slot is not None and slot.message == SYSTEM_PART


def scaled(sections: dict[str, int], raw: int, tokens: int) -> dict[str, int]:
    """SECTIONS of a RAW count scaled to TOKENS (the safety factor), still adding up to TOKENS."""
    if raw == tokens or raw <= 0:
        return dict(sections)
    out = {k: round(v * tokens / raw) for k, v in sections.items()}
    out["messages"] += tokens - sum(out.values())
    return out
