"""``needle init``, prompts built in code: a builder stub, a fixture and a ``[prompts.NAME]`` entry
for each place the code builds a request (:mod:`.code`), Semantic Kernel prompts kept in Python
strings among them (:mod:`.sk_prompts`); and the sample fixture of an SK prompt file. Stubs and fixtures are new files: an existing one is kept as it is."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from needle_action.config.model import PromptSettings
from needle_action.scaffold.code import CodeSite, find_sites
from needle_action.scaffold.sk_prompts import SkPrompt, sk_stub
from needle_action.scaffold.stubs import STUB_FOLDER, request_stub, template_stub, write_new
from needle_action.scaffold.templates import QUESTION_NAMES, FoundTemplate, guess_context, guess_var
from needle_action.scaffold.tree import Tree

MAX_STUBS = 5  # sites beyond these are listed in comments

SAMPLE_QUESTION = "Which plan includes priority support, and since when?"
SAMPLE_CONTEXT = (
    "Priority support became part of the Team plan in March. The Starter plan answers by email "
    "within two working days. Refunds are possible within thirty days of the first payment."
)


@dataclass
class BuiltPrompt:
    name: str
    origin: str  # where it comes from, one line
    stub: str  # the builder file, relative to the threshold file's folder
    fixture: str
    variables: list[str] = field(default_factory=list)
    context_var: str | None = None
    question_var: str | None = None
    kept: list[str] = field(default_factory=list)  # files that existed and were left alone
    lists: list[str] = field(default_factory=list)  # variables holding turns


def _sample(name: str, context_var: str | None, question_var: str | None, turns: bool) -> Any:
    """A value for the fixture init writes: turns for a variable that holds them."""
    if turns:  # a history: it ends with the user's turn when no other variable asks the question
        history = [
            {"role": "user", "content": "Is the Starter plan enough for a team of five?"},
            {"role": "assistant", "content": SAMPLE_CONTEXT},
        ]
        return history if question_var else [*history, {"role": "user", "content": SAMPLE_QUESTION}]
    if name == question_var:
        return SAMPLE_QUESTION
    if name == context_var:
        return SAMPLE_CONTEXT
    return f"example {name.replace('_', ' ')}"


def _name(base: str, taken: set[str]) -> str:
    name = re.sub(r"_{2,}", "_", re.sub(r"[^A-Za-z0-9_-]+", "_", base)).strip("_-").lower() or "built"
    if not name[0].isalnum():
        name = "p" + name
    out, n = name, 2
    while out in taken:
        out, n = f"{name}_{n}", n + 1
    taken.add(out)
    return out


def _site_prompt(site: CodeSite, taken: set[str], config_dir: Path, model: str) -> BuiltPrompt:
    stem = Path(site.file).stem
    local = f"{stem}_{site.function.rpartition('.')[2]}" if site.function else stem
    if site.is_sk and site.function and "." in site.function:
        local = site.function.replace(".", "_")
    name = _name(local if site.is_sk and site.function else (site.target or local), taken)
    stub_rel = f"{STUB_FOLDER}/{name}.py"
    where = f"{site.file}:{site.line}"
    if site.is_sk:
        where_from = f" in {site.function}()" if site.function else ""
        prompt = SkPrompt(
            config_dir / site.file,
            site.file,
            f"a Semantic Kernel prompt in code ({site.target}{where_from}, passed at line {site.line})",
            site.variables,
            site.lists,
            (site.function, site.target or ""),
        )
        built = _sk_prompt(prompt, taken, config_dir, name)
        return built
    if site.is_template:
        variables = list(site.variables)
        text = template_stub(site, stub_rel, config_dir)
        origin = f"{where}: a {site.kind} prompt template{' (' + site.target + ')' if site.target else ''}"
    else:
        variables = ["question", "context", *(site.variables if site.kind == "prompt-constant" else [])]
        text = request_stub(site, stub_rel, model)
        origin = f"{where}: {site.call}"
    built = BuiltPrompt(name, origin, stub_rel, f"{STUB_FOLDER}/{name}.yaml", variables, lists=site.lists)
    if not write_new(config_dir / stub_rel, text, config_dir):
        built.kept.append(stub_rel)
    return built


def _sk_prompt(prompt: SkPrompt, taken: set[str], config_dir: Path, name: str | None = None) -> BuiltPrompt:
    parts = Path(prompt.rel).parts
    base = parts[-2] if prompt.path.name.lower() == "skprompt.txt" and len(parts) > 1 else prompt.path.stem
    name = name or _name(base, taken)
    stub_rel = f"{STUB_FOLDER}/{name}.py"
    built = BuiltPrompt(
        name,
        f"{prompt.rel}: {prompt.what}",
        stub_rel,
        f"{STUB_FOLDER}/{name}.yaml",
        prompt.variables,
        lists=prompt.lists,
    )
    if not write_new(config_dir / stub_rel, sk_stub(prompt, stub_rel), config_dir):
        built.kept.append(stub_rel)
    return built


def _fixture(built: BuiltPrompt, config_dir: Path) -> None:
    built.context_var = guess_context(built.variables)
    built.question_var = guess_var(built.variables, QUESTION_NAMES, exclude=built.context_var)
    values = {v: _sample(v, built.context_var, built.question_var, v in built.lists) for v in built.variables}
    text = "# the builder's keyword arguments for one case (written by `needle init`: use real values)\n"
    text += yaml.safe_dump(values, sort_keys=False, allow_unicode=True, width=100)
    if not write_new(config_dir / built.fixture, text, config_dir):
        built.kept.append(built.fixture)


def built_prompts(
    root: Path,
    config_dir: Path,
    taken: set[str],
    with_sites: bool,
    sk_stubbed: list[SkPrompt] | None = None,
    tree: Tree | None = None,
) -> tuple[list[BuiltPrompt], list[CodeSite]]:
    """(the prompts given a builder, the code sites only listed): Semantic Kernel prompts always,
    code sites when WITH_SITES (no template of a format needle renders was found). TREE: the
    listing of ROOT ``needle init`` made once."""
    model = PromptSettings().model
    # the code as init found it (TREE was listed before init wrote anything): the SK stubs
    # written next are not searched, and build no request of their own
    sites = find_sites(root, config_dir, tree)
    out = [_sk_prompt(p, taken, config_dir) for p in sk_stubbed or []]
    # a template built inside a function cannot be imported: its stub would fail until edited, so
    # it is written only when nothing else was found
    ready = [s for s in sites if not (s.is_template and s.target is None)] or sites
    stubbed = ready[:MAX_STUBS] if with_sites else []
    out += [_site_prompt(s, taken, config_dir, model) for s in stubbed]
    for built in out:
        _fixture(built, config_dir)
    return out, [s for s in sites if s not in stubbed]


def _s(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def sample_fixture(found: FoundTemplate, lists: list[str], config_dir: Path) -> None:
    """A fixture for a template that has none and no sample of its own (a Semantic Kernel prompt):
    ``fixtures/NAME.yaml`` with a value per variable, so the first budget renders it."""
    if found.fixtures or found.has_sample or not found.variables:
        return
    rel = f"fixtures/{found.name}.yaml"
    values = {v: _sample(v, found.context_var, found.question_var, v in lists) for v in found.variables}
    text = "# the template's variables for one case (written by `needle init`: use real values)\n"
    text += yaml.safe_dump(values, sort_keys=False, allow_unicode=True, width=100)
    write_new(config_dir / rel, text, config_dir)
    found.fixtures = [rel]


def built_lines(built: BuiltPrompt) -> list[str]:
    """The ``[prompts.NAME]`` table of one prompt built in code."""
    out = ["", f"[prompts.{built.name}]", f"# built in code: {built.origin}"[:300]]
    out.append(f"# {built.stub} (written by needle init: edit it until it returns what the app sends)")
    if built.kept:
        out.append(f"# kept as they were (already there): {', '.join(built.kept)}")
    out.append(f"builder = {_s(built.stub + ':build')}")
    out.append(
        f"fixtures = [{_s(built.fixture)}]   # each fixture is one case: the builder's keyword arguments"
    )
    if built.variables:
        out.append(f"# variables: {', '.join(built.variables)}")
    for key, value, what in (
        ("context_var", built.context_var, "the haystack slot recall fills"),
        ("question_var", built.question_var, "the slot recall puts its question in"),
    ):
        out.append(f"{key} = {_s(value)}   # {what}" if value else f'# {key} = "..."   # {what}')
    out.append("# max_input_tokens = 8000")
    if not (built.context_var and built.question_var):
        out += [
            f"[prompts.{built.name}.recall]",
            "enabled = false   # turn on once context_var and question_var are set",
        ]
    return out


def site_comments(sites: list[CodeSite]) -> list[str]:
    """Code sites not configured, as comments."""
    if not sites:
        return []
    out = ["", "# Requests built in code, not configured here (a builder measures each: docs/config.md):"]
    return out + [f"#   {s.file}:{s.line} ({s.kind}) {s.call}"[:200] for s in sites[:20]]


__all__ = ["BuiltPrompt", "built_lines", "built_prompts", "site_comments"]
