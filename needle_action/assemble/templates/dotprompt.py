"""Google Dotprompt ``.prompt`` files: YAML front matter, a Handlebars body, roles as messages.

The front matter is read by the official ``dotpromptz`` package (its restricted YAML loader: no
anchors, aliases or tags, errors with their line); the body is rendered by its Handlebars engine,
bounded and with unforgeable role markers (:mod:`~needle_action.assemble.templates.handlebars`). The messages
follow Dotprompt's rules (``to_messages`` in dotpromptz):

* ``{{role "system"}}``, ``{{role "user"}}``, ``{{role "model"}}`` start a message (``model`` is
  the assistant); a role marker before any text just sets the role of the first message;
* text before the first marker is a user message; messages with only whitespace are dropped;
* ``{{history}}`` inserts the fixture's ``messages`` (Dotprompt's render-time history) there and
  continues as a model message; without the marker the history goes before the last user message.

Variables are ``input.default`` from the front matter, overlaid by the fixture (the fixture wins),
as Dotprompt overlays runtime input on the defaults. Partials (``{{> name}}``) are the files
``_name.prompt`` (``{{> dir/name}}``: ``dir/_name.prompt``), looked up next to the template
first, then from the config root, and confined to the root like Jinja includes.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dotpromptz import FrontmatterError, ParsedPrompt, parse_document
from dotpromptz.picoschema import picoschema_to_json_schema
from dotpromptz_handlebars import Node, StrictModeError

from needle_action.assemble.templates import handlebars as hbs
from needle_action.assemble.templates.declared import Declared
from needle_action.assemble.templates.handlebars import MARK, RenderLimit, Tag
from needle_action.assemble.templates.limits import SIZE_HINT
from needle_action.assemble.templates.roles import trim_blank_lines
from needle_action.assemble.templates.sandbox import read_template
from needle_action.core.dataformats import JSON
from needle_action.core.errors import ConfigError, TemplateError
from needle_action.core.paths import PathEscape, check_relative, display_path
from needle_action.core.workspace import ESCAPE_REASONS, HIDDEN_HINT, Workspace
from needle_action.request.prompt import Message, RenderedPrompt, Role

MAX_PARTIALS = 200
ROLES: dict[str, Role] = {"system": "system", "user": "user", "model": "assistant"}
_MARKER_RE = re.compile(f"{MARK}(role:[^{MARK}]*|history){MARK}")


# --------------------------------------------------------------------------- the file


@dataclass(frozen=True)
class DotpromptFile:
    """A ``.prompt`` file: its front matter (raw), ``input.default``, and the body with its first line."""

    front: JSON
    defaults: JSON
    schema: Any
    body: str
    body_line: int


def parse(text: str, file: str) -> DotpromptFile:
    """Front matter and body of a ``.prompt`` text, as dotpromptz parses them; errors at their line.

    Parsed once per text (a render reads its template's front matter three times, and recall
    renders it hundreds of times); the value returned is the caller's own copy."""
    return copy.deepcopy(_parse(text, file))


@functools.lru_cache(maxsize=32)  # keyed by the text itself: no file's content answers for another's
def _parse(text: str, file: str) -> DotpromptFile:
    try:
        parsed: ParsedPrompt[Any] = parse_document(text)
    except FrontmatterError as exc:
        raise TemplateError.at(
            f"Dotprompt front matter: {exc.reason}",
            exc,
            file=file,
            hint="the front matter is YAML between two --- lines; anchors, aliases and tags are not allowed",
        ) from None
    except Exception as exc:  # noqa: BLE001 - a hostile file must not surface as a traceback
        raise TemplateError(
            f"Dotprompt front matter cannot be read: {type(exc).__name__}", file=file
        ) from None
    body = parsed.template
    stripped = text.rstrip()
    offset = len(stripped) - len(body) if body and stripped.endswith(body) else 0
    defaults = parsed.input.default if parsed.input is not None and parsed.input.default else {}
    return DotpromptFile(
        front=dict(parsed.raw or {}),
        defaults=dict(defaults),
        schema=parsed.input.schema if parsed.input is not None else None,
        body=body,
        body_line=text.count("\n", 0, offset) + 1,
    )


# --------------------------------------------------------------------------- compiling, with partials


