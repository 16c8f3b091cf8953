"""What a prompt declares beyond its messages: tools, tool choice, request parameters.

Three places may declare them, merged in this order (a later one wins):

1. the template's own front matter: ``.prompty`` ``model.parameters`` (``tools`` may be
   ``${file:tools.json}``, relative to the file and confined to the config root; ``${env:...}`` is
   never resolved, it is an error), Dotprompt ``tools``/``toolDefs``/``output`` (read in
   :mod:`~needle_action.assemble.templates.dotprompt`);
2. ``[prompts.NAME]`` of ``needle.toml``: ``tools = "path.json"`` (replaces the front matter's
   list), ``tool_choice``, ``request_params`` (merged key by key over the front matter's).

Tools files are read once per (path, modification time, size), parameter files once per version
(:mod:`~needle_action.core.filecache`): recall renders a prompt hundreds of times.
"""

from __future__ import annotations

import copy
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from needle_action.assemble.templates.fixtures import load_fixture_once
from needle_action.core.dataformats import JSON
from needle_action.core.errors import ConfigError, TemplateError
from needle_action.core.filecache import FileCache
from needle_action.core.paths import display_path
from needle_action.core.workspace import Workspace
from needle_action.request.blocks import RequestShapeError
from needle_action.request.toolformats import load_tools, to_anthropic_tools
from needle_action.request.wire import anthropic_tool_choice

_FILE_REF = re.compile(r"^\s*\$\{file:(.+)\}\s*$")
_ENV_REF = re.compile(r"\$\{env:([^}]*)\}")
# keys of model.parameters that are the request itself: needle sets them (max tokens from the
# prompt's settings), or reads them apart (tools, tool_choice)
_PROMPTY_CORE = ("max_tokens", "max_completion_tokens", "stream", "model", "messages")
# the request parameters that declare structured output (Anthropic's, OpenAI's)
_STRUCTURED_OUTPUT = {"output_config", "response_format"}
_tools_cache: dict[tuple[str, int, int], tuple[JSON, ...]] = {}
_tools_lock = threading.Lock()
# a .prompty's `${file:...}` parameter values, read once per version of the file (every render
# declares them)
_parameter_files: FileCache[JSON] = FileCache(entries=32, max_bytes=32_000_000)


@dataclass(frozen=True)
class Declared:
    """Tools (Anthropic dicts), tool choice (Anthropic form) and request parameters."""

    tools: tuple[JSON, ...] = ()
    tool_choice: JSON | None = None
    params: JSON = field(default_factory=dict)
    unresolved: tuple[str, ...] = ()  # tools named without a definition (Dotprompt's ``tools``)
    unresolved_schema: str | None = None  # Dotprompt ``output.schema: Name``, registered in code
    schema_line: int | None = None  # the template line naming it
    tools_line: int | None = None  # the template line naming the unresolved tools

    def over(self, base: Declared) -> Declared:
        """SELF's declarations over BASE's: tools replace (a tools list settles the names BASE
        left undefined), params merge key by key."""
        return Declared(
            tools=self.tools or base.tools,
            tool_choice=self.tool_choice if self.tool_choice is not None else base.tool_choice,
            params={**base.params, **self.params},
            unresolved=() if self.tools else base.unresolved,
            unresolved_schema=None if _STRUCTURED_OUTPUT & set(self.params) else base.unresolved_schema,
            schema_line=base.schema_line,
            tools_line=base.tools_line,
        )


def cached_tools(path: Path, *, file: str | None = None) -> tuple[JSON, ...]:
    """:func:`load_tools` of PATH, read again only when the file changes."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    with _tools_lock:
        hit = _tools_cache.get(key)
    if hit is None:
        hit = load_tools(path, file=file)
        with _tools_lock:
            _tools_cache[key] = hit
    return hit


def from_config(workspace: Workspace, tools: str | None, tool_choice: JSON | None, params: JSON) -> Declared:
    """The declarations of a ``[prompts.NAME]`` table (paths were checked when it was loaded)."""
    loaded: tuple[JSON, ...] = ()
    if tools:
        full = workspace.confine(workspace.root / tools, what="tools file")
        loaded = cached_tools(full, file=display_path(full))
    return Declared(tools=loaded, tool_choice=dict(tool_choice) if tool_choice else None, params=dict(params))


def from_prompty(front: JSON, source_text: str, path: Path, workspace: Workspace, file: str) -> Declared:
    """The declarations of a ``.prompty`` front matter's ``model.parameters``."""
    model = front.get("model")
    parameters = model.get("parameters") if isinstance(model, dict) else None
    if parameters is None:  # Prompty 2: top-level tools, model.options
        options = model.get("options") if isinstance(model, dict) else None
        return Declared(
            tools=_prompty2_tools(front.get("tools"), source_text, file), params=_options(options)
        )
    line = _key_line(source_text, "parameters")
    if not isinstance(parameters, dict):
        raise TemplateError("model.parameters must be a mapping", file=file, line=line)
    _refuse_env(parameters, source_text, file)
    tools: tuple[JSON, ...] = ()
    choice: JSON | None = None
    params: JSON = {}
    for key, value in parameters.items():
        if key == "tools":
            tools = _prompty_tools(value, source_text, path, workspace, file)
        elif key == "tool_choice":
            choice = _prompty_choice(value, file, _key_line(source_text, "tool_choice"))
        elif key not in _PROMPTY_CORE:
            params[str(key)] = _resolve_file(value, path, workspace, file, _key_line(source_text, key))
    return Declared(tools=tools, tool_choice=choice, params=params)


