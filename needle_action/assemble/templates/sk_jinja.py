"""Semantic Kernel's basic template syntax, rendered as SK renders it, by translation to Jinja.

A ``skprompt.txt`` or an SK YAML prompt file (its ``template:``) becomes Jinja source the sandboxed
environment renders like any template (so the context slot, sentinels, limits and errors are the
same as for Jinja):

* ``{{$name}}`` (SK) and ``{{name}}`` / ``{{a.b}}`` (handlebars) print a variable;
* ``{{#each list}}...{{/each}}`` loops; inside, ``{{Field}}``, ``{{this.Field}}`` read the item's
  key (``Role`` also finds ``role``: SK's chat history items have ``Role`` and ``Content``, a
  fixture may write either), ``{{this}}`` is the item, ``{{@index}}`` its position;
* ``~`` beside the braces trims whitespace (as Jinja's ``-``);
* ``<message role="system|user|assistant">...</message>`` are the turns (a role printed from data,
  ``role="{{Role}}"``, picks one of the three as template text); text outside the tags is a user
  turn, as SK's ``ChatHistory.from_rendered_prompt`` reads it.

Function calls (``{{plugin.function $arg}}``) and other handlebars helpers (``{{#if}}``, ``{{else}}``,
``{{../x}}``) are not SK's basic syntax: an error at their line says to use a builder.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from needle_action.assemble.templates.semantic_kernel import sk_format
from needle_action.core.dataformats import DataError, parse_yaml
from needle_action.core.errors import TemplateError

# `[^{}]`: an unclosed `{{` stops at the next brace instead of rescanning the rest of the file
_TAG = re.compile(r"\{\{(~?)\s*([^{}]*?)\s*(~?)\}\}")
_OPEN_MESSAGE = re.compile(r"<message\s+role=([\"'])(.*?)\1\s*>", re.IGNORECASE)
_CLOSE_MESSAGE = re.compile(r"</message\s*>", re.IGNORECASE)
_NAME = re.compile(r"^\$?[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*$")
ROLES = ("system", "user", "assistant")


def _line(text: str, at: int, offset: int) -> int:
    return text.count("\n", 0, at) + 1 + offset


def _unsupported(what: str, file: str, line: int | Callable[[], int]) -> TemplateError:
    return TemplateError(
        f"{what}: not Semantic Kernel's basic syntax, which needle renders ($variables, #each, "
        "<message> turns)",
        file=file,
        line=line() if callable(line) else line,
        hint='use a builder that renders it (`needle init` writes one: builder = "needle_builders/NAME.py:build"), '
        "or put the value the function returns in the fixture and print it as a variable",
    )


def _field(item: str, path: str) -> str:
    """Jinja for ``{{Field}}`` inside an #each: the item's key, its first letter in either case."""
    if path == "this":
        return item
    path = path.removeprefix("this.")
    head, _, rest = path.partition(".")
    alt = head[:1].swapcase() + head[1:]
    tail = f".{rest}" if rest else ""
    if alt == head:
        return f"{item}.{head}{tail}"
    return f"({item}.{head} if {item}.{head} is defined else {item}.{alt}){tail}"


class _Translator:
    def __init__(self, file: str, offset: int, handlebars: bool) -> None:
        self.file, self.offset, self.handlebars = file, offset, handlebars
        self.items: list[str] = []  # the #each loop variables, innermost last

    def tag(self, text: str, m: re.Match[str]) -> str:
        left, body, right = m.group(1), m.group(2), m.group(3)
        # the line is counted only for an error: counting every tag's line from the start of the
        # file made a large file's translation quadratic
        line = functools.partial(_line, text, m.start(), self.offset)
        dash_l, dash_r = ("-" if left else ""), ("-" if right else "")
        if body.startswith("#each "):
            target = body[6:].strip().lstrip("$")
            if not _NAME.match(target):
                raise _unsupported(f"{{{{#each {target}}}}}", self.file, line)
            source = _field(self.items[-1], target) if self.items else target
            self.items.append(f"_sk_item{len(self.items)}")
            return f"{{%{dash_l} for {self.items[-1]} in {source} {dash_r}%}}"
        if body == "/each":
            if not self.items:
                raise _unsupported("{{/each}} without {{#each}}", self.file, line)
            self.items.pop()
            return f"{{%{dash_l} endfor {dash_r}%}}"
        if body == "@index" and self.items:
            return f"{{{{{dash_l} loop.index0 {dash_r}}}}}"
        if not _NAME.match(body) or not (self.handlebars or body.startswith("$")):
            # SK's own syntax: a name without `$` is a function call (`{{time.now}}`)
            raise _unsupported(f"the function call {{{{{body}}}}}", self.file, line)
        name = body.lstrip("$")
        expr = _field(self.items[-1], name) if self.items and not body.startswith("$") else name
        return f"{{{{{dash_l} {expr} {dash_r}}}}}"

    def role(self, value: str, text: str, at: int) -> str:
        """The marker of a ``<message role=...>``: literal, or chosen from a printed value."""
        literal = value.strip().lower()
        if literal in ROLES:
            return _marker(literal)
        m = _TAG.fullmatch(value.strip())
        if m is None:
            raise _unsupported(f'<message role="{value}">', self.file, _line(text, at, self.offset))
        expr = self.tag(text, m)[2:-2].strip("- ")  # the Jinja expression of the printed value
        return (
            f"{{% set _sk_role = ({expr})|string|lower %}}"
            f'{{% if _sk_role == "system" %}}{_marker("system")}{{% elif _sk_role == "assistant" %}}'
            f"{_marker('assistant')}{{% else %}}{_marker('user')}{{% endif %}}"
        )


