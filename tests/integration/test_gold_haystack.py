"""Gold needles inside the real prompt shape (the bundled examples, tiktoken o200k_base): the
fixture's own gold item moves to each depth among its other items, its question stays, its title
and role stay; the CLI turns a bad gold fixture into file:line, never a traceback."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from needle_action.cli import main
from needle_action.config import load_config
from needle_action.recall.haystack import HaystackBuilder
from needle_action.tokens import get_counter
from tests.builders import Project

TOKENIZER = "tiktoken:o200k_base"


@pytest.fixture
def project(tmp_path) -> Project:
    p = Project(tmp_path / "ex").examples()
    return p.edit("needle.toml", 'tokenizer = "local"', f'tokenizer = "{TOKENIZER}"')


def _builder(project: Project, name: str) -> HaystackBuilder:
    config = load_config(project.config_path)
    prompt = config.prompts[name]
    prompt = prompt.model_copy(update={"recall": prompt.recall.model_copy(update={"needle": "gold"})})
    return HaystackBuilder(config, prompt, get_counter(TOKENIZER, model="gpt-4o", settings=prompt), seed=1)


def test_the_rag_gold_document_moves_among_the_retrieved_ones(project):
    builder = _builder(project, "rag_answer")
    gold = builder.gold_needle
    assert gold is not None
    assert gold.style == "gold"
    assert gold.answer == "14 days | fourteen days"
    assert gold.question.startswith("How long are deleted objects kept")
    titles_at = {}
    for depth in (0.0, 0.5, 1.0):
        trial = builder.build(1500, depth, gold, trial=0)
        user = trial.rendered.messages[-1].content
        titles = re.findall(r'<document index="\d+" title="([^"]+)">', user)
        assert titles.count("Soft delete and the recycle window") == 1  # moved, not copied
        for other in ("Restoring a deleted object", "Object versioning", "Support plans", "Replication"):
            assert other in titles  # the documents it was retrieved with stay
        assert user.rstrip().endswith(gold.question)  # the fixture's own question
        titles_at[depth] = titles.index("Soft delete and the recycle window") / (len(titles) - 1)
    assert titles_at[0.0] == 0.0, titles_at
    assert titles_at[1.0] == 1.0, titles_at
    assert 0.2 < titles_at[0.5] < 0.8, titles_at


def test_a_gold_turn_keeps_its_role(project):
    project.edit(
        "fixtures/support_agent/typical.toml", "\n[customer]", '\nexpected = "4 mm hex key"\n\n[customer]'
    )
    builder = _builder(project, "support_agent")
    trial = builder.build(1500, 0.5, builder.gold_needle, trial=0)
    turns = [m for m in trial.rendered.messages if "4 mm hex key" in m.content]
    assert len(turns) == 1
    assert turns[0].role == "assistant"


def test_a_gold_passage_moves_through_a_string_slot(project):
    fixture = "fixtures/summarize_ticket/ops-4471.yaml"
    project.edit(
        fixture,
        "request: Summarize",
        "expected: server-side copy\ngold: 'Storage team says per-prefix limits cannot be raised per customer.'\nrequest: Summarize",
    )
    builder = _builder(project, "summarize_ticket")
    gold = builder.gold_needle
    assert gold.facts[0].startswith("Storage team says per-prefix limits")
    for depth, where in ((0.0, "start"), (1.0, "end")):
        text = builder.build(1800, depth, gold, trial=0).rendered.messages[-1].content
        assert text.count("Storage team says per-prefix limits") == 1
        thread = text.split("Ticket OPS-4471", 1)[1].strip()
        if where == "start":
            assert thread.startswith("Storage team says"), thread[:80]
        else:
            before_request = " ".join(thread.rsplit("Summarize this ticket", 1)[0].split())
            assert before_request.endswith("limits cannot be raised per customer."), thread[-200:]


@pytest.mark.parametrize(
    ("edit", "where", "words"),
    [
        (('expected: ["14 days", "fourteen days"]\n', ""), "typical.yaml:", "has no 'expected'"),
        (("gold: 0\n", "gold: 9\n"), "typical.yaml:7:", "gold = 9 is out of range"),
        (
            ('expected: ["14 days", "fourteen days"]', "expected: {regex: '14 (days'}"),
            "typical.yaml:6:",
            "regex does not compile",
        ),
    ],
)
def test_a_bad_gold_fixture_is_a_file_line_error(project, edit, where, words):
    project.edit("fixtures/rag_answer/typical.yaml", *edit)
    result = CliRunner().invoke(
        main, ["recall", "--config", str(project.config_path), "--prompt", "rag_answer", "--no-progress"]
    )
    assert result.exit_code == 2, result.output
    assert where in result.output, result.output
    assert words in result.output, result.output
    assert "hint:" in result.output
    assert "Traceback" not in result.output
