"""Role markers: a raw render (with sentinels) -> system text and user/assistant messages.

A line holding only ``system:``, ``user:`` or ``assistant:`` starts a new message, but only when
it is template text: a marker that comes from data (inside the sentinels :mod:`sandbox` puts
around every interpolated value) is content, so a retrieved document or a user message cannot
forge a ``system:`` line. See docs/templates.md for the convention.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterator

from needle_action.assemble.prompt import Message
from needle_action.assemble.sandbox import CLOSE, OPEN, strip_sentinels
from needle_action.errors import TemplateError

_PAD = f"[ \\t\\r{OPEN}{CLOSE}]*"
_MARKER_RE = re.compile(rf"^{_PAD}(system|user|assistant){_PAD}:{_PAD}$", re.IGNORECASE | re.MULTILINE)
_SOURCE_MARKER_RE = re.compile(r"^\s*(system|user|assistant)\s*:\s*$", re.IGNORECASE)

Pair = tuple[int, int, bool]  # (open, close, spans_a_newline) of one sentinel-marked value


def _positions(text: str, ch: str) -> list[int]:
    out, i = [], text.find(ch)
    while i >= 0:
        out.append(i)
        i = text.find(ch, i + 1)
    return out


def _pairs(text: str) -> list[Pair]:
    """Matched (open, close, spans_a_newline) sentinel pairs, sorted by open position."""
    events = sorted([(i, 1) for i in _positions(text, OPEN)] + [(i, -1) for i in _positions(text, CLOSE)])
    out: list[Pair] = []
    stack: list[int] = []
    for pos, kind in events:
        if kind == 1:
            stack.append(pos)
        elif stack:
            o = stack.pop()
            out.append((o, pos, text.find("\n", o, pos) >= 0))
    for o in stack:
        out.append((o, len(text), text.find("\n", o) >= 0))
    out.sort()
    return out


def _visible(text: str) -> bool:
    return bool(strip_sentinels(text).strip())


def _honoured(text: str, start: int, end: int, pairs: list[Pair], opens: list[int], reach: list[int]) -> bool:
    """A marker line counts only if its role word is template text or a whole one-line value, and
    at least one of its characters (the ':' at least) is template text.

    ``reach[i]`` is the furthest close of ``pairs[:i+1]``: a value opened before the line and still
    open at its start necessarily spans lines, so whatever of it shows on this line is data.
    """
    pos = start
    first = bisect_left(opens, start)
    if first and reach[first - 1] > start:
        pos = min(reach[first - 1], end)
        if _visible(text[start:pos]):
            return False
    has_template_text = False
    for o, c, _ in pairs[first : bisect_left(opens, end)]:
        if o < pos:
            continue  # nested inside a value already looked at
        if _visible(text[pos:o]):
            has_template_text = True
        if c >= end:  # opened on this line, closed on a later one: multi-line data
            if _visible(text[o:end]):
                return False
            return has_template_text
        pos = c + 1
    if pos < end and _visible(text[pos:end]):
        has_template_text = True
    return has_template_text


def _marker_lines(raw: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, role) of every line shaped like a role marker (cheap filter, then the regex)."""
    start = 0
    for line in raw.split("\n"):
        end = start + len(line)
        if ":" in line:
            m = _MARKER_RE.match(line)
            if m:
                yield start, end, m.group(1).lower()
        start = end + 1


def _chunks(raw: str) -> list[tuple[str, int, int]]:
    """(role, start, end) raw offsets of each message, cut at the honoured marker lines."""
    pairs = _pairs(raw) if OPEN in raw else []
    opens = [p[0] for p in pairs]
    reach: list[int] = []
    for _, c, _ in pairs:
        reach.append(max(c, reach[-1]) if reach else c)
    chunks: list[tuple[str, int, int]] = []
    role, cursor = "user", 0
    for start, end, marker_role in _marker_lines(raw):
        if not _honoured(raw, start, end, pairs, opens, reach):
            continue
        chunks.append((role, cursor, start))
        role = marker_role
        cursor = end + 1
    chunks.append((role, cursor, len(raw)))
    return chunks


def split_messages(raw: str) -> list[tuple[str, str, int]]:
    """Raw render (with sentinels) -> [(role, content, marker_index)] honouring the marker convention."""
    chunks = _chunks(raw)
    # Remove the sentinels once, then map raw offsets to clean ones (cheaper than per chunk).
    marks = sorted(_positions(raw, OPEN) + _positions(raw, CLOSE))
    clean = "".join(raw[a + 1 : b] for a, b in zip([-1, *marks], [*marks, len(raw)], strict=True))
    out = []
    for index, (r, a, b) in enumerate(chunks):
        a, b = a - bisect_left(marks, a), b - bisect_left(marks, b)
        content = trim_blank_lines(clean[a:b]) if a < b else ""
        if content:
            out.append((r, content, index))
    return out


def trim_blank_lines(text: str) -> str:
    """TEXT without its leading and trailing blank lines (a section's text, as a message holds it)."""
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


def _marker_source_line(source: str, role: str, nth: int) -> int | None:
    """Best guess at the template line of the NTH marker line for ROLE (1-based), else the last one."""
    hits = [
        i
        for i, line in enumerate(source.splitlines(), start=1)
        if (m := _SOURCE_MARKER_RE.match(line)) and m.group(1).lower() == role
    ]
    if not hits:
        return None
    return hits[min(nth, len(hits)) - 1]


def to_prompt(
    parts: list[tuple[str, str, int]], source_text: str, file: str
) -> tuple[str | None, tuple[Message, ...]]:
    """(system text, messages) from :func:`split_messages`' parts; at most one system, and first."""
    system: str | None = None
    messages: list[Message] = []
    seen_system = 0
    for position, (role, content, _) in enumerate(parts):
        if role == "system":
            seen_system += 1
            _check_system_place(seen_system, position, source_text, file)
            system = content
        else:
            messages.append(Message(role=role, content=content))  # type: ignore[arg-type]
    if system is None and not messages:
        raise TemplateError(
            "the template renders an empty prompt",
            file=file,
            hint="check the fixture's variables and the template's {% if %} branches",
        )
    return system, tuple(messages)


def _check_system_place(seen_system: int, position: int, source_text: str, file: str) -> None:
    if seen_system > 1:
        raise TemplateError(
            "the prompt renders more than one system message",
            file=file,
            line=_marker_source_line(source_text, "system", seen_system),
            hint="merge the system text into the first `system:` section",
        )
    if position != 0:
        raise TemplateError(
            "a system message must come first, before any user or assistant message",
            file=file,
            line=_marker_source_line(source_text, "system", seen_system),
            hint="move the `system:` section to the top of the template",
        )


__all__ = ["split_messages", "to_prompt"]
