"""The Jinja2 sandbox templates from pull requests run in, and the sentinels that mark their data.

* ``ImmutableSandboxedEnvironment`` (no ``__dunder__`` access, no mutation of fixture data,
  ``str.format`` checked) with ``StrictUndefined`` and autoescape off;
* the only globals are the fixture's variables and Jinja's harmless helpers (``range``, ``dict``,
  ``namespace``, ``cycler``, ``joiner``); nothing from ``os.environ`` or the process is reachable;
* includes, imports and extends resolve only inside the config root and out of hidden files and
  folders (``.git/``, ``.github/``, ``.env``; :class:`RootLoader`);
* every interpolated value is wrapped in private-use sentinels by :func:`finalize`, so the marker
  splitter (:mod:`~needle_action.assemble.templates.roles`) can tell template text from data;
* sizes are bounded (:mod:`~needle_action.assemble.templates.limits`): strings built by filters, methods and
  operators (``*``, ``**``, ``+``, ``%``, ``~``), integers, and the whole output of a render.
"""

from __future__ import annotations

import functools
import json
import posixpath
import re
import threading
import types
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import TemplateNotFound
from jinja2.runtime import BlockReference, Context, Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEscapeFormatter, SandboxedFormatter
from markupsafe import Markup

from needle_action.assemble.templates import limits
from needle_action.assemble.templates.prompty import split_prompty
from needle_action.assemble.templates.semantic_kernel import refuse_sk_prompt_file
from needle_action.assemble.templates.sk_jinja import sk_translated
from needle_action.core.errors import TemplateError
from needle_action.core.filecache import FileCache
from needle_action.core.paths import PathEscape, display_path, read_text
from needle_action.core.workspace import ESCAPE_REASONS, Workspace
from needle_action.request.blocks import BLOCK_TYPES

# Private-use code points (Supplementary Private Use Area-A): they bracket every interpolated value
# in the raw render and are removed before anything leaves the assemble package.
OPEN = "\U000f8e00"
CLOSE = "\U000f8e01"
# around the JSON of a list of content blocks printed with {{ }} (a fixture's messages), which the
# marker splitter turns back into blocks; removed from all data like the sentinels
BLOCKS_OPEN = "\U000f8e02"
BLOCKS_CLOSE = "\U000f8e03"

_SENTINEL_RE = re.compile(f"[{OPEN}{CLOSE}]")

# a template (with its includes) is source code a person wrote: 2 MB is far beyond any real one
MAX_TEMPLATE_BYTES = 2_000_000


# the texts of the templates read: a render reads its template, and recall renders it hundreds of times
_texts: FileCache[str] = FileCache(entries=64, max_bytes=32_000_000)


def template_text(path: Path, file: str | None = None) -> str:
    """PATH's text, at most MAX_TEMPLATE_BYTES (a TemplateError at FILE, default PATH, when it is
    larger or not UTF-8; other ``OSError``s propagate). Read once per version of the file
    (:mod:`~needle_action.core.filecache`); an error is raised again every time."""
    return _texts.get(
        path,
        lambda: read_text(
            path, what="template", error_cls=TemplateError, file=file, max_bytes=MAX_TEMPLATE_BYTES
        ),
    )


def read_template(path: Path, file: str) -> str:
    """A template's text (at most MAX_TEMPLATE_BYTES), or a TemplateError at FILE saying why not."""
    try:
        text = template_text(path, file)
        if path.suffix.lower() == ".prompt":
            refuse_sk_prompt_file(text, file, path.name)
        return text
    except FileNotFoundError:
        raise TemplateError("template file not found", file=file) from None
    except OSError as exc:
        raise TemplateError(f"cannot read the template: {exc.strerror or exc}", file=file) from None


