"""needle init: finds templates, guesses fixtures and slots, writes a starter that loads, never clobbers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from needle_action.assemble.render import render_case
from needle_action.cli import main
from needle_action.config import load_config
from needle_action.core.errors import ConfigError
from needle_action.scaffold.starter import left_out, write_starter
from needle_action.scaffold.templates import CONTEXT_NAMES, guess_context, guess_var
from tests.builders import Project, write


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    Project(root).files(
        {
            "prompts/rag_answer.j2": "system:\n{% include 'partials/rules.j2' %}\nuser:\n"
            "{% for d in retrieved_docs %}{{ d }}\n{% endfor %}{{ query }}\n",
            "prompts/partials/rules.j2": "Be brief.",
            "fixtures/rag_answer/typical.yaml": "retrieved_docs: [a]\nquery: q\n",
            "fixtures/rag_answer/worst.json": '{"retrieved_docs": ["a", "b"], "query": "w"}',
            "prompts/summary.jinja": "Summarise:\n{{ text }}\n",
            "prompts/summary.yaml": "text: hello\n",
            "agents/support.prompty": "---\nname: s\nsample:\n  history: []\n  question: hi\n---\nsystem:\nok\n"
            "{% for t in history %}{{ t.role }}:\n{{ t.content }}\n{% endfor %}user:\n{{ question }}\n",
            "node_modules/pkg/ignored.j2": "{{ x }}",
            ".git/hooks/ignored.j2": "{{ x }}",
            ".venv/lib/ignored.jinja2": "{{ x }}",
            "broken/bad.j2": "{% for %}",
        }
    )
    return root


def test_starter_loads_and_guesses(repo):
    path = write_starter(repo, repo / "needle.toml", force=False)
    text = path.read_text()
    assert "ignored" not in text
    config = load_config(path)
    assert set(config.prompts) == {"rag_answer", "summary", "support", "bad"}
    rag = config.prompts["rag_answer"]
    assert rag.template == "prompts/rag_answer.j2"
    assert rag.fixtures == ["fixtures/rag_answer/typical.yaml", "fixtures/rag_answer/worst.json"]
    assert (rag.context_var, rag.question_var) == ("retrieved_docs", "query")
    assert rag.recall.enabled
    assert config.prompts["summary"].fixtures == ["prompts/summary.yaml"]
    assert config.prompts["summary"].recall.enabled is False  # no question slot guessed
    support = config.prompts["support"]
    assert (support.context_var, support.question_var) == ("history", "question")
    assert support.recall.enabled
    assert "prompts/partials/rules.j2" in text
    assert "[prompts.rules]" not in text
    assert "# NOTE:" in text  # the broken template is listed with its problem, not skipped silently
    assert "# max_input_tokens =" in text
    assert "suggestion" in text
    # every prompt with fixtures renders
    for fx in config.fixture_paths(rag):
        assert render_case(config, rag, fx).system == "Be brief."


def test_refuses_to_overwrite_without_force(repo):
    target = repo / "needle.toml"
    target.write_text("# mine\n")
    with pytest.raises(ConfigError) as info:
        write_starter(repo, target, force=False)
    assert "--force" in info.value.hint
    assert target.read_text() == "# mine\n"
    write_starter(repo, target, force=True)
    assert target.read_text().startswith("# needle.toml")


def test_cli_init_exit_codes(repo):
    cwd = os.getcwd()
    os.chdir(repo)
    try:
        runner = CliRunner()
        first = runner.invoke(main, ["init"])
        assert first.exit_code == 0
        assert "wrote needle.toml" in first.output
        second = runner.invoke(main, ["init"])
        assert second.exit_code == 2
        assert "needle.toml: the threshold file already exists" in second.output
        assert "--force" in second.output
        assert "Traceback" not in second.output
        third = runner.invoke(main, ["init", "--force"])
        assert third.exit_code == 0
        rendered = runner.invoke(main, ["render", "rag_answer"])
        assert rendered.exit_code == 0
        assert "Be brief." in rendered.output
    finally:
        os.chdir(cwd)


def test_no_templates_is_a_clear_error(tmp_path):
    write(tmp_path, "README.md", "nothing here")
    with pytest.raises(ConfigError, match="no prompt templates found"):
        write_starter(tmp_path, tmp_path / "needle.toml")
    assert not (tmp_path / "needle.toml").exists()


def test_templates_outside_the_config_folder_are_refused(repo, tmp_path):
    with pytest.raises(ConfigError, match="outside the folder"):
        write_starter(repo, repo / "sub" / "needle.toml")


def test_name_clashes_get_unique_names(tmp_path):
    write(tmp_path, "a/answer.j2", "{{ question }}")
    write(tmp_path, "b/answer.j2", "{{ question }}")
    config = load_config(write_starter(tmp_path, tmp_path / "needle.toml"))
    assert sorted(config.prompts) == ["answer", "b_answer"]


def test_guess_var_prefers_known_names():
    assert guess_var({"docs", "documents", "q"}, ("documents", "docs")) == "documents"
    assert guess_var({"user_question_text"}, ("question",)) == "user_question_text"
    assert guess_var({"foo"}, ("question",)) is None


def test_guess_var_prefers_text_sources_over_image_sources():
    names = {"image_sources", "text_sources", "user_query", "past_messages", "override_prompt"}
    assert guess_var(names, CONTEXT_NAMES) == "text_sources"
    assert guess_var({"image_urls", "chunks_text"}, ("chunks", "urls")) == "chunks_text"
    assert guess_var({"image_docs", "docs_list"}, ("docs",)) == "docs_list"  # media names last


def test_a_tools_json_beside_a_template_is_its_tools_not_a_fixture(tmp_path):
    write(tmp_path, "prompts/agent.j2", "user:\n{{ documents }}\n{{ question }}\n")
    write(tmp_path, "prompts/agent.yaml", "documents: [a]\nquestion: q\n")
    write(tmp_path, "prompts/agent_tools.json", '[{"name": "search", "input_schema": {"type": "object"}}]')
    write(tmp_path, "prompts/agent_tools_notes.json", '{"not": "tools"}')
    config = load_config(write_starter(tmp_path, tmp_path / "needle.toml"))
    prompt = config.prompts["agent"]
    assert prompt.tools == "prompts/agent_tools.json"
    assert prompt.fixtures == ["prompts/agent.yaml", "prompts/agent_tools_notes.json"]
    assert render_case(config, prompt, config.fixture_paths(prompt)[0]).tools[0]["name"] == "search"


def test_a_dataset_beside_a_template_is_its_fixture_when_it_sets_its_variables(tmp_path):
    # a prompt flow's shape: the flow's data.jsonl sits beside its Jinja2 templates, named `data`
    root = tmp_path / "repo"
    Project(root).files(
        {
            "flows/qa/answer.jinja2": "# system:\nUse the notes.\n{{ notes }}\n# user:\n{{ question }}\n",
            "flows/qa/data.jsonl": '{"notes": "The hut opens in May.", "question": "When?"}\n'
            '{"notes": "x", "question": "y"}\n',
            "flows/other/label.jinja2": "# user:\nLabel {{ page_text }}\n",
            "flows/other/data.jsonl": '{"url": "https://example.com", "label": "Blog"}\n',
        }
    )
    config = load_config(write_starter(root, root / "needle.toml", force=False))
    assert config.prompts["answer"].fixtures == ["flows/qa/data.jsonl"]
    assert [p.name for p in config.fixture_paths(config.prompts["answer"])] == [
        "data.jsonl:1",
        "data.jsonl:2",
    ]
    # its dataset's keys are the flow's, not the template's: no fixture, so `page_text` is undefined
    # and the table waits in comments until it renders
    text = (root / "needle.toml").read_text()
    assert "label" not in config.prompts
    assert left_out(text) == ["label"]
    assert '# fixtures = ["fixtures/label.yaml"]' in text
    assert "a .jsonl/.csv one a line/row" in text


def test_a_template_that_does_not_render_yet_is_noted_with_its_line_and_hint(tmp_path):
    root = tmp_path / "repo"
    write(
        root,
        "prompts/menu.prompt",
        "---\noutput:\n  format: json\n  schema: Menu\n---\nPlan a menu for {{guests}} guests.\n",
    )
    write_starter(root, root / "needle.toml", force=False)
    note = next(
        line for line in (root / "needle.toml").read_text().splitlines() if line.startswith("# NOTE:")
    )
    assert "(line 4)" in note  # where `schema: Menu` is written
    assert "builder" in note  # the hint travels with it


def test_a_rag_chat_is_probed_in_its_documents_not_its_history():
    """A retail chat template reads its retrieved product pages, the customer, the chat history and
    the question: the haystack is the retrieved text (a whole-word or longer retrieval name wins
    over an exact conversation name)."""
    assert guess_context({"documentation", "customer", "history", "question"}) == "documentation"
    assert guess_context({"retrieved_docs", "history"}) == "retrieved_docs"
    assert guess_context({"history", "question"}) == "history"  # a chat alone: its history
    assert guess_context({"customer", "question"}) is None
