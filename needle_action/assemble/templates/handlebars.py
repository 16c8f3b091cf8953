"""Handlebars for Dotprompt files: the official engine, bounded, with its errors put on a line.

Dotprompt bodies are Handlebars, rendered here by the engine the official ``dotpromptz`` package
uses (``dotpromptz-handlebars``, pure Python). That engine is already data-only: a template reads
values through mappings and lists, never through Python attributes, and calls only the helpers
registered with it. What it does not do, this module adds:

* **bounds**: a template from a pull request could nest ``{{#each}}`` blocks or partials until the
  render never ends. The compiled program is instrumented: every piece of template text and every
  value printed is charged to a per-render :class:`Budget` (:data:`MAX_OUTPUT_CHARS`), and every
  block body and partial rendered counts one step (:data:`MAX_STEPS`), so a render stops with
  :class:`RenderLimit` long before memory or time run out;
* **markers data cannot forge**: Dotprompt marks roles with the text ``<<<dotprompt:role:NAME>>>``,
  so a retrieved document containing that text would start a new message. Here ``{{role}}`` and
  ``{{history}}`` emit private-use code points (:data:`MARK`) that are removed from all data first;
  the ``<<<dotprompt:...>>>`` form is honoured only when it is template text;
* **line numbers**: the engine's errors carry no position; :func:`locate` finds the tag to blame
  with a small tag scanner (:func:`scan_tags`).

Two entry points of the engine are used, ``compile_template`` and ``render_program``; the
dependency is pinned below the next minor version and the tests exercise both.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from dotpromptz_handlebars import (
    Block,
    HelperOptions,
    InlinePartial,
    Node,
    PartialBlock,
    SafeString,
    StrictModeError,
    Text,
)
from dotpromptz_handlebars._render import compile_template, render_program

from needle_action.assemble.templates.limits import MAX_OUTPUT_CHARS, RenderLimit

# Marks a role or history marker in the raw render. Private use (Supplementary Private Use Area-A),
# next to the Jinja sandbox's sentinels; removed from every value before rendering.
MARK = "\U000f8e02"

MAX_STEPS = 1_000_000  # block bodies + partials rendered: ~2 s of the engine's time
MAX_JSON_INDENT = 64
MAX_DEPTH = 100  # nesting of blocks and partials (the engine's own default)

_LITERAL_MARKER = re.compile(r"<<<dotprompt:(role:([a-z]+)|history)>>>")


# --------------------------------------------------------------------------- the budget


class Budget:
    """What one render may still produce: characters of output and steps (block bodies, partials)."""

    def __init__(self) -> None:
        self.max_chars, self.max_steps = MAX_OUTPUT_CHARS, MAX_STEPS
        self.chars, self.steps = self.max_chars, self.max_steps

    def spend(self, chars: int) -> None:
        """Charge CHARS characters of output; RenderLimit beyond the limit."""
        self.chars -= chars
        if self.chars < 0:
            raise RenderLimit(f"the template's output grew beyond {self.max_chars:,} characters")

    def step(self) -> None:
        """Charge one block body or partial rendered; RenderLimit beyond the limit."""
        self.steps -= 1
        if self.steps < 0:
            raise RenderLimit(
                f"the template rendered more than {self.max_steps:,} block bodies and partials "
                "(loops inside loops?)"
            )


_budget: ContextVar[Budget | None] = ContextVar("needle_handlebars_budget", default=None)


def _spend(chars: int) -> None:
    budget = _budget.get()
    if budget is not None:
        budget.spend(chars)


class _MeteredText(Text):
    """Template text whose every output is charged to the render's budget."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:  # noqa: D107 - Text's own fields are not used
        self._text = text

    @property
    def value(self) -> str:  # type: ignore[override]  # the engine reads node.value once per output
        _spend(len(self._text))
        return self._text


class _Step(Text):
    """An empty node at the head of each block body and partial: one step per time it renders."""

    __slots__ = ()

    def __init__(self) -> None:  # noqa: D107
        pass

    @property
    def value(self) -> str:  # type: ignore[override]  # as Text.value above: read per output
        budget = _budget.get()
        if budget is not None:
            budget.step()
        return ""


class _Value(str):
    """A string from the data: charged when the engine prints it."""

    __slots__ = ()

    def __str__(self) -> str:
        _spend(len(self))
        return str.__str__(self)


def _template_text(text: str) -> str:
    """Template text with Dotprompt's literal markers turned into ours (template text may use them)."""
    if "<<<dotprompt:" not in text:
        return text
    return _LITERAL_MARKER.sub(lambda m: f"{MARK}{m.group(1)}{MARK}", text)


def _instrument(nodes: list[Node], *, step: bool) -> list[Node]:
    """NODES with metered text, and a step at the head when STEP (a block body or a partial)."""
    out: list[Node] = [_Step()] if step else []
    for node in nodes:
        if type(node) is Text:
            out.append(_MeteredText(_template_text(node.value)))
            continue
        if isinstance(node, Block):
            node.body = _instrument(node.body, step=True)
            node.inverse = _instrument(node.inverse, step=True)
        elif isinstance(node, PartialBlock | InlinePartial):
            node.body = _instrument(node.body, step=True)
        out.append(node)
    return out


