"""Semantic Kernel's prompt formats, recognised: needle renders Jinja, Prompty and Dotprompt, not SK's.

SK keeps prompts as ``skprompt.txt`` (its own template syntax: ``{{$variable}}``, function calls
``{{plugin.function $arg}}``) beside a ``config.json``, or as YAML prompt files (``template:`` with
``template_format: semantic-kernel`` or ``handlebars``), both often with ``<message role="...">``
tags for the turns. Read as Jinja they fail on the ``$`` with a message about Jinja tags; this
module names the format instead, at its line, and points at a builder (``needle init`` writes one
that renders SK's basic syntax: docs/templates.md, "Semantic Kernel").
"""

from __future__ import annotations

import re

from needle_action.core.errors import ConfigError

SK_VARIABLE = re.compile(r"\{\{\s*\$[A-Za-z_]")
SK_CALL = re.compile(r"\{\{\s*[A-Za-z_][\w-]*[.-][A-Za-z_][\w]*(?:\s+[^}]*)?\}\}")
SK_YAML_FORMAT = re.compile(
    r"""^template_format:\s*["']?(semantic-kernel|handlebars)["']?\s*(?:#.*)?$""", re.MULTILINE
)
SK_YAML_TEMPLATE = re.compile(r"^template:", re.MULTILINE)


def _line(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def sk_format(text: str, file_name: str) -> tuple[str, int] | None:
    """(what SK format TEXT is written in, the line that shows it), or None when it is not SK's."""
    fmt = SK_YAML_FORMAT.search(text)
    if fmt and SK_YAML_TEMPLATE.search(text):
        return f"a Semantic Kernel YAML prompt (template_format: {fmt.group(1)})", _line(text, fmt.start())
    var = SK_VARIABLE.search(text)
    if var:
        what = "skprompt.txt" if file_name.lower() == "skprompt.txt" else "Semantic Kernel template syntax"
        return f"{what} ({{{{$variable}}}})", _line(text, var.start())
    if file_name.lower() == "skprompt.txt":
        call = SK_CALL.search(text)
        return "skprompt.txt", _line(text, call.start()) if call else 1
    return None


def refuse_sk(text: str, file: str, file_name: str) -> None:
    """Raise a clear error when TEXT is written in a Semantic Kernel format (exit 2, file:line)."""
    found = sk_format(text, file_name)
    if found is None:
        return
    what, line = found
    raise ConfigError(
        f"Semantic Kernel prompt format is not supported: use a builder ({what})",
        file=file,
        line=line,
        hint='`needle init` writes a builder that renders SK\'s basic syntax ({{$var}}, <message role="..."> '
        'turns) and an entry `builder = "needle_builders/NAME.py:build"` for it (docs/templates.md)',
    )


__all__ = ["refuse_sk", "sk_format"]
