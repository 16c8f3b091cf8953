"""Templates + fixtures -> the exact request the application would send (:class:`RenderedPrompt`).

Templates and fixtures come from pull requests, so they are treated as hostile: they render in the
sandbox of :mod:`~needle_action.assemble.sandbox` (confined to the config root, data marked with
sentinels), role markers are honoured only when they are template text
(:mod:`~needle_action.assemble.roles`), and whatever a template raises becomes a ``TemplateError``
at the template line that raised it, never a traceback.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Sequence
from pathlib import Path

import jinja2
from jinja2 import meta as jinja_meta
from jinja2.exceptions import SecurityError, TemplateNotFound, TemplateSyntaxError, UndefinedError

from needle_action.assemble import isolate
from needle_action.assemble.blocks import RequestShapeError
from needle_action.assemble.declared import Declared, from_prompty
from needle_action.assemble.fixtures import load_fixture
from needle_action.assemble.limits import SIZE_HINT, RenderLimit
from needle_action.assemble.prompt import RenderedPrompt
from needle_action.assemble.prompty import prompty_defaults, split_prompty, with_images
from needle_action.assemble.request import complete
from needle_action.assemble.roles import split_sections, to_prompt
from needle_action.assemble.sandbox import (
    MAX_TEMPLATE_BYTES,
    AccessDenied,
    RootLoader,
    environment_for,
    scrub,
)
from needle_action.config.model import Config, PromptConfig
from needle_action.errors import ConfigError, NeedleError, TemplateError
from needle_action.paths import confine, display_path, read_text, relative

_FRONT_MATTER_META = ("name", "description", "model")


def render_case(
    config: Config,
    prompt: PromptConfig,
    fixture_path_or_None: str | os.PathLike | None,
    variables: dict | None = None,
) -> RenderedPrompt:
    """Render PROMPT with one fixture (or VARIABLES, which then replace the fixture's contents).

    Files are read here (confined to the root, out of hidden folders unless ``[files] allow_hidden``
    lists them); the template itself runs in the render worker, bounded in time and memory
    (:mod:`~needle_action.assemble.isolate`). The result carries the declared tools, tool choice
    and request parameters, and its context slot placed as ``context_as`` says
    (:mod:`~needle_action.assemble.request`)."""
    root = config.root
    allow = tuple(config.files.allow_hidden)
    template_path = config.template_path(prompt)
    template_file = display_path(template_path)
    name = relative(root, template_path)
    variables, fixture_rel = _case_variables(root, fixture_path_or_None, variables, allow)
    kind = template_path.suffix.lower()

    front: dict = {}
    declared = Declared()
    try:
        source_text = _read_template(template_path, template_file)
        if kind == ".prompty":
            front = split_prompty(source_text, template_file).front
            defaults = prompty_defaults(front, template_path, root, template_file, allow_hidden=allow)
            variables = {**defaults, **variables}
            declared = from_prompty(
                front, source_text, template_path, root, template_file, allow_hidden=allow
            )
    except NeedleError:
        raise
    except OSError as exc:
        raise TemplateError(f"cannot read the template: {exc.strerror or exc}", file=template_file) from None
    lenient = lenient_undefined(prompt, kind)
    raw = isolate.render(root, allow, name, variables, file=template_file, lenient=lenient)
    if kind == ".prompt":  # Google Dotprompt: Handlebars, its own roles
        from needle_action.assemble.dotprompt import declared_by, to_rendered

        rendered = to_rendered(
            raw, source_text, variables, path=template_path, source=name, fixture=fixture_rel
        )
        declared = declared_by(source_text, template_path, file=template_file)
    else:
        sections = split_sections(raw, prompty=kind == ".prompty")
        try:
            system, messages = to_prompt(sections, source_text, template_file)
        except RequestShapeError as exc:  # content blocks the fixture holds
            raise _block_error(exc, root, fixture_rel, template_file) from None
        if kind == ".prompty":
            messages = with_images(messages, template_path, root, template_file, allow_hidden=allow)
        meta = {"front_matter": {k: v for k, v in front.items() if k in _FRONT_MATTER_META}} if front else {}
        rendered = RenderedPrompt(
            system=system, messages=messages, source=name, fixture=fixture_rel, meta=meta
        )
    return complete(config, prompt, rendered, declared, variables)


def _block_error(
    exc: RequestShapeError, root: Path, fixture_rel: str | None, template_file: str
) -> NeedleError:
    """A bad content block printed from the data, at the fixture line holding the bad value."""
    file, line = template_file, None
    if fixture_rel is not None:
        file = display_path(root / fixture_rel)
        if exc.value is not None:
            try:
                text = (root / fixture_rel).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                text = ""
            at = text.find(str(exc.value))
            line = text.count("\n", 0, at) + 1 if at >= 0 else None
    return ConfigError(
        f"a content block in the data is not valid: {exc.message}",
        file=file,
        line=line,
        hint=exc.hint or "content blocks are mappings like {type: text, text: ...}",
    )


def lenient_undefined(prompt: PromptConfig, kind: str) -> bool:
    """Whether an undefined name renders as empty: ``undefined`` if set, else the format's own
    runtime (Prompty and Dotprompt: lenient; plain Jinja: strict)."""
    if prompt.undefined is not None:
        return prompt.undefined == "lenient"
    return kind in (".prompty", ".prompt")


def render_raw(
    root: Path, allow_hidden: Sequence[str], name: str, variables: dict, *, file: str, lenient: bool = False
) -> str:
    """The raw output (sentinels included) of template NAME under ROOT, in this process.

    Everything a template raises becomes a TemplateError at the template line that raised it. The
    size checks of the sandbox apply; time and memory are bounded only in the render worker, which
    is what calls this (:func:`needle_action.assemble.isolate.render`).
    """
    if name.lower().endswith(".prompt"):  # Dotprompt: the Handlebars engine, metered (dotprompt.py)
        from needle_action.assemble.dotprompt import render_raw as render_dotprompt

        return render_dotprompt(
            root, root / name, variables, file=file, allow_hidden=allow_hidden, strict=not lenient
        )
    env = environment_for(root, allow_hidden, lenient=lenient)
    try:
        return env.get_template(name).render(scrub(variables))
    except NeedleError:
        raise
    except Exception as exc:  # noqa: BLE001 - user templates can raise anything; never a traceback
        raise _as_template_error(exc, env.loader, file) from None


def _case_variables(
    root: Path, fixture_path: str | os.PathLike | None, variables: dict | None, allow_hidden: Sequence[str]
) -> tuple[dict, str | None]:
    """(the variables to render with, the fixture's name relative to ROOT or None)."""
    if variables is not None:
        return variables, relative(root, Path(fixture_path)) if fixture_path is not None else None
    if fixture_path is None:
        return {}, None
    fx = confine(root, Path(fixture_path), what="fixture", allow_hidden=allow_hidden)
    fixture_rel = relative(root, fx)
    return load_fixture(fx), fixture_rel


def _read_template(path: Path, file: str) -> str:
    try:
        return read_text(
            path, what="template", error_cls=TemplateError, file=file, max_bytes=MAX_TEMPLATE_BYTES
        )
    except FileNotFoundError:
        raise TemplateError("template file not found", file=file) from None


# --------------------------------------------------------------------------- error mapping


def _template_frame(exc: BaseException, loader: RootLoader) -> tuple[str | None, int | None]:
    """The innermost template frame of EXC's traceback (Jinja rewrites them to template lines)."""
    found: tuple[str | None, int | None] = (None, None)
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename in loader.filenames:
            found = (loader.filenames[frame.filename], frame.lineno)
    return found


def _as_template_error(exc: BaseException, loader: RootLoader, default_file: str) -> NeedleError:
    """Whatever rendering raised, as a TemplateError at the template file and line that raised it."""
    if isinstance(exc, NeedleError):
        return exc
    frame_file, line = _template_frame(exc, loader)
    file = frame_file or default_file
    if isinstance(exc, TemplateSyntaxError):
        file = loader.filenames.get(
            exc.filename or "", display_path(exc.filename) if exc.filename else default_file
        )
        return TemplateError(
            f"template syntax error: {exc.message}",
            file=file,
            line=exc.lineno,
            hint="check the {% ... %} and {{ ... }} tags on this line",
        )
    if isinstance(exc, AccessDenied):
        return TemplateError(
            str(exc),
            file=file,
            line=line,
            hint="include templates by their path relative to the threshold file's folder",
        )
    if isinstance(exc, SecurityError):
        text = str(exc)
        if not text.startswith("the template"):
            text = f"the template tried to reach something the sandbox forbids: {text}"
        return TemplateError(
            text,
            file=file,
            line=line,
            hint="templates may only use their variables and plain filters; attributes "
            "starting with '_' and Python internals are off limits",
        )
    if isinstance(exc, UndefinedError):
        return TemplateError(
            f"undefined variable: {exc.message}",
            file=file,
            line=line,
            hint="add it to the fixture, or guard it with {% if name is defined %}",
        )
    if isinstance(exc, TemplateNotFound):
        return TemplateError(
            f"included template not found: {exc.name}",
            file=file,
            line=line,
            hint="include paths are relative to the including template's folder or the config root",
        )
    if isinstance(exc, RecursionError):
        return TemplateError("the template includes or calls itself without end", file=file, line=line)
    if isinstance(exc, RenderLimit):  # sizes (and, in the worker, time): the message says which
        return TemplateError(
            str(exc),
            file=file,
            line=line,
            hint=SIZE_HINT,
        )
    if isinstance(exc, MemoryError):
        return TemplateError(
            f"rendering needed more than the {isolate.MEMORY_BYTES // 2**20} MB of memory a render may use",
            file=file,
            line=line,
            hint=SIZE_HINT,
        )
    return TemplateError(f"rendering failed: {type(exc).__name__}: {exc}", file=file, line=line)


# --------------------------------------------------------------------------- static inspection


def undeclared_variables(env: jinja2.Environment, source: str) -> set[str]:
    """Variables a template reads from its context (for ``needle init``'s guesses)."""
    return set(jinja_meta.find_undeclared_variables(env.parse(source)))


def referenced_templates(env: jinja2.Environment, source: str) -> list[str]:
    """Names a template includes, imports or extends (literal names only)."""
    return [t for t in jinja_meta.find_referenced_templates(env.parse(source)) if t]


__all__ = ["render_case", "render_raw", "lenient_undefined", "undeclared_variables", "referenced_templates"]
