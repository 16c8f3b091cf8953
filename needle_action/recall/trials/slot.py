"""The context slot recall fills: which variables hold the context and the question, and the shape
of the context that every filler item and the needle must copy.

Slot shapes (:func:`detect_shape`, from the fixture's own value):

- a **list of dicts** (retrieved documents, chat turns): items keep the fixture items' keys. The
  longest text field is the body; a ``role`` key gets ``user`` for the needle (filler turns repeat
  the fixture's role pattern); title-like keys get a title; any other key is copied from a fixture
  item. Items with no text at the top but one level down (promptflow's chat history,
  ``{inputs: {question}, outputs: {answer}}``) keep their body there (``body_path``).
- a **list of strings**: the same with plain strings.
- a **string** (a ticket thread, a document): paragraphs joined by blank lines.

Every mistake here is the user's (a missing ``context_var``, an empty list, items with no text), so
each is a ``ConfigError`` naming the prompt or the fixture and what to change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from needle_action.config import Config, PromptConfig
from needle_action.core.errors import ConfigError
from needle_action.recall.trials.filler import scrub

_TITLE_KEYS = {"title", "name", "heading", "subject", "source", "filename", "file", "url", "label", "id"}
_BODY_KEYS = ("text", "content", "body", "page_content", "chunk", "message", "snippet")


def prompt_where(config: Config, prompt: PromptConfig) -> dict[str, Any]:
    """Where PROMPT is declared (``file``/``line`` keywords for a ``ConfigError``)."""
    return {"file": config.path, "line": config.line_of(f"prompts.{prompt.name}")}


def slot_variables(config: Config, prompt: PromptConfig) -> tuple[str, str]:
    """(the variable holding the context, the one holding the question): for a recorded request
    their JSON Pointers. A ConfigError at the prompt when either is not named."""
    slots = prompt.slots()  # variables, or a recorded request's JSON Pointers
    names: list[str] = []
    for (key, value), what in zip(slots, ("the context (the haystack slot)", "the question"), strict=True):
        if not value:
            raise ConfigError(
                f"prompt {prompt.name!r} has no {key}: recall needs to know which variable holds {what}",
                **prompt_where(config, prompt),
                hint=f'add {key} = "..." to [prompts.{prompt.name}], naming a variable of the template',
            )
        names.append(value)
    return names[0], names[1]


@dataclass
class SlotShape:
    """How the context slot's items look, so generated ones look the same."""

    kind: str  # "string" | "list_str" | "list_dict"
    items: list[Any] = field(default_factory=list)  # the fixture's own items (list slots)
    body_key: str | None = None
    body_path: tuple[str, ...] = ()  # where the body sits below body_key (a nested item), if it does
    role_key: str | None = None
    title_keys: tuple[str, ...] = ()

    @property
    def is_list(self) -> bool:
        """A list of items (documents, turns), not one string?"""
        return self.kind != "string"

    def empty(self) -> Any:
        return "" if self.kind == "string" else []

    def join(self, items: list[Any]) -> Any:
        """The slot's value holding ITEMS: paragraphs joined by blank lines, or the list itself."""
        return "\n\n".join(items) if self.kind == "string" else list(items)

    def item(self, body: str, title: str, *, index: int, needle: bool) -> Any:
        """A slot item carrying BODY, shaped like the fixture's items."""
        if self.kind != "list_dict":
            return body
        template = self.items[index % len(self.items)]
        out = dict(template)
        for key in self.title_keys:
            out[key] = title
        if self.role_key:
            out[self.role_key] = "user" if needle else template[self.role_key]
        return self.with_body(out, body)

    def body(self, item: Any) -> str:
        if self.kind == "list_dict":
            value = item.get(self.body_key)
            for key in self.body_path:
                value = value.get(key) if isinstance(value, dict) else None
            return str(value or "")
        return str(item)

    def with_body(self, item: Any, body: str) -> Any:
        if self.kind == "list_dict":
            assert self.body_key is not None  # a list_dict shape always has one
            return {**item, self.body_key: _nested(item.get(self.body_key), self.body_path, body)}
        return body

    def text_of(self, item: Any) -> str:
        """What an item contributes to the prompt, for pre-counting."""
        if self.kind == "list_dict":
            return " ".join(_texts(item))
        return str(item)


