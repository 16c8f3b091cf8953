"""One template's raw output, rendered in this process, and whatever it raised as a TemplateError.

This is what the render worker runs (:mod:`~needle_action.assemble.templates.isolate` bounds it in time and
memory); :mod:`~needle_action.assemble.render` turns the raw output into the request. Kept apart
from both so the worker and the request builder do not import each other.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jinja2.exceptions import SecurityError, TemplateNotFound, TemplateSyntaxError, UndefinedError

from needle_action.assemble.templates.limits import MEMORY_BYTES, SIZE_HINT, RenderLimit
from needle_action.assemble.templates.sandbox import AccessDenied, RootLoader, environment_for, scrub
from needle_action.core.errors import NeedleError, TemplateError
from needle_action.core.paths import display_path
from needle_action.core.workspace import Workspace


@dataclass(frozen=True)
class RenderJob:
    """One render of template NAME (relative to the workspace) with VARIABLES: what
    :func:`render_raw` runs and what the render worker receives. FILE names the template in
    messages. LENIENT renders an undefined name as empty (the Prompty and Dotprompt runtimes'
    semantics) instead of raising. BLOCKS is Jinja's (trim_blocks, lstrip_blocks), as the
    application's Environment sets them (Handlebars has no such switch: a ``.prompt`` ignores it)."""

    name: str
    variables: dict[str, Any]
    file: str
    lenient: bool = False
    blocks: tuple[bool, bool] = (False, False)


def render_raw(workspace: Workspace, job: RenderJob) -> str:
    """The raw output (sentinels included) of JOB's template in the WORKSPACE, in this process.

    Everything a template raises becomes a TemplateError at the template line that raised it. The
    size checks of the sandbox apply; time and memory are bounded only in the render worker, which
    is what calls this (:func:`needle_action.assemble.templates.isolate.render`).
    """
    name, variables, file, lenient = job.name, job.variables, job.file, job.lenient
    if name.lower().endswith(".prompt"):  # Dotprompt: the Handlebars engine, metered (dotprompt.py)
        from needle_action.assemble.templates.dotprompt import render_raw as render_dotprompt

        return render_dotprompt(workspace, workspace.root / name, variables, file=file, strict=not lenient)
    env = environment_for(workspace, lenient=lenient, blocks=job.blocks)
    try:
        return env.get_template(name).render(scrub(variables))
    except NeedleError:
        raise
    except Exception as exc:  # user templates can raise anything; never a traceback
        raise _as_template_error(exc, env.loader, file) from None


# --------------------------------------------------------------------------- error mapping


def _template_frame(exc: BaseException, loader: RootLoader) -> tuple[str | None, int | None]:
    """The innermost template frame of EXC's traceback (Jinja rewrites them to template lines)."""
    found: tuple[str | None, int | None] = (None, None)
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename in loader.filenames:
            found = (loader.filenames[frame.filename], loader.line_of(frame.filename, frame.lineno))
    return found


def _sandbox_message(exc: BaseException) -> str:
    text = str(exc)
    if text.startswith("the template"):
        return text
    return f"the template tried to reach something the sandbox forbids: {text}"


def _memory_message(_exc: BaseException) -> str:
    return f"rendering needed more than the {MEMORY_BYTES // 2**20} MB of memory a render may use"


# what a render raised -> (its message, the hint); the first type that matches wins
_ERRORS: tuple[tuple[type[BaseException], Callable[[Any], str], str | None], ...] = (
    (AccessDenied, str, "include templates by their path relative to the threshold file's folder"),
    (
        SecurityError,
        _sandbox_message,
        "templates may only use their variables and plain filters; attributes "
        "starting with '_' and Python internals are off limits",
    ),
    (
        UndefinedError,
        lambda e: f"undefined variable: {e.message}",
        "add it to the fixture, or guard it with {% if name is defined %}",
    ),
    (
        TemplateNotFound,
        lambda e: f"included template not found: {e.name}",
        "include paths are relative to the including template's folder or the config root",
    ),
    (RecursionError, lambda _e: "the template includes or calls itself without end", None),
    (RenderLimit, str, SIZE_HINT),  # sizes (and, in the worker, time): the message says which
    (MemoryError, _memory_message, SIZE_HINT),
)


def _as_template_error(exc: BaseException, loader: RootLoader, default_file: str) -> NeedleError:
    """Whatever rendering raised, as a TemplateError at the template file and line that raised it."""
    if isinstance(exc, NeedleError):
        return exc
    if isinstance(exc, TemplateSyntaxError):
        file = loader.filenames.get(
            exc.filename or "", display_path(exc.filename) if exc.filename else default_file
        )
        return TemplateError(
            f"template syntax error: {exc.message}",
            file=file,
            line=loader.line_of(exc.filename or "", exc.lineno),
            hint="check the {% ... %} and {{ ... }} tags on this line",
        )
    frame_file, line = _template_frame(exc, loader)
    file = frame_file or default_file
    for kind, message, hint in _ERRORS:
        if isinstance(exc, kind):
            return TemplateError(message(exc), file=file, line=line, hint=hint)
    return TemplateError(f"rendering failed: {type(exc).__name__}: {exc}", file=file, line=line)


__all__ = ["render_raw"]
