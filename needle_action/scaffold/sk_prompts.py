"""``needle init``, Semantic Kernel prompts: ``skprompt.txt`` files and SK YAML prompt files, found
and given a builder stub that renders SK's basic syntax as SK does.

The stub (:func:`sk_stub`) reads the prompt file at build time (so it follows the file's edits)
and renders: ``{{$name}}`` (and handlebars' ``{{name}}``) from the fixture's values, ``{{#each}}``
over a list of the fixture (SK's chat history loop), a function
call ``{{plugin.function $arg}}`` from the fixture key named like the function (its output, as the
app's kernel would have produced it), and ``<message role="...">`` tags as the turns (text with no
tag is one user turn, as SK's chat prompts do). Anything else (handlebars blocks ``{{#each}}``)
stops with a message at the stub's line, for the user to finish.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from needle_action.assemble.templates.semantic_kernel import sk_format
from needle_action.scaffold.stubs import up_expression
from needle_action.scaffold.templates import walk
from needle_action.scaffold.tree import Tree

MAX_BYTES = 200_000
_VARS = re.compile(r"\{\{~?\s*\$?([A-Za-z_][\w]*)\s*~?\}\}")
_EACH = re.compile(r"\{\{~?\s*#each\s+\$?([A-Za-z_][\w]*)")
_EACH_BODY = re.compile(r"\{\{~?\s*#each.*?/each\s*~?\}\}", re.DOTALL)


@dataclass
class SkPrompt:
    path: Path
    rel: str
    what: str
    variables: list[str]
    lists: list[str]  # variables an {{#each}} loops over
    string: tuple[str | None, str] | None = None  # in a .py file: (function or None, the name)


def _template_text(path: Path, text: str) -> str:
    """The template of a YAML prompt file (its ``template:`` block), else the file's text."""
    if path.suffix.lower() not in (".yaml", ".yml", ".prompt"):
        return text
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    template = (data.get("template") or data.get("prompt")) if isinstance(data, dict) else None
    return template if isinstance(template, str) else text


def find_sk_prompts(root: Path, config_dir: Path, tree: Tree | None = None) -> list[SkPrompt]:
    """skprompt.txt files and SK YAML prompt files under ROOT; TREE: the listing of ROOT
    ``needle init`` made once."""
    out: list[SkPrompt] = []
    for path in walk(root, (".txt", ".yaml", ".yml", ".prompt"), tree):
        if path.suffix.lower() == ".txt" and path.name.lower() != "skprompt.txt":
            continue
        if not path.absolute().is_relative_to(config_dir):
            continue
        try:
            if path.is_symlink() or path.stat().st_size > MAX_BYTES:
                continue
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        found = sk_format(text, path.name)
        if found is None:
            continue
        template = _template_text(path, text)
        lists = list(dict.fromkeys(_EACH.findall(template)))
        names = list(dict.fromkeys([*_VARS.findall(_EACH_BODY.sub(" ", template)), *lists]))
        rel = path.absolute().relative_to(config_dir).as_posix()
        out.append(SkPrompt(path, rel, found[0], names, lists))
    return out