# RootLoader's refusals, by PathEscape kind
_DENIED = {
    "absolute": "template name {name!r} is an absolute path; only files inside the config root may be used",
    "parent": "template name {name!r} contains '..'; only files inside the config root may be used",
    "unresolvable": "template {name!r} cannot be resolved (symlink loop?)",
    "outside": "template {name!r} resolves through a symlink outside the config root",
    "hidden": "template {name!r} is refused: " + ESCAPE_REASONS["hidden"],
    "invalid": "template name {name!r} contains a NUL character",
}


# --------------------------------------------------------------------------- sentinels


def strip_sentinels(text: str) -> str:
    """TEXT without any sentinel characters."""
    # str.replace calls are ~50x faster than str.translate for astral code points
    text = text.replace(OPEN, "").replace(CLOSE, "")
    if BLOCKS_OPEN in text or BLOCKS_CLOSE in text:
        text = text.replace(BLOCKS_OPEN, "").replace(BLOCKS_CLOSE, "")
    return text


def _has_sentinel(text: str) -> bool:
    return OPEN in text or CLOSE in text or BLOCKS_OPEN in text or BLOCKS_CLOSE in text


def scrub(value: Any, _memo: dict[int, Any] | None = None) -> Any:
    """Fixture data with any sentinel characters removed, so data cannot fake template text.

    Shared values (YAML aliases) are scrubbed once and stay shared: walking every reference anew
    would make an alias bomb exponential here even when no template ever reads the variable.
    """
    if isinstance(value, str):
        return strip_sentinels(value) if _has_sentinel(value) else value
    if not isinstance(value, dict | list | tuple):
        return value
    memo = {} if _memo is None else _memo
    key = id(value)
    if key in memo:
        return memo[key]
    out: Any
    if isinstance(value, dict):
        out = memo[key] = {}
        for k, v in value.items():
            out[scrub(k, memo)] = scrub(v, memo)
    elif isinstance(value, list):
        out = memo[key] = []
        out.extend(scrub(v, memo) for v in value)
    else:
        out = memo[key] = tuple(scrub(v, memo) for v in value)
    return out


class _Rendered(str):
    """Output of a macro, ``caller()`` or ``super()``: template text, already sentinel-marked inside."""


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+(?=>)")


def finalize(value: Any) -> str:
    """Wrap every ``{{ ... }}`` result in sentinels so the marker splitter can tell data from template."""
    if isinstance(value, _Rendered):
        return value
    if is_block_list(value):  # a turn's content blocks (a fixture's messages): kept as blocks
        payload = json.dumps(list(value), ensure_ascii=False, default=str)
        limits.check_output_piece(payload)
        return f"{OPEN}{BLOCKS_OPEN}{payload}{BLOCKS_CLOSE}{CLOSE}"
    text = str(value)  # StrictUndefined raises here, which is what we want
    if callable(value) and not isinstance(value, str):
        # `{{ item.title }}` on a string prints the method (`<built-in method title of str object
        # at 0x7f...>`, as Jinja does): its address differs each run, so it is dropped
        text = _ADDRESS.sub("", text)
    limits.check_output_piece(text)
    if OPEN in text or CLOSE in text:
        if _balanced(text):
            return text  # a {% set %} block or similar: template text with marked interpolations inside
        text = strip_sentinels(text)
    return f"{OPEN}{text}{CLOSE}"


def is_block_list(value: Any) -> bool:
    """Whether VALUE is a list of content blocks: mappings with a string ``type``, one at least of
    a known block type (an unknown one among them is then reported, not printed as text)."""
    return (
        isinstance(value, list | tuple)
        and bool(value)
        and all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in value)
        and any(b["type"] in BLOCK_TYPES for b in value)
    )


def _balanced(text: str) -> bool:
    depth = 0
    for m in _SENTINEL_RE.finditer(text):
        depth += 1 if m.group() == OPEN else -1
        if depth < 0:
            return False
    return depth == 0


# --------------------------------------------------------------------------- the loader


class AccessDenied(Exception):
    """A template reached for a file outside the config root (turned into TemplateError)."""


