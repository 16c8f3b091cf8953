"""Case files (``.jsonl``, ``.csv``): one case a line or a row, named ``file:N``, every problem at
its file:line; confined and size-bounded like every fixture. And the settings and views around
them: distinct slots, the init docs' extensions, an image inside a turn."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from needle_action.assemble.templates.fixtures import confine_fixture, load_fixture
from needle_action.config import load_config
from needle_action.config.cases import MAX_CASES, MAX_FIXTURE_BYTES
from needle_action.core.errors import ConfigError
from needle_action.core.workspace import Workspace
from needle_action.request.prompt import Message, RenderedPrompt
from needle_action.request.view import request_view
from needle_action.scaffold.templates import TEMPLATE_SUFFIXES
from tests.builders import Project

TABLE = """
    [prompts.a]
    template = "prompts/a.j2"
    fixtures = ["{fixtures}"]
    context_var = "notes"
    question_var = "question"
"""
TEMPLATE = "user:\n{{ notes }}\n{{ question }}\n"
REPO = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path, name: str, text: str, fixtures: str | None = None):
    project = Project(tmp_path / "p").template("prompts/a.j2", TEMPLATE).file(name, text)
    return load_config(project.config(TABLE.format(fixtures=fixtures or name)).config_path)


def test_each_non_blank_line_of_a_jsonl_file_is_a_case_named_by_its_line(tmp_path):
    text = '{"notes": "a", "question": "1?"}\n\n{"notes": "b", "question": "2?"}\n  \n{"notes": "c", "question": "3?"}\n'
    config = _config(tmp_path, "data/cases.jsonl", text)
    cases = config.fixture_paths(config.prompts["a"])
    assert [p.name for p in cases] == ["cases.jsonl:1", "cases.jsonl:3", "cases.jsonl:5"]
    assert [load_fixture(p)["notes"] for p in cases] == ["a", "b", "c"]


def test_a_glob_expands_case_files_into_cases(tmp_path):
    project = Project(tmp_path / "p").template("prompts/a.j2", TEMPLATE)
    project.file("data/x.jsonl", '{"notes": "a", "question": "?"}\n{"notes": "b", "question": "?"}\n')
    project.fixture("data/y.yaml", {"notes": "c", "question": "?"})
    config = load_config(project.config(TABLE.format(fixtures="data/*")).config_path)
    assert [p.name for p in config.fixture_paths(config.prompts["a"])] == ["x.jsonl:1", "x.jsonl:2", "y.yaml"]


@pytest.mark.parametrize(
    ("line", "words"),
    [("{notes: 1}", "JSON syntax error"), ('["a", "b"]', "JSON object"), ("null", "null")],
)
def test_a_bad_jsonl_line_is_an_error_at_its_line(tmp_path, line, words):
    config = _config(tmp_path, "data/cases.jsonl", '{"notes": "a", "question": "?"}\n' + line + "\n")
    bad = config.fixture_paths(config.prompts["a"])[1]
    with pytest.raises(ConfigError) as info:
        load_fixture(bad)
    assert words in info.value.message
    assert info.value.location.line == 2
    assert info.value.location.file.endswith("data/cases.jsonl")


def test_csv_rows_are_cases_by_the_header_and_numbered_after_it(tmp_path):
    text = 'notes,question\n"one, with a comma","first?"\n\n"two\nlines",second?\n'
    config = _config(tmp_path, "data/cases.csv", text)
    cases = config.fixture_paths(config.prompts["a"])
    assert [p.name for p in cases] == ["cases.csv:1", "cases.csv:2"]
    assert load_fixture(cases[0]) == {"notes": "one, with a comma", "question": "first?"}
    assert load_fixture(cases[1]) == {"notes": "two\nlines", "question": "second?"}


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("notes,question\na,b\nc,d,e\n", 3, "3 cells"),
        ("notes,notes\na,b\n", 1, "named twice"),
        ("notes,\na,b\n", 1, "empty"),
        ("\n", 1, "header row"),
    ],
)
def test_a_bad_csv_is_an_error_at_its_line_when_the_config_loads(tmp_path, text, line, words):
    project = Project(tmp_path / "p").template("prompts/a.j2", TEMPLATE).file("data/cases.csv", text)
    with pytest.raises(ConfigError) as info:
        load_config(project.config(TABLE.format(fixtures="data/cases.csv")).config_path)
    assert words in info.value.message
    assert info.value.location.line == line


def test_a_case_file_linked_from_outside_the_workspace_is_refused(tmp_path):
    outside = tmp_path / "secret.jsonl"
    outside.write_text('{"notes": "private", "question": "?"}\n')
    project = Project(tmp_path / "p").template("prompts/a.j2", TEMPLATE).link("data/cases.jsonl", outside)
    cfg = project.config(TABLE.format(fixtures="data/cases.jsonl")).config_path
    with pytest.raises(ConfigError) as info:
        load_config(cfg)
    assert "private" not in info.value.message
    # a case named by hand (a symlinked file, a path climbing out) goes through the same door
    root = project.root
    with pytest.raises(ConfigError):
        confine_fixture(Workspace(root), root / "data/cases.jsonl:1")
    with pytest.raises(ConfigError):
        confine_fixture(Workspace(root), root / "../secret.jsonl:1")


def test_case_files_are_size_bounded_and_count_bounded(tmp_path):
    big = _config(tmp_path / "big", "data/a.jsonl", '{"notes": "x", "question": "?"}\n')
    (big.root / "data/a.jsonl").write_text('{"notes": "' + "x" * (MAX_FIXTURE_BYTES + 1) + '"}\n')
    with pytest.raises(ConfigError, match="larger than"):
        big.fixture_paths(big.prompts["a"])
    many = _config(tmp_path / "many", "data/a.jsonl", '{"notes": "x", "question": "?"}\n')
    (many.root / "data/a.jsonl").write_text('{"notes": "x"}\n' * (MAX_CASES + 1))
    with pytest.raises(ConfigError, match="at most") as info:
        many.fixture_paths(many.prompts["a"])
    assert info.value.location.line == MAX_CASES + 1


def test_a_whole_case_file_is_not_one_fixture(tmp_path):
    config = _config(tmp_path, "data/cases.jsonl", '{"notes": "a", "question": "?"}\n')
    with pytest.raises(ConfigError, match="name one of them"):
        load_fixture(config.root / "data/cases.jsonl")


def test_the_same_variable_for_context_and_question_is_an_error_at_its_line(tmp_path):
    project = Project(tmp_path / "p").template("prompts/a.j2", TEMPLATE).fixture("f.yaml", {"notes": "a"})
    cfg = project.config(
        TABLE.format(fixtures="f.yaml").replace('question_var = "question"', 'question_var = "notes"')
    ).config_path
    with pytest.raises(ConfigError) as info:
        load_config(cfg)
    assert "both name 'notes'" in info.value.message
    line = info.value.location.line
    assert cfg.read_text().splitlines()[line - 1].strip().startswith("question_var")


def test_the_docs_list_the_extensions_init_scans():
    text = (REPO / "docs/config.md").read_text()
    entry = text[text.index("`needle init [--root DIR]") :]
    entry = entry[: entry.index("for fixtures")]
    assert tuple(f".{x}" for x in re.findall(r"`\*\.(\w+)`", entry)) == TEMPLATE_SUFFIXES


def test_text_after_an_image_stays_in_the_same_turn():
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/chart.png"}}
    turn = ({"type": "text", "text": "What does it show?"}, image, {"type": "text", "text": "Be brief."})
    view = request_view(RenderedPrompt(system=None, messages=(Message("user", turn),)))
    assert view.count("--- user ---") == 1
    assert (
        view.index("What does it show?")
        < view.index("[image: https://example.com/chart.png]")
        < view.index("Be brief.")
    )


def test_an_empty_case_file_is_an_error_not_a_prompt_without_data(tmp_path):
    project = Project(tmp_path / "p").template("prompts/a.j2", TEMPLATE).file("data/cases.jsonl", "\n\n")
    with pytest.raises(ConfigError, match="holds no case"):
        load_config(project.config(TABLE.format(fixtures="data/cases.jsonl")).config_path)


def test_one_json_document_over_several_lines_is_named_as_such(tmp_path):
    config = _config(tmp_path, "data/cases.jsonl", '{\n  "notes": "a",\n  "question": "?"\n}\n')
    first = config.fixture_paths(config.prompts["a"])[0]
    with pytest.raises(ConfigError) as info:
        load_fixture(first)
    assert info.value.location.line == 1
    assert "one JSON document over several lines" in (info.value.hint or "")


def test_prompty_2_inputs_and_tools_are_read(tmp_path):
    from needle_action.assemble.templates.declared import from_prompty
    from needle_action.assemble.templates.prompty import prompty_defaults, split_prompty

    path = REPO / "tests/data/real_tpl/prompts/tides_v2.prompty"
    text = path.read_text()
    front = split_prompty(text, "tides_v2.prompty").front
    workspace = Workspace(path.parent)
    defaults = prompty_defaults(front, path, workspace, "tides_v2.prompty")
    # default first, else the example; an input with neither gives nothing
    assert defaults == {"harbour": "Porthmadog", "question": "When is high water tomorrow?"}
    declared = from_prompty(front, text, path, workspace, "tides_v2.prompty")
    assert declared.params == {"temperature": 0.3}  # model.options; maxOutputTokens is the reserve's
    (tool,) = declared.tools
    assert tool["name"] == "tide_table"
    assert tool["input_schema"] == {
        "type": "object",
        "properties": {
            "harbour": {"type": "string", "description": "The harbour's name"},
            "days_ahead": {"type": "integer", "description": "0 for today, 1 for tomorrow"},
        },
        "required": ["harbour"],
    }
