"""``needle init``, prompts built in code: where a repository's Python builds its LLM requests.

Read with :mod:`ast` only: the user's code is never imported nor run here. Three shapes are found:

* **SDK calls**: ``client.messages.create(...)`` (Anthropic), ``client.chat.completions.create(...)``
  and ``client.responses.create(...)`` (OpenAI), ``.stream``/``.parse`` alike;
* **request dicts**: a dict literal with ``"model"`` and ``"messages"`` keys (an HTTP client's body);
* **Semantic Kernel prompts in code**: a string with SK syntax passed by name to
  ``create_semantic_function``, ``add_function(prompt=...)``, ``invoke_prompt``...;
* **prompt constants**: a module-level string of 200 characters or more whose name says prompt,
  instructions or system (an agent framework's system prompt), when no call found uses it;
* **prompt templates** of LangChain and LlamaIndex: ``ChatPromptTemplate.from_messages([...])``,
  ``ChatPromptTemplate.from_template("...")``, ``PromptTemplate("...")``,
  ``PromptTemplate.from_template("...")``, ``PromptTemplate(template="...")``, with the
  ``{variables}`` of their string literals.

Each is a :class:`CodeSite`; :mod:`.stubs` writes the builder that starts from it.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from needle_action.scaffold.tree import SKIP_DIRS as TREE_SKIP_DIRS
from needle_action.scaffold.tree import Tree, listing

MAX_FILE_BYTES = 1_000_000
MAX_FILES = 5_000
# the shared walk's skips, and build output (build/, dist/), which only the code search leaves out
SKIP_DIRS = TREE_SKIP_DIRS | {"build", "dist"}

# the end of a call's attribute chain -> the API it sends to
SDK_CALLS = {
    ("messages", "create"): "anthropic",
    ("messages", "stream"): "anthropic",
    ("messages", "count_tokens"): "",  # counts, sends nothing
    ("completions", "create"): "openai-chat",
    ("completions", "parse"): "openai-chat",
    ("completions", "stream"): "openai-chat",
    ("responses", "create"): "openai-responses",
    ("responses", "parse"): "openai-responses",
    ("responses", "stream"): "openai-responses",
}
# `client.messages.with_raw_response.create(...)` sends the same request
_RESPONSE_WRAPPERS = {"with_raw_response", "with_streaming_response"}
TEMPLATE_CLASSES = {"ChatPromptTemplate", "PromptTemplate", "RichPromptTemplate"}
TEMPLATE_METHODS = {"from_messages", "from_template", None}  # None: the constructor itself
# Semantic Kernel functions made from a prompt string (the string holds SK's template syntax)
SK_FUNCTIONS = {
    "create_semantic_function",
    "create_function_from_prompt",
    "add_function",
    "invoke_prompt",
    "KernelFunctionFromPrompt",
    "PromptTemplateConfig",
}
_SK_VARS = re.compile(r"\{\{~?\s*\$?([A-Za-z_]\w*)\s*~?\}\}")
_SK_EACH = re.compile(r"\{\{~?\s*#each\s+\$?([A-Za-z_]\w*)")
# a module-level string that is a prompt: an agent's system prompt kept in a constant
_PROMPT_NAME = re.compile(r"prompt|instruction|system", re.IGNORECASE)
MIN_PROMPT_CHARS = 200
_FIELD = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})")


@dataclass
class CodeSite:
    """One place the code builds a request or a prompt template."""

    file: str  # relative to the threshold file's folder, posix
    line: int
    kind: str  # anthropic | openai-chat | openai-responses | request-dict | langchain | llama_index
    function: str | None = None  # the enclosing function, if any
    target: str | None = None  # a template assigned at module level: its name
    call: str = ""  # the call's source, one line, shortened
    keywords: dict[str, str] = field(default_factory=dict)  # keyword -> source of its value
    constants: dict[str, str] = field(default_factory=dict)  # keyword -> module-level literal it names
    variables: list[str] = field(default_factory=list)  # template fields, or the function's parameters
    lists: list[str] = field(default_factory=list)  # template variables that hold turns (placeholders)

    @property
    def is_template(self) -> bool:
        return self.kind in ("langchain", "llama_index")

    @property
    def is_sk(self) -> bool:
        return self.kind == "semantic-kernel"


def python_files(root: Path, tree: Tree | None = None) -> list[Path]:
    """The ``.py`` files under ROOT, in the walk's order, outside SKIP_DIRS and hidden folders: no
    symlinked file, and at most MAX_FILES of them. From TREE, the listing ``needle init`` made
    once, else from a walk of ROOT made now."""
    return listing(root, tree).files((".py",), SKIP_DIRS, exact=True, links=False, limit=MAX_FILES)


def _chain(node: ast.AST) -> list[str]:
    """``client.chat.completions.create`` -> ["client", "chat", "completions", "create"]."""
    out: list[str] = []
    while isinstance(node, ast.Attribute):
        out.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        out.append(node.id)
    elif isinstance(node, ast.Call):
        out += _chain(node.func)
    return out[::-1]


def fstring_text(node: ast.JoinedStr) -> str:
    """An f-string's text with each run-time value as ``{its expression}`` (``{date.today()}``)."""
    parts = []
    for v in node.values:
        if isinstance(v, ast.Constant):
            parts.append(str(v.value))
        elif isinstance(v, ast.FormattedValue):
            parts.append("{" + ast.unparse(v.value) + "}")
    return "".join(parts)


