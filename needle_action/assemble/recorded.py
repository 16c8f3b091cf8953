"""Prompts that are data: a recorded request body (``request = "path.json"``), and what a builder returned.

A recorded request is an Anthropic Messages or OpenAI chat body, as the application logged it or as
``needle capture`` wrote it. Budgets count it as it is; recall fills the slots its JSON Pointers
name (``context_path``, ``question_path``): the haystack machinery sees the pointer as the name of a
variable (``{"/messages/3/content/0/content": [...]}``), so a list becomes items and a string is
split at sentence boundaries exactly as for ``context_var``. An unmodified body keeps its original
text (``meta["raw_body"]``): ``needle render NAME --format json`` prints it byte for byte.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path
from typing import Any

from needle_action.assemble.templates.defaults import case_variables
from needle_action.config.model import Config, PromptConfig
from needle_action.core.dataformats import JSON, DataError, parse_json
from needle_action.core.errors import ConfigError, TemplateError
from needle_action.core.paths import display_path, read_text, relative
from needle_action.request.jsonpointer import PointerError, parse, resolve, set_value
from needle_action.request.prompt import SYSTEM_PART, ContextSlot, RenderedPrompt
from needle_action.request.wire import from_body, is_openai_body

MAX_REQUEST_BYTES = 20_000_000
_bodies: dict[tuple[str, int, int], tuple[str, JSON]] = {}
_lock = threading.Lock()


def load_request(config: Config, prompt: PromptConfig) -> tuple[str, JSON]:
    """(the file's text, the parsed body) of PROMPT's recorded request, read once per file version."""
    assert prompt.request is not None
    path = config.workspace.confine(config.root / prompt.request, what="request")
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    with _lock:
        if key in _bodies:
            return _bodies[key]
    file = display_path(path)
    text = read_text(path, what="request", file=file, max_bytes=MAX_REQUEST_BYTES)
    try:
        body = parse_json(text)
    except DataError as exc:
        raise ConfigError(f"the request is not valid JSON: {exc.message}", file=file, line=exc.line) from None
    if not isinstance(body, dict):
        raise ConfigError("a recorded request is a JSON object (the request body)", file=file)
    with _lock:
        _bodies[key] = (text, body)
    return text, body


def prompt_variables(
    config: Config, prompt: PromptConfig, fixture_path: str | os.PathLike[str] | None
) -> JSON:
    """The variables recall varies: the fixture's (templates, builders), or for a recorded request
    the values its pointers name, keyed by the pointers."""
    if prompt.request is None:  # the template's own data (a .prompty's sample) under the fixture's
        return case_variables(config, prompt, fixture_path)
    _, body = load_request(config, prompt)
    out = {}
    for key, pointer in prompt.slots():
        if pointer:
            out[pointer] = _resolve(body, pointer, key, prompt)
    return out


def _resolve(body: JSON, pointer: str, key: str, prompt: PromptConfig) -> Any:
    try:
        return resolve(body, pointer)
    except PointerError as exc:
        raise ConfigError(f"{key}: {exc.message}", file=prompt.request, hint=exc.hint) from None


def render_recorded(
    config: Config, prompt: PromptConfig, variables: JSON | None, fixture: str | None
) -> RenderedPrompt:
    """PROMPT's recorded request, with the slots VARIABLES names (by pointer) replaced."""
    text, body = load_request(config, prompt)
    changed = False
    for pointer, value in (variables or {}).items():
        if pointer not in (prompt.context_path, prompt.question_path):
            continue
        if _resolve(body, pointer, "slot", prompt) != value:
            body, changed = set_value(body, pointer, value), True
    return as_rendered(
        body,
        source=prompt.request or "",
        fixture=fixture,
        file=prompt.request or "",
        raw=None if changed else text,
        context_path=prompt.context_path,
    )


def as_rendered(
    value: Any,
    *,
    source: str,
    fixture: str | None,
    file: str,
    raw: str | None = None,
    context_path: str | None = None,
    error_cls: type[TemplateError] = TemplateError,
    what: str = "the request",
) -> RenderedPrompt:
    """A request body (or a bare messages list) as the RenderedPrompt every stage measures.

    A bad shape is an ERROR_CLS naming the field (``/messages/2/content/0/type: ...``) in FILE."""
    body = {"messages": value} if isinstance(value, list) else value
    if not isinstance(body, dict):
        raise error_cls(
            f"{what} is a {type(value).__name__}: expected a request body (a JSON object) or a messages list",
            file=file,
        )
    try:
        rendered = from_body(body, source=source)
    except ValueError as exc:
        field = getattr(exc, "field_path", None)
        detail = getattr(exc, "message", None) or str(exc)
        where = f" at {field}" if field else ""
        raise error_cls(
            f"{what} is not a valid Anthropic or OpenAI request{where}: {detail}",
            file=file,
            hint="return what you pass to client.messages.create(...) (or chat.completions.create): "
            "a body with messages, or the messages list itself",
        ) from None
    meta = dict(rendered.meta)
    if raw is not None:
        meta["raw_body"] = raw
    updates: dict[str, Any] = {"fixture": fixture, "meta": meta}
    slot = None if is_openai_body(body) else _slot_of(context_path)  # OpenAI indices differ
    if slot is not None:
        updates["context_slot"] = ContextSlot(*slot)
    return dataclasses.replace(rendered, **updates)


def _slot_of(pointer: str | None) -> tuple[int, int | None] | None:
    """(message index, block index or None) of a pointer into ``/messages/...``, else None."""
    if not pointer:
        return None
    tokens = parse(pointer)
    if tokens and tokens[0] == "system":
        return SYSTEM_PART, (int(tokens[1]) if len(tokens) > 1 and tokens[1].isdigit() else None)
    if len(tokens) < 2 or tokens[0] != "messages" or not tokens[1].isdigit():
        return None
    block = int(tokens[3]) if len(tokens) > 3 and tokens[2] == "content" and tokens[3].isdigit() else None
    return int(tokens[1]), block


def fixture_name(config: Config, fixture_path: str | os.PathLike[str] | None) -> str | None:
    """FIXTURE_PATH relative to the config root (None without one)."""
    return relative(config.root, Path(fixture_path)) if fixture_path is not None else None


__all__ = ["as_rendered", "fixture_name", "load_request", "prompt_variables", "render_recorded"]