def compile_program(source: str, *, partial: bool = False) -> list[Node]:
    """SOURCE compiled and instrumented (a partial also counts a step each time it renders).

    Raises the engine's ``ValueError`` for a syntax error (see :func:`locate`)."""
    return _instrument(compile_template(source, max_depth=MAX_DEPTH), step=partial)


# --------------------------------------------------------------------------- data and helpers


def prepare(value: Any) -> Any:
    """Fixture data for a render: markers removed from strings, strings metered, containers copied."""
    if isinstance(value, str):
        return _Value(value.replace(MARK, "") if MARK in value else value)
    if isinstance(value, dict):
        return {str(k).replace(MARK, ""): prepare(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [prepare(v) for v in value]
    return value


def _marker(kind: str) -> SafeString:
    return SafeString(f"{MARK}{kind}{MARK}")


def _role(params: list[Any], options: HelperOptions) -> str:
    return _marker(f"role:{params[0]}") if params else ""


def _history(params: list[Any], options: HelperOptions) -> str:
    return _marker("history")


def _section(params: list[Any], options: HelperOptions) -> str:
    return ""  # Dotprompt's sections carry metadata, no text


def _media(params: list[Any], options: HelperOptions) -> str:
    url = options.hash.get("url")
    if not url:
        return ""
    text = f"[media: {url}]"  # an image or file part; shown, not counted as image tokens
    _spend(len(text))
    return SafeString(text)


def _json(params: list[Any], options: HelperOptions) -> str:
    if not params:
        return ""
    indent = options.hash.get("indent") or 0
    try:
        indent = int(indent)
    except (TypeError, ValueError):
        indent = 0
    if not 0 <= indent <= MAX_JSON_INDENT:
        raise RenderLimit(f"{{{{json}}}} indent must be a whole number from 0 to {MAX_JSON_INDENT}")
    text = json.dumps(params[0], indent=indent or None, separators=None if indent else (",", ":"))
    _spend(len(text))
    return SafeString(text)


def _if_equals(params: list[Any], options: HelperOptions) -> str:
    if len(params) < 2:
        return ""
    return options.fn() if params[0] == params[1] else options.inverse()


def _unless_equals(params: list[Any], options: HelperOptions) -> str:
    if len(params) < 2:
        return ""
    return options.fn() if params[0] != params[1] else options.inverse()


def _lookup(params: list[Any], options: HelperOptions) -> Any:
    collection, key = [*params, None, None][:2]
    if isinstance(collection, dict):
        return collection.get(key)
    if isinstance(collection, list) and isinstance(key, int | str) and str(key).isdigit():
        index = int(key)
        return collection[index] if index < len(collection) else None
    return None


def _log(params: list[Any], options: HelperOptions) -> str:
    return ""  # the engine's {{log}} prints to stdout: it would corrupt `needle render --format json`


# Dotprompt's helpers, as the official package defines them; role/history/media emit our markers.
HELPERS: dict[str, Callable[[list[Any], HelperOptions], Any]] = {
    "role": _role,
    "history": _history,
    "section": _section,
    "media": _media,
    "json": _json,
    "ifEquals": _if_equals,
    "unlessEquals": _unless_equals,
    "lookup": _lookup,
    "log": _log,
}


def render(
    program: list[Node],
    context: dict[str, Any],
    partials: dict[str, list[Node]],
    *,
    strict: bool = True,
    data: dict[str, Any] | None = None,
) -> str:
    """The raw output of PROGRAM with CONTEXT (already :func:`prepare`\\ d), within a fresh budget.

    DATA (prepared too) are the ``@`` variables: Dotprompt's render-time context, which Genkit
    fills with ``state`` and ``auth`` (``{{@state.name}}``).

    With STRICT, printing a missing variable raises ``StrictModeError``; without it (Dotprompt's
    own setting) it prints nothing. A missing value in ``{{#if}}`` or ``{{#each}}`` is empty either
    way. Limits raise :class:`RenderLimit`; anything else the engine raises is a ``ValueError``.
    """
    token = _budget.set(Budget())
    try:
        return render_program(
            program,
            context,
            data=data,
            helpers=HELPERS,
            partials=partials,  # compiled programs are accepted too
            escape_html=False,  # Dotprompt renders with NO_ESCAPE: prompts are not HTML
            strict=strict,
            max_depth=MAX_DEPTH,
        )
    finally:
        _budget.reset(token)


# --------------------------------------------------------------------------- tags and lines


@dataclass(frozen=True)
class Tag:
    """One ``{{ ... }}`` tag of a template: where it is and what it says (braces and ``~`` removed).

    ``body`` is None for a tag that is never closed."""

    line: int
    body: str | None
    triple: bool = False

    @property
    def kind(self) -> str:
        """comment | open | close | else | partial | value | unclosed"""
        b = self.body
        if b is None:
            return "unclosed"
        if b.startswith("!"):
            return "comment"
        if b.startswith(("#", "^")):
            return "open"
        if b.startswith("/"):
            return "close"
        if b == "else" or b.startswith("else "):
            return "else"
        if b.startswith(">"):
            return "partial"
        return "value"

    @property
    def name(self) -> str:
        """The helper, block, partial or path the tag names (first word, quotes removed)."""
        b = (self.body or "").lstrip("#^/>&*").strip()
        if b.startswith(">"):
            b = b[1:].strip()
        first = b.split()[0] if b.split() else ""
        return first.strip("\"'")


_CLOSERS = (("{{!--", "--}}"), ("{{~!--", "--}}"), ("{{{{", "}}}}"), ("{{{", "}}}"), ("{{", "}}"))


def scan_tags(text: str, first_line: int = 1) -> list[Tag]:
    """Every tag of TEXT in order, with its line (TEXT's first line is FIRST_LINE)."""
    newlines = [i for i, ch in enumerate(text) if ch == "\n"]
    tags: list[Tag] = []
    i = 0
    while (start := text.find("{{", i)) >= 0:
        if start > 0 and text[start - 1] == "\\" and not text.startswith("\\\\", start - 2):
            i = start + 2  # \{{ is literal text
            continue
        opener, closer = next((o, c) for o, c in _CLOSERS if text.startswith(o, start))
        end = text.find(closer, start + len(opener))
        if closer == "--}}" and end < 0:
            end = text.find("--~}}", start)
        line = first_line + bisect_right(newlines, start - 1)
        if end < 0:
            tags.append(Tag(line, None))
            break
        body = text[start + len(opener) : end].strip().strip("~").strip()
        if opener.endswith("!--"):
            body = "!" + body
        tags.append(Tag(line, body, triple=opener == "{{{"))
        i = end + len(closer)
        if opener == "{{{{":  # a raw block: its content is text up to the closing raw tag
            close = text.find("{{{{/", i)
            i = len(text) if close < 0 else close
    return tags


def _unbalanced(tags: list[Tag]) -> Tag | None:
    """The tag that breaks the nesting of blocks: a stray close or ``else``, or the innermost open
    block never closed (its opening line, like Jinja's errors)."""
    stack: list[tuple[str, Tag]] = []
    for tag in tags:
        kind = tag.kind
        if kind == "unclosed":
            return tag
        if kind == "open":
            name = "inline" if (tag.body or "").startswith("#*inline") else tag.name
            stack.append((name, tag))
        elif kind == "close":
            if not stack or stack[-1][0] != tag.name:
                return tag
            stack.pop()
        elif kind == "else" and not stack:
            return tag
    return stack[-1][1] if stack else None


def _alone(tag: Tag) -> str | None:
    """The tag as a template of its own, to compile on its own (None: nothing to check alone)."""
    b = tag.body or ""
    kind = tag.kind
    if kind == "value":
        return "{{{" + b + "}}}" if tag.triple else "{{" + b + "}}"
    if kind == "partial":
        return "{{" + b + "}}"
    if kind == "open" and not b.startswith(("#*", "#>")):
        name = "inline" if b.startswith("#*inline") else tag.name
        return "{{" + b + "}}{{/" + name + "}}"
    return None


def syntax_error_tag(tags: list[Tag]) -> Tag | None:
    """The tag a compile error is about: nesting first, then each tag compiled alone."""
    bad = _unbalanced(tags)
    if bad is not None:
        return bad
    for tag in tags:
        alone = _alone(tag)
        if alone is None:
            continue
        try:
            compile_template(alone)
        except (ValueError, RecursionError):
            return tag
    return None


_MISSING_HELPER = re.compile(r'Missing helper: "(.+)"')
_MISSING_PARTIAL = re.compile(r"The partial (.+) could not be found")
_BLOCK_ARGS = re.compile(r"#(\w+) requires|to #(\w+)")


def runtime_error_tag(exc: BaseException, tags: list[Tag]) -> Tag | None:
    """The first tag that can have raised EXC at render time (a name, a helper, a partial)."""
    text = str(exc)
    if isinstance(exc, StrictModeError):
        path = exc.path
        root = re.split(r"[./\[]", path.lstrip("@").lstrip("./"), maxsplit=1)[0]
        word = re.compile(rf"(?<![\w.@-]){re.escape(root)}(?![\w-])") if root else None
        return next((t for t in tags if t.kind == "value" and word and word.search(t.body or "")), None)
    for pattern, kinds in (
        (_MISSING_HELPER, ("value", "open")),
        (_MISSING_PARTIAL, ("partial", "open")),
        (_BLOCK_ARGS, ("open",)),
    ):
        m = pattern.search(text)
        if m:
            name = next(g for g in m.groups() if g)
            return next((t for t in tags if t.kind in kinds and t.name == name), None)
    return None


__all__ = [
    "MARK",
    "MAX_OUTPUT_CHARS",
    "MAX_STEPS",
    "Budget",
    "RenderLimit",
    "Tag",
    "compile_program",
    "prepare",
    "render",
    "runtime_error_tag",
    "scan_tags",
    "syntax_error_tag",
]
