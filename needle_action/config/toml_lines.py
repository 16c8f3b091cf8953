"""Where things sit in a TOML file: the line of every key, and of ``tomllib``'s own errors.

``tomllib`` returns plain dicts without positions, and its syntax errors carry their position only
inside the message. Errors that point at the line the user must edit need both, so this module
recovers them: :func:`scan_lines` maps dotted keys to lines, :func:`toml_error_at` parses the
position back out of a ``TOMLDecodeError`` message.
"""

from __future__ import annotations

import re

from needle_action.core.dataformats import TomlErrorAt, toml_error_at

_KEY_SEGMENT = re.compile(r"""\s*(?:([A-Za-z0-9_-]+)|"((?:[^"\\]|\\.)*)"|'([^']*)')\s*""")
_INLINE_KEY = re.compile(r"([A-Za-z0-9_-]+)\s*=")
_KEY_OR_TABLE = re.compile(r"""^\s*(\[|[A-Za-z0-9_."'-]+\s*=)""")


# --------------------------------------------------------------------------- keys -> lines


def _parse_key(text: str, pos: int) -> tuple[list[str], int] | None:
    """Dotted key at ``text[pos:]`` -> (segments, position after it), or None."""
    segments: list[str] = []
    while True:
        m = _KEY_SEGMENT.match(text, pos)
        if not m or m.end() == pos:
            return None
        bare, basic, literal = m.groups()
        if bare is None and basic is None and literal is None:
            return None
        segments.append(bare if bare is not None else basic if basic is not None else literal)
        pos = m.end()
        if pos < len(text) and text[pos] == ".":
            pos += 1
            continue
        return segments, pos


def _skip_string(text: str, i: int, quote: str) -> int:
    """Index just past the one-line string opened by QUOTE at ``text[i]``."""
    j = i + 1
    while j < len(text) and text[j] != quote:
        j += 2 if (quote == '"' and text[j] == "\\") else 1
    return j + 1


def _scan_value(text: str, i: int, depth: int, in_ml: str | None) -> tuple[int, str | None]:
    """Track bracket depth and multi-line strings through ``text[i:]`` (a value or its continuation)."""
    n = len(text)
    while i < n:
        if in_ml:
            end = text.find(in_ml, i)
            if end < 0:
                return depth, in_ml
            i = end + 3
            in_ml = None
            continue
        c = text[i]
        if c == "#":
            break
        if c in "\"'":
            if text.startswith(c * 3, i):
                in_ml = c * 3
                i += 3
            else:
                i = _skip_string(text, i, c)
            continue
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth = max(0, depth - 1)
        i += 1
    return depth, in_ml


class _LineScanner:
    """One pass over the file, remembering the table it is in and any value still open."""

    def __init__(self) -> None:
        self.lines: dict[str, int] = {}
        self.aot_count: dict[str, int] = {}  # [[array.of.tables]] seen so far, by key
        self.prefix: list[str] = []  # the current table header
        self.depth = 0  # brackets still open in a multi-line value
        self.in_ml: str | None = None  # the delimiter of an open multi-line string

    def scan(self, text: str) -> dict[str, int]:
        for lineno, raw in enumerate(text.splitlines(), start=1):
            if self.in_ml or self.depth:
                self.depth, self.in_ml = _scan_value(raw, 0, self.depth, self.in_ml)
                continue
            stripped = raw.lstrip()
            if not stripped or stripped.startswith("#"):
                continue
            start = len(raw) - len(stripped)
            if stripped.startswith("[["):
                self._array_header(raw, start, lineno)
            elif stripped.startswith("["):
                self._table_header(raw, start, lineno)
            else:
                self._key_value(raw, start, lineno)
        return self.lines

    def _record(self, path: list[str], lineno: int, exact: bool = True) -> None:
        for k in range(1, len(path)):
            self.lines.setdefault(".".join(path[:k]), lineno)
        key = ".".join(path)
        if exact or key not in self.lines:
            self.lines[key] = lineno

    def _array_header(self, raw: str, start: int, lineno: int) -> None:
        """``[[a.b]]``: the nth occurrence is table ``a.b.<n>`` (0-based, like a pydantic loc)."""
        parsed = _parse_key(raw, start + 2)
        if not parsed:
            return
        path = parsed[0]
        key = ".".join(path)
        index = self.aot_count.get(key, 0)
        self.aot_count[key] = index + 1
        self._record(path, lineno, exact=False)
        self.prefix = [*path, str(index)]
        self._record(self.prefix, lineno)

    def _table_header(self, raw: str, start: int, lineno: int) -> None:
        parsed = _parse_key(raw, start + 1)
        if parsed:
            self.prefix = parsed[0]
            self._record(self.prefix, lineno)

    def _key_value(self, raw: str, start: int, lineno: int) -> None:
        parsed = _parse_key(raw, start)
        if not parsed:
            return
        segments, pos = parsed
        if pos >= len(raw) or raw[pos] != "=":
            return
        path = [*self.prefix, *segments]
        self._record(path, lineno)
        value_start = pos + 1
        brace = raw.find("{", value_start)
        if brace >= 0 and raw[value_start:brace].strip() == "":
            # inline table: its keys live on this line
            for m in _INLINE_KEY.finditer(raw[brace:]):
                self.lines.setdefault(".".join([*path, m.group(1)]), lineno)
        self.depth, self.in_ml = _scan_value(raw, value_start, 0, None)


def scan_lines(text: str) -> dict[str, int]:
    """Map dotted keys ("prompts.rag", "prompts.rag.max_growth", "defaults.recall.sizes",
    "defaults.recall.needles.0") to their 1-based line.

    Not a TOML parser: it only has to be right for files ``tomllib`` already accepted, and only
    as precise as a line. Keys inside inline tables on one line get that line.
    """
    return _LineScanner().scan(text)


def nearest_line(lines: dict[str, int], dotted: str) -> int | None:
    """The line of DOTTED, else of its closest recorded parent (a key set by [defaults] has none)."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        found = lines.get(".".join(parts[:k]))
        if found:
            return found
    return None


def value_line(text_lines: list[str], key_line: int | None, value: str) -> int | None:
    """The line of ``value`` (a string literal in a possibly multi-line array) under ``key_line``."""
    if not key_line:
        return None
    needles = (f'"{value}"', f"'{value}'")
    for idx in range(key_line - 1, min(len(text_lines), key_line + 200)):
        line = text_lines[idx]
        if idx > key_line - 1 and _KEY_OR_TABLE.match(line):
            break
        if any(n in line for n in needles):
            return idx + 1
    return key_line


__all__ = ["TomlErrorAt", "nearest_line", "scan_lines", "toml_error_at", "value_line"]
