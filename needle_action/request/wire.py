"""The request model <-> the wire: Anthropic Messages and OpenAI chat completion bodies.

Anthropic is the canonical form, so :func:`anthropic_body` is nearly the model itself. The OpenAI
body translates: tools become ``{"type": "function", ...}``, an assistant's ``tool_use`` blocks
become ``tool_calls`` (input as JSON ``arguments``), each ``tool_result`` a ``role: "tool"`` message
placed before the rest of its turn, documents text parts (title, blank line, text), images
``image_url`` parts (base64 as a data URL).

Request parameters pass through unchanged to the provider they belong to. The structured-output
declaration is translated both ways (Anthropic ``output_config.format`` <-> OpenAI
``response_format``), and ``stop_sequences`` <-> ``stop``; ``thinking`` has no chat-completions
form and stays out of the OpenAI body (``reasoning_effort`` stays out of the Anthropic one).
Parameters neither API lists pass through to both (the config loader warns about them).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any, TypeVar

from needle_action.core.dataformats import JSON, DataError, parse_json
from needle_action.core.names import ANTHROPIC_PARAMS, OPENAI_PARAMS, known_param
from needle_action.request.blocks import (
    RequestShapeError,
    block_text,
    check_block,
    check_tool_pairs,
    text_block,
)
from needle_action.request.prompt import Message, RenderedPrompt, Role
from needle_action.request.rules import normalise
from needle_action.request.toolformats import to_anthropic_tools, to_openai_tools

# keys of a body that are the request itself, not parameters
_ANTHROPIC_CORE = ("model", "max_tokens", "system", "messages", "tools", "tool_choice", "stream")
_OPENAI_CORE = ("model", "max_tokens", "max_completion_tokens", "messages", "tools", "tool_choice", "stream")
_SCHEMA_NAME = "output"
_ANTHROPIC_ROLES: tuple[Role, ...] = ("user", "assistant")  # system is a field of its own
R = TypeVar("R", bound=str)  # the role names a reader accepts


# --------------------------------------------------------------------------- Anthropic


def anthropic_body(
    p: RenderedPrompt, model: str, max_tokens: int, *, split: Callable[[JSON], JSON] | None = None
) -> JSON:
    """The Messages request body: system apart (a string unless its blocks carry more than text),
    system-role turns folded into it, tools, tool_choice and parameters; brought within the API's
    rules last (:func:`needle_action.request.rules.normalise`: no empty or whitespace-only text
    blocks, cache markers only on blocks with content), so counting, sending and rendering see the
    same body. SPLIT (the provider's cache breakpoints) reshapes the body before those rules apply:
    its ``messages`` are still one per non-system turn of P, in order."""
    body: JSON = {"model": model, "max_tokens": max_tokens}
    system = _anthropic_system(p)
    if system is not None:
        body["system"] = system
    body["messages"] = [
        {"role": m.role, "content": m.wire_content()} for m in p.messages if m.role != "system"
    ]
    if p.tools:
        body["tools"] = copy.deepcopy(list(p.tools))
    if p.tool_choice is not None:
        body["tool_choice"] = copy.deepcopy(p.tool_choice)
    body.update(anthropic_params(p.params))
    if split is not None:
        body = split(body)
    return normalise(body)


def _anthropic_system(p: RenderedPrompt) -> str | list[JSON] | None:
    extra = [m.text for m in p.messages if m.role == "system"]
    blocks = list(p.system_blocks)
    if extra:  # the Messages API has no system role among the turns
        return "\n\n".join([*(b.get("text", "") for b in blocks), *extra])
    if not blocks:
        return None
    if len(blocks) == 1 and set(blocks[0]) == {"type", "text"}:
        text: str = blocks[0]["text"]
        return text
    return copy.deepcopy(blocks)


def anthropic_params(params: JSON) -> JSON:
    """PARAMS for the Messages API: OpenAI-only ones translated or left out."""
    out: JSON = {}
    for key, value in params.items():
        if key == "response_format":
            fmt = _anthropic_format(value)
            if fmt is not None:
                out.setdefault("output_config", {})["format"] = fmt
        elif key == "stop":
            out["stop_sequences"] = [value] if isinstance(value, str) else list(value)
        elif key in OPENAI_PARAMS and key not in ANTHROPIC_PARAMS:
            continue
        elif key == "output_config" and isinstance(value, dict):
            out["output_config"] = {**copy.deepcopy(value), **out.get("output_config", {})}
        else:
            out[key] = copy.deepcopy(value)
    return out


def _anthropic_format(response_format: Any) -> JSON | None:
    if not isinstance(response_format, dict) or response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema") or {}
    return {"type": "json_schema", "schema": copy.deepcopy(spec.get("schema", {}))}


# --------------------------------------------------------------------------- OpenAI


def openai_body(p: RenderedPrompt, model: str, max_tokens: int) -> JSON:
    """The chat completions body (see the module docstring)."""
    messages: list[JSON] = []
    if p.system:
        messages.append({"role": "system", "content": p.system})
    for m in p.messages:
        messages.extend(_openai_messages(m))
    body: JSON = {"model": model, "messages": messages, "max_completion_tokens": max_tokens}
    if p.tools:
        body["tools"] = to_openai_tools(p.tools)
    if p.tool_choice is not None:
        body["tool_choice"] = openai_tool_choice(p.tool_choice)
    body.update(openai_params(p.params))
    return body


def _openai_messages(m: Message) -> list[JSON]:
    if isinstance(m.content, str):
        return [{"role": m.role, "content": m.content}]
    if m.role == "assistant":
        return [_openai_assistant(m.content)]
    out = [
        {"role": "tool", "tool_call_id": b["tool_use_id"], "content": block_text(b)}
        for b in m.content
        if b.get("type") == "tool_result"
    ]
    parts = [_openai_part(b) for b in m.content if b.get("type") not in ("tool_result", "tool_use")]
    if parts:
        if len(parts) == 1 and parts[0]["type"] == "text":
            out.append({"role": m.role, "content": parts[0]["text"]})
        else:
            out.append({"role": m.role, "content": parts})
    return out


def _openai_assistant(blocks: tuple[JSON, ...]) -> JSON:
    text = "\n\n".join(b["text"] for b in blocks if b.get("type") == "text")
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": json.dumps(b.get("input", {}), ensure_ascii=False)},
        }
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    out: JSON = {"role": "assistant", "content": text or None}
    if calls:
        out["tool_calls"] = calls
    return out


def _openai_part(b: JSON) -> JSON:
    if b.get("type") == "image":
        source = b.get("source") or {}
        url = source.get("url") if source.get("type") == "url" else _data_url(source)
        return {"type": "image_url", "image_url": {"url": url}}
    text = block_text(b)
    if b.get("type") == "document" and b.get("title"):
        text = f"{b['title']}\n\n{text}"
    return {"type": "text", "text": text}


def _data_url(source: JSON) -> str:
    return f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"


def openai_tool_choice(choice: JSON) -> Any:
    """An Anthropic tool_choice in OpenAI's words."""
    kind = choice.get("type")
    if kind == "tool":
        return {"type": "function", "function": {"name": choice.get("name")}}
    return {"auto": "auto", "any": "required", "none": "none"}.get(str(kind), "auto")


def openai_params(params: JSON) -> JSON:
    """PARAMS for chat completions: Anthropic-only ones translated or left out."""
    out: JSON = {}
    for key, value in params.items():
        if key == "output_config":
            fmt = value.get("format") if isinstance(value, dict) else None
            if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
                out["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": _SCHEMA_NAME, "schema": copy.deepcopy(fmt.get("schema", {}))},
                }
        elif key == "stop_sequences":
            out["stop"] = copy.deepcopy(value)
        elif key in ANTHROPIC_PARAMS and key not in OPENAI_PARAMS:
            continue
        else:
            out[key] = copy.deepcopy(value)
    return out


