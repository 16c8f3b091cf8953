"""Content blocks of the request model, as the Anthropic Messages API spells them (plain JSON data).

A message's content is a string or a tuple of blocks of these types: ``text``, ``tool_use``,
``tool_result`` (content: a string or text/image blocks), ``document`` (a text source, optional
``title`` and ``citations``) and ``image`` (base64 or url source). This module checks their shape
(:func:`check_block`, :func:`check_tool_pairs`) and gives their plain text (:func:`block_text`).
Errors are :class:`RequestShapeError`: a ``ValueError`` naming the field (``messages[2].content[0]``).

No Jinja here: tokens, providers and the runtime import this through :mod:`prompt`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from needle_action.core.dataformats import JSON
from needle_action.core.errors import RequestShapeError

BLOCK_TYPES = ("text", "tool_use", "tool_result", "document", "image")
_IMAGE_SOURCES = ("base64", "url")
_DOCUMENT_SOURCES = ("text", "content", "base64", "url")


def _need(cond: bool, path: str, message: str, hint: str | None = None) -> None:
    if not cond:
        raise RequestShapeError(path, message, hint)


def check_block(block: Any, path: str) -> JSON:
    """BLOCK if it is a well-formed content block, else RequestShapeError at PATH."""
    _need(isinstance(block, dict), path, "a content block must be a mapping with a `type`")
    kind = block.get("type")
    if kind not in BLOCK_TYPES:
        raise RequestShapeError(
            f"{path}.type",
            f"unknown content block type {kind!r}",
            f"use one of: {', '.join(BLOCK_TYPES)}",
            kind,
        )
    if kind == "text":
        _need(isinstance(block.get("text"), str), f"{path}.text", "a text block needs a string `text`")
    elif kind == "tool_use":
        _need(_nonempty_str(block.get("id")), f"{path}.id", "a tool_use block needs a string `id`")
        _need(_nonempty_str(block.get("name")), f"{path}.name", "a tool_use block needs the tool's `name`")
        _need(isinstance(block.get("input", {}), dict), f"{path}.input", "`input` must be a mapping")
    elif kind == "tool_result":
        _need(
            _nonempty_str(block.get("tool_use_id")),
            f"{path}.tool_use_id",
            "a tool_result block needs the `tool_use_id` of the tool_use it answers",
        )
        _check_result_content(block.get("content", ""), f"{path}.content")
    elif kind == "document":
        _check_source(block.get("source"), f"{path}.source", _DOCUMENT_SOURCES)
    else:
        _check_source(block.get("source"), f"{path}.source", _IMAGE_SOURCES)
    checked: JSON = block
    return checked


def _nonempty_str(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _check_result_content(content: Any, path: str) -> None:
    if isinstance(content, str):
        return
    _need(isinstance(content, list | tuple), path, "tool_result content must be a string or a list of blocks")
    for i, inner in enumerate(content):
        check_block(inner, f"{path}[{i}]")
        _need(
            inner["type"] in ("text", "image", "document"),
            f"{path}[{i}].type",
            f"a tool_result may hold text, image or document blocks, not {inner['type']!r}",
        )


def _check_source(source: Any, path: str, kinds: Sequence[str]) -> None:
    _need(isinstance(source, dict), path, "a `source` mapping is required")
    _need(source.get("type") in kinds, f"{path}.type", f"source type must be one of: {', '.join(kinds)}")
    if source["type"] in ("text", "base64"):
        _need(isinstance(source.get("data"), str), f"{path}.data", "the source needs string `data`")
    elif source["type"] == "url":
        _need(_nonempty_str(source.get("url")), f"{path}.url", "the source needs a `url`")


def check_tool_pairs(messages: Sequence[Any], path: str = "messages") -> None:
    """Every tool_result answers a tool_use of the assistant message just before it (the API's rule)."""
    previous: set[str] = set()
    for i, m in enumerate(messages):
        blocks = m.content if not isinstance(m, dict) else m.get("content")
        ids: set[str] = set()
        for j, block in enumerate(blocks if isinstance(blocks, list | tuple) else ()):
            if block.get("type") == "tool_result":
                _need(
                    block.get("tool_use_id") in previous,
                    f"{path}[{i}].content[{j}].tool_use_id",
                    f"tool_result {block.get('tool_use_id')!r} has no tool_use with that id in the "
                    "assistant message just before it",
                    "emit the assistant's tool_use turn (same id) right before the tool_result",
                )
            elif block.get("type") == "tool_use":
                ids.add(block["id"])
        previous = ids


def block_text(block: JSON) -> str:
    """The plain text a block carries (empty for images and tool_use)."""
    kind = block.get("type")
    if kind == "text":
        text: str = block["text"]
        return text
    if kind == "tool_result":
        content = block.get("content", "")
        return content if isinstance(content, str) else blocks_text(content)
    if kind == "document":
        return document_text(block)
    return ""


def document_text(block: JSON) -> str:
    source = block.get("source") or {}
    if source.get("type") == "text":
        return str(source.get("data", ""))
    if source.get("type") == "content":
        inner = source.get("content")
        return inner if isinstance(inner, str) else blocks_text(inner or ())
    return ""


def blocks_text(blocks: Iterable[JSON]) -> str:
    """The joined plain text of BLOCKS (blank-line separated, empty ones skipped)."""
    return "\n\n".join(t for t in (block_text(b) for b in blocks) if t)


def text_block(text: str) -> JSON:
    return {"type": "text", "text": text}


def document_block(text: str, title: str | None = None, *, citations: bool = False) -> JSON:
    """A plain-text document block (the shape RAG apps with citations send)."""
    block: JSON = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text}}
    if title:
        block["title"] = title
    if citations:
        block["citations"] = {"enabled": True}
    return block


__all__ = [
    "BLOCK_TYPES",
    "RequestShapeError",
    "block_text",
    "blocks_text",
    "check_block",
    "check_tool_pairs",
    "document_block",
    "document_text",
    "text_block",
]
