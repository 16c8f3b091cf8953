"""Fixture files: the variables one case renders with (YAML, JSON or TOML; errors carry their line).

Parsed by :mod:`needle_action.core.dataformats` (nesting, alias expansion and integer sizes bounded);
files above :data:`MAX_FIXTURE_BYTES` are refused before they are read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from needle_action.core.dataformats import JSON, DataError, parse_json, parse_toml, parse_yaml
from needle_action.core.errors import ConfigError
from needle_action.core.paths import display_path, read_text

# a fixture is the variables of one request: 10 MB is already far beyond any model's context
# window, and keeps the slowest parser (pure-Python YAML, ~1.3 MB/s) under 10 s
MAX_FIXTURE_BYTES = 10_000_000


def yaml_error_position(exc: yaml.YAMLError) -> tuple[int | None, int | None, str]:
    """(line, column, problem) of a PyYAML error; line and column 1-based, None when unknown."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return None, None, problem
    return mark.line + 1, mark.column + 1, problem


_KINDS: dict[str, tuple[str, Callable[[str], Any], str]] = {
    ".yaml": ("YAML", parse_yaml, "check indentation and quoting on this line"),
    ".yml": ("YAML", parse_yaml, "check indentation and quoting on this line"),
    ".json": ("JSON", parse_json, "check commas, quotes and brackets on this line"),
    ".toml": ("TOML", parse_toml, "check quotes, brackets and `key = value` pairs on this line"),
}


def _parse_fixture_text(text: str, suffix: str, file: str) -> Any:
    kind = _KINDS.get(suffix)
    if kind is None:
        raise ConfigError(
            f"unsupported fixture type {suffix or '(no extension)'}",
            file=file,
            hint="fixtures are YAML (.yaml, .yml), JSON (.json) or TOML (.toml) files",
        )
    name, parse, hint = kind
    try:
        return parse(text)
    except DataError as exc:
        # "(at end of document)" stays in the message: the line alone would not say it
        end = " (at end of document)" if exc.at_end else ""
        raise ConfigError(
            f"{name} syntax error in fixture: {exc.message}{end}",
            file=file,
            line=exc.line,
            column=exc.column,
            hint=hint,
        ) from None


def load_fixture(path: str | os.PathLike[str]) -> JSON:
    """A fixture file's variables. YAML, JSON or TOML; the top level must be a mapping."""
    p = Path(path)
    file = display_path(p)
    if not p.is_file():
        raise ConfigError(
            "fixture file not found" if not p.exists() else "fixture path is not a file",
            file=file,
            hint="fixture paths are relative to the threshold file's folder",
        )
    text = read_text(p, what="fixture", file=file, max_bytes=MAX_FIXTURE_BYTES)
    data = _parse_fixture_text(text, p.suffix.lower(), file)
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise ConfigError(
            f"the fixture's top level must be a mapping of variable names to values, but it is {kind}",
            file=file,
            line=1,
            hint="write e.g. `question: ...` and `documents: [...]` at the top level",
        )
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise ConfigError(
            f"fixture variable names must be strings, got {bad[0]!r}",
            file=file,
            line=key_line(text, str(bad[0])),
            hint="quote the key",
        )
    return data


def key_line(text: str, key: str) -> int | None:
    """The 1-based line where the top-level KEY of a fixture text is written (None: not found)."""
    # YAML `key:`, TOML `key =`, JSON `"key":`, quoted or not; "golden:" is not "gold"
    written = re.compile(rf"""^\s*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')\s*[:=]""")
    for i, line in enumerate(text.splitlines(), start=1):
        if written.match(line):
            return i
    return None


__all__ = ["MAX_FIXTURE_BYTES", "key_line", "load_fixture", "yaml_error_position"]
