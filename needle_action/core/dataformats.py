"""TOML, JSON and YAML from untrusted files, parsed with limits and every failure at a line.

The threshold file, fixtures and ``.prompty`` front matter come from pull requests. The standard
parsers answer some hostile inputs with exceptions that carry no position, or with none of their
own at all: integers beyond Python's 4,300-digit conversion limit (``ValueError``), deep nesting
(``RecursionError``), YAML tags that fail to construct (``!!float abc``, ``!!timestamp x``), YAML
"unacceptable character" errors (a position, no line), and alias bombs ("billion laughs") that load
quickly as shared references and then explode in whatever walks them. Here each of those becomes a
:class:`DataError` with a message, and a line where one exists; callers add their file and wording.

Limits: :data:`MAX_DEPTH` levels of nesting, and for YAML :data:`MAX_YAML_VALUES` values once every
alias is expanded. YAML uses PyYAML's pure-Python ``SafeLoader`` on purpose: the C loader is ~15x
faster but crashes the interpreter (SIGSEGV) on deeply nested flow collections.

Bottom of the import graph: standard library, PyYAML and :mod:`needle_action.core.paths`. The position
parser for ``tomllib``'s messages lives here too (``config.toml_lines`` re-exports it).
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import yaml

from needle_action.core.paths import last_content_line

if TYPE_CHECKING:  # libyaml's marks: an event's start_mark may be one
    from yaml._yaml import Mark as CMark

JSON = dict[str, Any]
"""A JSON object as parsed (a request body, a content block, a table): its keys are strings, its
values are checked by whoever reads them. The one spelling for such objects across the package."""

MAX_DEPTH = 100
MAX_YAML_VALUES = 1_000_000
_DIGITS_LIMIT = 4300  # CPython's default int <-> str conversion limit (sys.get_int_max_str_digits)
_AT_LINE = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_AT_END = re.compile(r"\s*\(at end of document\)\s*$")
_LONG_INT = re.compile(r"[0-9][0-9_]{" + str(_DIGITS_LIMIT) + ",}")


@dataclass
class DataError(Exception):
    """A TOML/JSON/YAML text that cannot be used; LINE and COLUMN are 1-based when known."""

    message: str
    line: int | None = None
    column: int | None = None
    at_end: bool = False

    def __str__(self) -> str:
        return self.message


# --------------------------------------------------------------------------- shared checks


def _line_at(text: str, index: int) -> int:
    return text.count("\n", 0, max(0, index)) + 1


def _long_int_error(text: str) -> DataError:
    m = _LONG_INT.search(text)
    return DataError(
        f"a number has more than {_DIGITS_LIMIT:,} digits", line=_line_at(text, m.start()) if m else None
    )


def _depth_line(text: str, opens: str, closes: str, limit: int = MAX_DEPTH) -> int | None:
    """The line where bracket nesting first exceeds LIMIT (strings skipped, roughly), or None."""
    depth, i, n, quote = 0, 0, len(text), ""
    while i < n:
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in opens:
            depth += 1
            if depth > limit:
                return _line_at(text, i)
        elif c in closes:
            depth -= 1
        i += 1
    return None


def _too_deep(text: str, opens: str = "[{", closes: str = "]}") -> DataError:
    return DataError(
        f"values are nested more than {MAX_DEPTH} levels deep", line=_depth_line(text, opens, closes)
    )


def _deeper_than(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether VALUE nests lists/dicts more than LIMIT levels (iterative: no recursion to overflow)."""
    stack = [(value, 1)]
    seen: set[int] = set()
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict | list | tuple | set | frozenset):
            if d > limit:
                return True
            if id(v) in seen:  # shared (YAML aliases): its depth was checked once
                continue
            seen.add(id(v))
            items = list(v.keys()) + list(v.values()) if isinstance(v, dict) else list(v)
            stack.extend((item, d + 1) for item in items)
    return False


# --------------------------------------------------------------------------- tomllib errors


@dataclass(frozen=True)
class TomlErrorAt:
    """A ``TOMLDecodeError`` message split into its text and the position it names."""

    message: str  # without the "(at line L, column C)" / "(at end of document)" suffix
    line: int | None = None
    column: int | None = None
    at_end: bool = False  # "at end of document": LINE is then the last non-blank line


