"""Semantic Kernel's prompt formats, recognised (:mod:`.sk_jinja` renders their basic syntax).

SK keeps prompts as ``skprompt.txt`` (its own template syntax: ``{{$variable}}``, function calls
``{{plugin.function $arg}}``) beside a ``config.json``, or as YAML prompt files (``template:`` with
``template_format: semantic-kernel`` or ``handlebars``), both often with ``<message role="...">``
tags for the turns. Read as plain Jinja they would fail on the ``$``.
"""

from __future__ import annotations

import re

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


__all__ = ["sk_format"]
