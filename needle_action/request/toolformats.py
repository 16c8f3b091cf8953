"""Tool schemas: the Anthropic and OpenAI formats, detected and converted both ways.

The request model holds tools as Anthropic tool dicts (``name``, ``description``, ``input_schema``;
``strict`` and ``cache_control`` kept when present). A tools file or a ``.prompty``/Dotprompt
declaration may use either format, item by item:

* Anthropic: ``{"name": ..., "description": ..., "input_schema": {...}}`` (server tools such as
  ``{"type": "web_search_20250305", "name": "web_search"}`` are kept as they are);
* OpenAI chat: ``{"type": "function", "function": {"name", "description", "parameters"}}``;
* OpenAI Responses / legacy functions: ``{"type": "function", "name", "parameters"}`` or
  ``{"name", "parameters"}``.

A file may hold the list itself or ``{"tools": [...]}``. No Jinja and no config imports here: this sits
below ``config`` (whose path checks read a tools file with :func:`load_tools`) and ``assemble`` (the
request model, ``.prompty`` and Dotprompt declarations).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from needle_action.core.dataformats import JSON, DataError, parse_json
from needle_action.core.errors import ConfigError, RequestShapeError
from needle_action.core.paths import display_path, read_text

MAX_TOOLS_BYTES = 2_000_000
_EMPTY_SCHEMA = {"type": "object", "properties": {}}
_TOOLS_HINT = (
    "a tools file is a JSON list of tools, each either Anthropic-shaped "
    '{"name", "description", "input_schema"} or OpenAI-shaped {"type": "function", "function": '
    '{"name", "description", "parameters"}}'
)


def _fail(path: str, message: str) -> NoReturn:
    raise RequestShapeError(path, message, _TOOLS_HINT)


def tool_format(tool: Any, path: str = "tools[0]") -> str:
    """ "anthropic", "anthropic_server", "openai" (chat), "openai_flat" (Responses/legacy), or an error."""
    if not isinstance(tool, dict):
        return _fail(path, "a tool must be a mapping")
    if isinstance(tool.get("function"), dict) and tool.get("type", "function") == "function":
        return "openai"
    if "input_schema" in tool:
        return "anthropic"
    if "parameters" in tool and tool.get("type", "function") == "function":
        return "openai_flat"
    kind = tool.get("type")
    if isinstance(kind, str) and kind not in ("function", "custom") and isinstance(tool.get("name"), str):
        return "anthropic_server"
    return _fail(path, "not a tool: expected `input_schema` (Anthropic) or `function`/`parameters` (OpenAI)")


def _anthropic_tool(name: Any, description: Any, schema: Any, extra: JSON, path: str) -> JSON:
    if not isinstance(name, str) or not name:
        _fail(f"{path}.name", "a tool needs a non-empty string `name`")
    if description is not None and not isinstance(description, str):
        _fail(f"{path}.description", "`description` must be a string")
    schema = _EMPTY_SCHEMA if schema is None else schema
    if not isinstance(schema, dict):
        _fail(path, "the tool's schema (`input_schema` / `parameters`) must be a JSON object")
    out: JSON = {"name": name}
    if description is not None:
        out["description"] = description
    out["input_schema"] = copy.deepcopy(schema)
    for key in ("strict", "cache_control"):
        if key in extra:
            out[key] = copy.deepcopy(extra[key])
    return out


def to_anthropic_tool(tool: Any, path: str = "tools[0]") -> JSON:
    """One tool in any accepted format, as an Anthropic tool dict."""
    kind = tool_format(tool, path)
    if kind == "anthropic_server":
        return copy.deepcopy(tool)
    if kind == "anthropic":
        return _anthropic_tool(
            tool.get("name"), tool.get("description"), tool.get("input_schema"), tool, path
        )
    spec = tool["function"] if kind == "openai" else tool
    where = f"{path}.function" if kind == "openai" else path
    return _anthropic_tool(spec.get("name"), spec.get("description"), spec.get("parameters"), spec, where)


def to_anthropic_tools(tools: Any, path: str = "tools") -> tuple[JSON, ...]:
    """A tool list in either format (or ``{"tools": [...]}``) as Anthropic tool dicts; names unique."""
    if isinstance(tools, dict) and "tools" in tools:
        tools, path = tools["tools"], f"{path}.tools"
    if not isinstance(tools, list | tuple):
        _fail(path, "expected a list of tools")
    out = tuple(to_anthropic_tool(t, f"{path}[{i}]") for i, t in enumerate(tools))
    seen: set[str] = set()
    for i, t in enumerate(out):
        if t["name"] in seen:
            _fail(f"{path}[{i}].name", f"tool name {t['name']!r} is declared twice")
        seen.add(t["name"])
    return out


def to_openai_tool(tool: JSON) -> JSON:
    """An Anthropic tool dict as an OpenAI chat ``{"type": "function", "function": ...}`` tool."""
    function: JSON = {"name": tool["name"]}
    if "description" in tool:
        function["description"] = tool["description"]
    function["parameters"] = copy.deepcopy(tool.get("input_schema", _EMPTY_SCHEMA))
    if "strict" in tool:
        function["strict"] = tool["strict"]
    return {"type": "function", "function": function}


def to_openai_tools(tools: Sequence[JSON]) -> list[JSON]:
    """Anthropic tool dicts as OpenAI chat tools (Anthropic server tools have no OpenAI form: left out)."""
    return [to_openai_tool(t) for t in tools if "input_schema" in t]


def load_tools(path: Path, *, file: str | None = None) -> tuple[JSON, ...]:
    """The tools in the JSON file PATH (either format), as Anthropic tool dicts.

    Errors are ConfigError at the file and line: invalid JSON, a value that is not a tool list, a
    tool without a name or schema. FILE is how the file is named in messages (default: PATH)."""
    where = file or display_path(path)
    try:
        text = read_text(path, what="tools file", file=where, max_bytes=MAX_TOOLS_BYTES)
    except FileNotFoundError:
        raise ConfigError("tools file not found", file=where, hint=_TOOLS_HINT) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the tools file: {exc.strerror or exc}", file=where) from None
    try:
        data = parse_json(text)
    except DataError as exc:
        raise ConfigError.at(f"the tools file is not valid JSON: {exc.message}", exc, file=where) from None
    try:
        return to_anthropic_tools(data)
    except RequestShapeError as exc:
        raise ConfigError(
            f"not a valid tool list: {exc}", file=where, line=item_line(text, exc.field_path), hint=exc.hint
        ) from None


def item_line(text: str, field_path: str) -> int | None:
    """The line of the top-level list item FIELD_PATH names (``tools[3]...``) in the JSON TEXT."""
    if "[" not in field_path:
        return 1
    try:
        index = int(field_path.split("[", 1)[1].split("]", 1)[0])
    except ValueError:
        return None
    starts = _top_level_item_starts(text)
    return text.count("\n", 0, starts[index]) + 1 if index < len(starts) else None


def _top_level_item_starts(text: str) -> list[int]:
    """Offsets where each item of the first list at nesting depth 1 (or 2 under ``{"tools": [``) starts."""
    starts: list[int] = []
    depth, quote, escape, list_depth = 0, False, False, None
    expecting = False
    for i, c in enumerate(text):
        if quote:
            escape, quote = (False, True) if escape else (c == "\\", c != '"')
            continue
        if expecting and not c.isspace() and c != "]":
            starts.append(i)
            expecting = False
        if c == '"':
            quote = True
        elif c in "[{":
            depth += 1
            if c == "[" and list_depth is None:
                list_depth, expecting = depth, True
        elif c in "]}":
            depth -= 1
        elif c == "," and list_depth is not None and depth == list_depth:
            expecting = True
    return starts


__all__ = [
    "item_line",
    "load_tools",
    "to_anthropic_tool",
    "to_anthropic_tools",
    "to_openai_tool",
    "to_openai_tools",
    "tool_format",
]
