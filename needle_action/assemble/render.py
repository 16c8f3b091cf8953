"""Templates + fixtures -> the exact request the application would send (:class:`RenderedPrompt`).

Templates and fixtures come from pull requests, so they are treated as hostile: they render in the
sandbox of :mod:`~needle_action.assemble.templates.sandbox` (confined to the config root, data marked with
sentinels), role markers are honoured only when they are template text
(:mod:`~needle_action.assemble.templates.roles`), and whatever a template raises becomes a ``TemplateError``
at the template line that raised it (:mod:`~needle_action.assemble.templates.raw`), never a traceback.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import meta as jinja_meta

from needle_action.assemble.request import check_turns, complete
from needle_action.assemble.templates import isolate
from needle_action.assemble.templates.declared import Declared, from_prompty
from needle_action.assemble.templates.defaults import SAMPLE_CASE
from needle_action.assemble.templates.fixtures import confine_fixture, load_fixture
from needle_action.assemble.templates.prompty import split_prompty, with_defaults, with_images
from needle_action.assemble.templates.raw import RenderJob, render_raw
from needle_action.assemble.templates.roles import split_sections, to_prompt
from needle_action.assemble.templates.sandbox import read_template
from needle_action.config.model import Config, PromptConfig
from needle_action.core.errors import ConfigError, NeedleError, TemplateError
from needle_action.core.paths import display_path, relative
from needle_action.core.workspace import Workspace
from needle_action.request.blocks import RequestShapeError
from needle_action.request.prompt import RenderedPrompt

_FRONT_MATTER_META = ("name", "description", "model")


def render_case(
    config: Config,
    prompt: PromptConfig,
    fixture_path_or_None: str | os.PathLike[str] | None,
    variables: dict[str, Any] | None = None,
) -> RenderedPrompt:
    """Render PROMPT with one fixture (or VARIABLES, which then replace the fixture's contents).

    Files are read here (confined to the config's workspace); the template itself runs in the render worker, bounded in time and memory
    (:mod:`~needle_action.assemble.templates.isolate`). The result carries the declared tools, tool choice
    and request parameters, and its context slot placed as ``context_as`` says
    (:mod:`~needle_action.assemble.request`)."""
    workspace, root = config.workspace, config.root
    if prompt.request is not None or prompt.builder is not None:  # prompts that are data, or code
        return _render_data(config, prompt, fixture_path_or_None, variables)
    template_path = config.template_path(prompt)
    template_file = display_path(template_path)
    name = relative(root, template_path)
    variables, fixture_rel = _case_variables(workspace, fixture_path_or_None, variables)
    kind = template_path.suffix.lower()

    source_text, front, declared, variables, fixture_rel = _read_source(
        workspace, template_path, variables, fixture_rel
    )
    lenient, blocks = lenient_undefined(prompt, kind), (prompt.trim_blocks, prompt.lstrip_blocks)
    raw = isolate.render(workspace, RenderJob(name, variables, template_file, lenient, blocks))
    if kind == ".prompt":  # Google Dotprompt: Handlebars, its own roles
        rendered, declared = _dotprompt(raw, source_text, variables, template_path, name, fixture_rel)
    else:
        sections = split_sections(raw, prompty=kind == ".prompty")
        try:
            system, messages = to_prompt(sections, source_text, template_file)
        except RequestShapeError as exc:  # content blocks the fixture holds
            raise _block_error(exc, root, fixture_rel, template_file) from None
        if kind == ".prompty":
            messages = with_images(messages, template_path, workspace, template_file)
        meta = {"front_matter": {k: v for k, v in front.items() if k in _FRONT_MATTER_META}} if front else {}
        rendered = RenderedPrompt(
            system=system, messages=messages, source=name, fixture=fixture_rel, meta=meta
        )
    return complete(config, prompt, rendered, declared, variables)


def _dotprompt(
    raw: str, source_text: str, variables: dict[str, Any], path: Path, name: str, fixture: str | None
) -> tuple[RenderedPrompt, Declared]:
    """A ``.prompt``'s raw render as the request, and what its front matter declares."""
    from needle_action.assemble.templates.dotprompt import declared_by, parse, to_rendered

    file = display_path(path)
    if fixture is None and parse(source_text, file).defaults:
        fixture = SAMPLE_CASE  # input.default is the case, as a .prompty's sample
    rendered = to_rendered(raw, source_text, variables, path=path, source=name, fixture=fixture)
    return rendered, declared_by(source_text, path, file=file)


def _read_source(
    workspace: Workspace, template_path: Path, variables: dict[str, Any], fixture_rel: str | None
) -> tuple[str, dict[str, Any], Declared, dict[str, Any], str | None]:
    """The template's text, its front matter and what it declares; with a ``.prompty``'s sample
    under VARIABLES (a fixture overrides it key by key) and the case named ``sample`` when no
    fixture named it."""
    template_file, kind = display_path(template_path), template_path.suffix.lower()
    front: dict[str, Any] = {}
    declared = Declared()
    try:
        source_text = read_template(template_path, template_file)
        if kind == ".prompty":
            front = split_prompty(source_text, template_file).front
            # a fixture overrides the sample key by key
            variables, has_defaults = with_defaults(variables, front, template_path, workspace, template_file)
            if fixture_rel is None and has_defaults:
                fixture_rel = SAMPLE_CASE
            declared = from_prompty(front, source_text, template_path, workspace, template_file)
    except NeedleError:
        raise
    except OSError as exc:
        raise TemplateError(f"cannot read the template: {exc.strerror or exc}", file=template_file) from None
    return source_text, front, declared, variables, fixture_rel


def _render_data(
    config: Config,
    prompt: PromptConfig,
    fixture_path: str | os.PathLike[str] | None,
    variables: dict[str, Any] | None,
) -> RenderedPrompt:
    """A recorded request (its pointer slots replaced by VARIABLES), or a builder's return value."""
    if prompt.request is not None:
        from needle_action.assemble.recorded import fixture_name, render_recorded

        out = render_recorded(config, prompt, variables, fixture_name(config, fixture_path))
        check_turns(config, prompt, out, variables or {})
        return out
    from needle_action.assemble.builder.client import render_built

    variables, fixture_rel = _case_variables(config.workspace, fixture_path, variables)
    out = render_built(config, prompt, variables, fixture_rel)
    check_turns(config, prompt, out, variables)
    return out


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


def _case_variables(
    workspace: Workspace, fixture_path: str | os.PathLike[str] | None, variables: dict[str, Any] | None
) -> tuple[dict[str, Any], str | None]:
    """(the variables to render with, the fixture's name relative to the workspace's root or None)."""
    root = workspace.root
    if variables is not None:
        return variables, relative(root, Path(fixture_path)) if fixture_path is not None else None
    if fixture_path is None:
        return {}, None
    fx = confine_fixture(workspace, fixture_path)
    return load_fixture(fx), relative(root, fx)


# --------------------------------------------------------------------------- static inspection


def undeclared_variables(env: jinja2.Environment, source: str) -> set[str]:
    """Variables a template reads from its context (for ``needle init``'s guesses)."""
    return set(jinja_meta.find_undeclared_variables(env.parse(source)))


def referenced_templates(env: jinja2.Environment, source: str) -> list[str]:
    """Names a template includes, imports or extends (literal names only)."""
    return [t for t in jinja_meta.find_referenced_templates(env.parse(source)) if t]


__all__ = ["lenient_undefined", "referenced_templates", "render_case", "render_raw", "undeclared_variables"]