def toml_error_at(message: str, text: str) -> TomlErrorAt:
    """Parse the position out of ``str(TOMLDecodeError)`` for TEXT (the document that failed)."""
    m = _AT_LINE.search(message)
    if m:
        return TomlErrorAt(message[: m.start()], int(m.group(1)), int(m.group(2)))
    m = _AT_END.search(message)
    if m:
        return TomlErrorAt(message[: m.start()], last_content_line(text), at_end=True)
    return TomlErrorAt(message)


# --------------------------------------------------------------------------- TOML and JSON


def parse_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads`` with positions for every failure (see the module docstring)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        at = toml_error_at(str(exc), text)
        return _raise(DataError(at.message, at.line, at.column, at.at_end))
    except RecursionError:
        return _raise(_too_deep(text))
    except ValueError:  # only the int conversion limit gets here: syntax errors are TOMLDecodeError
        return _raise(_long_int_error(text))
    if _deeper_than(data):
        return _raise(_too_deep(text))
    return data


def parse_json(text: str) -> Any:
    """``json.loads`` with positions for every failure (see the module docstring)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return _raise(DataError(exc.msg, exc.lineno, exc.colno))
    except RecursionError:
        return _raise(_too_deep(text))
    except ValueError:
        return _raise(_long_int_error(text))
    if _deeper_than(data):
        return _raise(_too_deep(text))
    return data


def _raise(error: DataError) -> NoReturn:
    raise error


# --------------------------------------------------------------------------- YAML


class _Loader(yaml.SafeLoader):
    """SafeLoader that bounds nesting, counts alias expansion and gives construction errors a line."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._first_alias: yaml.Mark | CMark | None = None

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]  # types-PyYAML: Parser's is unannotated
        if isinstance(event, yaml.AliasEvent) and self._first_alias is None:
            self._first_alias = event.start_mark
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"values are nested more than {MAX_DEPTH} levels deep", event.start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except Exception as exc:  # noqa: BLE001 - PyYAML's constructors raise whatever their parsing hits
            # e.g. `!!float abc`, `!!int` with no value (IndexError), `!!timestamp x`, a date like
            # 2020-13-45, an int beyond the limit
            tag = node.tag.rsplit(":", 1)[-1]
            if "digits" in str(exc):
                problem = f"a number has more than {_DIGITS_LIMIT:,} digits"
            else:
                why = f" ({str(exc)[:120]})" if isinstance(exc, ValueError) else ""
                problem = f"this is not a valid {tag} value{why}"
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark) from None


def _expanded_size(root: yaml.Node, limit: int) -> int:
    """How many values ROOT stands for with every alias expanded; stops counting past LIMIT.

    A node that contains itself (``a: &a [*a]``, which PyYAML accepts) counts as unbounded.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:  # post-order without recursion
        node, done = stack.pop()
        key = id(node)
        if done:
            open_nodes.discard(key)
            sizes[key] = min(limit + 1, 1 + sum(sizes[id(c)] for c in _children(node)))
            continue
        if key in sizes:
            continue
        if key in open_nodes:  # reached again while inside itself: a cycle
            return limit + 1
        open_nodes.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in open_nodes:
                return limit + 1
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def parse_yaml(text: str) -> Any:
    """``yaml.safe_load`` with limits and positions (see the module docstring)."""
    try:
        loader = _Loader(text)
    except yaml.YAMLError as exc:  # the reader checks every character before parsing starts
        raise _yaml_error(exc, text) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if loader._first_alias is not None and _expanded_size(node, MAX_YAML_VALUES) > MAX_YAML_VALUES:
            raise DataError(
                f"YAML aliases expand to more than {MAX_YAML_VALUES:,} values (an alias bomb, or an alias inside its own anchor?)",
                line=loader._first_alias.line + 1,
                column=loader._first_alias.column + 1,
            )
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text) from None
    except RecursionError:
        raise _too_deep(text) from None
    finally:
        loader.dispose()


def _yaml_error(exc: yaml.YAMLError, text: str) -> DataError:
    if isinstance(exc, yaml.reader.ReaderError):  # "unacceptable character": a position, no mark
        return DataError(
            f"unacceptable character U+{exc.character:04X}: control characters are not allowed in YAML",
            line=_line_at(text, exc.position),
        )
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return DataError(problem)
    return DataError(problem, mark.line + 1, mark.column + 1)


__all__ = [
    "MAX_DEPTH",
    "MAX_YAML_VALUES",
    "DataError",
    "TomlErrorAt",
    "parse_json",
    "parse_toml",
    "parse_yaml",
    "toml_error_at",
]