@dataclass
class Compiled:
    """A template and its partials, compiled; the tags of each file, for error lines."""

    doc: DotpromptFile
    program: list[Node]
    partials: dict[str, list[Node]] = field(default_factory=dict)
    tags: dict[str, list[Tag]] = field(default_factory=dict)  # display path -> tags, template first
    stamps: tuple[Any, ...] = ()


def _compile(text: str, tags: list[Tag], file: str, *, partial: bool) -> list[Node]:
    try:
        return hbs.compile_program(text, partial=partial)
    except (ValueError, RecursionError) as exc:
        tag = hbs.syntax_error_tag(tags)
        raise TemplateError(
            f"Handlebars syntax error: {exc}",
            file=file,
            line=tag.line if tag else None,
            hint="check the {{...}} tags on this line; every {{#block}} needs its {{/block}}",
        ) from None


def _partial_file(workspace: Workspace, folder: Path, name: str, tag: Tag, file: str) -> Path | None:
    """The file of partial NAME (``_name.prompt``) next to FOLDER, else at the workspace's root;
    None when missing. Confined like a Jinja include (:meth:`Workspace.check`)."""
    try:
        check_relative(name)
    except PathEscape:
        raise TemplateError(
            f"partial {name!r} leaves the config root; only files inside it may be used",
            file=file,
            line=tag.line,
            hint="name partials by their path relative to the template's folder or the config root",
        ) from None
    folder_part, _, base = name.rpartition("/")
    rel = f"{folder_part}/_{base}.prompt" if folder_part else f"_{base}.prompt"
    for candidate in dict.fromkeys((folder / rel, workspace.root / rel)):
        if candidate.is_file():
            try:
                workspace.check(candidate)
            except PathEscape as exc:
                why = "resolves through a symlink outside the config root" if exc.kind == "outside" else ""
                raise TemplateError(
                    f"partial {name!r} {why or ESCAPE_REASONS[exc.kind]}",
                    file=file,
                    line=tag.line,
                    hint=HIDDEN_HINT if exc.kind == "hidden" else None,
                ) from None
            return candidate
    return None


class _Partials:
    """Loads the partials a template names, depth first, refusing loops (as dotpromptz does)."""

    def __init__(self, workspace: Workspace, folder: Path, out: Compiled) -> None:
        self.workspace, self.folder, self.out = workspace, folder, out
        self.paths: list[Path] = []

    def visit(self, tags: list[Tag], file: str, chain: tuple[str, ...]) -> None:
        """Load every partial TAGS (of FILE) name, then theirs; CHAIN: the partials being loaded."""
        for tag in tags:
            if tag.kind not in ("partial", "open") or not (tag.body or "").lstrip("#").startswith(">"):
                continue
            name = tag.name
            if not name or name.startswith(("(", "@")):
                continue  # a dynamic name or @partial-block: it can only reach partials loaded already
            if name in chain:
                loop = " -> ".join((*chain, name))
                raise TemplateError(
                    f"partials include each other in a loop: {loop}",
                    file=file,
                    line=tag.line,
                    hint="Dotprompt refuses partial cycles too; break the loop",
                )
            if name not in self.out.partials:
                self._load(name, tag, file, chain)

    def _load(self, name: str, tag: Tag, file: str, chain: tuple[str, ...]) -> None:
        path = _partial_file(self.workspace, self.folder, name, tag, file)
        if path is None:
            return  # the engine reports it at render time, unless a {{#> name}} block has a fallback
        if len(self.out.partials) >= MAX_PARTIALS:
            raise TemplateError(f"more than {MAX_PARTIALS} partials", file=file, line=tag.line)
        pfile = display_path(path)
        text = read_template(path, pfile)
        ptags = hbs.scan_tags(text)
        self.paths.append(path)
        self.out.tags[pfile] = ptags
        self.out.partials[name] = _compile(text, ptags, pfile, partial=True)
        self.visit(ptags, pfile, (*chain, name))


def _stamp(path: Path) -> tuple[str, int, int] | tuple[str, None, None]:
    try:
        st = path.stat()
    except OSError:
        return (str(path), None, None)
    return (str(path), st.st_mtime_ns, st.st_size)


