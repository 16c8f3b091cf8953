"""The Jinja2 sandbox templates from pull requests run in, and the sentinels that mark their data.

* ``ImmutableSandboxedEnvironment`` (no ``__dunder__`` access, no mutation of fixture data,
  ``str.format`` checked) with ``StrictUndefined`` and autoescape off;
* the only globals are the fixture's variables and Jinja's harmless helpers (``range``, ``dict``,
  ``namespace``, ``cycler``, ``joiner``); nothing from ``os.environ`` or the process is reachable;
* includes, imports and extends resolve only inside the config root (:class:`RootLoader`);
* every interpolated value is wrapped in private-use sentinels by :func:`finalize`, so the marker
  splitter (:mod:`~needle_action.assemble.roles`) can tell template text from data.
"""

from __future__ import annotations

import posixpath
import re
import threading
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import jinja2
from jinja2.exceptions import SecurityError, TemplateNotFound
from jinja2.runtime import BlockReference, Context, Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment

from needle_action.assemble.prompty import split_prompty
from needle_action.errors import TemplateError
from needle_action.paths import PathEscape, check_inside, check_relative, display_path, read_text

# Private-use code points (Supplementary Private Use Area-A): they bracket every interpolated value
# in the raw render and are removed before anything leaves the assemble package.
OPEN = "\U000f8e00"
CLOSE = "\U000f8e01"

_SENTINEL_RE = re.compile(f"[{OPEN}{CLOSE}]")

# Cheap guards against templates that try to exhaust memory ('x' * 10**10, 9 ** 9 ** 9).
MAX_SEQUENCE_PRODUCT = 20_000_000
MAX_EXPONENT = 1024

# RootLoader's refusals, by PathEscape kind
_DENIED = {
    "absolute": "template name {name!r} is an absolute path; only files inside the config root may be used",
    "parent": "template name {name!r} contains '..'; only files inside the config root may be used",
    "unresolvable": "template {name!r} cannot be resolved (symlink loop?)",
    "outside": "template {name!r} resolves through a symlink outside the config root",
}


# --------------------------------------------------------------------------- sentinels


def strip_sentinels(text: str) -> str:
    """TEXT without any sentinel characters."""
    # two str.replace calls are ~50x faster than str.translate for astral code points
    return text.replace(OPEN, "").replace(CLOSE, "")


def scrub(value: Any) -> Any:
    """Fixture data with any sentinel characters removed, so data cannot fake template text."""
    if isinstance(value, str):
        return strip_sentinels(value) if (OPEN in value or CLOSE in value) else value
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub(v) for v in value)
    return value


class _Rendered(str):
    """Output of a macro, ``caller()`` or ``super()``: template text, already sentinel-marked inside."""


def finalize(value: Any) -> str:
    """Wrap every ``{{ ... }}`` result in sentinels so the marker splitter can tell data from template."""
    if isinstance(value, _Rendered):
        return value
    text = str(value)  # StrictUndefined raises here, which is what we want
    if OPEN in text or CLOSE in text:
        if _balanced(text):
            return text  # a {% set %} block or similar: template text with marked interpolations inside
        text = strip_sentinels(text)
    return f"{OPEN}{text}{CLOSE}"


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
    """Resolves template names only inside ROOT; refuses absolute names, '..' and escaping symlinks."""

    def __init__(self, root: Path) -> None:
        self.root = root.absolute()
        self.filenames: dict[str, str] = {}  # absolute filename -> display path

    def check_name(self, name: str) -> Path:
        """The file NAME (relative to the root) stands for, or AccessDenied."""
        posix = name.replace("\\", "/")
        try:
            check_relative(posix)
            full = self.root / posix
            check_inside(self.root, full)
        except PathEscape as exc:
            raise AccessDenied(_DENIED[exc.kind].format(name=name)) from None
        return full

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        full = self.check_name(template)
        if not full.is_file():
            raise TemplateNotFound(template)
        mtime = full.stat().st_mtime_ns
        text = read_text(full, what="template", error_cls=TemplateError)
        filename = str(full)
        self.filenames[filename] = display_path(full)
        if full.suffix.lower() == ".prompty":
            text = split_prompty(text, display_path(full)).body

        def uptodate() -> bool:
            try:
                return full.stat().st_mtime_ns == mtime
            except OSError:
                return False

        return text, filename, uptodate


# --------------------------------------------------------------------------- the environment


class PromptEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox one config root's templates render in (see the module docstring)."""

    intercepted_binops = frozenset(["*", "**"])
    loader: RootLoader

    def __init__(self, root: Path) -> None:
        super().__init__(
            loader=RootLoader(root),
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            finalize=finalize,
            auto_reload=True,
            cache_size=400,
        )
        # Only harmless helpers: no lipsum, no url helpers, nothing that reaches modules.
        self.globals = {
            "range": self.globals["range"],
            "dict": dict,
            "namespace": self.globals["namespace"],
            "cycler": self.globals["cycler"],
            "joiner": self.globals["joiner"],
        }

    def join_path(self, template: str, parent: str) -> str:
        """``{% include "x.j2" %}`` finds x.j2 next to the including template first, then at the root."""
        posix = template.replace("\\", "/")
        if posix.startswith("/") or ".." in PurePosixPath(posix).parts:
            return template  # the loader refuses it with a clear message
        sibling = posixpath.join(posixpath.dirname(parent), posix)
        if sibling != posix and (self.loader.root / sibling).is_file():
            return sibling
        return template

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - mirrors Jinja's signature
        result = super().call(__context, __obj, *args, **kwargs)
        if isinstance(__obj, (Macro, BlockReference)) and isinstance(result, str):
            return _Rendered(result)
        return result

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if (
                    isinstance(seq, (str, list, tuple))
                    and isinstance(n, int)
                    and len(seq) * n > MAX_SEQUENCE_PRODUCT
                ):
                    raise SecurityError("the template tried to build a sequence too large to be a prompt")
        if (
            operator == "**"
            and isinstance(right, int)
            and right > MAX_EXPONENT
            and isinstance(left, (int, float))
        ):
            if abs(left) > 1:
                raise SecurityError("the template tried to compute a number too large to be a prompt")
        return super().call_binop(context, operator, left, right)


_envs: dict[Path, PromptEnvironment] = {}
_envs_lock = threading.Lock()


def environment_for(root: Path) -> PromptEnvironment:
    """One environment per config root; Jinja caches compiled templates per (name, mtime) inside it."""
    key = root.absolute().resolve()
    with _envs_lock:
        env = _envs.get(key)
        if env is None:
            env = _envs[key] = PromptEnvironment(root)
        return env


__all__ = [
    "OPEN",
    "CLOSE",
    "strip_sentinels",
    "scrub",
    "finalize",
    "AccessDenied",
    "RootLoader",
    "PromptEnvironment",
    "environment_for",
]
