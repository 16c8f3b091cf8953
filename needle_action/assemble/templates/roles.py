"""Role markers: a raw render (with sentinels) -> system text and user/assistant messages.

A line holding only ``system:``, ``user:`` or ``assistant:`` starts a new message, but only when
it is template text: a marker that comes from data (inside the sentinels :mod:`sandbox` puts
around every interpolated value) is content, so a retrieved document or a user message cannot
forge a ``system:`` line. ``tool_use: NAME`` (the section is the call's JSON input) and
``tool_result:`` / ``tool_result: NAME`` (the section is the result's text) emit tool turns, with
the same protection. ``# user:`` (one ``#``, the Markdown form promptflow's chat templates use)
counts in every template. In ``.prompty`` files Prompty's ``user[name="x"]:`` counts too, and text
before the first marker is the system message, as Prompty's parser reads it. See docs/templates.md for the convention.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from needle_action.assemble.templates.sandbox import BLOCKS_CLOSE, BLOCKS_OPEN, CLOSE, OPEN, strip_sentinels
from needle_action.core.dataformats import JSON, DataError, parse_json
from needle_action.core.errors import TemplateError
from needle_action.request.blocks import RequestShapeError, check_block, text_block
from needle_action.request.prompt import Message, Role

_PAD = f"[ \\t\\r{OPEN}{CLOSE}]*"
_TURN_ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant"}  # a section that is a turn
_NAME = "[A-Za-z0-9_-]{1,64}"  # a tool name, as both APIs accept them
_ROLE_RE = re.compile(rf"^{_PAD}(system|user|assistant){_PAD}:{_PAD}$", re.IGNORECASE)
_TOOL_USE_RE = re.compile(rf"^{_PAD}(tool_use){_PAD}:{_PAD}({_NAME}){_PAD}$")
_TOOL_RESULT_RE = re.compile(rf"^{_PAD}(tool_result){_PAD}:{_PAD}({_NAME})?{_PAD}$")
# Prompty's parser: an optional '#' before the role, optional [key="value"] arguments after it
_PROMPTY_RE = re.compile(
    rf"^{_PAD}#?{_PAD}(system|user|assistant)(?:\[[^\]\n]*\])?{_PAD}:{_PAD}$", re.IGNORECASE
)
# Markdown's form in any Jinja template: promptflow's chat templates write ``# system:`` (one '#',
# as its own parser allows), and Prompty inherited it from there
_HASH_ROLE_RE = re.compile(rf"^{_PAD}#{_PAD}(system|user|assistant){_PAD}:{_PAD}$", re.IGNORECASE)
_SOURCE_MARKER_RE = re.compile(
    r"^\s*#?\s*(?:(system|user|assistant)(?:\[[^\]\n]*\])?\s*:\s*$|(tool_use|tool_result)\s*:)", re.IGNORECASE
)
TOOL_ROLES = ("tool_use", "tool_result")
_BLOCKS_RE = re.compile(f"{BLOCKS_OPEN}(.*?){BLOCKS_CLOSE}", re.DOTALL)


@dataclass(frozen=True)
class Section:
    """One marked section of a render: its ROLE, the marker's argument (a tool name), its text."""

    role: str
    content: str
    index: int  # the marker's position among the honoured markers (0: before the first)
    arg: str | None = None


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


def _marker(line: str, prompty: bool) -> tuple[str, str | None] | None:
    """(role, tool name or None) if LINE is shaped like a marker."""
    m = _ROLE_RE.match(line) or (_PROMPTY_RE if prompty else _HASH_ROLE_RE).match(line)
    if m:
        return m.group(1).lower(), None
    m = _TOOL_USE_RE.match(line) or _TOOL_RESULT_RE.match(line)
    return (m.group(1), m.group(2)) if m else None


def _marker_lines(raw: str, prompty: bool) -> Iterator[tuple[int, int, str, str | None]]:
    """(start, end, role, arg) of every line shaped like a marker (cheap filter, then the regexes)."""
    start = 0
    for line in raw.split("\n"):
        end = start + len(line)
        if ":" in line and (found := _marker(line, prompty)):
            yield start, end, found[0], found[1]
        start = end + 1


