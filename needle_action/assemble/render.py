"""Templates + fixtures -> the exact request the application would send (:class:`RenderedPrompt`).

Templates and fixtures come from pull requests, so they are treated as hostile: they render in the
sandbox of :mod:`~needle_action.assemble.sandbox` (confined to the config root, data marked with
sentinels), role markers are honoured only when they are template text
(:mod:`~needle_action.assemble.roles`), and whatever a template raises becomes a ``TemplateError``
at the template line that raised it (:mod:`~needle_action.assemble.template`), never a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import jinja2
from jinja2 import meta as jinja_meta

from needle_action.assemble import isolate
from needle_action.assemble.fixtures import load_fixture
from needle_action.assemble.prompt import RenderedPrompt
from needle_action.assemble.prompty import prompty_defaults, split_prompty
from needle_action.assemble.roles import split_messages, to_prompt
from needle_action.assemble.sandbox import MAX_TEMPLATE_BYTES
from needle_action.config.model import Config, PromptConfig
from needle_action.errors import NeedleError, TemplateError
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
    (:mod:`~needle_action.assemble.isolate`)."""
    root = config.root
    allow = tuple(config.files.allow_hidden)
    template_path = config.template_path(prompt)
    template_file = display_path(template_path)
    name = relative(root, template_path)
    variables, fixture_rel = _case_variables(root, fixture_path_or_None, variables, allow)

    front: dict = {}
    try:
        source_text = _read_template(template_path, template_file)
        if template_path.suffix.lower() == ".prompty":
            front = split_prompty(source_text, template_file).front
            defaults = prompty_defaults(front, template_path, root, template_file, allow_hidden=allow)
            variables = {**defaults, **variables}
    except NeedleError:
        raise
    except OSError as exc:
        raise TemplateError(f"cannot read the template: {exc.strerror or exc}", file=template_file) from None
    raw = isolate.render(root, allow, name, variables, file=template_file)
    if template_path.suffix.lower() == ".prompt":  # Google Dotprompt: Handlebars, its own roles
        from needle_action.assemble.dotprompt import to_rendered

        return to_rendered(raw, source_text, variables, path=template_path, source=name, fixture=fixture_rel)

    system, messages = to_prompt(split_messages(raw), source_text, template_file)
    meta = {"front_matter": {k: v for k, v in front.items() if k in _FRONT_MATTER_META}} if front else {}
    return RenderedPrompt(system=system, messages=messages, source=name, fixture=fixture_rel, meta=meta)


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


# --------------------------------------------------------------------------- static inspection


def undeclared_variables(env: jinja2.Environment, source: str) -> set[str]:
    """Variables a template reads from its context (for ``needle init``'s guesses)."""
    return set(jinja_meta.find_undeclared_variables(env.parse(source)))


def referenced_templates(env: jinja2.Environment, source: str) -> list[str]:
    """Names a template includes, imports or extends (literal names only)."""
    return [t for t in jinja_meta.find_referenced_templates(env.parse(source)) if t]


__all__ = ["render_case", "undeclared_variables", "referenced_templates"]
