"""The assembled request: everything the application would send to the model.

The canonical form is the Anthropic Messages request, held as plain JSON-able data: the system as
text blocks, the tools and tool choice, messages whose content is a string or content blocks
(:mod:`~needle_action.request.blocks`), and the request parameters passed through unchanged.
:meth:`RenderedPrompt.to_anthropic_body` and :meth:`RenderedPrompt.to_openai_body` give the wire
bodies (:mod:`~needle_action.request.wire`); :meth:`RenderedPrompt.from_body` reads either back.

Lives apart from the rendering modules so that tokens, recall and providers can share it without
importing Jinja2 machinery.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from needle_action.core.dataformats import JSON
from needle_action.request.blocks import RequestShapeError, block_text, blocks_text, check_block, text_block

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

    def sections(self) -> dict[str, list[str]]:
        """Texts by section, for per-section counting: system, tools (canonical JSON each), messages
        (without the context slot), context (the slot's texts) and params (canonical JSON each)."""
        system = [b["text"] for b in self.system_blocks if b.get("type") == "text"]
        messages: list[str] = []
        for m in self.messages:
            messages.extend(_message_texts(m))
        context = self._context_parts() or []
        slot = self.context_slot
        if slot is not None:
            system, messages = self._without_context(system, messages)
        return {
            "system": system,
            "tools": [_canonical(t) for t in self.tools],
            "messages": messages,
            "context": context,
            "params": [_canonical({k: v}) for k, v in self.params.items()]
            + ([_canonical({"tool_choice": self.tool_choice})] if self.tool_choice else []),
        }

    def _without_context(self, system: list[str], messages: list[str]) -> tuple[list[str], list[str]]:
        """SYSTEM and MESSAGES with the context slot's text taken out (the sections add up)."""
        slot = self.context_slot
        assert slot is not None
        cut = _cut_context(self, slot)
        if slot.message == SYSTEM_PART:
            return cut, messages
        out: list[str] = []
        for i, m in enumerate(self.messages):
            out.extend(cut if i == slot.message else _message_texts(m))
        return system, out

    # ------------------------------------------------------------------ views

    def view(self, collapse_context: bool = False) -> str:
        """The labelled human view (``needle render``, the assembled-prompt diff)."""
        from needle_action.request.view import request_view

        return request_view(self, collapse_context=collapse_context)

    def as_text(self) -> str:
        """Human-readable form used by ``needle render``: :meth:`view`."""
        return self.view()

    # ------------------------------------------------------------------ wire bodies

    def to_anthropic_body(self, model: str, max_tokens: int) -> JSON:
        """The exact Anthropic Messages request body."""
        from needle_action.request.wire import anthropic_body

        return anthropic_body(self, model, max_tokens)

    def to_openai_body(self, model: str, max_tokens: int) -> JSON:
        """The OpenAI chat completions body: tools as functions, assistant ``tool_calls``,
        ``role: "tool"`` messages, documents as text."""
        from needle_action.request.wire import openai_body

        return openai_body(self, model, max_tokens)

    @classmethod
    def from_body(cls, body: JSON, *, source: str = "") -> RenderedPrompt:
        """An Anthropic Messages body or an OpenAI chat body (detected) as a RenderedPrompt;
        a bad shape raises :class:`RequestShapeError` naming the field."""
        from needle_action.request.wire import from_body

        return from_body(body, (Message, cls), source=source)

    def validate(self) -> RenderedPrompt:
        """Self, if every block is well formed and every tool_result follows its tool_use."""
        from needle_action.request.blocks import check_tool_pairs

        for i, m in enumerate(self.messages):
            if not isinstance(m.content, str):
                for j, b in enumerate(m.content):
                    check_block(b, f"messages[{i}].content[{j}]")
        check_tool_pairs(self.messages)
        return self


def _message_texts(m: Message) -> list[str]:
    if isinstance(m.content, str):
        return [m.content]
    out = []
    for b in m.content:
        if b.get("type") == "tool_use":
            out.append(_canonical({"name": b.get("name"), "input": b.get("input", {})}))
        elif t := block_text(b):
            out.append(t)
    return out


def _cut_context(p: RenderedPrompt, slot: ContextSlot) -> list[str]:
    """The texts of the part holding the slot, the slot itself left out."""
    if slot.block is None or (p.context_span is not None and p.context_blocks == 1):
        if slot.block is None:
            text = p.system or "" if slot.message == SYSTEM_PART else p.messages[slot.message].text
            others: list[str] = []
        else:
            parts = p.system_blocks if slot.message == SYSTEM_PART else p.messages[slot.message].blocks
            text = block_text(parts[slot.block])
            others = _message_texts(Message("user", parts[: slot.block] + parts[slot.block + 1 :]))
        start, end = p.context_span or (0, len(text))
        return [t for t in (text[:start], text[end:]) if t] + others
    if slot.message == SYSTEM_PART:
        blocks = p.system_blocks
        keep = blocks[: slot.block] + blocks[slot.block + p.context_blocks :]
        return [b["text"] for b in keep if b.get("type") == "text"]
    m = p.messages[slot.message]
    keep = m.blocks[: slot.block] + m.blocks[slot.block + p.context_blocks :]
    return _message_texts(Message(m.role, keep))


__all__ = ["SYSTEM_PART", "ContextSlot", "Message", "RenderedPrompt", "RequestShapeError", "Role"]