# --------------------------------------------------------------------------- reading a body


def is_openai_body(body: JSON) -> bool:
    """Whether BODY is an OpenAI chat body (else it is read as an Anthropic Messages body)."""
    if "max_completion_tokens" in body or "response_format" in body:
        return True
    for m in body.get("messages") or ():
        if isinstance(m, dict) and (m.get("role") in ("system", "developer", "tool") or "tool_calls" in m):
            return True
    return any(isinstance(t, dict) and "function" in t for t in body.get("tools") or ())


def from_body(body: Any, *, source: str = "") -> RenderedPrompt:
    """A RenderedPrompt from an Anthropic or OpenAI body; RequestShapeError on a bad shape."""
    if not isinstance(body, dict):
        raise RequestShapeError("", "a request body must be a JSON object")
    if not isinstance(body.get("messages"), list):
        raise RequestShapeError("messages", "a request body needs a `messages` list")
    reader = _from_openai if is_openai_body(body) else _from_anthropic
    prompt = reader(body, source)
    check_tool_pairs(prompt.messages)
    return prompt


def _from_anthropic(body: JSON, source: str) -> RenderedPrompt:

    system = body.get("system")
    system_blocks: tuple[JSON, ...] = ()
    if isinstance(system, str):
        system_blocks = (text_block(system),)
    elif isinstance(system, list):
        system_blocks = tuple(check_block(b, f"system[{i}]") for i, b in enumerate(system))
    elif system is not None:
        raise RequestShapeError("system", "`system` must be a string or a list of text blocks")
    messages = []
    for i, m in enumerate(body["messages"]):
        role, content = _role_and_content(m, f"messages[{i}]", _ANTHROPIC_ROLES)
        if isinstance(content, list):
            content = tuple(check_block(b, f"messages[{i}].content[{j}]") for j, b in enumerate(content))
        messages.append(Message(role, copy.deepcopy(content)))
    return RenderedPrompt(
        system=None,
        messages=tuple(messages),
        source=source,
        system_blocks=copy.deepcopy(system_blocks),
        tools=to_anthropic_tools(body["tools"]) if body.get("tools") else (),
        tool_choice=_choice(body.get("tool_choice")),
        params={k: copy.deepcopy(v) for k, v in body.items() if k not in _ANTHROPIC_CORE},
    )


