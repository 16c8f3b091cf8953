"""A rendered prompt made into the whole request: declarations attached, checked, context placed.

Every render goes through :func:`complete` (budgets, ``needle render``, recall's re-renders with
the context variable replaced), so tools, parameters and the context's placement are the same
wherever a prompt is measured.
"""

from __future__ import annotations

import re
from dataclasses import replace

from needle_action.assemble.context import locate, place
from needle_action.assemble.templates.declared import Declared, from_config
from needle_action.assemble.templates.sandbox import read_template
from needle_action.config.model import Config, PromptConfig
from needle_action.core.dataformats import JSON
from needle_action.core.errors import ConfigError, TemplateError
from needle_action.core.names import MESSAGES_API_PROVIDERS
from needle_action.core.paths import display_path
from needle_action.request import rules
from needle_action.request.blocks import RequestShapeError
from needle_action.request.contextparts import ANCHORS_KEY, anchors_of
from needle_action.request.prompt import RenderedPrompt


def complete(
    config: Config, prompt: PromptConfig, rendered: RenderedPrompt, front: Declared, variables: JSON
) -> RenderedPrompt:
    """RENDERED with the prompt's tools, tool choice and request parameters (the config's over the
    template's front matter's), checked, and its context slot located and placed."""
    own = from_config(config.workspace, prompt.tools, prompt.tool_choice, prompt.request_params)
    declared = own.over(front)
    _check_resolved(config, prompt, declared)
    _check_choice(config, prompt, declared)
    out = replace(rendered, tools=declared.tools, tool_choice=declared.tool_choice, params=declared.params)
    try:
        out.validate()
    except RequestShapeError as exc:
        raise TemplateError(
            f"the rendered request is not one the API accepts: {exc}",
            file=str(config.template_path(prompt)),
            hint=exc.hint,
        ) from None
    check_turns(config, prompt, out, variables)
    var = prompt.context_var
    if var and var in variables:
        anchors = anchors_of(variables[var])
        if anchors is not None:  # every part the context lands in counts as context (tokens/sections.py)
            out = replace(out, meta={**out.meta, ANCHORS_KEY: anchors})
        out = locate(out, variables[var])
        question = variables.get(prompt.question_var) if prompt.question_var else None
        out = place(
            out,
            variables[var],
            prompt.context_as,
            tool=prompt.context_tool,
            question=question,
            where=(str(config.path), setting_line(config, prompt, "context_as")),
        )
    return out


# a loop over turns: Jinja's `{% for x in VAR %}`, Handlebars' `{{#each VAR}}`
# (linear: `[^%]` stops at the tag's end, so a crafted template cannot make the scan backtrack)
_LOOPS = re.compile(r"{%-?\s*for\s[^%]*?\bin\s+([A-Za-z_]\w*)|{{~?#each\s+([A-Za-z_]\w*)")


def check_turns(config: Config, prompt: PromptConfig, out: RenderedPrompt, variables: JSON) -> None:
    """A request with no turn is an error at the line of the loop whose variable would have supplied
    the turns (the Messages API refuses it); so is one that ends with an assistant turn because such
    a loop's variable is missing or empty (with every loop's data given, a final assistant turn is a
    prefill the application means). Only where the request is the Messages API's: OpenAI's chat API
    takes a system-only request, which real chats send (the question in the system text, the history
    after it empty on the first turn)."""
    if prompt.provider not in MESSAGES_API_PROVIDERS and (out.system or out.messages):
        return
    turns = [m for m in out.messages if m.role != "system"]
    if turns and turns[-1].role == "user":
        return
    file, line, var = _turn_source(config, prompt, variables)
    if turns and var is None:
        return
    rule = rules.rule("no-messages" if not turns else "last-turn")
    what = "renders no user or assistant turn" if not turns else "ends with an assistant turn"
    named = f"; the turns would come from `{var}`, which the fixture {_state(variables, var)}" if var else ""
    hint = (
        f"give `{var}` its turns in the fixture, or end the template with a `user:` turn"
        if var
        else "end the template with a `user:` turn (the question the model answers)"
    )
    if var is None and not turns and (printed := _empty_print(config, prompt, variables)):
        var, line = printed
        named = f"; its user turn prints only `{var}`, which the fixture {_state(variables, var)}"
        hint = f"give `{var}` a value in the fixture (or in the template's sample or default inputs)"
    raise TemplateError(
        f"the request {what} (the Messages API rule `{rule.code}`: {rule.text}){named}",
        file=file,
        line=line,
        hint=hint,
    )


