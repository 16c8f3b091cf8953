"""How the fake Anthropic API reads a Messages request body: its texts in prompt order, what its
tools cost, and the content-block rules the real API enforces.

The real API renders a request as tools, then system, then messages (the order prompt caching
documents for its prefixes). The fake reads it in that order too:

* ``tools``: each tool as its canonical JSON (``json.dumps(tool, sort_keys=True,
  separators=(",", ":"))`` without ``cache_control``);
* ``system``: a string, or the concatenation of its text blocks;
* each message: a string, or its blocks read in order and concatenated: ``text`` -> its text;
  ``tool_use`` -> ``NAME(canonical JSON of input)``; ``tool_result`` -> its string content or the
  concatenation of its text blocks; ``document`` -> its title, a line break, its text source's
  data (or its content blocks' text); ``image`` -> nothing (counted apart, see below).

count_tokens (:func:`count_request`) is deterministic and documented, not Claude's tokenizer:
tiktoken ``o200k_base`` over those parts joined by ``"\\n"``, plus :data:`TOOLS_OVERHEAD` tokens
when the request has tools (the real API adds a tool-use system prompt of a few hundred tokens; 346
for Claude 4 models with ``tool_choice`` auto), plus :data:`IMAGE_TOKENS` per image block.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

TOOLS_OVERHEAD = 346
IMAGE_TOKENS = 1_000
BLOCK_TYPES = ("text", "image", "document", "tool_use", "tool_result")


class BodyError(Exception):
    """A request the API refuses (400 invalid_request_error), with the API's field path."""


def canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def tool_text(tool: dict) -> str:
    return canonical({k: v for k, v in tool.items() if k != "cache_control"})


def block_text(block: dict) -> str:
    """The text one content block contributes to the prompt ("" for images)."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        return f"{block.get('name', '')}({canonical(block.get('input', {}))})"
    if kind == "tool_result":
        return content_text(block.get("content", ""))
    if kind == "document":
        source = block.get("source") or {}
        body = source.get("data") if source.get("type") == "text" else content_text(source.get("content", ""))
        title = block.get("title")
        return (f"{title}\n" if title else "") + str(body or "")
    return ""


def content_text(content) -> str:
    """A message's (or a tool_result's) content read as one text: adjacent text blocks
    concatenated (a text split into blocks for cache breakpoints reads the same), other blocks
    set apart by a blank line (a tool_result's text does not run into the question after it)."""
    if isinstance(content, str):
        return content
    out = ""
    previous = None
    for b in content if isinstance(content, list) else []:
        if not isinstance(b, dict) or not (text := block_text(b)):
            continue
        kind = b.get("type")
        joined = previous is None or (kind == "text" and previous == "text")
        out += text if joined else "\n\n" + text
        previous = kind
    return out


def images_in(content) -> int:
    if not isinstance(content, list):
        return 0
    n = 0
    for b in content:
        if isinstance(b, dict):
            n += b.get("type") == "image"
            if b.get("type") == "tool_result":
                n += images_in(b.get("content"))
    return n


def request_parts(body: dict) -> list[tuple[str, str]]:
    """(role, text) of each part in prompt order: every tool ("tools"), the system, each message."""
    out = [("tools", tool_text(t)) for t in body.get("tools") or [] if isinstance(t, dict)]
    system = body.get("system")
    if system:
        out.append(("system", content_text(system)))
    for m in body.get("messages") or []:
        if isinstance(m, dict) and m.get("content") is not None:
            out.append((str(m.get("role")), content_text(m.get("content"))))
    return out


def count_request(body: dict, count: Callable[[str], int]) -> int:
    """The fake's count_tokens rule (see the module docstring)."""
    parts = request_parts(body)
    total = count("\n".join(text for _, text in parts))
    if body.get("tools"):
        total += TOOLS_OVERHEAD
    total += IMAGE_TOKENS * sum(
        images_in(m.get("content")) for m in body.get("messages") or [] if isinstance(m, dict)
    )
    return total


def cache_blocks(body: dict) -> Iterator[tuple[str, str, bool]]:
    """(role, text, has cache_control) of every cacheable block: tools, system blocks, message
    blocks (a tool_result's own text blocks, then the tool_result), in prompt order."""
    for t in body.get("tools") or []:
        if isinstance(t, dict):
            yield "tools", tool_text(t), isinstance(t.get("cache_control"), dict)
    parts = [("system", body.get("system"))] if body.get("system") else []
    parts += [
        (str(m.get("role")), m.get("content")) for m in body.get("messages") or [] if isinstance(m, dict)
    ]
    for role, content in parts:
        if isinstance(content, str):
            yield role, content, False
        elif isinstance(content, list):
            for b in content:
                if not isinstance(b, dict):
                    continue
                inner = b.get("content") if b.get("type") == "tool_result" else None
                if isinstance(inner, list):  # a tool_result split for caching: its blocks are breakpoints
                    for x in inner:
                        if isinstance(x, dict):
                            yield role, block_text(x), isinstance(x.get("cache_control"), dict)
                yield (
                    role,
                    "" if isinstance(inner, list) else block_text(b),
                    isinstance(b.get("cache_control"), dict),
                )


def validate_blocks(body: dict) -> None:
    """Raise BodyError where the API refuses content blocks: an unknown type, a bad tools list, a
    tool_result whose tool_use_id is not a tool_use of the message before it."""
    _validate_tools(body.get("tools"))
    previous: list = []
    for i, m in enumerate(body.get("messages") or []):
        content = m.get("content") if isinstance(m, dict) else None
        blocks = content if isinstance(content, list) else []
        for j, b in enumerate(blocks):
            kind = b.get("type") if isinstance(b, dict) else None
            if kind not in BLOCK_TYPES:
                raise BodyError(
                    f"messages.{i}.content.{j}.type: Input tag '{kind}' found using 'type' does not "
                    f"match any of the expected tags: {', '.join(repr(t) for t in BLOCK_TYPES)}"
                )
        uses = {b.get("id") for b in previous if isinstance(b, dict) and b.get("type") == "tool_use"}
        for j, b in enumerate(blocks):
            if b.get("type") == "tool_result" and b.get("tool_use_id") not in uses:
                raise BodyError(
                    f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{b.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
                    "`tool_use` block in the previous message."
                )
        previous = blocks


def _validate_tools(tools) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise BodyError("tools: Input should be a valid list")
    for i, t in enumerate(tools):
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not t["name"]:
            raise BodyError(f"tools.{i}.name: Field required")
        if "type" not in t and not isinstance(t.get("input_schema"), dict):
            raise BodyError(f"tools.{i}.input_schema: Field required")
