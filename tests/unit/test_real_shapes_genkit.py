"""Genkit's ``.prompt`` shapes (tests/data/real_shapes/genkit, README there): what broke on them.

Each test renders a small file in the shape of a real Genkit sample through ``render_case`` and,
where the official ``dotpromptz`` can render it, compares with what it renders.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest
from dotpromptz import DataArgument, Dotprompt

from needle_action.assemble.render import render_case
from needle_action.assemble.templates.roles import trim_blank_lines
from needle_action.config import Config, PromptConfig
from needle_action.core.errors import TemplateError
from needle_action.request.wire import anthropic_body

DATA = Path(__file__).resolve().parents[1] / "data" / "real_shapes" / "genkit"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    shutil.copytree(DATA, tmp_path / "app")
    return tmp_path / "app"


def _render(root: Path, template: str, fixture: str | None = None, **settings: Any):
    prompt = PromptConfig(name="p", template=template, **settings)
    config = Config(path=root / "needle.toml", root=root, prompts={"p": prompt})
    return render_case(config, prompt, root / fixture if fixture else None)


def test_state_in_the_fixture_is_the_render_context_as_genkit_passes_it(root):
    out = _render(root, "prompts/greeter.prompt", "greeter.yaml", tools="tools.json")
    # dotpromptz renders {{@state.x}} from DataArgument.context, where Genkit puts the session state
    theirs: Any = asyncio.run(
        Dotprompt().render(
            (root / "prompts/greeter.prompt").read_text(),
            DataArgument(
                input={"question": "Has parcel 4471 left the depot?"}, context={"state": {"userName": "Ada"}}
            ),
        )
    )
    their_system = "".join(p.text for p in theirs.messages[0].content)
    # the same text, but for blank lines at its ends (needle trims those, docs/templates.md)
    greeting = " You are Ada from the parcel desk; greet the customer by that name."
    assert out.system == trim_blank_lines(their_system) == greeting
    assert [(m.role, m.content) for m in out.messages] == [("user", "Has parcel 4471 left the depot?")]


def test_an_at_key_is_not_an_input_variable(root):
    (root / "prompts/echo.prompt").write_text("{{state.userName}}|{{@state.userName}}\n")
    (root / "echo.yaml").write_text('"@state": {userName: Ada}\n')
    out = _render(root, "prompts/echo.prompt", "echo.yaml")
    assert out.messages[0].content == "|Ada"


def test_at_root_in_a_fixture_is_refused(root):
    (root / "bad.yaml").write_text('question: q\n"@root": {x: 1}\n')
    with pytest.raises(TemplateError) as info:
        _render(root, "prompts/greeter.prompt", "bad.yaml", tools="tools.json")
    assert "'@root' is reserved" in info.value.message


def test_tool_choice_in_the_front_matter_reaches_the_request(root):
    out = _render(root, "prompts/greeter.prompt", "greeter.yaml", tools="tools.json")
    body = anthropic_body(out, "m", 64)
    assert body["tool_choice"] == {"type": "any"}  # Genkit's toolChoice: required
    assert [t["name"] for t in body["tools"]] == ["lookupOrder"]


def test_a_bad_tool_choice_is_an_error_at_the_file(root):
    text = (root / "prompts/greeter.prompt").read_text().replace("required", "sometimes")
    (root / "prompts/greeter.prompt").write_text(text)
    with pytest.raises(TemplateError) as info:
        _render(root, "prompts/greeter.prompt", "greeter.yaml", tools="tools.json")
    assert "toolChoice must be auto, required or none" in info.value.message


def test_tools_defined_in_code_are_named_with_a_relative_path(root, monkeypatch):
    monkeypatch.chdir(root)
    with pytest.raises(TemplateError) as info:
        _render(root, "prompts/greeter.prompt", "greeter.yaml")
    assert "lookupOrder" in info.value.message
    assert info.value.location.file == "prompts/greeter.prompt"
    text = (root / "prompts/greeter.prompt").read_text().splitlines()
    assert text[info.value.location.line - 1].startswith("tools:")  # the line naming them


def test_a_schema_registered_in_code_is_named_with_where_to_give_it(root):
    (root / "soup.yaml").write_text("food: soup\n")
    with pytest.raises(TemplateError) as info:
        _render(root, "prompts/recipe.prompt", "soup.yaml")
    assert "'Recipe'" in info.value.message
    assert "defined in the application's code" in info.value.message
    assert "defineSchema" not in info.value.message  # the app may pass a pydantic class as well
    text = (root / "prompts/recipe.prompt").read_text().splitlines()
    assert text[info.value.location.line - 1].strip().startswith("schema:")  # the line that names it
    assert "request_params.output_config" in info.value.hint
    assert "builder" in info.value.hint


def test_the_schema_given_in_needle_toml_settles_the_name(root):
    (root / "soup.yaml").write_text("food: soup\n")
    schema = {"type": "object", "properties": {"title": {"type": "string"}}}
    fmt = {"format": {"type": "json_schema", "schema": schema}}
    out = _render(root, "prompts/recipe.prompt", "soup.yaml", request_params={"output_config": fmt})
    assert out.params["output_config"] == fmt
    assert "Write a recipe for soup." in out.messages[0].content


def test_a_helper_registered_in_code_says_so(root):
    (root / "leeks.yaml").write_text("food: soup\ningredients: [leek]\n")
    fmt = {"format": {"type": "json_schema", "schema": {"type": "object"}}}
    with pytest.raises(TemplateError) as info:
        _render(root, "prompts/recipe.prompt", "leeks.yaml", request_params={"output_config": fmt})
    assert 'Missing helper: "list"' in info.value.message
    assert info.value.location.line == 18
    assert "defineHelper" in info.value.hint


def test_a_partial_with_a_hash_argument_renders_as_dotpromptz_does(root):
    (root / "story.yaml").write_text("subject: a lighthouse\npersonality: grumpy cat\n")
    out = _render(root, "prompts/story.prompt", "story.yaml")
    partial = (root / "prompts/_style.prompt").read_text()
    theirs: Any = asyncio.run(
        Dotprompt(partials={"style": partial}).render(
            (root / "prompts/story.prompt").read_text(),
            DataArgument(input={"subject": "a lighthouse", "personality": "grumpy cat"}),
        )
    )
    texts = [trim_blank_lines("".join(p.text for p in m.content)) for m in theirs.messages]
    assert [out.system, *(m.content for m in out.messages)] == texts
    assert out.system == "Answer in the voice of a grumpy cat."