def _compile_file(workspace: Workspace, path: Path, file: str) -> Compiled:
    doc = parse(read_template(path, file), file)
    tags = hbs.scan_tags(doc.body, doc.body_line)
    out = Compiled(doc=doc, program=_compile(doc.body, tags, file, partial=False), tags={file: tags})
    partials = _Partials(workspace, path.absolute().parent, out)
    partials.visit(tags, file, ())
    out.stamps = tuple(_stamp(p) for p in (path, *partials.paths))
    return out


_cache: OrderedDict[tuple[Any, ...], Compiled] = OrderedDict()
_cache_lock = threading.Lock()
_CACHE_SIZE = 64


def load(workspace: Workspace, path: Path, file: str) -> Compiled:
    """PATH compiled with its partials; cached until one of the files changes (recall renders the
    same template hundreds of times, in the same render worker)."""
    key = (workspace, str(path.absolute()))
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and all(_stamp(Path(s[0])) == s for s in hit.stamps):
        return hit
    compiled = _compile_file(workspace, path, file)
    with _cache_lock:
        _cache[key] = compiled
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return compiled


# --------------------------------------------------------------------------- rendering


def _blame(exc: BaseException, compiled: Compiled, default_file: str) -> tuple[str, int | None]:
    """(file, line) of the tag that most likely raised EXC: the template first, then its partials."""
    for file, tags in compiled.tags.items():
        tag = hbs.runtime_error_tag(exc, tags)
        if tag is not None:
            return file, tag.line
    return default_file, None


def _runtime_error(exc: BaseException, compiled: Compiled, file: str) -> TemplateError:
    where, line = _blame(exc, compiled, file)
    if isinstance(exc, RenderLimit):
        return TemplateError(str(exc), file=file, hint=SIZE_HINT)
    if isinstance(exc, StrictModeError):
        return TemplateError(
            f"undefined variable: {exc.path}",
            file=where,
            line=line,
            hint="add it to the fixture or to input.default, or guard it with {{#if name}}",
        )
    if isinstance(exc, RecursionError):
        return TemplateError("blocks or partials nest too deeply", file=where, line=line, hint=SIZE_HINT)
    text = str(exc)
    if "partial" in text:
        hint = "a partial NAME is the file _NAME.prompt, next to the template or at the config root"
    elif text.startswith("Missing helper"):
        hint = (
            "needle has Dotprompt's own helpers (role, history, section, media, json, ifEquals, "
            "unlessEquals, lookup) and Handlebars' (if, unless, each, with); a helper the "
            "application registers in code (Genkit's defineHelper) cannot run here: measure the "
            'prompt with a builder (builder = "file.py:function") that renders it as the app does'
        )
    else:
        hint = (
            "Dotprompt's helpers are role, history, section, media, json, ifEquals, unlessEquals "
            "and lookup, besides Handlebars' if, unless, each and with"
        )
    return TemplateError(f"rendering failed: {text}", file=where, line=line, hint=hint)


def context_data(variables: JSON, file: str) -> dict[str, Any]:
    """The ``@`` variables of a render: the fixture's keys that start with ``@``, without it.

    Dotprompt renders with a context beside the input (Genkit puts the session's ``state`` and the
    caller's ``auth`` there), read as ``{{@state.name}}``; a fixture writes it ``"@state": {...}``.
    ``@root`` is the engine's own (the input), as dotpromptz reserves it."""
    data = {str(k)[1:]: v for k, v in variables.items() if str(k).startswith("@")}
    if "root" in data:
        raise TemplateError(
            "the fixture's key '@root' is reserved: {{@root.x}} reads the input's x",
            file=file,
            hint="write the value as an input (root: ... without @), or name the context another way",
        )
    return data


def render_raw(workspace: Workspace, path: Path, variables: JSON, *, file: str, strict: bool = False) -> str:
    """The raw render of the ``.prompt`` at PATH (markers included): defaults overlaid by VARIABLES.

    Runs in the render worker (``template.render_raw`` sends ``.prompt`` names here), so time and
    memory are bounded there too; the answer is plain text for :func:`to_rendered`."""
    compiled = load(workspace, path, file)
    inputs = {k: v for k, v in variables.items() if not str(k).startswith("@")}
    context = hbs.prepare({**compiled.doc.defaults, **inputs})
    data = hbs.prepare(context_data(variables, file))
    try:
        return hbs.render(compiled.program, context, compiled.partials, strict=strict, data=data)
    except (RenderLimit, StrictModeError, ValueError, TypeError, RecursionError, MemoryError) as exc:
        raise _runtime_error(exc, compiled, file) from None