def _role_and_content(m: Any, path: str, roles: tuple[R, ...]) -> tuple[R, Any]:
    if not isinstance(m, dict):
        raise RequestShapeError(path, "a message must be a mapping with `role` and `content`")
    if m.get("role") not in roles:
        raise RequestShapeError(f"{path}.role", f"role must be one of: {', '.join(roles)}")
    content = m.get("content")
    if not isinstance(content, str | list) and not (content is None and m.get("tool_calls")):
        raise RequestShapeError(f"{path}.content", "content must be a string or a list of blocks")
    return m["role"], content


def _choice(choice: Any) -> JSON | None:
    if choice is None or isinstance(choice, dict):
        return copy.deepcopy(choice)
    raise RequestShapeError("tool_choice", "tool_choice must be a mapping such as {type = 'auto'}")


def _from_openai(body: JSON, source: str) -> RenderedPrompt:

    system: list[str] = []
    messages: list[Message] = []
    roles = ("system", "developer", "user", "assistant", "tool")
    for i, m in enumerate(body["messages"]):
        path = f"messages[{i}]"
        role, content = _role_and_content(m, path, roles)
        if role in ("system", "developer"):
            text = _openai_text(content, f"{path}.content")
            if messages:
                messages.append(Message("system", text))
            else:
                system.append(text)
        elif role == "tool":
            result = _tool_result(m, path)
            last = messages[-1] if messages else None
            if last is not None and last.role == "user" and _all_results(last):
                messages[-1] = Message("user", (*last.blocks, result))
            else:
                messages.append(Message("user", (result,)))
        elif role == "assistant":
            messages.append(Message("assistant", _assistant_blocks(m, path)))
        else:
            messages.append(Message("user", _user_content(content, f"{path}.content")))
    return RenderedPrompt(
        system="\n\n".join(system) if system else None,
        messages=tuple(messages),
        source=source,
        tools=to_anthropic_tools(body["tools"]) if body.get("tools") else (),
        tool_choice=anthropic_tool_choice(body.get("tool_choice")),
        params={k: copy.deepcopy(v) for k, v in body.items() if k not in _OPENAI_CORE},
    )


