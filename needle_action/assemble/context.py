"""The context slot: where the context variable landed in a rendered request, and where the
application really puts it (``context_as``).

:func:`locate` finds the variable's text in the rendered request: the span from its first item's
text to its last item's, in the one part (system text, a message, or one block) that holds most
of its items. :func:`place` then reshapes the request as ``context_as`` asks:

* ``"text"`` (default): as rendered; only ``context_slot``/``context_span`` are set;
* ``"tool_result"`` (the agent shape): the user turn holding the slot is sent as the result of a
  call the assistant made: an assistant ``tool_use`` of ``context_tool`` (default: the first
  declared tool), then that turn as a user ``tool_result`` block. Text after the slot's last line
  (the question, say) stays in the same user turn as a text block after the result;
* ``"document"``: the slot becomes ``document`` blocks, one per list item (the item's body text,
  its title-like key as the title), in place in its user turn.

Both run on every render (budgets, ``needle render``, recall's re-renders alike).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from needle_action.core.dataformats import JSON
from needle_action.core.errors import ConfigError
from needle_action.request.blocks import document_block, text_block
from needle_action.request.prompt import SYSTEM_PART, ContextSlot, Message, RenderedPrompt

CONTEXT_TOOL_ID = "toolu_needle_context"
MAX_ITEMS = 5000  # items made into documents: far more than any real context, bounded all the same
PROBES = 16  # items looked for at each end of the context
_BODY_KEYS = ("text", "content", "body", "page_content", "chunk", "message", "snippet")
_TITLE_KEYS = ("title", "name", "heading", "subject", "source", "filename", "file", "url", "id")


# --------------------------------------------------------------------------- items


def item_text(item: Any) -> str:
    """The text an item contributes: a string, or a mapping's body (a body-like key, else its
    longest string value)."""
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        for key in _BODY_KEYS:
            body = item.get(key)
            if isinstance(body, str) and body.strip():
                return body
        strings = [v for v in item.values() if isinstance(v, str)]
        return max(strings, key=len) if strings else ""
    return "" if item is None else str(item)


def item_title(item: Any) -> str | None:
    if isinstance(item, dict):
        for key in _TITLE_KEYS:
            if isinstance(item.get(key), str | int) and str(item[key]).strip():
                return str(item[key])
    return None


def _items(value: Any) -> list[Any]:
    if isinstance(value, list | tuple):
        return list(value[:MAX_ITEMS])
    return [] if value is None else [value]


# --------------------------------------------------------------------------- locating


def _anchors(text: str) -> tuple[str, str] | None:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return None
    return lines[0][:200], lines[-1][-200:]


def _span_in(text: str, anchors: list[tuple[str, str]]) -> tuple[int, int, int] | None:
    """(start, end, score) of the items in TEXT: from the first of the first items found to the end
    of the last of the last items found. Only :data:`PROBES` items are looked for at each end, so
    a context of thousands of items (recall's filler) costs a few scans of the text, not one each."""
    start, end, found = -1, -1, 0
    for first, _ in anchors[:PROBES]:
        s = text.find(first)
        if s >= 0:
            start, found = s, found + 1
            break
    if start < 0:
        return None
    for _, last in reversed(anchors[-PROBES:]):
        e = text.rfind(last)
        if e >= start:
            end, found = e + len(last), found + 1
            break
    if end < 0:
        end = start + len(anchors[0][0])
    return start, end, found


def _parts(p: RenderedPrompt) -> Iterator[tuple[int, int | None, str]]:
    if p.system is not None:
        if len(p.system_blocks) > 1:
            for j, b in enumerate(p.system_blocks):
                yield SYSTEM_PART, j, b.get("text", "")
        else:
            yield SYSTEM_PART, None, p.system
    for i, m in enumerate(p.messages):
        if isinstance(m.content, str):
            yield i, None, m.content
        else:
            for j, b in enumerate(m.content):
                if b.get("type") == "text":
                    yield i, j, b["text"]


def locate(p: RenderedPrompt, value: Any) -> RenderedPrompt:
    """P with ``context_slot``/``context_span`` set to where VALUE's text is (unchanged if nowhere)."""
    items = _items(value)
    ends = items if len(items) <= 2 * PROBES else items[:PROBES] + items[-PROBES:]
    anchors = [a for a in (_anchors(item_text(it)) for it in ends) if a]
    if not anchors:
        return p
    best: tuple[int, int, int | None, int, int] | None = None  # (found, message, block, start, end)
    for message, block, text in _parts(p):
        hit = _span_in(text, anchors)
        if hit and (best is None or hit[2] > best[0]):
            best = (hit[2], message, block, hit[0], hit[1])
    if best is None:
        return p
    _, message, block, start, end = best
    meta = {**p.meta, "context_items": len(items)}
    return replace(p, context_slot=ContextSlot(message, block), context_span=(start, end), meta=meta)


# --------------------------------------------------------------------------- placing


Where = tuple[str | None, int | None]  # (file, line) of the setting, for errors


def place(
    p: RenderedPrompt,
    value: Any,
    how: str,
    *,
    tool: str | None,
    question: Any = None,
    where: Where = (None, None),
) -> RenderedPrompt:
    """P reshaped as ``context_as = HOW`` (after :func:`locate`); WHERE locates the setting."""
    if how == "text":
        return p
    if p.context_slot is None:
        if any(item_text(it).strip() for it in _items(value)[:PROBES]):
            raise ConfigError(
                f'context_as = "{how}": the context variable\'s text does not appear in the rendered prompt',
                file=where[0],
                line=where[1],
                hint="the template must print the context's text unchanged for needle to find where it goes",
            )
        return p  # an empty context: nothing to place
    slot = p.context_slot
    if slot.message == SYSTEM_PART or p.messages[slot.message].role != "user" or slot.block is not None:
        raise ConfigError(
            f'context_as = "{how}" needs the context in a user turn of plain text; '
            f"here it is in the {'system text' if slot.message == SYSTEM_PART else 'a ' + p.messages[slot.message].role + ' turn'}",
            file=where[0],
            line=where[1],
            hint="render the context variable in a user turn of its own (a `user:` marker before it)",
        )
    if how == "tool_result":
        return _as_tool_result(p, _context_tool(p, tool, where), question)
    return _as_documents(p, value)


def _context_tool(p: RenderedPrompt, name: str | None, where: Where) -> JSON:
    if not p.tools:
        raise ConfigError(
            'context_as = "tool_result" needs a tool the context comes back from; the prompt declares none',
            file=where[0],
            line=where[1],
            hint='declare tools = "tools.json" (or model.parameters.tools in a .prompty)',
        )
    if name is None:
        return p.tools[0]
    for t in p.tools:
        if t.get("name") == name:
            return t
    raise ConfigError(
        f"context_tool {name!r} is not one of the prompt's tools ({', '.join(str(t.get('name')) for t in p.tools)})",
        file=where[0],
        line=where[1],
    )


def _call_input(tool: JSON, question: Any) -> JSON:
    """The call's input: the schema's required properties, strings holding the question."""
    schema = tool.get("input_schema") or {}
    props = schema.get("properties") or {}
    out: JSON = {}
    for key in schema.get("required") or []:
        kind = str((props.get(key) or {}).get("type"))
        defaults: dict[str, Any] = {"integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}
        out[key] = defaults.get(kind, question if isinstance(question, str) else "")
    return out


def _as_tool_result(p: RenderedPrompt, tool: JSON, question: Any) -> RenderedPrompt:
    assert p.context_slot is not None
    assert p.context_span is not None
    i = p.context_slot.message
    text = p.messages[i].text
    start, end = p.context_span
    cut = text.find("\n", end)
    cut = len(text) if cut < 0 else cut
    result = {"type": "tool_result", "tool_use_id": CONTEXT_TOOL_ID, "content": text[:cut]}
    rest = text[cut:].strip("\n")
    call = {
        "type": "tool_use",
        "id": CONTEXT_TOOL_ID,
        "name": tool["name"],
        "input": _call_input(tool, question),
    }
    before = list(p.messages[:i])
    if before and before[-1].role == "assistant":  # the call joins the assistant's own turn
        before[-1] = Message("assistant", (*before[-1].blocks, call))
    else:
        before.append(Message("assistant", (call,)))
    turn = Message("user", (result, text_block(rest)) if rest.strip() else (result,))
    messages = (*before, turn, *p.messages[i + 1 :])
    return replace(p, messages=messages, context_slot=ContextSlot(len(before), 0), context_span=(start, end))


def _as_documents(p: RenderedPrompt, value: Any) -> RenderedPrompt:
    assert p.context_slot is not None
    assert p.context_span is not None
    i = p.context_slot.message
    text = p.messages[i].text
    start, end = p.context_span
    docs = [document_block(item_text(it), item_title(it)) for it in _items(value)]
    head, tail = text[:start].strip("\n"), text[end:].strip("\n")
    blocks = (
        ([text_block(head)] if head.strip() else []) + docs + ([text_block(tail)] if tail.strip() else [])
    )
    messages = (*p.messages[:i], Message("user", tuple(blocks)), *p.messages[i + 1 :])
    first = 1 if head.strip() else 0
    return replace(
        p, messages=messages, context_slot=ContextSlot(i, first), context_span=None, context_blocks=len(docs)
    )


__all__ = ["CONTEXT_TOOL_ID", "item_text", "item_title", "locate", "place"]
