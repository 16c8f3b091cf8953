"""Resource limits for rendering templates from pull requests: cheap checks inside the sandbox.

A template is a small program, and a hostile one asks for the largest thing it can name in a few
characters: ``'x'|center(10**9)``, ``'%0999999999d'|format(1)``, ``((10**1000)**1000)**1000``, a
string doubled with ``~`` thirty times, a 20 MB ``|wordwrap``. Each check here looks at the size a
filter, method or operator *would* produce before it runs and refuses with :class:`RenderLimit`
(raised inside the template, so the error names its line). They are the fast, clear first line; the
hard bounds on time and memory are the render worker's (:mod:`~needle_action.assemble.templates.isolate`),
which also catches what no estimate covers (nested loops, runaway recursion).

The numbers are generous for prompts (a 2M-token context window is ~8 MB of text) and small for a
machine: :data:`MAX_STRING_CHARS` per string built, :data:`MAX_OUTPUT_CHARS` per render,
:data:`MAX_INT_BITS` per integer.
"""

from __future__ import annotations

import functools
import re
import types
from collections.abc import Callable, Iterable
from typing import Any

from jinja2 import filters as jinja_filters

MAX_OUTPUT_CHARS = 20_000_000
MAX_STRING_CHARS = 20_000_000
MAX_INT_BITS = 65_536  # ~19,700 decimal digits; Python refuses to print more than 4,300 anyway
MAX_JSON_INDENT = 64
MAX_WORDWRAP_CHARS = 2_000_000  # textwrap is pure Python: ~1 s per MB
MAX_PIECES = 100_000  # |batch and |slice counts, like the sandbox's range()
# the render worker's address space (RLIMIT_AS, assemble/isolate.py); a MemoryError names it
MEMORY_BYTES = 768 * 1024 * 1024

_PRINTF = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?([diouxXeEfFgGcrsa%])")
_SPEC_NUMBER = re.compile(r"\d+")


SIZE_HINT = "a prompt is text a model can read; build smaller values or fewer of them"


class RenderLimit(Exception):  # noqa: N818 - reads as "the render hit a limit"
    """A template asked for more than a prompt can need; mapped to a TemplateError at its line."""


def check_chars(size: int, what: str) -> None:
    """Refuse a string (or sequence) of SIZE characters (items) built by WHAT."""
    if size > MAX_STRING_CHARS:
        raise RenderLimit(
            f"the template tried to build a string of {size:,} characters with {what}; "
            f"the limit is {MAX_STRING_CHARS:,}"
        )


def _width(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --------------------------------------------------------------------------- printf and str.format


def check_printf(fmt: str, args: Any) -> None:
    """Refuse ``FMT % ARGS`` when its widths and precisions add up beyond the string limit."""
    positional = list(args) if isinstance(args, tuple) else [args]
    total = len(fmt)
    for m in _PRINTF.finditer(fmt):
        for number in m.group(1, 2):
            if number == "*":
                total += abs(_width(positional.pop(0))) if positional else 0
            elif number:
                total += int(number) if len(number) < 12 else MAX_STRING_CHARS + 1
        if m.group(3) != "%" and positional:
            value = positional.pop(0)
            total += len(value) if isinstance(value, str) else 0
    check_chars(total, "% formatting")


def check_format_spec(spec: str) -> None:
    """Refuse a ``str.format`` field whose width or precision is beyond the string limit."""
    total = sum(int(n) if len(n) < 12 else MAX_STRING_CHARS + 1 for n in _SPEC_NUMBER.findall(spec))
    check_chars(total, f"the format spec {spec[:20]!r}")


# --------------------------------------------------------------------------- operators


def check_binop(operator: str, left: Any, right: Any) -> None:
    """The checks for ``*``, ``**``, ``+`` and ``%`` (the operators the environment intercepts)."""
    if operator == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, str | bytes | list | tuple) and isinstance(n, int):
                check_chars(len(seq) * n, "'*' repetition")
        if _is_int(left) and _is_int(right):
            _check_bits(abs(left).bit_length() + abs(right).bit_length(), "'*'")
    elif operator == "**" and _is_int(left) and _is_int(right) and right > 0 and abs(left) > 1:
        _check_bits(abs(left).bit_length() * right, "'**'")
    elif operator == "+" and isinstance(left, str | bytes | list | tuple) and hasattr(right, "__len__"):
        check_chars(len(left) + len(right), "'+'")
    elif operator == "%" and isinstance(left, str):
        check_printf(left, right)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_bits(bits: int, what: str) -> None:
    if bits > MAX_INT_BITS:
        raise RenderLimit(
            f"the template tried to compute a number of about {bits:,} bits with {what}; "
            f"the limit is {MAX_INT_BITS:,} bits"
        )