def _marker(role: str) -> str:
    """A role marker on its own line, out of reach of the ``~``/``-`` whitespace trims beside it."""
    return f"{{% raw %}}\n{role}:\n{{% endraw %}}"


_JINJA_DELIMITER = re.compile(r"\{[{%#]|[}%#]\}|\{$")


def _raw(chunk: str) -> str:
    """Literal SK text as Jinja source, kept verbatim: each of Jinja's own delimiters in it (and a
    ``{`` at its end, which the next translated tag would turn into one) is printed as a string. A
    ``{% raw %}`` block would end at the first ``{% endraw %}`` the text itself contains."""
    return _JINJA_DELIMITER.sub(lambda m: "{{ " + repr(m.group(0)) + " }}", chunk)


def to_jinja(text: str, file: str, offset: int = 0, handlebars: bool = False) -> tuple[str, list[int]]:
    """TEXT in SK's basic syntax (or its handlebars format) as Jinja source, and the line of TEXT's
    file each line of that source comes from (OFFSET: lines above TEXT in its file)."""
    tr = _Translator(file, offset, handlebars)
    out: list[str] = []
    lines: list[int] = []  # lines[i]: the file's line of the source's line i + 1
    here = offset + 1

    def emit(piece: str, span: str, literal: bool) -> None:
        nonlocal here
        out.append(_raw(piece) if literal else piece)
        for _ in range(piece.count("\n")):
            lines.append(here)
            here += 1 if literal else 0
        if not literal:
            here += span.count("\n")

    pos = 0
    marks = sorted(
        [(m.start(), m.end(), "open", m) for m in _OPEN_MESSAGE.finditer(text)]
        + [(m.start(), m.end(), "close", m) for m in _CLOSE_MESSAGE.finditer(text)]
        + [(m.start(), m.end(), "tag", m) for m in _TAG.finditer(text)],
        key=lambda x: x[0],
    )
    for start, end, kind, m in marks:
        if start < pos:
            continue  # a tag inside a <message role="{{...}}"> already translated
        emit(text[pos:start], "", literal=True)
        if kind == "open":
            emit(tr.role(m.group(2), text, start), m.group(0), literal=False)
        elif kind == "close":  # what follows a message, up to the next one, is a user turn
            emit(_marker("user"), m.group(0), literal=False)
        else:
            emit(tr.tag(text, m), m.group(0), literal=False)
        pos = end
    emit(text[pos:], "", literal=True)
    lines.append(here)
    if tr.items:
        raise _unsupported("{{#each}} without {{/each}}", file, offset + text.count("\n") + 1)
    return "".join(out), lines


def _yaml_template(text: str, file: str) -> tuple[str, int] | None:
    """(the ``template:`` of an SK YAML prompt file, the lines above it), or None."""
    try:
        data = parse_yaml(text)  # nesting and aliases bounded: the file is the pull request's
    except DataError:
        return None
    template = data.get("template") if isinstance(data, dict) else None
    if not isinstance(template, str):
        return None
    m = re.search(r"^template:[ \t]*([|>][-+0-9]*)?[ \t]*$", text, re.MULTILINE)
    key = re.search(r"^template:", text, re.MULTILINE)
    above = text.count("\n", 0, key.start()) + (1 if m else 0) if key else 0
    return template, above


def sk_as_jinja(text: str, file: str, file_name: str) -> str:
    """TEXT as the Jinja source needle renders: translated when it is written in Semantic Kernel's
    format (skprompt.txt, an SK YAML prompt file, ``{{$var}}``), else unchanged."""
    return sk_translated(text, file, file_name)[0]


def sk_translated(text: str, file: str, file_name: str) -> tuple[str, list[int] | None]:
    """(the Jinja source, the file's line of each of its lines; None when TEXT is not SK's)."""
    found = sk_format(text, file_name)
    if found is None:
        return text, None
    if file_name.lower().endswith((".yaml", ".yml")) and found[0].startswith("a Semantic Kernel YAML"):
        got = _yaml_template(text, file)
        if got is None:
            return text, None
        return to_jinja(got[0], file, got[1], handlebars="handlebars" in found[0])
    return to_jinja(text, file)


__all__ = ["sk_as_jinja", "sk_translated", "to_jinja"]
