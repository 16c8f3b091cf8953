"""Semantic Kernel's prompt formats, recognised (:mod:`.sk_jinja` renders their basic syntax).

SK keeps prompts as ``skprompt.txt`` (its own template syntax: ``{{$variable}}``, function calls
``{{plugin.function $arg}}``) beside a ``config.json``, or as YAML prompt files (``template:`` with
``template_format: semantic-kernel`` or ``handlebars``), both often with ``<message role="...">``
tags for the turns. Read as plain Jinja they would fail on the ``$``.
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
# SK's older YAML prompt files (`prompt: "...{{$history}}..."`), named *.prompt like Dotprompt's
SK_PROMPT_FILE = "a Semantic Kernel YAML prompt file (its prompt: holds SK syntax), not Dotprompt"


def refuse_sk_prompt_file(text: str, file: str, file_name: str) -> None:
    """A ``.prompt`` file that is SK's, not Dotprompt: an error at its line (needle would render its
    YAML as Handlebars text, a wrong count with no word)."""
    found = sk_format(text, file_name)
    if found is not None and found[0] == SK_PROMPT_FILE:
        raise ConfigError(
            f"{found[0]}: needle renders .prompt files as Dotprompt",
            file=file,
            line=found[1],
            hint="measure it with a builder: `needle init` writes one that renders it "
            '(builder = "needle_builders/NAME.py:build"; docs/templates.md, "Semantic Kernel prompts")',
        )


def _line(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def sk_format(text: str, file_name: str) -> tuple[str, int] | None:
    """(what SK format TEXT is written in, the line that shows it), or None when it is not SK's."""
    fmt = SK_YAML_FORMAT.search(text)
    if fmt and SK_YAML_TEMPLATE.search(text):
        return f"a Semantic Kernel YAML prompt (template_format: {fmt.group(1)})", _line(text, fmt.start())
    var = SK_VARIABLE.search(text)
    if var and file_name.lower().endswith(".prompt") and not text.lstrip().startswith("---"):
        return SK_PROMPT_FILE, _line(text, var.start())
    if var:
        what = "skprompt.txt" if file_name.lower() == "skprompt.txt" else "Semantic Kernel template syntax"
        return f"{what} ({{{{$variable}}}})", _line(text, var.start())
    if file_name.lower() == "skprompt.txt":
        call = SK_CALL.search(text)
        return "skprompt.txt", _line(text, call.start()) if call else 1
    return None


__all__ = ["SK_PROMPT_FILE", "refuse_sk_prompt_file", "sk_format"]