def _nested(value: Any, path: tuple[str, ...], body: str) -> Any:
    """VALUE (a dict) with BODY at PATH below it, copied on the way; BODY itself for no PATH."""
    if not path:
        return body
    inner = value if isinstance(value, dict) else {}
    return {**inner, path[0]: _nested(inner.get(path[0]), path[1:], body)}


def _texts(value: Any) -> list[str]:
    """The scalar values of an item, nested ones too, in order."""
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    return [str(value)] if isinstance(value, (str, int, float)) else []


def deep_scrub(value: Any) -> Any:
    """VALUE with every string in it scrubbed (:func:`needle_action.recall.trials.filler.scrub`)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: deep_scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [deep_scrub(v) for v in value]
    return value


def detect_shape(value: Any, var: str, where: dict[str, Any]) -> SlotShape:
    """The shape of VALUE, the fixture's context variable VAR (WHERE: the fixture, for errors)."""
    if value is None or isinstance(value, str):
        return SlotShape("string")
    if isinstance(value, list):
        if not value:
            raise ConfigError(
                f"the recall fixture's {var!r} list is empty, so there is no item to copy the shape from",
                **where,
                hint="give the fixture at least one item, shaped like what the application passes",
            )
        if all(isinstance(v, str) for v in value):
            return SlotShape("list_str", items=list(value))
        if all(isinstance(v, dict) for v in value):
            return _dict_shape(value, var, where)
        raise ConfigError(
            f"the items of {var!r} mix types; recall needs all strings or all tables/dicts", **where
        )
    one = " (a list of one document is [ {...} ])" if isinstance(value, dict) else ""
    raise ConfigError(
        f"recall cannot fill {var!r}: it is a {type(value).__name__}, not text or a list",
        **where,
        hint="context_var must name the variable holding the context: a string, or a list of "
        f"documents/turns{one}",
    )


def _dict_shape(value: list[dict[str, Any]], var: str, where: dict[str, Any]) -> SlotShape:
    """A list of dicts: the body (a usual body key, else the longest text), role and title keys."""
    keys = [k for k in value[0] if all(k in v for v in value)]
    text_keys = [k for k in keys if all(isinstance(v[k], str) for v in value)]
    if not text_keys and (nested := _nested_body(value, keys)) is not None:
        return SlotShape("list_dict", items=list(value), body_key=nested[0], body_path=(nested[1],))
    if not text_keys:
        raise ConfigError(
            f"the items of {var!r} have no text field recall could fill",
            **where,
            hint="items need a string field such as text or content",
        )
    role_key = next((k for k in text_keys if k.lower() == "role"), None)
    candidates = [k for k in text_keys if k != role_key]
    if not candidates:
        raise ConfigError(f"the items of {var!r} have only a role, no text field", **where)
    named = [k for k in candidates if k.lower() in _BODY_KEYS]
    body_key = named[0] if named else max(candidates, key=lambda k: sum(len(v[k]) for v in value))
    titles = tuple(k for k in candidates if k != body_key and k.lower() in _TITLE_KEYS)
    return SlotShape("list_dict", items=list(value), body_key=body_key, role_key=role_key, title_keys=titles)


def _nested_body(value: list[dict[str, Any]], keys: list[str]) -> tuple[str, str] | None:
    """(key, inner key) of the body of items whose text sits one level down, e.g. promptflow's
    ``{inputs: {question}, outputs: {answer}}``: a usual body key, else the longest text."""
    found: list[tuple[str, str]] = []
    for key in keys:
        if not all(isinstance(v[key], dict) for v in value):
            continue
        inner = [k for k in value[0][key] if all(isinstance(v[key].get(k), str) for v in value)]
        found += [(key, k) for k in inner if k.lower() != "role"]
    if not found:
        return None
    named = [f for f in found if f[1].lower() in _BODY_KEYS]
    return named[0] if named else max(found, key=lambda f: sum(len(v[f[0]][f[1]]) for v in value))