# --------------------------------------------------------------------------- messages


@dataclass
class _Source:
    role: str
    text: str = ""
    history: bool = False
    blocks: tuple[JSON, ...] | None = None  # a history turn with tool requests/responses or media


def _role_line(tags: list[Tag], role: str) -> int | None:
    """Line of the first ``{{role ...}}`` tag naming ROLE (else of any role tag)."""
    roles = [t for t in tags if t.kind == "value" and t.name == "role"]
    named = [t for t in roles if re.search(rf"[\"']{re.escape(role)}[\"']", t.body or "")]
    found = named or roles
    return found[0].line if found else None


def _history_messages(value: Any, file: str) -> list[_Source]:
    """The fixture's ``messages`` (Dotprompt's render-time history) as message sources."""
    if value is None:
        return []
    hint = "write messages: [{role: user, content: ...}, {role: model, content: ...}]"
    if not isinstance(value, list):
        raise ConfigError("`messages` (the history {{history}} inserts) must be a list", file=file, hint=hint)
    out = []
    calls: dict[str, str] = {}  # tool name -> id of its last request, for responses without a ref
    for i, m in enumerate(value):
        role = m.get("role") if isinstance(m, dict) else None
        content = m.get("content") if isinstance(m, dict) else None
        blocks = _part_blocks(content, calls) if isinstance(content, list) else None
        if isinstance(content, list):  # Dotprompt's parts: [{text: ...}]
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        if role not in ("user", "model", "assistant", "tool") or not isinstance(content, str):
            raise ConfigError(
                f"messages[{i}] needs a role (user, model or tool) and a content", file=file, hint=hint
            )
        kind = {"assistant": "model", "tool": "user"}.get(str(role), str(role))  # a tool turn is a user turn
        out.append(_Source(kind, content, history=True, blocks=blocks))
    return out


def _part_blocks(parts: list[Any], calls: dict[str, str]) -> tuple[JSON, ...] | None:
    """Dotprompt parts as content blocks, when there is more than text: ``toolRequest`` ->
    ``tool_use``, ``toolResponse`` -> ``tool_result``, ``media`` -> an image (None: text only)."""
    if not any(
        isinstance(p, dict) and ("toolRequest" in p or "toolResponse" in p or "media" in p) for p in parts
    ):
        return None
    out: list[JSON] = []
    for p in parts:
        if not isinstance(p, dict):
            continue
        if isinstance(p.get("toolRequest"), dict):
            req = p["toolRequest"]
            ref = str(req.get("ref") or f"toolu_needle_h{len(calls) + 1:02d}")
            calls[str(req.get("name"))] = ref
            out.append(
                {"type": "tool_use", "id": ref, "name": str(req.get("name")), "input": req.get("input") or {}}
            )
        elif isinstance(p.get("toolResponse"), dict):
            res = p["toolResponse"]
            ref = str(res.get("ref") or calls.get(str(res.get("name")), ""))
            output = res.get("output")
            text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, default=str)
            out.append({"type": "tool_result", "tool_use_id": ref, "content": text})
        elif isinstance(p.get("media"), dict) and p["media"].get("url"):
            out.append({"type": "image", "source": {"type": "url", "url": str(p["media"]["url"])}})
        elif isinstance(p.get("text"), str) and p["text"]:
            out.append({"type": "text", "text": p["text"]})
    return tuple(out)


def _sources(raw: str, history: list[_Source], tags: list[Tag], file: str) -> list[_Source]:
    """RAW split at the markers into messages, by Dotprompt's rules (see the module docstring)."""
    sources = [_Source("user")]
    marked_history = False
    pos = 0
    for m in [*_MARKER_RE.finditer(raw), None]:
        sources[-1].text += raw[pos : m.start() if m else len(raw)]
        if m is None:
            break
        pos = m.end()
        kind = m.group(1)
        if kind == "history":
            marked_history = True
            sources += [*history, _Source("model")]
            continue
        role = kind.removeprefix("role:")
        if role not in ROLES:
            raise TemplateError(
                f"unknown role {role!r}" + (": tool messages are not supported" if role == "tool" else ""),
                file=file,
                line=_role_line(tags, role),
                hint='Dotprompt\'s roles are "system", "user" and "model"',
            )
        if sources[-1].text.strip():
            sources.append(_Source(role))
        else:
            sources[-1].role = role
    kept = [s for s in sources if s.text.strip() or s.history]
    if history and not marked_history:
        at = len(kept) - 1 if kept and kept[-1].role == "user" else len(kept)
        kept[at:at] = history
    return kept


