"""JSON Pointers (RFC 6901): where a value sits inside a JSON document, as ``/messages/3/content``.

A recorded request names its haystack and its question with pointers (``context_path``,
``question_path``). Pointers come from the user's threshold file, so a pointer that does not
resolve must say where it stopped and which path was meant: :func:`nearest_valid` finds the
longest prefix that resolves and the closest existing key at the next step.
"""

from __future__ import annotations

import copy
import difflib
from typing import Any


class PointerError(ValueError):
    """A pointer that is malformed or does not resolve; ``.hint`` names the nearest valid path."""

    def __init__(self, pointer: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.pointer = pointer
        self.message = message
        self.hint = hint


def parse(pointer: str) -> list[str]:
    """The reference tokens of POINTER (``""`` is the whole document, ``/a~1b/0`` -> ``["a/b", "0"]``)."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PointerError(pointer, f"a JSON Pointer starts with '/', got {pointer!r}")
    tokens = pointer[1:].split("/")
    for token in tokens:
        rest = token.replace("~0", "").replace("~1", "")
        if "~" in rest:
            raise PointerError(pointer, f"{pointer!r}: '~' must be written ~0 (and '/' inside a key ~1)")
    return [t.replace("~1", "/").replace("~0", "~") for t in tokens]


def join(tokens: list[str]) -> str:
    """The pointer of TOKENS (the inverse of :func:`parse`)."""
    return "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)


def _index(container: list[Any], token: str, pointer: str) -> int:
    if not token.isdigit() or (token != "0" and token.startswith("0")):  # noqa: S105 - a pointer token
        raise PointerError(pointer, f"{token!r} is not an array index")
    i = int(token)
    if i >= len(container):
        raise PointerError(pointer, f"index {i} is past the end (the array has {len(container)} items)")
    return i


def _step(value: Any, token: str, pointer: str) -> Any:
    if isinstance(value, dict):
        if token not in value:
            raise PointerError(pointer, f"no key {token!r}")
        return value[token]
    if isinstance(value, list):
        return value[_index(value, token, pointer)]
    raise PointerError(pointer, f"cannot step into a {type(value).__name__} with {token!r}")


def resolve(document: Any, pointer: str) -> Any:
    """The value POINTER names in DOCUMENT; a :class:`PointerError` (with a hint) when it does not resolve."""
    value = document
    tokens = parse(pointer)
    for depth, token in enumerate(tokens):
        try:
            value = _step(value, token, pointer)
        except PointerError as exc:
            where = join(tokens[:depth]) or "the document's root"
            raise PointerError(
                pointer,
                f"JSON Pointer {pointer!r} does not resolve: at {where}, {exc.message}",
                hint=f"the nearest valid path is {nearest_valid(document, pointer)!r}",
            ) from None
    return value


def set_value(document: Any, pointer: str, value: Any) -> Any:
    """A deep copy of DOCUMENT with the value at POINTER replaced by VALUE (the pointer must resolve)."""
    tokens = parse(pointer)
    if not tokens:
        return copy.deepcopy(value)
    resolve(document, pointer)  # raises with the hint when it does not resolve
    out = copy.deepcopy(document)
    parent = resolve(out, join(tokens[:-1]))
    last = tokens[-1]
    if isinstance(parent, list):
        parent[int(last)] = value
    else:
        parent[last] = value
    return out


def nearest_valid(document: Any, pointer: str) -> str:
    """The longest valid path toward POINTER: its resolving prefix, then the closest key or index."""
    try:
        tokens = parse(pointer)
    except PointerError:
        return ""
    value, good = document, list[str]()
    for token in tokens:
        try:
            value = _step(value, token, pointer)
        except PointerError:
            guess = _closest(value, token)
            return join([*good, guess]) if guess is not None else join(good)
        good.append(token)
    return join(good)


def _closest(value: Any, token: str) -> str | None:
    if isinstance(value, dict) and value:
        keys = [str(k) for k in value]
        match = difflib.get_close_matches(token, keys, n=1, cutoff=0.5)
        return match[0] if match else None
    if isinstance(value, list) and value:
        return str(len(value) - 1) if token.isdigit() else None
    return None


__all__ = ["PointerError", "join", "nearest_valid", "parse", "resolve", "set_value"]