class RootLoader(jinja2.BaseLoader):
    """Resolves template names only inside the WORKSPACE; refuses absolute names, '..', escaping
    symlinks and hidden files and folders it does not allow (``.git`` never)."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.root = self.workspace.root
        self.filenames: dict[str, str] = {}  # absolute filename -> display path
        self.line_maps: dict[str, list[int]] = {}  # a translated template's line -> its file's line

    def line_of(self, filename: str, line: int | None) -> int | None:
        """LINE of FILENAME's rendered source as a line of the file (they differ when translated)."""
        lines = self.line_maps.get(filename)
        if lines is None or line is None or not 0 < line <= len(lines):
            return line
        return lines[line - 1]

    def check_name(self, name: str) -> Path:
        """The file NAME (relative to the root) stands for, or AccessDenied."""
        posix = name.replace("\\", "/")
        try:
            return self.workspace.path(posix)
        except PathEscape as exc:
            raise AccessDenied(_DENIED[exc.kind].format(name=name)) from None

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        full = self.check_name(template)
        if not full.is_file():
            raise TemplateNotFound(template)
        mtime = full.stat().st_mtime_ns
        shown = display_path(full)
        text, lines = _jinja_sources.get(full, lambda: _jinja_source(full, shown), extra=shown)
        filename = str(full)
        self.filenames[filename] = shown
        if lines is not None:
            self.line_maps[filename] = list(lines)

        def uptodate() -> bool:
            try:
                return full.stat().st_mtime_ns == mtime
            except OSError:
                return False

        return text, filename, uptodate


# what a template file is as Jinja source, read once per version of the file: the checks before a
# run read the templates the renders read again (a worker compiles each once, then Jinja caches it)
_jinja_sources: FileCache[tuple[str, tuple[int, ...] | None]] = FileCache(entries=64, max_bytes=32_000_000)


def _jinja_source(full: Path, shown: str) -> tuple[str, tuple[int, ...] | None]:
    """FULL's text as Jinja reads it (a .prompty's body, Semantic Kernel's syntax translated), and
    the file line of each of its lines when they differ. SHOWN: FULL as errors name it."""
    text = template_text(full)
    if full.suffix.lower() == ".prompty":
        return split_prompty(text, shown).body, None
    if full.suffix.lower() != ".prompt":  # Semantic Kernel's basic syntax, as Jinja
        text, lines = sk_translated(text, shown, full.name)
        return text, tuple(lines) if lines is not None else None
    return text, None


# --------------------------------------------------------------------------- the environment


