"""``needle init``, the search: the repository's prompt templates, their fixtures, tools and variables.

The starter is a guess a human finishes: fixtures found next to a template or in ``fixtures/``
folders with a matching name, the context/question variables guessed from the names the template
reads, budgets left as commented suggestions. Whatever it writes must load with ``load_config``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from needle_action.assemble.render import referenced_templates, render_case, undeclared_variables
from needle_action.assemble.templates.fixtures import load_fixture
from needle_action.assemble.templates.prompty import split_prompty
from needle_action.assemble.templates.roles import split_sections
from needle_action.assemble.templates.sandbox import environment_for
from needle_action.assemble.templates.sk_jinja import sk_as_jinja
from needle_action.config.cases import case_ref, is_case_file, read_cases
from needle_action.config.model import Config, PromptConfig, PromptSettings
from needle_action.core.errors import NeedleError
from needle_action.core.names import ProviderName
from needle_action.core.paths import is_inside
from needle_action.core.workspace import Workspace
from needle_action.request.toolformats import load_tools
from needle_action.scaffold.tree import Tree, listing

RENDERS_NOT = "does not render yet"  # how a template's NOTE starts when its render failed
TEMPLATE_SUFFIXES = (".j2", ".jinja", ".jinja2", ".prompty", ".prompt")
FIXTURE_DIR_NAMES = ("fixtures", "fixture", "samples", "testdata", "test_data")

# Variable names that usually hold the haystack: retrieved text first, then the conversation (an
# app that has both, a RAG chat, is probed where its retrieved documents sit, not in its history).
RETRIEVAL_NAMES = (
    "documents",
    "docs",
    "document",
    "context",
    "contexts",
    "chunks",
    "passages",
    "sources",
    "retrieved",
    "results",
    "knowledge",
    "notes",
)
CONVERSATION_NAMES = ("history", "messages", "conversation", "turns", "transcript")
CONTEXT_NAMES = RETRIEVAL_NAMES + CONVERSATION_NAMES
QUESTION_NAMES = (
    "question",
    "query",
    "user_question",
    "user_query",
    "input",
    "user_input",
    "user_message",
    "message",
    "ask",
    "request",
    "prompt",
)


@dataclass
class FoundTemplate:
    path: Path
    rel: str  # relative to the threshold file's folder, posix
    name: str
    fixtures: list[str] = field(default_factory=list)
    variables: list[str] = field(default_factory=list)
    context_var: str | None = None
    question_var: str | None = None
    problem: str | None = None
    has_sample: bool = False  # a .prompty sample / a .prompt input.default renders without a fixture
    rough_chars: int | None = None
    gold_fixture: str | None = None  # the first fixture that names its answer (`expected`)
    tools: str | None = None  # a *tools*.json next to it: its tool schemas, not a fixture
    tools_declared: str | None = None  # the tools file its own front matter names (.prompty)
    # the provider its own front matter names (.prompty), if needle has it
    provider: ProviderName | None = None
    model: str | None = None  # ... and the model (an Azure deployment), when written out, not ${env:...}

    @property
    def renders_not(self) -> bool:
        """Its render with its first fixture failed (:func:`_estimate` wrote why)."""
        return bool(self.problem and self.problem.startswith(RENDERS_NOT))


def walk(root: Path, suffixes: tuple[str, ...], tree: Tree | None = None) -> list[Path]:
    """The files under ROOT whose suffix, in any case, is one of SUFFIXES, in the walk's order
    (hidden folders and ``tree.SKIP_DIRS`` left out): from TREE, the listing ``needle init`` made once,
    else from a walk of ROOT made now."""
    return listing(root, tree).files(suffixes)


# Words that mark a variable as holding media or references rather than text a model reads
# (`image_sources` beside `text_sources`): such names lose to text-like ones.
MEDIA_WORDS = ("image", "img", "picture", "photo", "figure", "screenshot", "audio", "video", "url", "path")
TEXT_WORDS = ("text", "content", "doc", "passage", "chunk", "body")


# a switch, not a slot: `include_follow_up_questions` (Azure's search demo) holds no question
_FLAG = re.compile(r"^(?:include|use|is|has|enable|disable|show|suggest|with|allow)_", re.IGNORECASE)


def _text_rank(name: str) -> int:
    low = name.lower()
    if any(w in low for w in MEDIA_WORDS):
        return 2
    return 0 if any(w in low for w in TEXT_WORDS) else 1


def _contains(variable: str, name: str) -> bool:
    """NAME inside VARIABLE; a short name (``ask``, ``docs``) only as a whole word of it (``user_ask``,
    not ``task``)."""
    if len(name) > 4:
        return name in variable
    return re.search(rf"(?:^|_){re.escape(name)}(?:_|$)", variable) is not None


def guess_var(
    variables: set[str] | list[str], names: tuple[str, ...], exclude: str | None = None
) -> str | None:
    """Exact known names first (in priority order), then names containing one of them, text-like
    names before plain ones and media names (images, urls) last."""
    pool = [v for v in sorted(variables) if v != exclude and not _FLAG.match(v)]
    for n in names:
        if n in pool:
            return n
    for n in names:
        hits = sorted((v for v in pool if _contains(v.lower(), n)), key=_text_rank)
        if hits:
            return hits[0]
    return None


def guess_context(variables: set[str] | list[str]) -> str | None:
    """The variable that most likely holds the haystack: a retrieval name before a conversation's."""
    return guess_var(variables, RETRIEVAL_NAMES) or guess_var(variables, CONVERSATION_NAMES)


