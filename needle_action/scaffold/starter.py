"""``needle init``, the writing: a commented starter ``needle.toml`` from the templates found.

The starter is a guess a human finishes; whatever it writes must load with ``load_config``."""

from __future__ import annotations

import json
import os
from pathlib import Path

from needle_action.assemble.templates.semantic_kernel import SK_PROMPT_FILE
from needle_action.config.cases import is_case_file
from needle_action.config.loader import FIXTURE_SUFFIXES
from needle_action.config.model import PromptSettings, RecallSettings
from needle_action.core.errors import ConfigError
from needle_action.core.paths import display_path
from needle_action.scaffold.built import (
    BuiltPrompt,
    built_lines,
    built_prompts,
    sample_fixture,
    site_comments,
)
from needle_action.scaffold.code import CodeSite
from needle_action.scaffold.sk_prompts import find_sk_prompts
from needle_action.scaffold.templates import (
    TEMPLATE_SUFFIXES,
    FoundTemplate,
    included_templates,
    inspect_size,
    inspect_template,
    prompt_name,
    walk,
)
from needle_action.scaffold.tree import Tree


def _s(value: str) -> str:
    """A TOML basic string (JSON escapes are valid TOML escapes)."""
    return json.dumps(value, ensure_ascii=False)


def _suggest_budget(chars: int | None, reserve: int) -> int | None:
    if chars is None:
        return None
    tokens = chars / 4  # ~4 characters per token for English prose
    raw = int(tokens * 1.5) + reserve
    return max(1000, -(-raw // 1000) * 1000)


def render_starter(
    found: list[FoundTemplate],
    partials: list[str],
    built: list[BuiltPrompt] | None = None,
    listed: list[CodeSite] | None = None,
) -> str:
    d, r = PromptSettings(), RecallSettings()
    out = [
        "# needle.toml: token budgets and positional recall checks for this repository's prompts.",
        "# Written by `needle init`; edit freely. Reference: docs/config.md",
        "# Paths are relative to this file's folder and may not leave it.",
        "",
        "[defaults]",
        "# Every [prompts.NAME] table inherits these keys and may override any of them.",
        f"model = {_s(d.model)}          # the model the prompts are sent to",
        f"provider = {_s(d.provider)}            # recall runs on: anthropic | openai | local (embedded model, no key)",
        f"tokenizer = {_s(d.tokenizer)}   # tiktoken:o200k_base | tiktoken:cl100k_base | anthropic | local",
        f"tokenizer_safety_factor = {d.tokenizer_safety_factor}   # multiplies tiktoken counts for Claude models",
        f"reserve_output_tokens = {d.reserve_output_tokens}      # room kept free for the answer",
        "# max_input_tokens = 8000        # budget: fail when tokens + reserve exceed it (suggestions per prompt below)",
        '# max_growth = "10%"             # fail when a PR grows a prompt more than this vs the base ("10%" or 500 tokens)',
        "",
        "[defaults.recall]",
        "# Needle-in-a-haystack trials in the prompt's real shape (needs context_var and question_var).",
        f"enabled = {str(r.enabled).lower()}",
        f'sizes = {json.dumps(r.sizes)}            # context sizes in real tokens, or "auto"',
        f"depths = {json.dumps(r.depths)}   # needle positions: 0 = start, 1 = end",
        f'trials = {json.dumps(r.trials)}                # trials per cell; "auto": enough to catch a drop of min_drop',
        f"threshold = {r.threshold}                # minimum recall per cell",
        f"needle = {_s(r.styles[0])}              # codeword | sentence | distractors | multihop | custom | gold | nonlexical | absent, or a list (docs/needles.md)",
        "# distractors = 3                # look-alikes per trial that differ in subject and value",
        '# similarity = "high"            # how alike they are: low | medium | high',
        f"seed = {r.seed}",
        "# max_calls = 500                # stop cleanly (partial result) after this many model calls",
        "# max_cost_usd = 2.0             # ... or this estimated spend",
        '# filler_globs = ["docs/**/*.md"]  # extra filler text from the repository',
    ]
    if partials:
        out += ["", "# Partials (included by other templates, so not prompts of their own):"]
        out += [f"#   {p}" for p in partials]
    # a prompt that does not render yet waits in comments while others render: `needle check` runs
    # on what works from the first command, and the NOTE says what to fix
    hold = any(not f.renders_not for f in found) or bool(built)
    for f in found:
        lines = _prompt_lines(f, d)
        out += _left_out(f.name, lines) if hold and f.renders_not else lines
    for b in built or []:
        out += built_lines(b)
    out += site_comments(listed or [])
    if built:
        out += [
            "",
            "# Builders run this repository's Python: in a worker with no network and no secrets (as user",
            "# nobody under root), with the project's .venv/venv when there is one (or builder_python).",
            "# In the GitHub Action only the base branch's [files] counts (docs/security.md).",
            "[files]",
            "builders = true",
            '# builder_python = ".venv/bin/python"   # a Python that can import the app\'s packages',
        ]
    return "\n".join(out) + "\n"


def _prompt_lines(f: FoundTemplate, d: PromptSettings) -> list[str]:
    """The [prompts.NAME] table of one template found (and its recall table)."""
    out: list[str] = []
    out += ["", f"[prompts.{f.name}]", f"template = {_s(f.rel)}"]
    out += _declared_model_lines(f, d)
    if f.problem:
        out.append(f"# NOTE: {f.problem}".replace("\n", " "))
    if f.variables:
        out.append(f"# variables the template reads: {', '.join(f.variables)}")
    if f.tools:
        out.append(
            f"tools = {_s(f.tools)}   # the tool schemas sent with the prompt (counted, and sent in recall)"
        )
    elif f.tools_declared:
        out.append(f"# tools: {f.tools_declared}, from the template's model.parameters.tools")
    if f.fixtures:
        each = "each fixture is one case" + (
            ", a .jsonl/.csv one a line/row" if any(is_case_file(x) for x in f.fixtures) else ""
        )
        out.append("fixtures = [" + ", ".join(_s(x) for x in f.fixtures) + f"]   # {each}")
    else:
        out.append(
            '# fixtures = ["fixtures/'
            + f.name
            + '.yaml"]   # YAML/JSON/TOML files (or .jsonl/.csv datasets) with the variables above'
        )
    out.append(
        f"context_var = {_s(f.context_var)}   # the haystack slot recall fills"
        if f.context_var
        else '# context_var = "documents"   # the variable holding retrieved text / history'
    )
    out.append(
        f"question_var = {_s(f.question_var)}   # the slot recall puts its question in"
        if f.question_var
        else '# question_var = "question"   # the variable holding the user\'s question'
    )
    budget = _suggest_budget(f.rough_chars, d.reserve_output_tokens)
    if budget:
        out.append(
            f"# max_input_tokens = {budget}   # suggestion: ~1.5x this prompt's current size plus the reserve"
        )
    else:
        out.append("# max_input_tokens = 8000")
    out.append('# max_growth = "10%"')
    out += _recall_table(f)
    return out


LEFT_OUT = "# Left out until it renders (uncomment the table below once it does): "


def _left_out(name: str, lines: list[str]) -> list[str]:
    """LINES (a prompt's tables, from their blank line on) commented out under a line naming NAME:
    removing one ``# `` from each restores them as written."""
    return ["", LEFT_OUT + name, *(f"# {line}" if line else line for line in lines[1:])]


def left_out(text: str) -> list[str]:
    """The prompts a starter TEXT leaves out until they render."""
    return [line[len(LEFT_OUT) :] for line in text.splitlines() if line.startswith(LEFT_OUT)]


def _declared_model_lines(f: FoundTemplate, d: PromptSettings) -> list[str]:
    """The provider and model the template's own front matter names, where they differ from the
    defaults: the prompt is measured where its requests go."""
    if f.provider is None or f.provider == d.provider:
        return []
    lines = [f"provider = {_s(f.provider)}   # where the template's own model section sends it"]
    if f.model:
        return [*lines, f"model = {_s(f.model)}   # as the template names it (on Azure: the deployment)"]
    return [
        *lines,
        '# model = "gpt-4o"   # the template leaves it to the application: name the model it runs',
    ]


def _recall_table(f: FoundTemplate) -> list[str]:
    """The prompt's own recall keys: off until it can run; ``gold`` when a fixture names its answer."""
    lines: list[str] = []
    if not (f.context_var and f.question_var and (f.fixtures or f.has_sample)):
        lines.append("enabled = false   # turn on once fixtures, context_var and question_var are set")
    if f.gold_fixture is not None:
        if f.fixtures and f.gold_fixture != f.fixtures[0]:
            lines.append(f"fixture = {_s(f.gold_fixture)}   # the fixture that names its answer")
        lines.append(
            'needle = "gold"   # the fixture names its answer (expected): move its real gold item through '
            'the context, as in "Lost in the Middle"; or ["gold", "nonlexical", "absent"]'
        )
    return [f"[prompts.{f.name}.recall]", *lines] if lines else []


def write_starter(
    root: str | os.PathLike[str], config_path: str | os.PathLike[str], force: bool = False
) -> Path:
    """Scan ROOT for templates and write a commented starter threshold file at CONFIG_PATH.

    CONFIG_PATH is taken as given (relative to the working directory); every template must sit
    inside its folder, because paths in the file are relative to it.
    """
    root = Path(root)
    config_path = Path(config_path)
    _check_paths(root, config_path, force)
    config_dir = config_path.absolute().parent
    tree = Tree.walk(root)  # the one walk of the repository: every finder below filters it
    sk_all = find_sk_prompts(root, config_dir, tree)  # skprompt.txt, SK YAML: templates needle renders
    sk_stubbed = [p for p in sk_all if p.what == SK_PROMPT_FILE]  # SK's *.prompt: a builder renders it
    sk_files = [p for p in sk_all if p not in sk_stubbed]
    stubbed = {p.path for p in sk_stubbed}
    templates = sorted(
        [*(t for t in walk(root, TEMPLATE_SUFFIXES, tree) if t not in stubbed), *(p.path for p in sk_files)]
    )
    outside = [t for t in templates if not t.absolute().is_relative_to(config_dir)]
    if outside:
        raise ConfigError(
            f"template {display_path(outside[0].absolute())} is outside the folder of {display_path(config_path)}",
            hint="paths in needle.toml are relative to its folder: write it at the repository root "
            "(e.g. needle init --root R --config R/needle.toml)",
        )
    found, partials, taken = _found_templates(templates, tree, config_dir)
    lists = {p.path.resolve(): p.lists for p in sk_files}
    for f in found:
        if f.path.resolve() in lists:
            sample_fixture(f, lists[f.path.resolve()], config_dir)
            inspect_size(f, config_dir)
    built, listed = built_prompts(
        root, config_dir, taken, with_sites=not found, sk_stubbed=sk_stubbed, tree=tree
    )
    if not found and not built:
        raise ConfigError(_nothing_found(root, templates), hint=NOTHING_FOUND_HINT)
    text = render_starter(found, partials, built, listed)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(config_path, flags, 0o644), "w", encoding="utf-8") as out:
        out.write(text)
    return config_path


def _check_paths(root: Path, config_path: Path, force: bool) -> None:
    """A ConfigError unless ROOT is a folder and CONFIG_PATH a file init may write (or, with
    FORCE, replace)."""
    if not root.is_dir():
        raise ConfigError(
            f"{display_path(root)} is not a folder", hint="pass --root PATH to the repository to scan"
        )
    if config_path.is_symlink():
        raise ConfigError(
            "the threshold file's path is a symlink; needle init writes no file through one",
            file=display_path(config_path),
            hint="remove the link, or pass --config PATH to write somewhere else",
        )
    if config_path.exists() and not force:
        raise ConfigError(
            "the threshold file already exists; not overwriting it",
            file=display_path(config_path),
            hint="pass --force to replace it, or --config PATH to write somewhere else",
        )
    if config_path.is_dir():
        raise ConfigError(
            "expected a file path for the threshold file, got a folder", file=display_path(config_path)
        )


NOTHING_FOUND_HINT = (
    f"templates are files ending in {', '.join(TEMPLATE_SUFFIXES)}, Semantic Kernel's skprompt.txt and "
    "YAML prompt files; code that builds requests is found by its SDK calls (messages.create, "
    "chat.completions.create, responses.create), request dicts with model and messages, and LangChain/"
    "LlamaIndex prompt templates. A prompt built in code is measured by a builder (`builder = "
    '"file.py:function"`, a function returning the request) or from a recorded request (`request = '
    '"x.json"`, the body the app sent): docs/config.md. Pass --root to scan another folder'
)


def _nothing_found(root: Path, templates: list[Path]) -> str:
    where = display_path(root.absolute()) or "."
    if templates:
        return f"every template under {where} is included by another one, and no code that builds a request was found"
    return f"no prompt templates found under {where}, and no code that builds a request"


def _found_templates(
    templates: list[Path], tree: Tree, config_dir: Path
) -> tuple[list[FoundTemplate], list[str], set[str]]:
    """(the templates inspected, the partials, the prompt names taken)."""
    partial_set = included_templates(templates, config_dir)
    fixture_files = walk(tree.root, FIXTURE_SUFFIXES, tree)
    taken: set[str] = set()
    found: list[FoundTemplate] = []
    partials: list[str] = []
    for t in templates:
        rel = t.absolute().relative_to(config_dir).as_posix()
        if t.resolve() in partial_set:
            partials.append(rel)
            continue
        found.append(inspect_template(t, rel, prompt_name(t, taken), config_dir, fixture_files))
    return found, partials, taken
