"""``needle init``, prompts built in code: the builder stub and fixture written for each site found.

A stub is a small Python file the user owns (``needle_builders/<name>.py``), written once, never
over an existing file. It is a start that runs as written where it can:

* for an SDK call or a request dict (:func:`request_stub`): a ``build(**fixture)`` returning the
  request the app sends, with the app's module-level literals (its system prompt, its tool list)
  read from the app's *source* by ``ast`` at build time, so the count follows the app's edits
  without importing it (its SDK, clients and keys are not needed to build a request);
* for a LangChain / LlamaIndex template (:func:`template_stub`): it imports the app's module and
  formats the template with the fixture's values (the library must be importable by the builders'
  Python: docs/config.md, "Prompts built in code");
* for a Semantic Kernel prompt (:func:`needle_action.scaffold.sk_prompts.sk_stub`): it reads the prompt file and renders
  SK's basic syntax (``{{$var}}``, ``<message role="...">`` turns).
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path, PurePosixPath

from needle_action.core.errors import ConfigError
from needle_action.scaffold.code import CodeSite

STUB_FOLDER = "needle_builders"

_READ_LITERAL = '''

def app_constant(name: str) -> Any:
    """The literal value {app} assigns to NAME at module level, read from its source with ast: the
    app is not imported (its SDK clients and keys are not needed to build the request)."""
    tree = ast.parse(APP.read_text(encoding="utf-8"))
    for stmt in tree.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
        value = getattr(stmt, "value", None)
        if value is not None and any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return literal(value)
    raise LookupError(f"{{APP.name}} assigns no literal {{name}}")


def literal(node: ast.expr) -> Any:
    """A literal, also "...".strip() or textwrap.dedent("...")."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("strip"):
        return getattr(literal(node.func.value), node.func.attr)()
    if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "dedent":
        return textwrap.dedent(literal(node.args[0]))
    if isinstance(node, ast.JoinedStr):  # an f-string: its run-time values stay as {{expression}}
        return "".join(
            str(v.value) if isinstance(v, ast.Constant) else "{{" + ast.unparse(getattr(v, "value", v)) + "}}"
            for v in node.values
        )
    return ast.literal_eval(node)