def _fixture_candidates(template: Path, config_dir: Path, fixture_files: list[Path]) -> list[str]:
    stem = template.name.split(".")[0]
    keys = {stem.lower(), stem.lower().replace("-", "_")}

    def matches(p: Path) -> bool:
        if p == template:  # a YAML prompt file is no fixture of itself
            return False
        fstem = p.name.split(".")[0].lower().replace("-", "_")
        if p.name == "needle.toml" or p.name == "pyproject.toml":
            return False
        in_fixture_dir = any(
            part.lower() in FIXTURE_DIR_NAMES for part in p.relative_to(config_dir).parts[:-1]
        )
        named = any(fstem == k or fstem.startswith(k + "_") or fstem.startswith(k + "-") for k in keys)
        if p.parent == template.parent and named:
            return True
        return in_fixture_dir and (named or p.parent.name.lower().replace("-", "_") in keys)

    return [p.relative_to(config_dir).as_posix() for p in fixture_files if matches(p)]


# a text format written before the template's own extension (``system.txt.j2``): not part of the name
_INNER_SUFFIX = re.compile(r"\.(?:txt|md|xml|html)$", re.IGNORECASE)


def prompt_name(template: Path, taken: set[str]) -> str:
    # every dot of the stem stays a word: Genkit's variants (``hello.history.prompt``) and a
    # system/user pair (``chat_answer.system.jinja2``) are different prompts
    stem = _INNER_SUFFIX.sub("", template.name[: -len(template.suffix)] if template.suffix else template.name)
    if template.name.lower() == "skprompt.txt":  # Semantic Kernel: the function is the folder's name
        stem = template.parent.name.lower()
    base = re.sub(r"[^A-Za-z0-9_-]+", "_", stem).strip("_-") or "prompt"
    if not base[0].isalnum():
        base = "p" + base
    name, n = base, 2
    if name in taken:
        name = (
            f"{re.sub(r'[^A-Za-z0-9_-]+', '_', template.parent.name).strip('_-')}_{base}".strip("_") or base
        )
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def _inspect(found: FoundTemplate, config_dir: Path) -> None:
    """Fill variables/guesses (and a rough rendered size) from the template itself."""
    env = environment_for(Workspace(config_dir))
    try:
        text = found.path.read_text(encoding="utf-8")
        if found.path.suffix.lower() == ".prompt":  # Dotprompt: Handlebars, variables from its schema
            from needle_action.assemble.templates.dotprompt import template_variables

            names, found.has_sample = template_variables(text, found.rel)
            _guess(found, names)
            return
        if found.path.suffix.lower() == ".prompty":
            prompty = split_prompty(text, found.rel)
            text = prompty.body
            found.has_sample = bool(prompty.front.get("sample") or prompty.front.get("inputs"))
            found.provider, found.model = declared_model(prompty.front)
        else:  # Semantic Kernel's formats are read as the Jinja they render as
            text = sk_as_jinja(text, found.rel, found.path.name)
        _guess(found, undeclared_variables(env, text), text, found.path.suffix.lower() == ".prompty")
    except NeedleError as exc:
        found.problem = exc.message
    except Exception as exc:  # noqa: BLE001 - a broken template must not stop init
        found.problem = f"{type(exc).__name__}: {getattr(exc, 'message', exc)}"


_EXPR = re.compile(r"\{\{-?\s*([A-Za-z_]\w*)|\{%-?\s*for\s+[\w\s,]+?\s+in\s+([A-Za-z_]\w*)")
_TAGS = re.compile(r"\{#.*?#\}|\{%.*?%\}|\{\{.*?\}\}", re.DOTALL)


def printed(text: str) -> list[str]:
    """The variables TEXT prints or loops over, in order of first appearance."""
    return list(dict.fromkeys(a or b for a, b in _EXPR.findall(text)))