_USER_MARKER = re.compile(
    r"^[ \t]*(?:#[ \t]*)?user[ \t]*:[ \t]*$", re.IGNORECASE | re.MULTILINE
)  # linear: no two runs of blanks meet
_PRINT = re.compile(r"{{-?\s*([A-Za-z_]\w*)\s*-?}}")


def _empty_print(config: Config, prompt: PromptConfig, variables: JSON) -> tuple[str, int] | None:
    """(the variable, its line) of the first ``{{ var }}`` after a ``user:`` marker whose value is
    missing or empty: the turn it was the whole of vanished."""
    if not prompt.template:
        return None
    path = config.template_path(prompt)
    try:
        source = read_template(path, display_path(path))  # bounded, as the render read it
    except TemplateError:
        return None
    for marker in _USER_MARKER.finditer(source):
        for m in _PRINT.finditer(source, marker.end()):
            if not variables.get(m.group(1)):
                return m.group(1), source.count("\n", 0, m.start()) + 1
    return None


def _state(variables: JSON, var: str) -> str:
    return "does not set" if var not in variables else "leaves empty"


def _turn_source(config: Config, prompt: PromptConfig, variables: JSON) -> tuple[str, int | None, str | None]:
    """(the template, the line of the first loop over a missing or empty variable, its name)."""
    if not prompt.template:
        return prompt.source_file, None, None
    path = config.template_path(prompt)
    try:
        source = read_template(path, display_path(path))  # bounded, as the render read it
    except TemplateError:
        return display_path(path), None, None
    for m in _LOOPS.finditer(source):
        var = m.group(1) or m.group(2)
        if not variables.get(var):
            return display_path(path), source.count("\n", 0, m.start()) + 1, var
    return display_path(path), None, None


def setting_line(config: Config, prompt: PromptConfig, key: str) -> int | None:
    """The line of KEY in the prompt's table, else in [defaults], else the table's header."""
    return (
        config.line_of(f"prompts.{prompt.name}.{key}")
        or config.line_of(f"defaults.{key}")
        or config.line_of(f"prompts.{prompt.name}")
    )


def _check_resolved(config: Config, prompt: PromptConfig, declared: Declared) -> None:
    """Names the template declares that only the application's code defines: an error saying
    where needle.toml can give them."""
    file = display_path(config.template_path(prompt))
    if declared.unresolved:
        raise TemplateError(
            f"the template names tools without their definitions: {', '.join(declared.unresolved)}",
            file=file,
            line=declared.tools_line,
            hint=f'give their schemas in a tools file: tools = "tools.json" in [prompts.{prompt.name}], '
            "or toolDefs in the front matter",
        )
    if declared.unresolved_schema:
        raise TemplateError(
            f"output.schema names the schema {declared.unresolved_schema!r}, which is defined in the "
            "application's code (a registered schema, a pydantic or zod class): needle cannot read it "
            "from the template",
            file=file,
            line=declared.schema_line,
            hint="write the schema in the front matter (Picoschema or JSON Schema), give it as JSON Schema in "
            f"[prompts.{prompt.name}.request_params.output_config.format] "
            '(type = "json_schema", schema = {...}), or build the request in code with a builder',
        )


def _check_choice(config: Config, prompt: PromptConfig, declared: Declared) -> None:
    choice = declared.tool_choice
    if not choice or choice.get("type") != "tool":
        return
    names = [t.get("name") for t in declared.tools]
    if choice.get("name") not in names:
        raise ConfigError(
            f"tool_choice names the tool {choice.get('name')!r}, which the prompt does not declare",
            file=str(config.path),
            line=setting_line(config, prompt, "tool_choice"),
            hint=f"declared tools: {', '.join(map(str, names)) or 'none'}",
        )


__all__ = ["check_turns", "complete", "setting_line"]