def _to_prompt(sources: list[_Source], tags: list[Tag], file: str) -> tuple[str | None, tuple[Message, ...]]:
    system: str | None = None
    messages: list[Message] = []
    for i, s in enumerate(sources):
        text = s.text if s.history else trim_blank_lines(s.text)
        if s.role != "system":
            content = s.blocks if s.blocks is not None else text
            messages.append(Message(role=ROLES[s.role], content=content))
            continue
        if system is not None or i != 0:
            raise TemplateError(
                "a system message must come first, and only once",
                file=file,
                line=_role_line(tags, "system"),
                hint='put one {{role "system"}} section at the top of the template',
            )
        system = text
    if system is None and not messages:
        raise TemplateError(
            "the template renders an empty prompt",
            file=file,
            hint="check the fixture's variables, input.default and the template's {{#if}} branches",
        )
    return system, tuple(messages)


def to_rendered(
    raw: str, source_text: str, variables: JSON, *, path: Path, source: str, fixture: str | None
) -> RenderedPrompt:
    """The request the ``.prompt`` at PATH (whose text is SOURCE_TEXT) makes, from its raw render
    RAW: messages split at the markers, the fixture's ``messages`` as history, front-matter meta."""
    file = display_path(path)
    doc = parse(source_text, file)
    tags = hbs.scan_tags(doc.body, doc.body_line)
    history = _history_messages(variables.get("messages"), fixture or file)
    system, messages = _to_prompt(_sources(raw, history, tags, file), tags, file)
    front = {k: v for k, v in doc.front.items() if k in ("name", "description", "model")}
    return RenderedPrompt(
        system=system,
        messages=messages,
        source=source,
        fixture=fixture,
        meta={"front_matter": front} if front else {},
    )


# --------------------------------------------------------------------------- declarations

# Dotprompt's generation config keys, as the Messages API names them (maxOutputTokens is needle's)
_CONFIG_PARAMS = {
    "temperature": "temperature",
    "topP": "top_p",
    "topK": "top_k",
    "stopSequences": "stop_sequences",
}


def _run_sync(coro: Any) -> Any:
    """The result of a coroutine that never waits (dotpromptz's Picoschema parser without a resolver)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise ValueError("the schema names another schema, which needle cannot resolve")


def declared_by(source_text: str, path: Path, *, file: str) -> Declared:
    """What the front matter declares: ``tools`` (names, defined by ``toolDefs`` or by the prompt's
    ``tools`` file in needle.toml), ``output.schema`` (Picoschema or JSON Schema) as structured
    output, and ``config``'s sampling keys as request parameters."""
    front = parse(source_text, file).front
    defs = {d.get("name"): d for d in front.get("toolDefs") or [] if isinstance(d, dict)}
    tools: list[JSON] = []
    unresolved: list[str] = []
    for name in front.get("tools") or []:
        d = defs.get(name)
        if d is None:
            unresolved.append(str(name))
            continue
        tool = {
            "name": str(name),
            "input_schema": d.get("inputSchema") or {"type": "object", "properties": {}},
        }
        if d.get("description"):
            tool["description"] = str(d["description"])
        tools.append(tool)
    params = {
        ours: front["config"][theirs]
        for theirs, ours in _CONFIG_PARAMS.items()
        if isinstance(front.get("config"), dict) and theirs in front["config"]
    }
    output = front.get("output")
    schema = output.get("schema") if isinstance(output, dict) else None
    named = schema if isinstance(schema, str) and _SCHEMA_NAME.match(schema) else None
    if schema is not None and named is None:
        params["output_config"] = {"format": {"type": "json_schema", "schema": _json_schema(schema, file)}}
    return Declared(
        tools=tuple(tools),
        tool_choice=_tool_choice(front.get("toolChoice"), file),
        params=params,
        unresolved=tuple(unresolved),
        unresolved_schema=named,
        schema_line=_front_line(source_text, "output", "schema") if named else None,
        tools_line=_front_line(source_text, "tools") if unresolved else None,
    )


