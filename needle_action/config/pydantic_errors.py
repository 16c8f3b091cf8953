"""A pydantic ``ValidationError`` -> one message about the key the user wrote, and where.

pydantic reports errors against the *merged* prompt table (``[defaults]`` already folded in), with
locations such as ``('recall', 'sizes', 0)`` and union tags such as ``'list[int]'``. The user needs
the table they actually wrote the value in (the prompt's own table or ``[defaults]``), the key, a
readable complaint and a hint: :func:`describe` builds that as a :class:`Problem`; the loader turns
it into a ``ConfigError`` at the key's line.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from needle_action.config.model import PromptConfig, PromptSettings

# keys that only make sense per prompt, so a hint can say where they belong
_PROMPT_ONLY_KEYS = ("template", "fixtures", "description")


@dataclass(frozen=True)
class Problem:
    """What to tell the user: the message, the dotted key whose line it points at, a hint."""

    message: str
    key: str
    hint: str | None = None


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The choice closest to WORD (a likely typo), or None when nothing is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def origin_key(
    loc: tuple[Any, ...], prompt_raw: dict[str, Any], defaults_raw: dict[str, Any], base: str
) -> str:
    """Dotted key where the value at LOC was written: in the prompt's table (BASE), or in [defaults].

    Whichever table holds more of LOC wrote it; the prompt wins a tie, since it overrides defaults.
    """
    if base == "defaults":
        own, inherited = _depth_present(defaults_raw, loc), 0
    else:
        own, inherited = _depth_present(prompt_raw, loc), _depth_present(defaults_raw, loc)
    if inherited > own:
        return ".".join(["defaults", *map(str, loc[:inherited])])
    return ".".join([base, *map(str, loc[:own])])


def _depth_present(raw: Any, loc: tuple[Any, ...]) -> int:
    """How many leading elements of LOC can be followed through RAW (dicts by key, lists by index)."""
    cur = raw
    for i, part in enumerate(loc):
        if (isinstance(cur, dict) and part in cur) or (
            isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur)
        ):
            cur = cur[part]
        else:
            return i
    return len(loc)


def describe(
    exc: ValidationError,
    model: type[BaseModel],
    prompt_raw: dict[str, Any],
    defaults_raw: dict[str, Any],
    base: str,
) -> Problem:
    """The first problem in EXC, worded against the table the user wrote (BASE or [defaults])."""
    errors = _distinct_errors(exc)
    err = errors[0]
    loc = tuple(err["loc"])
    origin = origin_key(loc, prompt_raw, defaults_raw, base)
    origin_base = "defaults" if origin.startswith("defaults") else base
    more = (
        f" ({len(errors) - 1} more problem{'s' if len(errors) > 2 else ''} after this one)"
        if len(errors) > 1
        else ""
    )
    if err["type"] == "extra_forbidden":
        where_model = model if origin_base == base else PromptSettings
        return _unknown_key(loc, origin, origin_base, where_model, more)
    if err["type"] == "missing":
        return _missing_key(loc, origin, base, more)
    return _bad_value(err, loc, origin, base, origin_base, more)


def _distinct_errors(exc: ValidationError) -> list[dict[str, Any]]:
    # Union members add tags such as 'list[int]' to the loc; they are not keys the user wrote.
    errors: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    for e in exc.errors(include_url=False):
        clean = tuple(p for p in e["loc"] if not (isinstance(p, str) and ("[" in p or "(" in p)))
        if clean not in seen:
            seen.add(clean)
            errors.append({**e, "loc": clean})
    return errors


def _unknown_key(
    loc: tuple[Any, ...], origin: str, origin_base: str, where_model: type[BaseModel], more: str
) -> Problem:
    key = str(loc[-1])
    table = ".".join([origin_base, *map(str, loc[:-1])])
    if origin_base == "defaults" and key in _PROMPT_ONLY_KEYS and not loc[:-1]:
        hint: str | None = f"'{key}' is set per prompt: move it into each [prompts.NAME] table"
    else:
        hint = _allowed_keys_hint(key, _fields_at(where_model, loc[:-1]))
    return Problem(f"unknown key '{key}' in [{table}]{more}", origin, hint)


def _allowed_keys_hint(key: str, fields: list[str]) -> str | None:
    if not fields:
        return None
    guess = did_you_mean(key, fields)
    if guess:
        return f"did you mean '{guess}'?"
    return f"keys allowed here: {', '.join(sorted(fields))}"


def _missing_key(loc: tuple[Any, ...], origin: str, base: str, more: str) -> Problem:
    key = str(loc[-1])
    table = ".".join([base, *map(str, loc[:-1])])
    hint = (
        'add template = "path/to/prompt.j2" (relative to this file\'s folder)' if key == "template" else None
    )
    return Problem(f"[{table}] is missing the required key '{key}'{more}", origin, hint)


def _bad_value(
    err: dict[str, Any], loc: tuple[Any, ...], origin: str, base: str, origin_base: str, more: str
) -> Problem:
    kind = err["type"]
    msg = err["msg"].removeprefix("Value error, ")
    got = err.get("input")
    shown = ""
    if isinstance(got, (str, int, float, bool)) and kind not in ("value_error", "assertion_error"):
        shown = f" (got {_short(got)})"
    if loc and isinstance(loc[-1], int) and len(loc) >= 2:
        what = f"entry {loc[-1] + 1} of '{loc[-2]}'"
        loc_table = loc[:-2]
    else:
        dotted = ".".join(map(str, loc)) or base
        what = f"'{dotted.split('.')[-1]}'" if loc else f"[{base}]"
        loc_table = loc[:-1]
    table = ".".join([origin_base, *map(str, loc_table)])
    return Problem(f"{what} in [{table}]: {msg}{shown}{more}", origin, _type_hint(loc, kind))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_hint(loc: tuple[Any, ...], kind: str) -> str | None:
    last = str(loc[-1]) if loc else ""
    if last == "max_growth":
        return 'write max_growth = "10%" (percent of the base) or max_growth = 500 (tokens)'
    if last == "sizes":
        return 'write sizes = [2000, 8000] (tokens) or sizes = "auto"'
    if "max_input_tokens" in {str(part) for part in loc}:  # the union's tag ('int') comes last
        return 'write max_input_tokens = 8000 (tokens) or max_input_tokens = "auto" (from the recall curve)'
    if kind.startswith("int") or kind.startswith("float"):
        return "write a number without quotes"
    if kind.startswith("bool"):
        return "write true or false without quotes"
    if kind == "literal_error":
        return "use one of the values listed above, in double quotes"
    return None


def _model_of(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """(the BaseModel inside ANNOTATION, whether it sits in a list/dict that consumes a loc element)."""
    origin = typing.get_origin(annotation)
    if origin in (list, dict):
        inner, _ = _model_of(typing.get_args(annotation)[-1])
        return inner, True
    if origin is not None:  # Optional / Union
        for arg in typing.get_args(annotation):
            inner, container = _model_of(arg)
            if inner is not None:
                return inner, container
        return None, False
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False


def _fields_at(model: type[BaseModel], path: tuple[Any, ...]) -> list[str]:
    """Field names of the sub-model reached by walking PATH (a pydantic loc) from MODEL."""
    cur: type[BaseModel] | None = model
    i = 0
    while i < len(path):
        if cur is None:
            return []
        field = cur.model_fields.get(str(path[i]))
        if field is None:
            return []
        cur, container = _model_of(field.annotation)
        i += 2 if container else 1
    if cur is None:
        return []
    names = list(cur.model_fields)
    if cur is PromptConfig:
        names.remove("name")
    return names


__all__ = ["Problem", "describe", "did_you_mean", "origin_key"]