_STUB = """\"\"\"needle builder: the Semantic Kernel prompt {rel}, rendered as SK renders its basic syntax.

Written by `needle init`. It reads the prompt file on every build (so it follows its edits) and
renders: {{{{$name}}}} (and handlebars' {{{{name}}}}) from the fixture's values; {{{{#each name}}}}...
{{{{/each}}}} over a list in the fixture (inside, {{{{Field}}}} or {{{{this.Field}}}} reads each item, as
SK's chat history items Role and Content); a function call {{{{plugin.function $arg}}}} from the
fixture key named like the function ("plugin.function" or "function"): the text the app's kernel
would have put there; ~ trims whitespace; <message role="..."> tags are the turns (no tag: one user
turn). needle calls build(**fixture) in a worker with no network and no secrets.
\"\"\"

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

PROMPT = {where} / {rel!r}
STRING = {string!r}  # in a Python file: (the function, or None at module level; the name of the string)
TAG = re.compile(r"(\\s*)\\{{\\{{(~?)\\s*(.*?)\\s*(~?)\\}}\\}}(\\s*)", re.S)
EACH = re.compile(r"\\{{\\{{~?\\s*#each\\s+(\\S+?)\\s*~?\\}}\\}}(.*?)\\{{\\{{~?\\s*/each\\s*~?\\}}\\}}", re.S)
MESSAGE = re.compile(r"<message\\s+role=[\\"']([a-zA-Z]+)[\\"']\\s*>(.*?)</message>", re.S)


def python_string(source: str, function: str | None, name: str) -> str:
    \"\"\"The string NAME is assigned (in FUNCTION, or at module level), read with ast: not imported.\"\"\"
    import ast
    import textwrap

    tree = ast.parse(source)
    scopes: list[ast.AST] = [tree]
    if function:  # "Class.method" or "function"
        owner, _, method = function.rpartition(".")
        within = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == owner] if owner else [tree]
        scopes = [
            n
            for c in within
            for n in (ast.iter_child_nodes(c) if owner else ast.walk(c))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == method
        ]
    for scope in scopes:
        for node in ast.walk(scope) if function else tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                value = node.value
                if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):  # "...".strip()
                    return str(getattr(ast.literal_eval(value.func.value), value.func.attr)())
                if isinstance(value, ast.Call):  # textwrap.dedent("...")
                    return textwrap.dedent(ast.literal_eval(value.args[0]))
                return str(ast.literal_eval(value))
    raise LookupError(f"{{PROMPT.name}} assigns no string {{name}}" + (f" in {{function}}()" if function else ""))


def template_text() -> str:
    text = PROMPT.read_text(encoding="utf-8")
    if STRING is not None:
        return python_string(text, *STRING)
    if PROMPT.suffix.lower() in (".yaml", ".yml", ".prompt"):
        import yaml  # a YAML prompt file: its `template:` (PyYAML must be importable by the builders)

        data = yaml.safe_load(text)
        text = data.get("template") or data["prompt"]
    return str(text)


def lookup(name: str, values: dict[str, Any], item: Any = None) -> Any:
    \"\"\"NAME's value: a field of the current #each ITEM (any case of its first letter), else the fixture's.\"\"\"
    name = name.lstrip("$")
    if item is not None:
        if name == "this":
            return item
        key = name.removeprefix("this.")
        if isinstance(item, dict):
            for k in (key, key[:1].lower() + key[1:], key[:1].upper() + key[1:]):
                if k in item:
                    return item[k]
    if name in values:
        return values[name]
    raise KeyError(f"{{PROMPT.name}} reads {{name}}, which the fixture does not define")


def fill(tag: str, values: dict[str, Any], item: Any) -> str:
    \"\"\"One {{{{...}}}} tag's text: a variable's value, or a function call's output from the fixture.\"\"\"
    words = tag.split()
    if len(words) == 1 and words[0].lstrip("$").replace(".", "_").isidentifier():
        return html.escape(str(lookup(words[0], values, item)), quote=False)
    function = words[0]
    for key in (function, function.rpartition(".")[2]):
        if key in values:
            return html.escape(str(values[key]), quote=False)
    raise NotImplementedError(
        f"{{PROMPT.name}} has {{tag!r}}: give the fixture a key {{function!r}} holding the text it "
        "returns, or render this part here"
    )


def render(text: str, values: dict[str, Any], item: Any = None) -> str:
    def tag(m: re.Match[str]) -> str:
        before, trim_left, body, trim_right, after = m.groups()
        return ("" if trim_left else before) + fill(body, values, item) + ("" if trim_right else after)

    return TAG.sub(tag, text)


def build(**values: Any) -> list[dict[str, str]]:
    \"\"\"The prompt rendered with one fixture's VALUES, as the messages the app sends.\"\"\"
    text = EACH.sub(lambda m: "".join(render(m.group(2), values, it) for it in lookup(m.group(1), values)), template_text())
    text = render(text, values)
    turns = [{{"role": role.lower(), "content": html.unescape(body.strip())}} for role, body in MESSAGE.findall(text)]
    if not turns:
        turns = [{{"role": "user", "content": html.unescape(text.strip())}}]
    return turns
"""


def sk_stub(prompt: SkPrompt, stub_rel: str) -> str:
    """The builder stub that renders PROMPT (written at STUB_REL)."""
    return _STUB.format(rel=prompt.rel, where=up_expression(stub_rel), string=prompt.string)


__all__ = ["SkPrompt", "find_sk_prompts", "sk_stub"]