def _chunks(raw: str, prompty: bool) -> list[tuple[str, str | None, int, int]]:
    """(role, arg, start, end) raw offsets of each section, cut at the honoured marker lines."""
    pairs = _pairs(raw) if OPEN in raw else []
    opens = [p[0] for p in pairs]
    reach: list[int] = []
    for _, c, _ in pairs:
        reach.append(max(c, reach[-1]) if reach else c)
    chunks: list[tuple[str, str | None, int, int]] = []
    role, arg, cursor = ("system" if prompty else "user"), None, 0  # Prompty's parser starts in system
    for start, end, marker_role, marker_arg in _marker_lines(raw, prompty):
        if not _honoured(raw, start, end, pairs, opens, reach):
            continue
        chunks.append((role, arg, cursor, start))
        role, arg = marker_role, marker_arg
        cursor = end + 1
    chunks.append((role, arg, cursor, len(raw)))
    return chunks


def split_sections(raw: str, *, prompty: bool = False) -> list[Section]:
    """Raw render (with sentinels) -> its sections, honouring the marker convention. Sections left
    empty are dropped, except tool sections (a call without input, an empty result)."""
    chunks = _chunks(raw, prompty)
    # Remove the sentinels once, then map raw offsets to clean ones (cheaper than per chunk).
    marks = sorted(_positions(raw, OPEN) + _positions(raw, CLOSE))
    clean = "".join(raw[a + 1 : b] for a, b in zip([-1, *marks], [*marks, len(raw)], strict=True))
    out = []
    for index, (r, arg, a, b) in enumerate(chunks):
        a, b = a - bisect_left(marks, a), b - bisect_left(marks, b)
        content = trim_blank_lines(clean[a:b]) if a < b else ""
        if content or r in TOOL_ROLES:
            out.append(Section(r, content, index, arg))
    return out


def split_messages(raw: str) -> list[tuple[str, str, int]]:
    """Raw render (with sentinels) -> [(role, content, marker_index)] honouring the marker convention."""
    return [(s.role, s.content, s.index) for s in split_sections(raw)]


def trim_blank_lines(text: str) -> str:
    """TEXT without its leading and trailing blank lines (a section's text, as a message holds it)."""
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


def content_of(text: str) -> str | tuple[JSON, ...]:
    """A section's content: its text, or blocks where it printed a list of content blocks (the
    text around them becomes text blocks). Blocks are checked: RequestShapeError names the bad one."""
    if BLOCKS_OPEN not in text:
        return text
    blocks: list[JSON] = []
    pos = 0
    for m in [*_BLOCKS_RE.finditer(text), None]:
        piece = trim_blank_lines(text[pos : m.start() if m else len(text)])
        if piece.strip():
            blocks.append(text_block(piece))
        if m is None:
            break
        try:
            printed = parse_json(m.group(1))
        except DataError as exc:
            raise RequestShapeError(
                f"content[{len(blocks)}]", f"content blocks that cannot be read: {exc}"
            ) from None
        for b in printed:
            blocks.append(check_block(b, f"content[{len(blocks)}]"))
        pos = m.end()
    return tuple(blocks)


def _marker_source_line(source: str, role: str, nth: int) -> int | None:
    """Best guess at the template line of the NTH marker line for ROLE (1-based), else the last one."""
    hits = [
        i
        for i, line in enumerate(source.splitlines(), start=1)
        if (m := _SOURCE_MARKER_RE.match(line)) and (m.group(1) or m.group(2)).lower() == role
    ]
    if not hits:
        return None
    return hits[min(nth, len(hits)) - 1]


