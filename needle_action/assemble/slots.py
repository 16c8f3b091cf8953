"""The variables a template reads, and the recall slots checked against them before a run.

``context_var`` and ``question_var`` must name variables the template reads; a typo would
otherwise surface mid-run as a needle that never appears. The names are read without rendering:
Jinja's own analysis over the template and the files it includes, imports or extends (literal
names; a computed name means "cannot tell", and nothing is refused), Dotprompt's from its tags
and ``input.schema``.
"""

from __future__ import annotations

import difflib

from jinja2 import meta as jinja_meta

from needle_action.assemble.request import setting_line
from needle_action.assemble.templates.sandbox import environment_for, read_template
from needle_action.config.model import Config, PromptConfig
from needle_action.core.errors import ConfigError, NeedleError
from needle_action.core.paths import display_path, relative

MAX_FILES = 64  # templates followed through includes: far more than any prompt has


def _jinja_names(config: Config, prompt: PromptConfig) -> set[str] | None:
    env = environment_for(config.workspace)
    loader = env.loader
    assert loader is not None  # the sandbox's environments always have their RootLoader
    names: set[str] = set()
    todo, seen = [relative(config.root, config.template_path(prompt))], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if len(seen) > MAX_FILES:
            return None
        try:
            source = loader.get_source(env, name)[0]
            tree = env.parse(source)
        except Exception:  # noqa: BLE001 - refused, missing or broken: the render says so, at its line
            return None
        names |= jinja_meta.find_undeclared_variables(tree)
        for ref in jinja_meta.find_referenced_templates(tree):
            if ref is None:
                return None  # a computed name: which variables it reads cannot be told
            todo.append(env.join_path(ref, name))
    return names


def template_variables(config: Config, prompt: PromptConfig) -> set[str] | None:
    """The variables PROMPT's template reads, or None when that cannot be told without rendering
    (a builder, a recorded request, a computed include, a Dotprompt partial, a broken template)."""
    if not prompt.template or prompt.request is not None or prompt.builder is not None:
        return None
    path = config.template_path(prompt)
    if path.suffix.lower() != ".prompt":
        return _jinja_names(config, prompt)
    from needle_action.assemble.templates.dotprompt import template_variables as dotprompt_names

    try:
        text = read_template(path, display_path(path))
        if "{{>" in text:
            return None
        return dotprompt_names(text, display_path(path))[0]
    except (NeedleError, OSError):
        return None


def check_slots(config: Config, prompt: PromptConfig) -> None:
    """A ConfigError at the needle.toml line of ``context_var``/``question_var`` when it names no
    variable of the template (nothing is refused when the variables cannot be told)."""
    wanted = [(key, value) for key, value in prompt.slots() if value and key.endswith("_var")]
    if not wanted:
        return
    names = template_variables(config, prompt)
    if names is None:
        return
    for key, value in wanted:
        if value in names:
            continue
        guess = difflib.get_close_matches(value, sorted(names), n=1, cutoff=0.6)
        read = ", ".join(sorted(names)[:12]) or "none"
        raise ConfigError(
            f"{key} = {value!r} is not a variable of {prompt.template}; the template reads: {read}",
            file=display_path(config.path),
            line=setting_line(config, prompt, key),
            hint=(f"did you mean {guess[0]!r}? " if guess else "")
            + f"{key} names the template variable that holds "
            + ("the retrieved context" if key == "context_var" else "the user's question"),
        )


__all__ = ["check_slots", "template_variables"]
