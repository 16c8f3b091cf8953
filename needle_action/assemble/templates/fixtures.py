"""Fixture files: the variables one case renders with (YAML, JSON or TOML; errors carry their line),
or one case of a case file (a ``.jsonl`` line, a ``.csv`` row: :mod:`needle_action.config.cases`).

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

from needle_action.config.cases import MAX_FIXTURE_BYTES, case_ref, is_case_file, read_cases, split_case
from needle_action.core.dataformats import JSON, DataError, parse_json, parse_toml, parse_yaml
from needle_action.core.errors import ConfigError
from needle_action.core.filecache import FileCache
from needle_action.core.paths import display_path, read_text
from needle_action.core.workspace import Workspace


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
    if is_case_file(file):
        raise ConfigError(
            "a case file holds many cases: name one of them",
            file=file,
            hint="list the file in fixtures = [...] (each line or row is a case), or name a case as file.jsonl:LINE",
        )
    kind = _KINDS.get(suffix)
    if kind is None:
        raise ConfigError(
            f"unsupported fixture type {suffix or '(no extension)'}",
            file=file,
            hint="fixtures are YAML (.yaml, .yml), JSON (.json) or TOML (.toml) files, or case files "
            "(.jsonl: one case a line; .csv: a header row, then one case a row)",
        )
    name, parse, hint = kind
    try:
        return parse(text)
    except DataError as exc:
        # "(at end of document)" stays in the message: the line alone would not say it
        end = " (at end of document)" if exc.at_end else ""
        raise ConfigError.at(
            f"{name} syntax error in fixture: {exc.message}{end}", exc, file=file, hint=hint
        ) from None


def load_fixture(path: str | os.PathLike[str]) -> JSON:
    """A fixture file's variables. YAML, JSON or TOML; the top level must be a mapping. A case
    name (``cases.jsonl:3``) gives that case's variables."""
    p, number = split_case(path)
    file = display_path(p)
    if not p.is_file():
        raise ConfigError(
            "fixture file not found" if not p.exists() else "fixture path is not a file",
            file=file,
            hint="fixture paths are relative to the threshold file's folder",
        )
    if number is not None:
        return _case_variables(p, number, file)
    text = read_text(p, what="fixture", file=file, max_bytes=MAX_FIXTURE_BYTES)
    return _checked(_parse_fixture_text(text, p.suffix.lower(), file), text, file)


def load_fixture_once(cache: FileCache[JSON], path: Path) -> JSON:
    """:func:`load_fixture` of PATH through CACHE: read once per version of the file. The value is
    the cache's, shared: the caller copies what it hands out. A case of a case file is read
    through :func:`~needle_action.config.cases.read_cases`, which caches the case file."""
    if split_case(path)[1] is not None:  # the version to key on is the case file's, not PATH's
        return load_fixture(path)
    return cache.get(path, lambda: load_fixture(path))


def _case_variables(path: Path, number: int, file: str) -> JSON:
    """Case NUMBER of the case file PATH: a JSON Lines line's object, or a CSV row by its header."""
    case = next((c for c in read_cases(path) if c.number == number), None)
    if case is None:
        raise ConfigError(
            f"{path.name} has no case {number}",
            file=file,
            hint="cases are named by their line (.jsonl) or row after the header (.csv); blank lines are not cases",
        )
    if case.header:
        return dict(zip(case.header, case.cells, strict=True))
    try:
        data = parse_json(case.text)
    except DataError as exc:
        raise ConfigError.at(
            f"JSON syntax error in this line of the case file: {exc.message}",
            exc,
            file=file,
            line=case.line,
            hint=_one_document(path)
            or 'each line of a .jsonl fixture is one JSON object, e.g. {"question": "..."}',
        ) from None
    if not isinstance(data, dict):
        kind = f"a {type(data).__name__}" if data is not None else "null"
        raise ConfigError(
            f"each line of a .jsonl fixture is a JSON object of variables; this one is {kind}",
            file=file,
            line=case.line,
            hint='write e.g. {"question": "...", "documents": [...]} on the line',
        )
    return _checked(data, "", file)


def _one_document(path: Path) -> str | None:
    """A hint when the .jsonl file is one JSON document written over several lines."""
    try:
        parse_json(read_text(path, what="fixture", max_bytes=MAX_FIXTURE_BYTES))
    except (DataError, ConfigError, OSError):
        return None
    return "this file is one JSON document over several lines: JSON Lines holds one object a line (or name it .json)"


def _checked(data: Any, text: str, file: str) -> JSON:
    """DATA when it is a mapping of variable names (a ConfigError at FILE otherwise)."""
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


def confine_fixture(workspace: Workspace, fixture_path: str | os.PathLike[str]) -> Path:
    """FIXTURE_PATH once the file it names (a case file's, for a case) passes the workspace's rules."""
    file, number = split_case(fixture_path)
    real = workspace.confine(file, what="fixture")
    return real if number is None else case_ref(real, number)


def key_line(text: str, key: str) -> int | None:
    """The 1-based line where the top-level KEY of a fixture text is written (None: not found)."""
    # YAML `key:`, TOML `key =`, JSON `"key":`, quoted or not; "golden:" is not "gold"
    written = re.compile(rf"""^\s*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')\s*[:=]""")
    for i, line in enumerate(text.splitlines(), start=1):
        if written.match(line):
            return i
    return None


__all__ = [
    "MAX_FIXTURE_BYTES",
    "confine_fixture",
    "key_line",
    "load_fixture",
    "load_fixture_once",
    "yaml_error_position",
]
