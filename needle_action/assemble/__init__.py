"""Templates + fixtures -> the exact request the application would send.

``from needle_action.assemble import render_case, RenderedPrompt`` is the way in. The submodules:
``prompt`` (the request itself; ``blocks``, ``wire`` and ``view`` its parts; tool formats are
:mod:`needle_action.request.toolformats`), ``fixtures``, ``prompty``, ``sandbox`` (the Jinja2 environment,
the root-confined loader, the data sentinels), ``roles`` (marker splitting) and ``render``.

Only the request types load eagerly: tokens, providers and the runtime library import
``RenderedPrompt`` and must not pull in Jinja2 or PyYAML, so the rendering names load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from needle_action.request.prompt import ContextSlot, Message, RenderedPrompt, RequestShapeError, Role

if TYPE_CHECKING:
    from needle_action.assemble.render import referenced_templates, render_case, undeclared_variables
    from needle_action.assemble.templates.fixtures import load_fixture
    from needle_action.assemble.templates.roles import split_messages
    from needle_action.assemble.templates.sandbox import PromptEnvironment, RootLoader, environment_for

_LAZY = {
    "load_fixture": "needle_action.assemble.templates.fixtures",
    "render_case": "needle_action.assemble.render",
    "undeclared_variables": "needle_action.assemble.render",
    "referenced_templates": "needle_action.assemble.render",
    "split_messages": "needle_action.assemble.templates.roles",
    "environment_for": "needle_action.assemble.templates.sandbox",
    "PromptEnvironment": "needle_action.assemble.templates.sandbox",
    "RootLoader": "needle_action.assemble.templates.sandbox",
}


def __getattr__(name: str) -> Any:
    """Load a rendering name on first use (PEP 562), then keep it as a plain attribute."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ContextSlot",
    "Message",
    "PromptEnvironment",
    "RenderedPrompt",
    "RequestShapeError",
    "Role",
    "RootLoader",
    "environment_for",
    "load_fixture",
    "referenced_templates",
    "render_case",
    "split_messages",
    "undeclared_variables",
]