def _front_line(text: str, key: str, child: str | None = None) -> int | None:
    """The line of the front matter's top-level KEY (or of CHILD inside its mapping); None when
    it is not written so (flow style, say)."""
    inside = False
    for i, line in enumerate(text.split("\n")[:500], start=1):
        if re.match(rf"^{key}\s*:", line):
            if child is None:
                return i
            inside = True
        elif inside and re.match(rf"^\s+{child}\s*:", line):
            return i
        elif inside and line.strip() and not line[0].isspace():
            inside = False
    return None


# ``output.schema: Recipe``: a schema the application registers in code (Genkit's defineSchema),
# not a Picoschema type, which needle cannot read from the file
_SCHEMA_NAME = re.compile(r"^(?!(?:string|number|integer|boolean|null|any|object|array)\b)[A-Za-z_]\w*$")


def _tool_choice(value: Any, file: str) -> JSON | None:
    """Genkit's ``toolChoice`` (``auto``, ``required``, ``none``) in Anthropic's form."""
    if value is None:
        return None
    if value not in ("auto", "required", "none"):
        raise TemplateError(
            f"toolChoice must be auto, required or none, not {value!r}",
            file=file,
            hint="Genkit's toolChoice: auto (the model decides), required (some tool), none",
        )
    return {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}[value]


def _json_schema(schema: Any, file: str) -> Any:
    try:
        return _run_sync(picoschema_to_json_schema(schema))
    except Exception as exc:  # noqa: BLE001 - a hostile front matter must not surface as a traceback
        raise TemplateError(
            f"Dotprompt output.schema cannot be read: {exc}",
            file=file,
            hint="write it in Picoschema (name: string, items(array): ...) or as a JSON Schema",
        ) from None


# --------------------------------------------------------------------------- for `needle init`

_SCHEMA_KEY = re.compile(r"^([A-Za-z_][\w-]*)")
_PATH_ROOT = re.compile(r"^(?:@root\.)?([A-Za-z_][\w-]*)")
_BUILTIN_WORDS = {"if", "unless", "each", "with", "else", "this", *hbs.HELPERS}
_SCOPES = ("each", "with")  # inside them, a plain name is read from the item, not the input


def _tag_names(tags: list[Tag]) -> set[str]:
    """Input names the tags read: paths at the top level, ``@root.x`` anywhere."""
    names: set[str] = set()
    depth = 0
    for tag in tags:
        kind, body = tag.kind, tag.body or ""
        if kind == "close" and tag.name in _SCOPES:
            depth = max(0, depth - 1)
        if kind not in ("value", "open"):
            continue
        for word in body.lstrip("#^&").split()[:2]:
            m = _PATH_ROOT.match(word)
            top = depth == 0 or word.startswith("@root.")
            if m and top and m.group(1) not in _BUILTIN_WORDS and "=" not in word:
                names.add(m.group(1))
        if kind == "open" and tag.name in _SCOPES:
            depth += 1
    return names


def template_variables(text: str, file: str) -> tuple[set[str], bool]:
    """(names the template reads, whether ``input.default`` gives values), for ``needle init``.

    Names come from ``input.schema`` (Picoschema keys like ``documents(array)``), ``input.default``
    and the tags themselves (the first word of each path outside ``{{#each}}``/``{{#with}}``)."""
    doc = parse(text, file)
    names: set[str] = set(doc.defaults)
    if isinstance(doc.schema, dict):
        names |= {m.group(1) for k in doc.schema if (m := _SCHEMA_KEY.match(str(k)))}
    return names | _tag_names(hbs.scan_tags(doc.body)), bool(doc.defaults)


def is_partial(path: Path) -> bool:
    """Dotprompt's convention: ``_name.prompt`` files are partials, not prompts."""
    return path.name.startswith("_")


__all__ = [
    "DotpromptFile",
    "is_partial",
    "load",
    "parse",
    "render_raw",
    "template_variables",
    "to_rendered",
]