def guarded_str_join(values: Iterable[Any]) -> str:
    """``a ~ b``: the concatenation, refused when the result would be too long."""
    parts = [str(v) for v in values]
    check_chars(sum(map(len, parts)), "'~'")
    return "".join(parts)


# --------------------------------------------------------------------------- str and bytes methods


def _join_size(sep: Any, items: list[Any]) -> int:
    size = sum(len(x) if isinstance(x, str | bytes) else len(str(x)) for x in items)
    return size + len(sep) * max(0, len(items) - 1)


def _count(s: Any, sub: Any) -> int:
    return int(s.count(sub))  # str or bytes, SUB of the same type (checked by the caller)


def _replace_size(s: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    old: Any
    new: Any
    old, new = [*args, None, None][:2]
    if not isinstance(old, str | bytes) or not isinstance(new, str | bytes):
        return len(s)
    count = args[2] if len(args) > 2 else kwargs.get("count", -1)
    n = (len(s) + 1 if not old else _count(s, old)) if type(old) is type(s) else 0
    if _is_int(count) and count >= 0:
        n = min(n, count)
    return len(s) + n * max(0, len(new) - len(old))


def check_method(method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Before a template calls a ``str``/``bytes`` method: refuse results beyond the string limit."""
    if not isinstance(method, types.BuiltinMethodType):
        return
    s: Any = getattr(method, "__self__", None)
    if not isinstance(s, str | bytes):
        return
    name = method.__name__
    if name in ("center", "ljust", "rjust", "zfill") and args:
        check_chars(max(len(s), _width(args[0])), f"{name}()")
    elif name == "expandtabs":
        tab = args[0] if args else kwargs.get("tabsize", 8)
        check_chars(len(s) + _count(s, "\t" if isinstance(s, str) else b"\t") * max(0, _width(tab)), name)
    elif name == "replace":
        check_chars(_replace_size(s, args, kwargs), "replace()")
    elif name == "join" and args:
        items = args[0] if isinstance(args[0], list | tuple) else None
        if items is not None:
            check_chars(_join_size(s, list(items)), "join()")
    elif name == "translate" and args and isinstance(args[0], dict):
        longest = max((len(v) for v in args[0].values() if isinstance(v, str)), default=1)
        check_chars(len(s) * max(1, longest), "translate()")


# --------------------------------------------------------------------------- filters


def _center(value: Any, width: int = 80) -> str:
    check_chars(max(len(str(value)), _width(width)), "|center")
    return jinja_filters.do_center(value, width)


def _indent(s: Any, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
    text = str(s)
    pad = len(width) if isinstance(width, str) else _width(width)
    check_chars(len(text) + (text.count("\n") + 1) * pad, "|indent")
    return jinja_filters.do_indent(s, width, first, blank)


def _wordwrap(environment: Any, s: str, width: int = 79, break_long_words: bool = True, wrapstring: str | None = None, break_on_hyphens: bool = True) -> str:  # fmt: skip
    text = str(s)
    if len(text) > MAX_WORDWRAP_CHARS:
        raise RenderLimit(
            f"|wordwrap was given a text of {len(text):,} characters; the limit is {MAX_WORDWRAP_CHARS:,}"
        )
    sep = len(wrapstring) if isinstance(wrapstring, str) else 1
    check_chars(len(text) + (len(text) // max(1, _width(width)) + 1) * sep, "|wordwrap")
    return jinja_filters.do_wordwrap(environment, s, width, break_long_words, wrapstring, break_on_hyphens)


def _format(value: str, *args: Any, **kwargs: Any) -> str:
    check_printf(str(value), kwargs or args)
    return jinja_filters.do_format(value, *args, **kwargs)


def _replace(eval_ctx: Any, s: str, old: str, new: str, count: int | None = None) -> str:
    text = str(s)
    check_chars(_replace_size(text, (str(old), str(new), -1 if count is None else count), {}), "|replace")
    return jinja_filters.do_replace(eval_ctx, s, old, new, count)


def _join(eval_ctx: Any, value: Iterable[Any], d: str = "", attribute: Any = None) -> str:
    items = list(value)
    if attribute is None:
        check_chars(_join_size(str(d), items), "|join")
    joined: str = jinja_filters.do_join(eval_ctx, items, d, attribute)
    return joined


def _tojson(eval_ctx: Any, value: Any, indent: int | None = None) -> Any:
    if indent is not None and (not _is_int(indent) or indent > MAX_JSON_INDENT):
        raise RenderLimit(
            f"|tojson indent must be a whole number up to {MAX_JSON_INDENT}, got {str(indent)[:20]}"
        )
    return jinja_filters.do_tojson(eval_ctx, value, indent)


def _pieces(name: str, count: Any) -> None:
    if _is_int(count) and count > MAX_PIECES:
        raise RenderLimit(f"the template asked |{name} for {count:,} pieces; the limit is {MAX_PIECES:,}")


def _batch(value: Any, linecount: int, fill_with: Any = None) -> Any:
    _pieces("batch", linecount)
    return jinja_filters.do_batch(value, linecount, fill_with)


def _slice(value: Any, slices: int, fill_with: Any = None) -> Any:
    _pieces("slice", slices)
    return jinja_filters.do_slice(value, slices, fill_with)


def _keep_pass_arg(guard: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    """GUARD with ORIGINAL's ``jinja_pass_arg`` marker, so Jinja passes the same first argument."""
    marker = getattr(original, "jinja_pass_arg", None)
    wrapped = functools.wraps(original)(guard)
    if marker is None and hasattr(wrapped, "jinja_pass_arg"):
        del wrapped.jinja_pass_arg
    return wrapped


_GUARDS: dict[str, Callable[..., Any]] = {
    "center": _center,
    "indent": _indent,
    "wordwrap": _wordwrap,
    "format": _format,
    "replace": _replace,
    "join": _join,
    "tojson": _tojson,
    "batch": _batch,
    "slice": _slice,
}
GUARDED_FILTERS: dict[str, Callable[..., Any]] = {
    name: _keep_pass_arg(guard, getattr(jinja_filters, f"do_{name}")) for name, guard in _GUARDS.items()
}


# --------------------------------------------------------------------------- the output


def _too_much_output(size: int) -> RenderLimit:
    return RenderLimit(
        f"the template's output grew to {size:,} characters; the limit is {MAX_OUTPUT_CHARS:,} per render"
    )


def check_output_piece(text: str) -> None:
    """One ``{{ ... }}`` value: refused on its own when it is longer than a whole render may be."""
    if len(text) > MAX_OUTPUT_CHARS:
        raise _too_much_output(len(text))


def bounded_concat(parts: Iterable[str]) -> str:
    """``"".join(PARTS)`` (the environment's ``concat``), refused beyond :data:`MAX_OUTPUT_CHARS`.

    For a render the parts come from the template's generator: the error is thrown *into* it, so the
    traceback, and the error message, point at the template line that was being rendered.
    """
    if isinstance(parts, list):
        if sum(map(len, parts)) > MAX_OUTPUT_CHARS:
            raise _too_much_output(sum(map(len, parts)))
        return "".join(parts)
    out: list[str] = []
    total = 0
    it = iter(parts)
    for piece in it:
        total += len(piece)
        out.append(piece)
        if total > MAX_OUTPUT_CHARS:
            error = _too_much_output(total)
            if isinstance(it, types.GeneratorType):
                it.throw(error)
            raise error
    return "".join(out)


__all__ = [
    "GUARDED_FILTERS",
    "MAX_INT_BITS",
    "MAX_OUTPUT_CHARS",
    "MAX_STRING_CHARS",
    "RenderLimit",
    "bounded_concat",
    "check_binop",
    "check_chars",
    "check_format_spec",
    "check_method",
    "check_output_piece",
    "check_printf",
    "guarded_str_join",
]
