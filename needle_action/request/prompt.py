"""The assembled request: everything the application would send to the model.

The canonical form is the Anthropic Messages request, held as plain JSON-able data: the system as
text blocks, the tools and tool choice, messages whose content is a string or content blocks
(:mod:`~needle_action.request.blocks`), and the request parameters passed through unchanged.
Plain data: what other stages make of it lives with them or beside it — the wire bodies both ways
(:mod:`~needle_action.request.wire`), the labelled view (:mod:`~needle_action.request.view`), the
counts by section (:mod:`needle_action.tokens.sections`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from needle_action.core.dataformats import JSON
from needle_action.request.blocks import (
    RequestShapeError,
    block_text,
    blocks_text,
    check_block,
    check_tool_pairs,
    text_block,
)

Role = Literal["system", "user", "assistant"]
SYSTEM_PART = -1  # ContextSlot.message for a context held in the system text


class ContextSlot(NamedTuple):
    """Where the context variable (the haystack) sits in the request.

    ``message`` is an index into ``RenderedPrompt.messages`` (``-1``: the system text); ``block`` is
    an index into that message's content blocks, or None when the content is a plain string. With
    ``RenderedPrompt.context_span`` (characters of that text, end excluded) and
    ``RenderedPrompt.context_blocks`` (document mode: how many consecutive blocks) it is exact.
    """

    message: int
    block: int | None = None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class Message:
    """One turn: ``content`` is a string or a tuple of content blocks (Anthropic shapes)."""

    role: Role
    content: str | tuple[JSON, ...]

    def __post_init__(self) -> None:
        if isinstance(self.content, list):  # accept a list, hold a tuple (the dataclass is frozen)
            object.__setattr__(self, "content", tuple(self.content))

    def __hash__(self) -> int:
        return hash((self.role, _canonical(self.wire_content())))

    @property
    def text(self) -> str:
        """The plain text: the string, or the joined text of its text/tool_result/document blocks."""
        return self.content if isinstance(self.content, str) else blocks_text(self.content)

    @property
    def blocks(self) -> tuple[JSON, ...]:
        """The content as blocks (a string is one text block)."""
        return (text_block(self.content),) if isinstance(self.content, str) else self.content

    def wire_content(self) -> str | list[JSON]:
        return self.content if isinstance(self.content, str) else list(self.content)


@dataclass(frozen=True)
class RenderedPrompt:
    """The whole request: system, messages, tools, tool choice and request parameters.

    ``system`` is the joined system text (for callers that want a string); ``system_blocks`` holds it
    as Anthropic text blocks (derived from ``system`` when not given; ``system`` is derived from the
    blocks when only they are given). ``tools`` are Anthropic tool dicts, ``params`` the request
    parameters (``thinking``, ``output_config``, ``response_format``, ...). ``context_slot`` locates
    the context variable (None: no slot known)."""

    system: str | None
    messages: tuple[Message, ...]
    source: str = ""  # template path, for messages and annotations
    fixture: str | None = None
    meta: JSON = field(default_factory=dict, compare=False, hash=False)
    system_blocks: tuple[JSON, ...] = ()
    tools: tuple[JSON, ...] = ()
    tool_choice: JSON | None = None
    params: JSON = field(default_factory=dict, hash=False)
    context_slot: ContextSlot | None = None
    context_span: tuple[int, int] | None = None
    context_blocks: int = 1

    def __post_init__(self) -> None:
        if self.system_blocks and self.system is None:
            object.__setattr__(self, "system", blocks_text(self.system_blocks))
        elif self.system and not self.system_blocks:  # an empty system is no block (the API refuses those)
            object.__setattr__(self, "system_blocks", (text_block(self.system),))
        for name in ("messages", "system_blocks", "tools"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        if self.context_slot is not None and not isinstance(self.context_slot, ContextSlot):
            object.__setattr__(self, "context_slot", ContextSlot(*self.context_slot))

    def __hash__(self) -> int:
        return hash(self.content_hash())

    # ------------------------------------------------------------------ identity

    def to_json(self) -> JSON:
        """Everything the provider receives (tools, choice and params only when present)."""
        out: JSON = {
            "system": self.system,
            "messages": [{"role": m.role, "content": m.wire_content()} for m in self.messages],
        }
        if self.system_blocks and self.system_blocks != (text_block(self.system or ""),):
            out["system_blocks"] = list(self.system_blocks)
        if self.tools:
            out["tools"] = list(self.tools)
        if self.tool_choice is not None:
            out["tool_choice"] = self.tool_choice
        if self.params:
            out["params"] = self.params
        return out

    def content_hash(self) -> str:
        blob = _canonical(self.to_json()).encode("utf-8")
        return hashlib.sha256(blob).hexdigest()

    # ------------------------------------------------------------------ texts

    def texts(self) -> list[str]:
        """The system text and each message's plain text (tools and params not included)."""
        out = [self.system] if self.system else []
        out.extend(m.text for m in self.messages)
        return out

    def context_text(self) -> str | None:
        """The text of the context slot, or None when there is none."""
        parts = self._context_parts()
        return None if parts is None else "\n\n".join(parts)

    def _context_parts(self) -> list[str] | None:
        slot = self.context_slot
        if slot is None:
            return None
        if slot.block is None:
            text = self.system or "" if slot.message == SYSTEM_PART else self.messages[slot.message].text
            start, end = self.context_span or (0, len(text))
            return [text[start:end]]
        blocks = self.system_blocks if slot.message == SYSTEM_PART else self.messages[slot.message].blocks
        texts = [block_text(b) for b in blocks[slot.block : slot.block + self.context_blocks]]
        if self.context_span is not None and len(texts) == 1:  # part of one block (a tool_result)
            texts = [texts[0][self.context_span[0] : self.context_span[1]]]
        return texts

    def validate(self) -> RenderedPrompt:
        """Self, if every block is well formed and every tool_result follows its tool_use."""
        for i, m in enumerate(self.messages):
            if not isinstance(m.content, str):
                for j, b in enumerate(m.content):
                    check_block(b, f"messages[{i}].content[{j}]")
        check_tool_pairs(self.messages)
        return self


__all__ = ["SYSTEM_PART", "ContextSlot", "Message", "RenderedPrompt", "RequestShapeError", "Role"]
