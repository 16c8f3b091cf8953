"""The Messages API's rules for a request body, written once: what it refuses, and how needle
brings a body it builds within them without changing what the model reads.

The rules (each a :class:`Rule`, its ``text`` the words the API's 400 uses, so a refusal can be
named, :func:`rule_of`):

* ``no-messages``: a request needs at least one message;
* ``empty-text``: a text block must not be empty;
* ``empty-message``: every message has content (only a final assistant turn may be empty);
* ``whitespace-text``: a text block must hold more than whitespace (the system's blocks too);
* ``empty-cache-control``: ``cache_control`` only on a block that carries content;
* ``cache-breakpoints``: at most :data:`MAX_CACHE_BREAKPOINTS` blocks with ``cache_control``;
* ``prefill-whitespace``: a final assistant turn (a prefill) does not end with whitespace;
* ``last-turn``: the last message is a user turn (the model is asked for a reply, not a prefill);
* ``first-turn`` and ``alternating-turns``: the first message is a user turn, and turns alternate.
  The Anthropic API now accepts both (it merges consecutive turns of one role); some routes to
  Claude still refuse them (an assistant-first request on Amazon Bedrock has been seen refused while
  the same request passed the Anthropic API). needle sends what the template renders, the user's
  real request: these rules only name such a refusal, never rewrite the turns.

:func:`normalise` is applied where the Anthropic body is built (``request.wire.anthropic_body``),
so counting, sending and rendering see the same bytes: a whitespace-only text block is merged into
the text block after it (else the one before it; else, between blocks that are not text, dropped),
an empty one dropped, and a ``cache_control`` it carried moves to the nearest block before it that
carries content, in its turn or at the end of the turn before (a shorter cached prefix, still a
correct one). A message left with no content
at all is dropped (the API merges the turns around it), and a final assistant turn (a prefill)
loses its trailing whitespace. Otherwise the text the model reads is unchanged.
:func:`violations` lists what a body still breaks (``no-messages``, ``last-turn``, too many
breakpoints: what needle cannot fix without changing the request).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from needle_action.core.dataformats import JSON

MAX_CACHE_BREAKPOINTS = 4


@dataclass(frozen=True)
class Rule:
    code: str
    text: str  # what the API's error message says (lower case, matched as a substring)
    hint: str


RULES = (
    Rule(
        "no-messages",
        "at least one message is required",
        "the template renders no user turn: give the variable its turns in the fixture",
    ),
    Rule(
        "whitespace-text",
        "text content blocks must contain non-whitespace text",
        "a text block holds only whitespace (an indented loop, a split for caching)",
    ),
    Rule("empty-text", "text content blocks must be non-empty", "a text block is empty"),
    Rule(
        "empty-message",
        "all messages must have non-empty content",
        "a turn renders empty (only a final assistant turn may be)",
    ),
    Rule(
        "empty-cache-control",
        "cache_control cannot be set for empty text blocks",
        "cache_control sits on a block without content",
    ),
    Rule(
        "cache-breakpoints",
        f"a maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided",
        f"the request marks more than {MAX_CACHE_BREAKPOINTS} blocks with cache_control",
    ),
    Rule(
        "prefill-whitespace",
        "final assistant content cannot end with trailing whitespace",
        "a final assistant turn (a prefill) ends with whitespace",
    ),
    Rule(
        "last-turn",
        "final message must be a user turn",
        "the last message is an assistant turn: end the request with the user's turn",
    ),
    Rule(
        "first-turn",
        'first message must use the "user" role',
        "the request starts with an assistant turn (a greeting, a trimmed history), which this route "
        "to the model refuses: start the messages with the user's turn",
    ),
    Rule(
        "alternating-turns",
        "roles must alternate",
        "two turns of one role follow each other, which this route to the model refuses: merge them "
        "into one turn",
    ),
)
_BY_CODE = {r.code: r for r in RULES}


def rule(code: str) -> Rule:
    return _BY_CODE[code]


def rule_of(message: str | None) -> Rule | None:
    """The rule a provider's error MESSAGE names, or None."""
    low = (message or "").lower()
    return next((r for r in RULES if r.text in low), None)


# --------------------------------------------------------------------------- normalising


def _is_text(b: Any) -> bool:
    return isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)


def _blank(b: Any) -> bool:
    return _is_text(b) and not b["text"].strip()