def pass_through(text: str, variables: set[str]) -> str | None:
    """The variable a template only passes through (``{{prompt_text}}`` and no text of its own,
    role markers aside): the app writes that prompt in code, so it holds no question slot."""
    names = [v for v in printed(text) if v in variables]
    if len(names) != 1:
        return None
    rest = _TAGS.sub(" ", text)
    rest = re.sub(r"(?im)^\s*#?\s*(system|user|assistant|human|ai)\s*:?\s*$", " ", rest)
    return names[0] if not re.search(r"\w", rest) else None


# a .prompty's provider (``model.configuration.type``; Prompty 2: ``model.provider``) -> needle's
PROMPTY_PROVIDERS: dict[str, ProviderName] = {
    "azure_openai": "azure",
    "azure": "azure",
    "openai": "openai",
    "anthropic": "anthropic",
}
# the keys naming the model, in the order Prompty reads them (Prompty 2: ``model.id``)
PROMPTY_MODEL_KEYS = ("azure_deployment", "model", "name", "id")


def declared_model(front: dict[str, Any]) -> tuple[ProviderName | None, str | None]:
    """(the provider, the model) a ``.prompty``'s front matter names: an Azure OpenAI template is
    measured on Azure, where its requests go (a system-only template is a valid request there, not on
    the Messages API). The model only when it is written out: a placeholder (``${env:...}``,
    ``<your-deployment>``) is the application's to fill at run time."""
    model = front.get("model")
    if not isinstance(model, dict):
        return None, None
    configuration = model.get("configuration")
    source = configuration if isinstance(configuration, dict) else model
    kind = source.get("type") if source is configuration else model.get("provider")
    provider = PROMPTY_PROVIDERS.get(kind.lower()) if isinstance(kind, str) else None
    if provider is None:
        return None, None
    names = (source.get(key) for key in PROMPTY_MODEL_KEYS)
    name = next((n.strip() for n in names if isinstance(n, str) and n.strip()), None)
    written = name is not None and re.fullmatch(r"[A-Za-z0-9][\w.:@/-]*", name) is not None
    return provider, name if written else None


def last_user_turn(text: str, prompty: bool) -> str:
    """The text of the template's last user turn (the whole text when it marks no roles)."""
    try:
        sections = split_sections(text, prompty=prompty)
    except Exception:  # noqa: BLE001 - a guess: a template it cannot split is one turn
        return text
    users = [sec.content for sec in sections if sec.role == "user"]
    return users[-1] if users else text


def _by_position(candidates: list[str], turn: list[str]) -> str | None:
    """Among CANDIDATES (in name order), the first printed in the last user turn, else the first."""
    for name in candidates:
        if name in turn:
            return name
    return candidates[0] if candidates else None


def _guess(found: FoundTemplate, variables: set[str], text: str = "", prompty: bool = False) -> None:
    """The context and question variables, from the names the template reads and where it prints
    them: a question variable printed in the last user turn wins over one printed elsewhere, and a
    template that only passes one variable through gets neither."""
    found.variables = sorted(variables)
    through = pass_through(text, variables) if text else None
    if through is not None:
        found.problem = (
            f"the template only prints {{{{ {through} }}}}: the prompt's text is written in code, so it "
            "has no question slot of its own; measure the code that builds it with a builder "
            '(`builder = "file.py:function"`) or a recorded request (`request = "x.json"`)'
        )
        return
    found.context_var = guess_context(variables)
    turn = printed(last_user_turn(text, prompty)) if text else []
    pool = [v for v in variables if v != found.context_var]
    ranked = [v for v in (guess_var(pool, (n,)) for n in QUESTION_NAMES) if v is not None]
    found.question_var = _by_position(list(dict.fromkeys(ranked)), turn)
    if found.question_var is None and turn:  # no known name: the last variable the user turn prints
        rest = [v for v in turn if v in pool and not _FLAG.match(v)]
        found.question_var = rest[-1] if rest else None


def included_templates(templates: list[Path], config_dir: Path) -> set[Path]:
    """Templates that other templates include/import/extend: building blocks, not prompts.
    Dotprompt partials are ``_name.prompt`` files, by that format's own convention."""
    env = environment_for(Workspace(config_dir))
    out: set[Path] = {
        t.resolve() for t in templates if t.suffix.lower() == ".prompt" and t.name.startswith("_")
    }
    for t in templates:
        if t.suffix.lower() == ".prompt":
            continue
        try:
            refs = referenced_templates(env, t.read_text(encoding="utf-8"))
        except Exception:  # noqa: BLE001, S112 - a template that does not parse refers to nothing
            continue
        for ref in refs:
            for candidate in (t.parent / ref, config_dir / ref):
                if candidate.is_file():
                    out.add(candidate.resolve())
    return out