def _all_results(m: Message) -> bool:
    return not isinstance(m.content, str) and all(b.get("type") == "tool_result" for b in m.content)


def _openai_text(content: Any, path: str) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for j, part in enumerate(content or ()):
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise RequestShapeError(f"{path}[{j}]", "expected a text part {type: text, text: ...}")
        parts.append(part["text"])
    return "\n\n".join(parts)


def _tool_result(m: JSON, path: str) -> JSON:
    call_id = m.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise RequestShapeError(f"{path}.tool_call_id", "a tool message needs the `tool_call_id` it answers")
    return {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": _openai_text(m.get("content"), f"{path}.content"),
    }


def _assistant_blocks(m: JSON, path: str) -> str | tuple[JSON, ...]:
    content = m.get("content")
    calls = m.get("tool_calls") or []
    if not calls:
        return _openai_text(content, f"{path}.content") if content is not None else ""
    blocks: list[JSON] = []
    text = _openai_text(content, f"{path}.content") if content else ""
    if text:
        blocks.append(text_block(text))
    for j, call in enumerate(calls):
        blocks.append(_tool_use(call, f"{path}.tool_calls[{j}]"))
    return tuple(blocks)


def _tool_use(call: Any, path: str) -> JSON:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not isinstance(call.get("id"), str):
        raise RequestShapeError(path, "a tool call needs an `id` and a `function` with a `name`")
    try:
        args = parse_json(fn.get("arguments") or "{}")
    except (TypeError, DataError):
        raise RequestShapeError(
            f"{path}.function.arguments", "arguments must be a JSON object string"
        ) from None
    if not isinstance(args, dict):
        raise RequestShapeError(f"{path}.function.arguments", "arguments must be a JSON object string")
    return {"type": "tool_use", "id": call["id"], "name": fn["name"], "input": args}


def _user_content(content: Any, path: str) -> str | tuple[JSON, ...]:
    if isinstance(content, str):
        return content
    blocks: list[JSON] = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            blocks.append(text_block(part["text"]))
        elif kind == "image_url" and isinstance(part.get("image_url"), dict):
            blocks.append(_image_block(str(part["image_url"].get("url", ""))))
        else:
            raise RequestShapeError(
                f"{path}[{j}].type", f"unknown content part type {kind!r}", "use text or image_url"
            )
    return tuple(blocks)


def _image_block(url: str) -> JSON:
    if url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": head, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def anthropic_tool_choice(choice: Any) -> JSON | None:
    """An OpenAI tool_choice in Anthropic's words."""
    if choice is None:
        return None
    if isinstance(choice, str):
        kinds = {"auto": "auto", "required": "any", "none": "none"}
        if choice not in kinds:
            raise RequestShapeError("tool_choice", f"unknown tool_choice {choice!r}")
        return {"type": kinds[choice]}
    fn = choice.get("function") if isinstance(choice, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise RequestShapeError("tool_choice", "expected 'auto', 'required', 'none' or a function choice")
    return {"type": "tool", "name": fn["name"]}


__all__ = [
    "ANTHROPIC_PARAMS",
    "OPENAI_PARAMS",
    "anthropic_body",
    "anthropic_params",
    "anthropic_tool_choice",
    "from_body",
    "is_openai_body",
    "known_param",
    "openai_body",
    "openai_params",
    "openai_tool_choice",
]