'''


def up_expression(stub_rel: str) -> str:
    """The expression of the threshold file's folder, from a stub at STUB_REL."""
    depth = len(PurePosixPath(stub_rel).parts) - 1
    return "Path(__file__).resolve()" + ".parent" * (depth + 1)


def _value(site: CodeSite, key: str, default: str) -> str:
    """The Python source of KEY's value in the stub's body."""
    if key in site.constants:
        return f"app_constant({site.constants[key]!r})"
    raw = site.keywords.get(key)
    if raw is None:
        return default
    try:  # a literal in the call itself, and nothing else: no expression of the app's is pasted
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return default
    return repr(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else default


def _system_line(site: CodeSite, key: str) -> str:
    value = _value(site, key, "")
    if site.kind == "prompt-constant" and site.variables:  # the app fills its {fields} with str.format
        value += ".format(**fields)"
    return f'        "system": {value},' if value else '        **({"system": SYSTEM} if SYSTEM else {}),'


def _passes(site: CodeSite) -> list[str]:
    """Comment lines: what the app passes for each key, as its source reads."""
    out = [f"#   {key}={value}"[:200] for key, value in site.keywords.items()]
    return ["# What the app passes (edit the build below to match):", *out] if out else []


def request_stub(site: CodeSite, stub_rel: str, model: str) -> str:
    """A builder returning the request SITE sends, for the fixture's ``question`` and ``context``."""
    body = [f'        "model": {_value(site, "model", json.dumps(model))},']
    if site.kind in ("anthropic", "prompt-constant"):
        body.append(f'        "max_tokens": {_value(site, "max_tokens", "1024")},')
        if "system" in site.keywords or "system" in site.constants:
            body.append(_system_line(site, "system"))
    if "tools" in site.keywords:
        tools = _value(site, "tools", "")
        body.append(
            f'        "tools": {tools},' if tools else '        **({"tools": TOOLS} if TOOLS else {}),'
        )
    turn = '{"role": "user", "content": user_turn}'
    if site.kind not in ("anthropic", "prompt-constant") and (
        {"instructions", "system"} & (set(site.keywords) | set(site.constants))
    ):
        key = "instructions" if "instructions" in site.keywords else "system"
        system = _value(site, key, "")
        turn = f'*([{{"role": "system", "content": SYSTEM}}] if SYSTEM else []), {turn}'
        if system:
            turn = f'{{"role": "system", "content": {system}}}, {turn.split("[]), ", 1)[1]}'
    if "messages" in site.constants:  # a module-level list of turns (a system turn, examples)
        turn = f"*app_constant({site.constants['messages']!r}), {turn}"
    body.append(f'        "messages": [{turn}],')
    params = ", ".join(site.variables) or "none"
    lines = [
        f'"""needle builder: the request {site.file}:{site.line} sends ({site.kind}).',
        "",
        "Written by `needle init` as a start: make it return what the app sends. needle calls",
        "build(**fixture) once per fixture (its keys are the keyword arguments) in a worker with no",
        "network and no secrets, and counts and probes the request it returns (docs/config.md).",
        "The app's call" + (f" in {site.function}({params})" if site.function else "") + ":",
        f"    {site.call}",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import ast",
        "import textwrap",
        "from pathlib import Path",
        "from typing import Any",
        "",
        f"APP = {up_expression(stub_rel)} / {site.file!r}",
        *_passes(site),
        'SYSTEM = ""  # TODO: the system prompt the app sends, if it is not a literal in its module',
        "TOOLS: list[dict[str, Any]] = []  # TODO: the tool schemas it sends, if not a literal there",
        _READ_LITERAL.format(app=site.file).rstrip("\n"),
        "",
        "",
        'def build(question: str, context: str = "", **fields: Any) -> dict[str, Any]:',
        '    """The request for one fixture: QUESTION asked over CONTEXT (retrieved text, notes...)."""',
        '    user_turn = f"{context}\\n\\n{question}" if context else question',
        "    return {",
        *body,
        "    }",
        "",
    ]
    return "\n".join(lines)


def _import_root(app: Path, config_dir: Path) -> Path:
    """The folder to import APP's module from: above its last package folder (``__init__.py``)."""
    folder = app.parent
    while folder != config_dir and (folder / "__init__.py").is_file() and is_below(folder.parent, config_dir):
        folder = folder.parent
    return folder


def is_below(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def template_stub(site: CodeSite, stub_rel: str, config_dir: Path) -> str:
    """A builder that imports the app's module and formats SITE's template with the fixture."""
    app = config_dir / site.file
    base = _import_root(app, config_dir)
    module = ".".join(app.relative_to(base).with_suffix("").parts)
    base_rel = base.relative_to(config_dir).as_posix()
    where = f"{up_expression(stub_rel)}" + (f" / {base_rel!r}" if base_rel != "." else "")
    if site.target:
        get = f"from {module} import {site.target} as TEMPLATE  # noqa: E402 - after the path is set"
    else:  # built inside a function: calling the app's function could do anything, so not here
        inside = f"inside {site.function}()" if site.function else "in an expression"
        get = (
            f"# TODO: the template is built {inside} at {site.file}:{site.line}: import it from {module}\n"
            "# once it is a module-level name, or build the same template here\n"
            "TEMPLATE: Any = None"
        )
    lines = [
        f'"""needle builder: the {site.kind} prompt template {site.file}:{site.line}, formatted with a fixture.',
        "",
        "Written by `needle init`. It imports the app's module, so the builders' Python must have the",
        f"app's packages ({site.kind} among them): a .venv beside needle.toml is used on its own, or set",
        "[files] builder_python (docs/config.md). needle calls build(**fixture) with each fixture's",
        "keys, in a worker with no network and no secrets.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import sys",
        "from pathlib import Path",
        "from typing import Any",
        "",
        f"sys.path.insert(0, str({where}))",
        get,
        "",
        'ROLES = {"human": "user", "ai": "assistant", "chatbot": "assistant", "model": "assistant"}',
        "",
        "",
        "def build(**values: Any) -> list[dict[str, Any]]:",
        '    """The template formatted with one fixture\'s VALUES, as the messages the app sends."""',
        "    if TEMPLATE is None:",
        f'        raise NotImplementedError("set TEMPLATE in this file to the template at {site.file}:{site.line}")',
        '    if hasattr(TEMPLATE, "format_messages"):',
        "        turns = []",
        "        for m in TEMPLATE.format_messages(**values):",
        '            role = getattr(m, "role", None)',
        '            role = getattr(role, "value", role) or getattr(m, "type", "user")',
        '            turns.append({"role": ROLES.get(role, role), "content": m.content})',
        "        return turns",
        '    return [{"role": "user", "content": TEMPLATE.format(**values)}]',
        "",
    ]
    return "\n".join(lines)


def write_new(path: Path, text: str, inside: Path) -> bool:
    """Write TEXT to PATH (under the folder INSIDE) unless something is there (a file, a folder, a
    symlink): never overwrite, never follow a link. True when written."""
    if os.path.lexists(path):
        return False
    for parent in path.parents:
        if is_below(parent, inside) and parent != inside and parent.is_symlink():
            raise ConfigError(f"{parent} is a symlink: needle init writes no file through one")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    return True


__all__ = ["STUB_FOLDER", "request_stub", "template_stub", "up_expression", "write_new"]