def _clean(blocks: list[Any], orphans: list[Any] | None = None) -> list[Any]:
    """BLOCKS with no empty or whitespace-only text block (see the module docstring). A marker with
    no block before it in BLOCKS goes to ORPHANS (for the turn before), else it is dropped."""
    out: list[Any] = []
    spare = ""  # whitespace waiting for the next text block
    for b in blocks:
        if _blank(b):
            spare += b["text"]
            if "cache_control" in b and out and "cache_control" not in out[-1]:
                out[-1] = {**out[-1], "cache_control": b["cache_control"]}
            elif "cache_control" in b and not out and orphans is not None:
                orphans.append(b["cache_control"])
            continue
        if isinstance(b, dict) and b.get("type") == "tool_result" and isinstance(b.get("content"), list):
            b = {**b, "content": _clean(b["content"])}
        if spare and _is_text(b):
            b = {**b, "text": spare + b["text"]}
        elif spare and out and _is_text(out[-1]):
            out[-1] = {**out[-1], "text": out[-1]["text"] + spare}
        spare = ""
        out.append(b)
    if spare and out and _is_text(out[-1]):
        out[-1] = {**out[-1], "text": out[-1]["text"] + spare}
    return out


def _mark_last(message: JSON, marker: Any) -> JSON:
    """MESSAGE with MARKER on its last block (a string content made one text block)."""
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    if not blocks or "cache_control" in blocks[-1]:
        return message
    blocks[-1] = {**blocks[-1], "cache_control": marker}
    return {**message, "content": blocks}


def _empty(content: Any) -> bool:
    if isinstance(content, str):
        return not content.strip()
    return isinstance(content, list) and not content


def normalise(body: JSON) -> JSON:
    """BODY (a Messages request, not changed) within the rules it can be brought within."""
    out = copy.copy(body)
    system = out.get("system")
    if isinstance(system, list):
        system = _clean(system)
    if system is not None and _empty(system):
        out.pop("system")
    elif system is not None:
        out["system"] = system
    messages: list[Any] = []
    for m in out.get("messages") or []:
        content = m.get("content") if isinstance(m, dict) else None
        orphans: list[Any] = []
        if isinstance(content, list):
            m = {**m, "content": _clean(content, orphans)}
        if orphans and messages and isinstance(messages[-1], dict):  # a turn's leading marker: the
            messages[-1] = _mark_last(messages[-1], orphans[0])  # prefix ends with the turn before
        if isinstance(m, dict) and _empty(m.get("content")):
            continue
        messages.append(m)
    if messages and isinstance(messages[-1], dict) and messages[-1].get("role") == "assistant":
        messages[-1] = _without_trailing_space(messages[-1])
    if "messages" in out:
        out["messages"] = messages
    return out


def _without_trailing_space(message: JSON) -> JSON:
    """A final assistant turn (a prefill) without the trailing whitespace the API refuses there."""
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": content.rstrip()}
    if isinstance(content, list) and content and _is_text(content[-1]):
        last = {**content[-1], "text": content[-1]["text"].rstrip()}
        return {**message, "content": [*content[:-1], last]}
    return message


# --------------------------------------------------------------------------- checking


def _marks(body: JSON) -> int:
    n = sum(1 for t in body.get("tools") or [] if isinstance(t, dict) and "cache_control" in t)
    system = body.get("system")
    parts: list[Any] = [system] if isinstance(system, list) else []
    parts += [m.get("content") for m in body.get("messages") or [] if isinstance(m, dict)]
    for content in parts:
        for b in content if isinstance(content, list) else []:
            if not isinstance(b, dict):
                continue
            n += "cache_control" in b
            inner = b.get("content") if b.get("type") == "tool_result" else None
            n += (
                sum(isinstance(x, dict) and "cache_control" in x for x in inner or [])
                if isinstance(inner, list)
                else 0
            )
    return n


def violations(body: JSON) -> list[Rule]:
    """The rules BODY breaks that :func:`normalise` cannot mend."""
    found: list[Rule] = []
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if not messages:
        found.append(rule("no-messages"))
    elif messages[-1].get("role") != "user":
        found.append(rule("last-turn"))
    if _marks(body) > MAX_CACHE_BREAKPOINTS:
        found.append(rule("cache-breakpoints"))
    return found


__all__ = ["MAX_CACHE_BREAKPOINTS", "RULES", "Rule", "normalise", "rule", "rule_of", "violations"]