def to_prompt(
    parts: Sequence[Section | tuple[str, str, int]], source_text: str, file: str
) -> tuple[str | None, tuple[Message, ...]]:
    """(system text, messages) from :func:`split_sections`' sections; at most one system, and
    first; tool sections become ``tool_use`` / ``tool_result`` blocks (see :class:`_Turns`)."""
    turns = _Turns(source_text, file)
    for position, part in enumerate(parts):
        if not isinstance(part, Section):
            part = Section(part[0], part[1], part[2])
        turns.add(position, part)
    if turns.system is None and not turns.messages:
        raise TemplateError(
            "the template renders an empty prompt",
            file=file,
            hint="check the fixture's variables and the template's {% if %} branches",
        )
    return turns.system, tuple(turns.messages)


class _Turns:
    """Messages built section by section.

    ``tool_use: NAME`` adds a call (its section is the JSON input; empty: ``{}``) to the assistant
    turn just before, or starts one; ``tool_result[: NAME]`` answers the first unanswered call (of
    that name) of that assistant turn, in a user turn of results; a ``user:`` section right after
    results joins that turn as text after them (the API's agent shape)."""

    def __init__(self, source_text: str, file: str) -> None:
        self.source_text, self.file = source_text, file
        self.system: str | None = None
        self.messages: list[Message] = []
        self.pending: list[JSON] = []  # calls of the last assistant turn not answered yet
        self.seen: dict[str, int] = {}
        self.calls = 0

    def line(self, role: str) -> int | None:
        return _marker_source_line(self.source_text, role, self.seen.get(role, 1))

    def add(self, position: int, part: Section) -> None:
        self.seen[part.role] = self.seen.get(part.role, 0) + 1
        if part.role == "system":
            _check_system_place(self.seen["system"], position, self.source_text, self.file)
            self.system = part.content
        elif part.role == "tool_use":
            self._tool_use(part)
        elif part.role == "tool_result":
            self._tool_result(part)
        elif part.role == "user" and self._results_open():
            last = self.messages[-1]
            self.messages[-1] = Message(
                "user", (*last.blocks, *Message("user", content_of(part.content)).blocks)
            )
        else:
            self.messages.append(Message(role=_TURN_ROLES[part.role], content=content_of(part.content)))
            self.pending = []

    def _results_open(self) -> bool:
        last = self.messages[-1] if self.messages else None
        return (
            last is not None
            and last.role == "user"
            and not isinstance(last.content, str)
            and all(b.get("type") == "tool_result" for b in last.content)
        )

    def _tool_use(self, part: Section) -> None:
        try:
            data = parse_json(part.content) if part.content.strip() else {}
        except DataError as exc:
            data = exc
        if not isinstance(data, dict):
            raise TemplateError(
                f"the input of tool_use {part.arg!r} is not a JSON object",
                file=self.file,
                line=self.line("tool_use"),
                hint='write the call\'s input as JSON on the lines after the marker: {"query": "..."}',
            )
        self.calls += 1
        call = {"type": "tool_use", "id": f"toolu_needle_{self.calls:02d}", "name": part.arg, "input": data}
        last = self.messages[-1] if self.messages else None
        if last is not None and last.role == "assistant":
            self.messages[-1] = Message("assistant", (*last.blocks, call))
        else:
            self.messages.append(Message("assistant", (call,)))
            self.pending = []
        self.pending.append(call)

    def _tool_result(self, part: Section) -> None:
        call = next((c for c in self.pending if part.arg in (None, c["name"])), None)
        if call is None:
            named = f" for {part.arg!r}" if part.arg else ""
            raise TemplateError(
                f"tool_result{named} without its tool_use: no unanswered call in the assistant turn just before",
                file=self.file,
                line=self.line("tool_result"),
                hint="put a `tool_use: NAME` section (the call) in the assistant turn right before the result",
            )
        self.pending.remove(call)
        result = {"type": "tool_result", "tool_use_id": call["id"], "content": part.content}
        if self._results_open():
            self.messages[-1] = Message("user", (*self.messages[-1].blocks, result))
        else:
            self.messages.append(Message("user", (result,)))


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


__all__ = ["Section", "split_messages", "split_sections", "to_prompt", "trim_blank_lines"]
