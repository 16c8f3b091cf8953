"""An OpenAI chat request counted with tiktoken, the way OpenAI's cookbook documents it ("How to
count tokens with tiktoken", ``num_tokens_from_messages`` and ``num_tokens_for_tools``).

* Each message: 3 framing tokens, plus the tokens of each of its string fields (role, content,
  name), plus 1 for a ``name``. Every reply is primed with 3 more.
* Tools (``num_tokens_for_tools``): per function ``func_init`` plus the tokens of
  ``name:description`` (one trailing period dropped); when it has properties, ``prop_init`` once
  and per property ``prop_key`` plus the tokens of ``name:type:description``, and for an ``enum``
  ``enum_init`` plus ``enum_item`` and the item's tokens per item; ``func_end`` once for the list.
  The overheads are the cookbook's for gpt-4o / gpt-4o-mini (7, 3, 3, -3, 3, 12) and for
  gpt-3.5-turbo / gpt-4 (10, 3, 3, -3, 3, 12). Other models get the gpt-4o numbers and are
  labelled approximate.
* Beyond the cookbook (approximate): an assistant's ``tool_calls`` cost their function name and
  arguments text (3 framing tokens each); a ``tool`` message its content and ``tool_call_id``;
  content parts their text, and ``image_url`` parts what :mod:`needle_action.tokens.images`
  estimates from the pixels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from needle_action.core.dataformats import JSON
from needle_action.tokens.images import (
    ANTHROPIC_MAX_TOKENS,
    OPENAI_MAX_TOKENS,
    anthropic_image_tokens,
    image_block_size,
    openai_image_tokens,
)

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
TOKENS_REPLY_PRIMING = 3
TOKENS_PER_TOOL_CALL = 3  # not documented: the framing of one call, like a message's


@dataclass(frozen=True)
class ToolOverheads:
    func_init: int
    prop_init: int
    prop_key: int
    enum_init: int
    enum_item: int
    func_end: int


GPT4O = ToolOverheads(7, 3, 3, -3, 3, 12)
GPT4 = ToolOverheads(10, 3, 3, -3, 3, 12)


def tool_overheads(model: str) -> tuple[ToolOverheads, bool]:
    """(the cookbook's overheads for MODEL's family, whether they are documented for it)."""
    m = model.lower()
    if m.startswith(("gpt-4o", "gpt-4o-mini")):
        return GPT4O, True
    if m.startswith(("gpt-3.5-turbo", "gpt-4")) and not m.startswith(("gpt-4.1", "gpt-4.5")):
        return GPT4, True
    return GPT4O, False


# text -> its token count. Every function here only ever ADDS what it returns (never scales,
# compares or drops it): a request's count is its fixed tokens plus its texts' tokens, which is
# what lets TiktokenCounter.count_many plan many requests first and encode their texts in one batch.
Encode = Callable[[str], int]


def _no_period(text: str) -> str:
    return text[:-1] if text.endswith(".") else text


def tools_tokens(tools: list[JSON], count: Encode, model: str) -> int:
    """What OpenAI's chat tools (``{"type": "function", "function": {...}}``) cost MODEL."""
    if not tools:
        return 0
    o, _ = tool_overheads(model)
    total = 0
    for tool in tools:
        fn = tool.get("function") or {}
        total += o.func_init + count(f"{fn.get('name', '')}:{_no_period(str(fn.get('description') or ''))}")
        props = ((fn.get("parameters") or {}).get("properties")) or {}
        if props:
            total += o.prop_init
            for key, prop in props.items():
                prop = prop if isinstance(prop, dict) else {}
                total += o.prop_key
                if "enum" in prop:
                    total += o.enum_init
                    for item in prop["enum"]:
                        total += o.enum_item + count(str(item))
                desc = _no_period(str(prop.get("description") or ""))
                total += count(f"{key}:{prop.get('type', '')}:{desc}")
    return total + o.func_end


def image_tokens(part: JSON, images: str) -> int:
    """An ``image_url`` part: from its pixels by IMAGES' rule ("openai", or "anthropic" when a
    Claude model is counted with tiktoken); the rule's ceiling when the size is unknown (a URL)."""
    size = image_block_size(part)
    if images == "anthropic":
        return anthropic_image_tokens(*size) if size else ANTHROPIC_MAX_TOKENS
    detail = str((part.get("image_url") or {}).get("detail", "auto"))
    return openai_image_tokens(*size, detail) if size else OPENAI_MAX_TOKENS


def content_tokens(content: str | list[Any] | None, count: Encode, images: str = "openai") -> int:
    """A message's content: a string, or parts (``text``, ``image_url``)."""
    if isinstance(content, str):
        return count(content)
    total = 0
    for part in content or []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "image_url":
            total += image_tokens(part, images)
        else:
            total += count(str(part.get("text", "")))
    return total


def message_tokens(message: JSON, count: Encode, images: str = "openai") -> int:
    """One chat message, framing included (not the reply priming)."""
    total = TOKENS_PER_MESSAGE + count(str(message.get("role", "")))
    total += content_tokens(message.get("content") or "", count, images)
    if message.get("name"):
        total += count(str(message["name"])) + TOKENS_PER_NAME
    if message.get("tool_call_id"):
        total += count(str(message["tool_call_id"]))
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        total += TOKENS_PER_TOOL_CALL + count(str(fn.get("name", ""))) + count(str(fn.get("arguments", "")))
    return total


def chat_tokens(body: JSON, count: Encode, model: str, *, images: str = "openai") -> int:
    """The whole request: messages, reply priming, tools."""
    messages = body.get("messages") or []
    total = sum(message_tokens(m, count, images) for m in messages) + TOKENS_REPLY_PRIMING
    return total + tools_tokens(body.get("tools") or [], count, model)
