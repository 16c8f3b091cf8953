"""Issue 22 end to end: ``needle diff REF`` on a real repository with two commits prints the
assembled-request diff and writes it into the comment, labelled by section, with the section that
grew named in the headline; a change to a retrieved document alone is one line of context shape."""

from __future__ import annotations

import json
import re

import pytest
from markdown_it import MarkdownIt

from tests.builders import GitRepo, Project
from tests.integration.action_runner import CONFIG
from tests.integration.test_base_ref_cli import _cli_env, needle

FIRST = "You are the documentation assistant for Tidewater Object Storage."
SENTENCE = "Never guess a retention period: quote it."


def _diff_blocks(markdown: str) -> list[str]:
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    return [t.content for t in md.parse(markdown) if t.type == "fence" and t.info == "diff"]


@pytest.fixture
def repo(tmp_path) -> GitRepo:
    repo = GitRepo.init(tmp_path / "repo")
    Project(repo.path).examples("prompts", "fixtures").config(CONFIG.format(growth="300%"), dedent=False)
    repo.commit("base")
    return repo


TOOL = {
    "name": "lookup_retention",
    "description": "Look up the recycle window of a bucket.",
    "input_schema": {"type": "object", "properties": {"bucket": {"type": "string"}}, "required": ["bucket"]},
}


@pytest.mark.slow  # one CLI run, budgets on both sides
def test_a_system_sentence_and_a_tool_are_a_system_and_a_tools_change(repo, tmp_path):
    """The acceptance of issue 22: the head adds one sentence to the system text and one tool."""
    project = Project(repo.path).edit("prompts/rag_answer.j2", FIRST, f"{FIRST} {SENTENCE}")
    project.file("tools.json", json.dumps([TOOL]))
    project.edit(
        "needle.toml", 'context_var = "documents"', 'tools = "tools.json"\ncontext_var = "documents"', count=1
    )
    repo.commit("the pull request")
    out = tmp_path / "comment.md"
    run = needle(["diff", "HEAD~1", "--no-recall", "-o", str(out)], repo.path, _cli_env(tmp_path, None))
    assert run.returncode == 0, run.stdout + run.stderr

    body = out.read_text()
    (block,) = _diff_blocks(body)
    lines = block.splitlines()
    assert f"+{FIRST} {SENTENCE}" in lines
    assert f"-{FIRST}" in lines
    header = next(x for x in lines if x.startswith("@@"))
    assert header.endswith(" system")
    assert lines[lines.index(header) + 1] == " --- system ---"
    # the tool: its own section, added whole, as canonical JSON
    assert "+--- tools ---" in lines
    assert '+  "name": "lookup_retention"' in lines
    assert (
        "<details><summary>Assembled request of `rag_answer` · `fixtures/rag_answer/typical.yaml` · "
        "system, tools · " in body
    )
    # the headline names the section that grew most: the tool's schema outweighs one sentence
    headline = MarkdownIt("commonmark").render(next(x for x in body.splitlines() if x.startswith("## ")))
    assert re.search(r"· \+\d+ tokens, \d+ of them in tools</h2>", headline), headline
    assert re.search(r"\| `rag_answer` \| `fixtures/rag_answer/typical.yaml` \| \+\d+ \| \+\d+ \|", body)
    # the terminal shows the same diff (no colour: not a TTY)
    assert f"+{FIRST} {SENTENCE}" in run.stdout
    assert "\x1b[" not in run.stdout
    assert (
        "assembled request of rag_answer [fixtures/rag_answer/typical.yaml]: system, tools (+" in run.stdout
    )


@pytest.mark.slow  # one CLI run, budgets on both sides
def test_a_changed_document_shows_as_the_context_shape_not_its_text(repo, tmp_path):
    old = "stays restorable for the recycle window, 14 days by default."
    new = "stays restorable for the recycle window, 21 days by default, or as set per bucket."
    Project(repo.path).edit("fixtures/rag_answer/typical.yaml", old, new)
    repo.commit("a retriever change")
    out = tmp_path / "comment.md"
    run = needle(["diff", "HEAD~1", "--no-recall", "-o", str(out)], repo.path, _cli_env(tmp_path, None))
    assert run.returncode == 0, run.stdout + run.stderr

    (block,) = _diff_blocks(out.read_text())
    changed = [x for x in block.splitlines() if x[:1] in "+-"]
    assert len(changed) == 2, changed
    assert all(re.fullmatch(r"[+-]\[context: \d+ chars, 6 items\]", x) for x in changed), changed
    assert "21 days" not in out.read_text()


HOSTILE_CONFIG = """
[defaults]
model = "claude-sonnet-5-5"
provider = "anthropic"
tokenizer = "tiktoken:o200k_base"
max_input_tokens = 200000

[defaults.recall]
enabled = false

[prompts.evil]
template = "prompts/evil.j2"
"""
HOSTILE_LINES = "```\n</details>\n<img src=x onerror=alert(1)>\n@org/team please approve\n~~~~\n    ````\n"


def _raw_html(markdown: str) -> list[str]:
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    return [
        t.content
        for block in md.parse(markdown)
        for t in [block, *(block.children or [])]
        if t.type in ("html_block", "html_inline")
    ]


@pytest.mark.slow  # one CLI run, budgets on both sides
def test_a_hostile_template_cannot_escape_the_diff_or_the_size_limit(tmp_path):
    repo = GitRepo.init(tmp_path / "repo")
    project = Project(repo.path).config(HOSTILE_CONFIG)
    project.template("prompts/evil.j2", "system:\nYou are helpful.\nuser:\nHello\n")
    repo.commit("base")
    project.template(
        "prompts/evil.j2", f"system:\nYou are helpful.\n{HOSTILE_LINES}{'A' * 70_000}\nuser:\nHello\n"
    )
    repo.commit("the pull request")
    out = tmp_path / "comment.md"
    run = needle(["diff", "HEAD~1", "--no-recall", "-o", str(out)], repo.path, _cli_env(tmp_path, None))
    assert run.returncode == 0, run.stdout + run.stderr
    body = out.read_text()

    assert len(body) <= 65_536
    (block,) = _diff_blocks(body)  # one fence, and it closes where we closed it
    for line in ("+</details>", "+<img src=x onerror=alert(1)>", "+~~~~", "+    ````"):
        assert line in block.splitlines(), block
    assert "+@\u200dorg/team please approve" in block.splitlines()
    assert re.search(r"^\+A{300}… \[\+\d[\d,]* chars\]$", block, re.M)  # the long line, cut, its size said
    raw = " ".join(_raw_html(body))
    assert "<img" not in raw
    assert "onerror" not in raw
    assert raw.count("<details>") == raw.count("</details>")
    assert re.search(r"@org", body) is None
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(body)
    assert "<img" not in rendered
    assert rendered.count("<details>") == rendered.count("</details>") == 2