def string_value(node: ast.expr) -> str | None:
    """A string literal's value, also written ``"...".strip()`` or ``textwrap.dedent("...")``
    (how prompts are kept in constants); None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):  # an f-string: its run-time values stay as {expression}
        return fstring_text(node)
    if isinstance(node, ast.Call) and not node.keywords:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("strip", "lstrip", "rstrip") and not node.args:
            inner = string_value(func.value)
            return None if inner is None else str(getattr(inner, func.attr)())
        if _chain(func)[-1:] == ["dedent"] and len(node.args) == 1:
            inner = string_value(node.args[0])
            return None if inner is None else textwrap.dedent(inner)
    return None


def _module_strings(tree: ast.Module) -> dict[str, str]:
    """Module-level names bound to a string (a template's text kept apart from the template)."""
    out: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            text = string_value(stmt.value)
            if text is not None:
                out[stmt.targets[0].id] = text
    return out


def _literal_names(tree: ast.Module) -> set[str]:
    """Module-level names bound to a literal value (a string, a list of tool dicts...)."""
    names: set[str] = set()
    for stmt in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        if value is None:
            continue
        if string_value(value) is not None:
            names.update(t.id for t in targets if isinstance(t, ast.Name))
            continue
        try:
            ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _framework(tree: ast.Module) -> str | None:
    """Which prompt-template library the module imports, if any."""
    for node in ast.walk(tree):
        mods: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            mods = [node.module]
        elif isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        for m in mods:
            if m.startswith("llama_index"):
                return "llama_index"
            if m.startswith("langchain"):
                return "langchain"
    return None


def _fields(node: ast.AST) -> list[str]:
    """``{name}`` fields of every string literal under NODE, in order, once each."""
    out: list[str] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            out += [m for m in _FIELD.findall(sub.value) if m not in out]
    return out


def _placeholders(node: ast.AST) -> list[str]:
    """Variables a template fills with turns: ``MessagesPlaceholder("history")`` and
    ``("placeholder", "{history}")``."""
    out: list[str] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and _chain(sub.func)[-1:] == ["MessagesPlaceholder"]:
            args = [*sub.args[:1], *(k.value for k in sub.keywords if k.arg == "variable_name")]
            out += [a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        elif isinstance(sub, ast.Tuple) and len(sub.elts) == 2:
            role, text = sub.elts
            if (
                isinstance(role, ast.Constant)
                and role.value == "placeholder"
                and isinstance(text, ast.Constant)
            ):
                out += _FIELD.findall(str(text.value))
    return list(dict.fromkeys(out))


def _one_line(source: str, node: ast.AST, limit: int = 160) -> str:
    text = " ".join((ast.get_source_segment(source, node) or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Finder(ast.NodeVisitor):
    def __init__(self, rel: str, source: str, tree: ast.Module) -> None:
        self.rel, self.source = rel, source
        self.constants = _literal_names(tree)
        self.strings = _module_strings(tree)
        self.values = {
            st.targets[0].id: st.value
            for st in tree.body
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
        }
        self.framework = _framework(tree)
        self.function: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        self.classes: list[str] = []
        self.assigned: str | None = None
        self.sites: list[CodeSite] = []

    def visit_ClassDef(self, node: ast.ClassDef) -> None:  # noqa: N802
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def _qualified(self) -> str | None:
        """The enclosing function, as ``Class.method`` inside a class."""
        if not self.function:
            return None
        name = self.function[-1].name
        return f"{self.classes[-1]}.{name}" if self.classes and len(self.function) == 1 else name

    def _enter(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.function.append(node)
        self.generic_visit(node)
        self.function.pop()

    visit_FunctionDef = _enter
    visit_AsyncFunctionDef = _enter

    def visit_Assign(self, node: ast.Assign) -> None:  # noqa: N802
        top = not self.function and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        self.assigned = node.targets[0].id if top and isinstance(node.targets[0], ast.Name) else None
        value = node.value
        if (
            self.assigned
            and _PROMPT_NAME.search(self.assigned)
            and len(string_value(value) or "") >= MIN_PROMPT_CHARS
        ):
            site = self._site(node, "prompt-constant")
            site.target, site.constants = self.assigned, {"system": self.assigned}
            if not isinstance(value, ast.JoinedStr):  # an f-string has no str.format fields left
                site.variables = _FIELD.findall(string_value(value) or "")
            site.call = f"{self.assigned} = ... ({len(string_value(value) or ''):,} characters)"
            self.sites.append(site)
        self.generic_visit(node)
        self.assigned = None

    def _site(self, node: ast.AST, kind: str) -> CodeSite:
        func = self.function[-1] if self.function else None
        params = (
            [a.arg for a in func.args.args + func.args.kwonlyargs if a.arg not in ("self", "cls")]
            if func
            else []
        )
        return CodeSite(
            self.rel,
            getattr(node, "lineno", 1),
            kind,
            function=func.name if func else None,
            call=_one_line(self.source, node),
            variables=params,
        )

    def visit_Call(self, node: ast.Call) -> None:  # noqa: N802
        chain = [c for c in _chain(node.func) if c not in _RESPONSE_WRAPPERS]
        kind = SDK_CALLS.get((chain[-2], chain[-1])) if len(chain) >= 2 else None
        if kind and "threads" in chain:  # the Assistants API adds a message to a thread: no request
            kind = None
        if kind:
            site = self._site(node, kind)
            for kw in node.keywords:
                if kw.arg is not None:
                    self._keyword(site, kw.arg, kw.value)
            system = self._system_turn(node)
            if system and "system" not in site.constants:
                site.constants["system"] = system
            self.sites.append(site)
        elif chain[-1:] and chain[-1] in SK_FUNCTIONS and self._sk_prompt(node):
            return
        elif self._is_template(chain):
            site = self._site(node, self.framework or "langchain")
            site.target, site.lists = self.assigned, _placeholders(node)
            named = [n for n in self._names_under(node) if n in self.strings]
            site.constants = {f"template{i}": name for i, name in enumerate(named)}  # strings it wraps
            fields = [f for name in named for f in _FIELD.findall(self.strings[name])]
            site.variables = list(dict.fromkeys([*_fields(node), *fields, *site.lists]))
            self.sites.append(site)
            return  # a template nested in a template is part of it
        self.generic_visit(node)

    def _sk_prompt(self, call: ast.Call) -> bool:
        """A Semantic Kernel prompt passed to the kernel by name (``create_semantic_function(
        prompt_template)``, ``add_function(prompt=...)``): a site when the string holds SK syntax."""
        args = [
            *call.args[:1],
            *(k.value for k in call.keywords if k.arg in ("prompt", "template", "prompt_template")),
        ]
        for arg in args:
            if not isinstance(arg, ast.Name):
                continue
            text = self._local_string(arg.id) if self.function else None
            scope = self._qualified() if text is not None else None
            text = text if text is not None else self.strings.get(arg.id)
            if text is None or "{{" not in text:
                continue
            site = self._site(call, "semantic-kernel")
            site.target, site.function = arg.id, scope
            site.lists = list(dict.fromkeys(_SK_EACH.findall(text)))
            site.variables = list(dict.fromkeys([*_SK_VARS.findall(text), *site.lists]))
            self.sites.append(site)
            return True
        return False

    def _local_string(self, name: str) -> str | None:
        """The string NAME is assigned in the enclosing function."""
        for node in ast.walk(self.function[-1]):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets
            ):
                return string_value(node.value)
        return None

    def _names_under(self, node: ast.AST, depth: int = 0) -> list[str]:
        """Module-level names NODE reads, and those their values read (a template built from a
        list of messages built from a string), a few levels deep."""
        out: list[str] = []
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in self.values and sub.id not in out:
                out.append(sub.id)
                if depth < 3:
                    out += [n for n in self._names_under(self.values[sub.id], depth + 1) if n not in out]
        return out

    def _keyword(self, site: CodeSite, key: str, value: ast.expr) -> None:
        site.keywords[key] = _one_line(self.source, value, 400)
        if isinstance(value, ast.Name) and value.id in self.constants:
            site.constants[key] = value.id

    def _system_turn(self, call: ast.Call) -> str | None:
        """The module-level constant a ``{"role": "system", "content": NAME}`` turn of the call's
        ``messages`` (or ``input``) list holds."""
        for kw in call.keywords:
            if kw.arg not in ("messages", "input") or not isinstance(kw.value, ast.List):
                continue
            for item in kw.value.elts:
                if not isinstance(item, ast.Dict):
                    continue
                pairs = {
                    k.value: v
                    for k, v in zip(item.keys, item.values, strict=True)
                    if isinstance(k, ast.Constant)
                }
                role, content = pairs.get("role"), pairs.get("content")
                if (
                    isinstance(role, ast.Constant)
                    and role.value in ("system", "developer")
                    and isinstance(content, ast.Name)
                    and content.id in self.constants
                ):
                    return content.id
        return None

    def _is_template(self, chain: list[str]) -> bool:
        if not chain or self.framework is None:
            return False
        if chain[-1] in TEMPLATE_CLASSES:
            return True
        if self.framework == "llama_index" and chain[-1].endswith("Prompt") and chain[-1][:1].isupper():
            return True  # its older classes: QuestionAnswerPrompt, RefinePrompt, SummaryPrompt...
        return len(chain) >= 2 and chain[-2] in TEMPLATE_CLASSES and chain[-1] in TEMPLATE_METHODS

    def visit_Dict(self, node: ast.Dict) -> None:  # noqa: N802
        keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        if {"model", "messages"} <= keys:
            site = self._site(node, "request-dict")
            for k, v in zip(node.keys, node.values, strict=True):
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    self._keyword(site, k.value, v)
            self.sites.append(site)
        self.generic_visit(node)


def find_sites(root: Path, config_dir: Path, tree: Tree | None = None) -> list[CodeSite]:
    """Every place under ROOT whose code builds a request or a prompt template (ast only); TREE:
    the listing of ROOT ``needle init`` made once."""
    sites: list[CodeSite] = []
    for path in python_files(root, tree):
        if not path.absolute().is_relative_to(config_dir):
            continue  # paths in needle.toml are relative to its folder
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            source = path.read_text(encoding="utf-8")
            module = ast.parse(source, filename=path.name)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # not Python this interpreter reads: nothing to find
        rel = path.absolute().relative_to(config_dir).as_posix()
        finder = _Finder(rel, source, module)
        try:
            finder.visit(module)
        except RecursionError:
            continue
        sites += [s for s in finder.sites if s.kind]
    return _ranked(sites)


def _merge_spread_calls(sites: list[CodeSite]) -> None:
    """An SDK call made with ``**params`` only, in a file that builds a request dict elsewhere (a
    ``_prepare_params`` method): the call takes the dict's keys, and the dict is not listed again."""
    for call in [s for s in sites if s.kind in SDK_CALLS.values() and not s.keywords]:
        body = next((s for s in sites if s.kind == "request-dict" and s.file == call.file), None)
        if body is not None:
            call.keywords, call.constants = dict(body.keywords), dict(body.constants)
            call.call += f"  (the body built at line {body.line})"
            sites.remove(body)


def _ranked(sites: list[CodeSite]) -> list[CodeSite]:
    """SDK calls first (they are what is sent), then templates, then request dicts; code under
    tests/ last; one site per (file, function, kind)."""
    order = {"anthropic": 0, "openai-chat": 0, "openai-responses": 0, "langchain": 1, "llama_index": 1}
    order["semantic-kernel"] = 1
    order["prompt-constant"] = 3
    used = {(s.file, name) for s in sites for name in s.constants.values() if s.kind != "prompt-constant"}
    sites = [s for s in sites if not (s.kind == "prompt-constant" and (s.file, s.target) in used)]

    def key(s: CodeSite) -> tuple[Any, ...]:
        in_tests = any(part in ("tests", "test") for part in s.file.split("/")[:-1])
        local = s.is_template and s.target is None  # built inside a function: the stub cannot import it
        return (in_tests, order.get(s.kind, 2) + local, s.file, s.line)

    seen: set[tuple[str, str | None, str, str | None, int]] = set()
    _merge_spread_calls(sites)
    sdk = {(s.file, s.function) for s in sites if s.kind in SDK_CALLS.values()}
    out: list[CodeSite] = []
    for s in sorted(sites, key=key):
        k = (s.file, s.function, s.kind, s.target, s.line if s.is_sk or s.is_template else 0)
        if s.kind == "request-dict" and (s.file, s.function) in sdk:
            continue  # the body of the SDK call found there
        if k not in seen:
            seen.add(k)
            out.append(s)
    return out


__all__ = ["CodeSite", "find_sites", "python_files"]