class _CodeGenerator(CodeGenerator):
    """Jinja's code generator with ``a ~ b`` routed through a size check (it is no operator call the
    sandbox can intercept: Jinja compiles it to a plain ``str_join``)."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.concat_values((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class _GuardedFormatter(SandboxedFormatter):
    def format_field(self, value: Any, format_spec: str) -> Any:
        limits.check_format_spec(format_spec)
        return super().format_field(value, format_spec)


class _GuardedEscapeFormatter(SandboxedEscapeFormatter):
    def format_field(self, value: Any, format_spec: str) -> Any:
        limits.check_format_spec(format_spec)
        return super().format_field(value, format_spec)


class PromptEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox one config root's templates render in (see the module docstring)."""

    intercepted_binops = frozenset(["*", "**", "+", "%"])
    code_generator_class = _CodeGenerator
    loader: RootLoader

    def __init__(
        self,
        workspace: Workspace,
        *,
        lenient: bool = False,
        blocks: tuple[bool, bool] = (False, False),
    ) -> None:
        super().__init__(
            loader=RootLoader(workspace),
            # lenient: jinja2.Undefined, what the Prompty runtime and plain jinja2 use (an undefined
            # name prints as empty and is false); strict: an undefined name is an error at its line
            undefined=jinja2.Undefined if lenient else jinja2.StrictUndefined,
            autoescape=False,
            finalize=finalize,
            auto_reload=True,
            cache_size=400,
            # (trim_blocks, lstrip_blocks): what the application's own Environment sets
            trim_blocks=blocks[0],
            lstrip_blocks=blocks[1],
        )
        # Only harmless helpers: no lipsum, no url helpers, nothing that reaches modules.
        self.globals = {
            "range": self.globals["range"],
            "dict": dict,
            "namespace": self.globals["namespace"],
            "cycler": self.globals["cycler"],
            "joiner": self.globals["joiner"],
        }
        self.filters.update(limits.GUARDED_FILTERS)
        # the join of every render, macro body and {% set %} block: bounded output
        # jinja2 declares concat a method; its compiled templates call the instance's attribute
        self.concat = limits.bounded_concat  # type: ignore[method-assign]
        self.concat_values = limits.guarded_str_join

    def join_path(self, template: str, parent: str) -> str:
        """``{% include "x.j2" %}`` finds x.j2 next to the including template first, then at the root."""
        posix = template.replace("\\", "/")
        if posix.startswith("/") or ".." in PurePosixPath(posix).parts or "\x00" in posix:
            return template  # the loader refuses it with a clear message
        sibling = posixpath.join(posixpath.dirname(parent), posix)
        if sibling != posix and (self.loader.root / sibling).is_file():
            return sibling
        return template

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - mirrors Jinja's signature
        limits.check_method(__obj, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        if isinstance(__obj, (Macro, BlockReference)) and isinstance(result, str):
            return _Rendered(result)
        return result

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        limits.check_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)

    def wrap_str_format(self, value: Any) -> Any:
        """``str.format`` / ``format_map`` reached from a template: Jinja's own wrapper (same checks,
        same errors), with a formatter that also bounds each field's width and precision
        (``'{:>999999999}'.format(x)``)."""
        if not isinstance(value, types.MethodType | types.BuiltinMethodType) or value.__name__ not in (
            "format",
            "format_map",
        ):
            return None
        f_self = value.__self__
        if not isinstance(f_self, str):
            return None
        formatter: SandboxedFormatter = (
            _GuardedEscapeFormatter(self, escape=f_self.escape)
            if isinstance(f_self, Markup)
            else _GuardedFormatter(self)
        )
        is_map = value.__name__ == "format_map"

        def wrapper(*args: Any, **kwargs: Any) -> str:
            if is_map:
                if kwargs:
                    raise TypeError("format_map() takes no keyword arguments")
                if len(args) != 1:
                    raise TypeError(f"format_map() takes exactly one argument ({len(args)} given)")
                kwargs, args = args[0], ()
            return type(f_self)(formatter.vformat(f_self, args, kwargs))

        return functools.update_wrapper(wrapper, value)


_envs: dict[tuple[Workspace, bool, tuple[bool, bool]], PromptEnvironment] = {}
_envs_lock = threading.Lock()


def environment_for(
    workspace: Workspace, *, lenient: bool = False, blocks: tuple[bool, bool] = (False, False)
) -> PromptEnvironment:
    """One environment per workspace, undefined mode and block whitespace (trim_blocks,
    lstrip_blocks); Jinja caches compiled templates per (name, mtime) inside it."""
    blocks = (bool(blocks[0]), bool(blocks[1]))
    key = (workspace.resolved(), lenient, blocks)
    with _envs_lock:
        env = _envs.get(key)
        if env is None:
            env = _envs[key] = PromptEnvironment(workspace, lenient=lenient, blocks=blocks)
        return env


__all__ = [
    "BLOCKS_CLOSE",
    "BLOCKS_OPEN",
    "CLOSE",
    "OPEN",
    "AccessDenied",
    "PromptEnvironment",
    "RootLoader",
    "environment_for",
    "finalize",
    "is_block_list",
    "scrub",
    "strip_sentinels",
]