def _prompty_tools(
    value: Any, source_text: str, path: Path, workspace: Workspace, file: str
) -> tuple[JSON, ...]:
    line = _key_line(source_text, "tools")
    if isinstance(value, str):
        m = _FILE_REF.match(value)
        if not m:
            raise TemplateError(
                "model.parameters.tools must be a list of tools or ${file:tools.json}",
                file=file,
                line=line,
                hint="write tools: ${file:my_tools.json}, a path relative to this .prompty file",
            )
        target = _referenced_file(m.group(1), "tools file", path, workspace, file, line)
        return cached_tools(target, file=display_path(target))
    try:
        return to_anthropic_tools(value)
    except RequestShapeError as exc:
        raise TemplateError(
            f"model.parameters.tools: not a valid tool list: {exc}", file=file, line=line, hint=exc.hint
        ) from None


_KINDS = {"string": "string", "integer": "integer", "int": "integer", "number": "number", "float": "number",
          "boolean": "boolean", "bool": "boolean", "array": "array", "object": "object"}  # fmt: skip


def _prompty2_tools(value: Any, source_text: str, file: str) -> tuple[JSON, ...]:
    """Prompty 2's top-level ``tools``: ``{name, kind: function, description, parameters}``, the
    parameters a list of ``{name, kind, description, required, enum}`` (or a JSON Schema)."""
    if not isinstance(value, list):
        return ()
    tools: list[JSON] = []
    for spec in value:
        if (
            not isinstance(spec, dict)
            or not isinstance(spec.get("name"), str)
            or spec.get("kind", "function") != "function"
        ):
            raise TemplateError(
                "tools: each entry is {name, kind: function, description, parameters}",
                file=file,
                line=_key_line(source_text, "tools"),
                hint="a tool of another kind (mcp, openapi, ...) is the application's: declare its schema in a tools file",
            )
        tool: JSON = {"name": spec["name"], "input_schema": _parameters_schema(spec.get("parameters"))}
        if spec.get("description"):
            tool["description"] = str(spec["description"])
        tools.append(tool)
    return tuple(tools)


# Prompty 2's model.options -> request parameters (maxOutputTokens is reserve_output_tokens's job)
_OPTIONS = {"temperature": "temperature", "topP": "top_p", "topK": "top_k", "stopSequences": "stop_sequences"}


def _options(options: Any) -> JSON:
    if not isinstance(options, dict):
        return {}
    return {ours: options[theirs] for theirs, ours in _OPTIONS.items() if theirs in options}


def _parameters_schema(parameters: Any) -> JSON:
    if isinstance(parameters, dict) and "type" in parameters:
        return dict(parameters)  # a JSON Schema already
    if isinstance(parameters, dict):
        parameters = parameters.get("properties")
    props: JSON = {}
    required: list[str] = []
    for p in parameters if isinstance(parameters, list) else []:
        if isinstance(p, dict) and isinstance(p.get("name"), str):
            prop: JSON = {"type": _KINDS.get(str(p.get("kind", "string")).lower(), "string")}
            for key in ("description", "enum"):
                if key in p:
                    prop[key] = p[key]
            props[p["name"]] = prop
            if p.get("required"):
                required.append(p["name"])
    schema: JSON = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


def _prompty_choice(value: Any, file: str, line: int | None) -> JSON | None:
    if isinstance(value, dict) and value.get("type") in ("auto", "any", "tool", "none"):
        return dict(value)  # already Anthropic's form
    try:
        return anthropic_tool_choice(value)  # OpenAI's form, as Prompty files write it
    except RequestShapeError as exc:
        raise TemplateError(f"model.parameters.tool_choice: {exc.message}", file=file, line=line) from None


def _resolve_file(value: Any, path: Path, workspace: Workspace, file: str, line: int | None) -> Any:
    """A ``${file:x.json}`` parameter value as the file's data (JSON or YAML, confined); else VALUE."""
    if not isinstance(value, str) or not (m := _FILE_REF.match(value)):
        return value
    target = _referenced_file(m.group(1), "parameter file", path, workspace, file, line)
    # the request's own copy: the cached value is shared
    return copy.deepcopy(load_fixture_once(_parameter_files, target))


def _referenced_file(
    ref: str, what: str, path: Path, workspace: Workspace, file: str, line: int | None
) -> Path:
    """The file a ``${file:REF}`` names, relative to the .prompty at PATH, confined to the WORKSPACE."""
    target = workspace.confine(path.parent / ref.strip(), what=f"the {what}", file=file)
    if not target.is_file():
        raise TemplateError(f"{what} not found: {ref.strip()}", file=file, line=line)
    return target


def _refuse_env(value: Any, source_text: str, file: str) -> None:
    """``${env:NAME}`` anywhere in the parameters: an error (a pull request must not read secrets)."""
    if isinstance(value, str):
        m = _ENV_REF.search(value)
        if m:
            raise ConfigError(
                f"model.parameters refers to the environment variable {m.group(1)!r}: needle never "
                "resolves ${env:...} (a pull request's file must not read the runner's secrets)",
                file=file,
                line=_text_line(source_text, m.group(0)),
                hint="write the value itself in the front matter, or leave the key out",
            )
    elif isinstance(value, dict):
        for v in value.values():
            _refuse_env(v, source_text, file)
    elif isinstance(value, list):
        for v in value:
            _refuse_env(v, source_text, file)


def _key_line(text: str, key: str) -> int | None:
    m = re.search(rf"^\s*{re.escape(str(key))}\s*:", text, re.MULTILINE)
    return text.count("\n", 0, m.start()) + 1 if m else None


def _text_line(text: str, needle: str) -> int | None:
    at = text.find(needle)
    return text.count("\n", 0, at) + 1 if at >= 0 else None


__all__ = ["Declared", "cached_tools", "from_config", "from_prompty"]
