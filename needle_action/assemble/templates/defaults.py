"""The inputs a template gives itself, and the variables of one case.

A ``.prompty`` carries its own data (``sample:``, ``inputs.X.default``) and a ``.prompt`` its
``input.default``: with no fixture that data is the case, named :data:`SAMPLE_CASE`, for budgets,
``needle render`` and recall alike; a fixture overrides it key by key.
"""

from __future__ import annotations

import os
from typing import Any

from needle_action.assemble.templates.fixtures import confine_fixture, load_fixture
from needle_action.assemble.templates.prompty import prompty_defaults, split_prompty
from needle_action.assemble.templates.sandbox import read_template
from needle_action.config.model import Config, PromptConfig
from needle_action.core.paths import display_path

SAMPLE_CASE = "sample"  # the case a template's own data is, when no fixture is given


def template_defaults(config: Config, prompt: PromptConfig) -> dict[str, Any]:
    """The inputs a template gives itself: a ``.prompty``'s ``sample`` and input defaults, a
    ``.prompt``'s ``input.default`` ({} for other templates, recorded requests and builders)."""
    if not prompt.template or prompt.request is not None or prompt.builder is not None:
        return {}
    path = config.template_path(prompt)
    kind, file = path.suffix.lower(), display_path(path)
    if kind not in (".prompty", ".prompt"):
        return {}
    text = read_template(path, file)
    if kind == ".prompt":
        from needle_action.assemble.templates.dotprompt import parse

        return dict(parse(text, file).defaults)
    return prompty_defaults(split_prompty(text, file).front, path, config.workspace, file)


def case_variables(
    config: Config, prompt: PromptConfig, fixture_path: str | os.PathLike[str] | None
) -> dict[str, Any]:
    """The variables one case renders with: the template's own defaults (a ``.prompty``'s
    sample), overridden key by key by the fixture's."""
    fixture = (
        load_fixture(confine_fixture(config.workspace, fixture_path)) if fixture_path is not None else {}
    )
    return {**template_defaults(config, prompt), **fixture}


__all__ = ["SAMPLE_CASE", "case_variables", "template_defaults"]