def _is_tool_list(path: Path) -> bool:
    try:
        load_tools(path)
    except NeedleError:
        return False
    return True


def _declared_tools(found: FoundTemplate, config_dir: Path) -> None:
    """The tools file a ``.prompty`` names in ``model.parameters.tools: ${file:...}``."""
    if found.path.suffix.lower() != ".prompty":
        return
    try:
        front = split_prompty(found.path.read_text(encoding="utf-8"), found.rel).front
    except (NeedleError, OSError, UnicodeDecodeError):
        return
    model = front.get("model")
    params = model.get("parameters") if isinstance(model, dict) else None
    ref = params.get("tools") if isinstance(params, dict) else None
    m = re.fullmatch(r"\s*\$\{file:(.+)\}\s*", ref) if isinstance(ref, str) else None
    if m:
        target = (found.path.parent / m.group(1).strip()).absolute()
        if is_inside(config_dir, target):
            found.tools_declared = target.relative_to(config_dir).as_posix()


def _split_tools(found: FoundTemplate, config_dir: Path) -> None:
    """Tool lists among the fixture candidates are the prompt's tools: the one its front matter
    names (declared there already), else a ``*tools*.json`` holding a valid tool list."""
    _declared_tools(found, config_dir)
    keep: list[str] = []
    for rel in found.fixtures:
        if rel == found.tools_declared:
            continue
        tools_name = "tools" in Path(rel).name.lower() and rel.lower().endswith(".json")
        if found.tools is None and tools_name and _is_tool_list(config_dir / rel):
            found.tools = rel
            continue
        keep.append(rel)
    found.fixtures = keep


def inspect_size(found: FoundTemplate, config_dir: Path) -> None:
    """The rough size again, once a fixture was written for FOUND."""
    if found.renders_not:
        found.problem = None
    _estimate(found, config_dir)


def _estimate(found: FoundTemplate, config_dir: Path) -> None:
    """Rough rendered size with the first fixture, for a budget suggestion (chars, not tokens)."""
    prompt = PromptConfig(
        name=found.name,
        template=found.rel,
        fixtures=found.fixtures[:1],
        tools=found.tools,
        provider=found.provider or PromptSettings().provider,
    )
    config = Config(path=config_dir / "needle.toml", root=config_dir, prompts={found.name: prompt})
    try:
        cases = config.fixture_paths(prompt)  # a case file's first case
        rendered = render_case(config, prompt, cases[0] if cases else None)
    except NeedleError as exc:
        if not found.problem:
            line = f" (line {exc.location.line})" if exc.location.line else ""
            found.problem = f"{RENDERS_NOT}{line}: {exc.message}" + (f" -- {exc.hint}" if exc.hint else "")
        return
    found.rough_chars = sum(len(t) for t in rendered.texts())


def _gold_fixture(fixtures: list[str], config_dir: Path) -> str | None:
    """The first fixture with a top-level ``expected`` (its answer), for ``needle = "gold"``."""
    for rel in fixtures:
        try:
            if "expected" in load_fixture(config_dir / rel):
                return rel
        except NeedleError:  # a broken fixture is reported when the file is used, not here
            continue
    return None


def inspect_template(
    template: Path, rel: str, name: str, config_dir: Path, fixture_files: list[Path]
) -> FoundTemplate:
    """One template inspected: its fixtures and tools, variables, gold fixture, rough size."""
    f = FoundTemplate(path=template, rel=rel, name=name)
    f.fixtures = _fixture_candidates(template.absolute(), config_dir, [p.absolute() for p in fixture_files])
    _split_tools(f, config_dir)
    f.gold_fixture = _gold_fixture(f.fixtures, config_dir)
    _inspect(f, config_dir)
    if not f.fixtures:
        f.fixtures = _dataset_beside(template.absolute(), config_dir, fixture_files, set(f.variables))
    _estimate(f, config_dir)
    return f


def _dataset_beside(
    template: Path, config_dir: Path, fixture_files: list[Path], variables: set[str]
) -> list[str]:
    """A case file in the template's own folder (a prompt flow's ``data.jsonl``) whose first case
    sets a variable the template reads: the template's dataset, whatever its name."""
    for p in fixture_files:
        p = p.absolute()
        if p.parent != template.parent or not is_case_file(p):
            continue
        try:
            first = read_cases(p)[0].number
            keys = set(load_fixture(case_ref(p, first)))
        except (NeedleError, OSError, IndexError):
            continue  # a broken dataset is reported when it is used, not here
        if keys & variables:
            return [p.relative_to(config_dir).as_posix()]
    return []
