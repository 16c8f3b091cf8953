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
tiktoken ``o200k_base`` over those parts joined by ``"\\n"``, plus the tool-use system prompt when
the request has tools (:func:`tools_overhead`: what Anthropic's tool-use pricing table gives per
model family, one number for ``tool_choice`` auto or none, another for any or tool), plus
what each image block costs (:func:`image_cost`): the vision guide's rule, an image scaled down
(aspect kept) until its long edge is at most 1568 px and it costs at most ~1,600 tokens, then
``width * height / 750`` tokens; an image whose size the fake cannot read (a URL, an unknown format)
costs the ceiling.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable, Iterator

TOOLS_OVERHEAD = 346  # Claude 4 and later with tool_choice auto (or none)
TOOLS_OVERHEAD_FORCED = 313  # ... with tool_choice any or tool
# the Claude 3 generation's own numbers: {model id fragment: (auto or none, any or tool)}
OLDER_TOOLS_OVERHEAD = {
    "claude-3-opus": (530, 281),
    "claude-3-sonnet": (159, 235),
    "claude-3-haiku": (264, 340),
    "claude-3-5-haiku": (264, 340),
    "claude-3-5-sonnet-20240620": (294, 261),
}
IMAGE_EDGE = 1568  # px: the longest edge the API keeps
IMAGE_CEILING = 1_600  # tokens: the most one image costs after scaling
PIXELS_PER_TOKEN = 750
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


def images_in(content) -> list[dict]:
    """Every image block of a message's content, those inside tool results included."""
    if not isinstance(content, list):
        return []
    out = []
    for b in content:
        if isinstance(b, dict):
            if b.get("type") == "image":
                out.append(b)
            if b.get("type") == "tool_result":
                out += images_in(b.get("content"))
    return out


def pixels(raw: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG, GIF or baseline/progressive JPEG; None otherwise."""
    if raw.startswith(b"\x89PNG") and raw[12:16] == b"IHDR":
        return int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")
    if raw[:3] == b"GIF":
        return int.from_bytes(raw[6:8], "little"), int.from_bytes(raw[8:10], "little")
    at = 2 if raw.startswith(b"\xff\xd8") else len(raw)
    while at + 9 <= len(raw) and raw[at] == 0xFF:
        kind = raw[at + 1]
        if kind in (0xC0, 0xC1, 0xC2):  # start of frame: height then width
            return int.from_bytes(raw[at + 7 : at + 9], "big"), int.from_bytes(raw[at + 5 : at + 7], "big")
        at += 2 + int.from_bytes(raw[at + 2 : at + 4], "big")
    return None


def image_cost(block: dict) -> int:
    """What one image block adds to count_tokens (the module docstring)."""
    source = block.get("source") or {}
    try:
        raw = base64.b64decode(source.get("data") or "") if source.get("type") == "base64" else b""
    except (binascii.Error, ValueError):
        raw = b""
    size = pixels(raw)
    if not size or not all(size):
        return IMAGE_CEILING
    width, height = size
    shrink = min(
        1.0, IMAGE_EDGE / max(width, height), math.sqrt(IMAGE_CEILING * PIXELS_PER_TOKEN / (width * height))
    )
    return math.ceil(int(width * shrink) * int(height * shrink) / PIXELS_PER_TOKEN)


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
        total += tools_overhead(str(body.get("model", "")), body.get("tool_choice"))
    total += sum(
        image_cost(image)
        for m in body.get("messages") or []
        if isinstance(m, dict)
        for image in images_in(m.get("content"))
    )
    return total


def tools_overhead(model: str, tool_choice) -> int:
    """The tool-use system prompt the API adds to a request with tools (the module docstring)."""
    forced = isinstance(tool_choice, dict) and tool_choice.get("type") in ("any", "tool")
    auto, chosen = next(
        (v for k, v in OLDER_TOOLS_OVERHEAD.items() if model.startswith(k)),
        (TOOLS_OVERHEAD, TOOLS_OVERHEAD_FORCED),
    )
    return chosen if forced else auto


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


def _check_texts(blocks, where: str) -> None:
    """The API's text rules on a list of blocks: no empty text block, none of only whitespace, no
    cache_control on an empty one (a tool_result's own blocks too)."""
    for j, b in enumerate(blocks):
        if not isinstance(b, dict):
            continue
        if b.get("type") == "tool_result" and isinstance(b.get("content"), list):
            _check_texts(b["content"], f"{where}.{j}.content")
        if b.get("type") != "text" or not isinstance(b.get("text"), str):
            continue
        if b["text"] == "" and "cache_control" in b:
            raise BodyError(f"{where}.{j}.text: cache_control cannot be set for empty text blocks")
        if b["text"] == "":
            raise BodyError(f"{where.split('.')[0]}: text content blocks must be non-empty")
        if not b["text"].strip():
            raise BodyError(f"{where.split('.')[0]}: text content blocks must contain non-whitespace text")


def validate_texts(body: dict) -> None:
    """Raise BodyError where the API refuses text: empty or whitespace-only text blocks (system,
    messages, tool_result contents), cache_control on an empty block, a message without content
    (only a final assistant turn may be empty)."""
    system = body.get("system")
    if isinstance(system, list):
        _check_texts(system, "system")
    elif isinstance(system, str) and system and not system.strip():
        raise BodyError("system: text content blocks must contain non-whitespace text")
    messages = body.get("messages") or []
    for i, m in enumerate(messages):
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            _check_texts(content, f"messages.{i}.content")
        last_assistant = i == len(messages) - 1 and m.get("role") == "assistant"
        tail = (
            content
            if isinstance(content, str)
            else (content[-1].get("text") if content and isinstance(content[-1], dict) else None)
        )
        if last_assistant and isinstance(tail, str) and tail and tail != tail.rstrip():
            raise BodyError("messages: final assistant content cannot end with trailing whitespace")
        if not last_assistant and (content == [] or (isinstance(content, str) and not content.strip())):
            what = "non-empty" if not content else "non-whitespace"
            raise BodyError(
                f"messages.{i}: all messages must have {what} content except for the optional final "
                "assistant message"
                if what == "non-empty"
                else "messages: text content blocks must contain non-whitespace text"
            )


MAX_CACHE_MARKS = 4


def validate_marks(body: dict) -> None:
    """Raise BodyError when more blocks than the API allows carry cache_control."""
    marked = sum(1 for _, _, mark in cache_blocks(body) if mark)
    if marked > MAX_CACHE_MARKS:
        raise BodyError(
            f"A maximum of {MAX_CACHE_MARKS} blocks with cache_control may be provided. Found {marked}."
        )


def validate_blocks(body: dict) -> None:
    """Raise BodyError where the API refuses content blocks: an unknown type, a bad tools list, a
    tool_result whose tool_use_id is not a tool_use of the message before it, empty or
    whitespace-only text (:func:`validate_texts`), more than four cache_control markers."""
    _validate_tools(body.get("tools"))
    validate_texts(body)
    validate_marks(body)
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
