"""Issue 18's acceptance case through the CLI: a repository-shaped RAG app (tests/data/rag_app: two
`.prompty` files and a tools JSON file) goes through `needle init`, and both prompts render; the
query-rewrite prompt's request carries its tool; request errors stop with exit 2 at their line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from needle_action.config import load_config
from tests.needle_cli import invoke_in as cli

RAG_APP = Path(__file__).resolve().parents[1] / "data" / "rag_app"
PROMPTS = "app/backend/prompts"


@pytest.fixture
def app(tmp_path) -> Path:
    repo = tmp_path / "rag_app"
    shutil.copytree(RAG_APP, repo)
    result = cli(repo, "init")
    assert result.exit_code == 0, result.output
    return repo


def test_init_keeps_the_tools_file_out_of_the_fixtures_and_picks_the_text_sources(app):
    config = load_config(app / "needle.toml")
    rewrite, answer = config.prompts["chat_query_rewrite"], config.prompts["chat_answer_question"]
    assert not any("tools" in f for f in rewrite.fixtures)
    assert answer.context_var == "text_sources"
    assert answer.question_var == "user_query"
    assert f"# tools: {PROMPTS}/chat_query_rewrite_tools.json" in (app / "needle.toml").read_text()


def test_both_prompts_render_and_the_rewrite_body_carries_its_tool(app):
    for name in ("chat_query_rewrite", "chat_answer_question"):
        result = cli(app, "render", name)
        assert result.exit_code == 0, result.output
    answer = cli(app, "render", "chat_answer_question").output
    assert "override_prompt" not in answer
    assert "The assistant answers customers" in answer
    body = json.loads(cli(app, "render", "chat_query_rewrite", "--format", "json").output)
    assert body["model"]
    assert body["max_tokens"] == 1024
    assert [t["name"] for t in body["tools"]] == ["search_knowledge_base"]
    assert body["tools"][0]["input_schema"]["required"] == ["search_query"]
    openai = json.loads(cli(app, "render", "chat_query_rewrite", "--format", "openai").output)
    assert openai["tools"][0]["function"]["name"] == "search_knowledge_base"
    assert openai["messages"][0]["role"] == "system"
    text = cli(app, "render", "chat_query_rewrite").output
    assert "--- tools ---" in text
    assert '"name": "search_knowledge_base"' in text


def test_the_answer_prompt_as_documents_and_as_a_tool_result(app):
    config = app / "needle.toml"
    config.write_text(
        config.read_text().replace(
            'context_var = "text_sources"',
            'context_var = "text_sources"\ncontext_as = "document"',
        )
    )
    body = json.loads(cli(app, "render", "chat_answer_question", "--format", "json").output)
    last = body["messages"][-1]["content"]
    assert [b["type"] for b in last].count("document") == 3
    config.write_text(
        config.read_text()
        .replace('context_as = "document"', 'context_as = "tool_result"')
        .replace(
            'template = "app/backend/prompts/chat_answer_question.prompty"',
            'template = "app/backend/prompts/chat_answer_question.prompty"\n'
            f'tools = "{PROMPTS}/chat_query_rewrite_tools.json"',
        )
    )
    body = json.loads(cli(app, "render", "chat_answer_question", "--format", "json").output)
    call, result = body["messages"][-2]["content"][-1], body["messages"][-1]["content"][0]
    assert call["type"] == "tool_use"
    assert call["name"] == "search_knowledge_base"
    assert call["input"]["search_query"].startswith("Does the warranty cover")
    assert result["tool_use_id"] == call["id"]
    assert "IP67" in result["content"]


def test_a_broken_tools_file_exits_2_at_its_line(app):
    tools = app / PROMPTS / "chat_query_rewrite_tools.json"
    tools.write_text('[\n  {"type": "function", "function": {"description": "no name"}}\n]\n')
    result = cli(app, "render", "chat_query_rewrite")
    assert result.exit_code == 2, result.output
    assert f"{PROMPTS}/chat_query_rewrite_tools.json:2:" in result.output
    assert "not a valid tool list" in result.output
    assert "hint:" in result.output


def test_a_tool_result_without_its_call_exits_2_at_the_marker(app):
    (app / "prompts").mkdir()
    (app / "prompts" / "agent.j2").write_text("user:\nhi\ntool_result:\nfound it\n")
    with open(app / "needle.toml", "a") as f:
        f.write('\n[prompts.agent]\ntemplate = "prompts/agent.j2"\n')
    result = cli(app, "render", "agent")
    assert result.exit_code == 2, result.output
    assert "prompts/agent.j2:3:" in result.output, result.output
    assert "without its tool_use" in result.output
