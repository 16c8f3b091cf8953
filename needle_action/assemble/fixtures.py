"""Fixture files: the variables one case renders with (YAML, JSON or TOML; errors carry their line)."""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from needle_action.config.toml_lines import toml_error_at
from needle_action.errors import ConfigError
from needle_action.paths import display_path, read_text


def yaml_error_position(exc: yaml.YAMLError) -> tuple[int | None, int | None, str]:
    """(line, column, problem) of a PyYAML error; line and column 1-based, None when unknown."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return None, None, problem
    return mark.line + 1, mark.column + 1, problem


def _parse_yaml(text: str, file: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        line, col, problem = yaml_error_position(exc)
        raise ConfigError(
            f"YAML syntax error in fixture: {problem}",
            file=file,
            line=line,
            column=col,
            hint="check indentation and quoting on this line",
        ) from None


def _parse_json(text: str, file: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"JSON syntax error in fixture: {exc.msg}",
            file=file,
            line=exc.lineno,
            column=exc.colno,
            hint="check commas, quotes and brackets on this line",
        ) from None


def _parse_toml(text: str, file: str) -> Any:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        at = toml_error_at(str(exc), text)
        # "(at end of document)" stays in the message: the line alone would not say it
        message = str(exc) if at.at_end else at.message
        raise ConfigError(
            f"TOML syntax error in fixture: {message}",
            file=file,
            line=at.line,
            column=at.column,
            hint="check quotes, brackets and `key = value` pairs on this line",
        ) from None


_PARSERS: dict[str, Callable[[str, str], Any]] = {
    ".yaml": _parse_yaml,
    ".yml": _parse_yaml,
    ".json": _parse_json,
    ".toml": _parse_toml,
}


def _parse_fixture_text(text: str, suffix: str, file: str) -> Any:
    parse = _PARSERS.get(suffix)
    if parse is None:
        raise ConfigError(
            f"unsupported fixture type {suffix or '(no extension)'}",
            file=file,
            hint="fixtures are YAML (.yaml, .yml), JSON (.json) or TOML (.toml) files",
        )
    return parse(text, file)


def load_fixture(path: str | os.PathLike) -> dict:
    """A fixture file's variables. YAML, JSON or TOML; the top level must be a mapping."""
    p = Path(path)
    file = display_path(p)
    if not p.is_file():
        raise ConfigError(
            "fixture file not found" if not p.exists() else "fixture path is not a file",
            file=file,
            hint="fixture paths are relative to the threshold file's folder",
        )
    text = read_text(p, what="fixture", file=file)
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


__all__ = ["key_line", "load_fixture", "yaml_error_position"]
