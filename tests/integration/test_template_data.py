"""A template's own data and case files, end to end through the CLI: a ``.prompty`` whose only data
is its ``sample:`` measured by ``needle check`` against the fake API, ``.jsonl``/``.csv`` fixtures
as one case a line/row, slots checked against the template before a run, and a needle the template
drops explained by what dropped it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench.workload import CLAUDE_DEFAULTS
from needle_action.cli import main
from tests.builders import Project
from tests.fakes.simulated_model import SimulatedModel, flat
from tests.needle_cli import needle_env, run_needle

# the shape of a retrieval app's answer prompt: the retrieved notes in the system text (a list of
# mappings looped over), the question in the user turn, a tool declared in the front matter
HARBOUR_PROMPTY = """---
name: Harbour helpdesk
description: Answers ferry questions from retrieved timetable notes.
model:
  api: chat
  parameters:
    max_tokens: 200
    tools:
      - type: function
        function:
          name: lookup_timetable
          description: Look up one route's timetable.
          parameters:
            type: object
            properties:
              route: {type: string}
            required: [route]
inputs:
  sources:
    type: array
  question:
    type: string
sample:
  sources:
    - title: Winter timetable
      text: The first ferry leaves the north pier at 06:40 on weekdays.
    - title: Fares
      text: A return ticket costs the same as two singles after 18:00.
  question: When does the first weekday ferry leave?
---
system:
You answer questions about the harbour ferries using only the notes below.

# Notes
{% for s in sources %}
## {{ s.title }}
{{ s.text }}
{% endfor %}

user:
{{ question }}
"""

RECALL = """
[defaults.recall]
sizes = [700]
depths = [0.0, 1.0]
trials = 2
threshold = 0.8
max_output_tokens = 32
"""


def needle_cli(args, fake, cache, *, cwd=None):
    """`needle ARGS` in a real process pointed at FAKE, from CWD (the repository, as a user runs it)."""
    env = needle_env(
        ANTHROPIC_BASE_URL=fake.base_url,
        ANTHROPIC_API_KEY=fake.api_key,
        NEEDLE_CACHE_DIR=str(cache),
        NO_COLOR="1",
    )
    return run_needle(args, env=env, cwd=cwd, timeout=600)


def needle_here(args, fake, cache, *, cwd: Path):
    """`needle ARGS` in this process (click's runner) from CWD, with :func:`needle_cli`'s environment:
    for the tests whose point is the message, not the process (one real-process run stays above)."""
    env = {
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": fake.api_key,
        "NEEDLE_CACHE_DIR": str(cache),
        "NO_COLOR": "1",
    }
    here = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args, env=env)
    finally:
        os.chdir(here)


def _messages(fake) -> list[dict]:
    return [r["json"] for r in fake.requests if r["path"].endswith("/v1/messages")]


def _project(tmp_path, template: str, extra: str = "", name: str = "prompts/answer.prompty") -> Project:
    table = f"""
[prompts.answer]
template = "{name}"
context_var = "sources"
question_var = "question"
{extra}"""
    return (
        Project(tmp_path / "repo")
        .template(name, template)
        .config(CLAUDE_DEFAULTS.format(model="claude-sonnet-5-5") + RECALL + table, dedent=False)
    )


@pytest.mark.slow  # a real `needle check` with recall (~3 s idle); the prompty render test below stays fast
def test_a_prompty_whose_only_data_is_its_sample_is_measured_by_check(tmp_path, fake_anthropic):
    fake_anthropic.responder = SimulatedModel(flat(0.97), seed=1)
    project = _project(tmp_path, HARBOUR_PROMPTY)
    out = tmp_path / "out.json"
    done = needle_cli(
        ["check", "--config", str(project.config_path), "--json", str(out)], fake_anthropic, tmp_path / "c"
    )
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr
    data = json.loads(out.read_text())
    (prompt,) = data["prompts"]
    assert [c["fixture"] for c in prompt["cases"]] == ["sample"]  # the sample is the case, by name
    cells = prompt["recall"]["cells"]
    assert len(cells) == 2
    assert all(c["trials"] == 2 for c in cells)
    sent = _messages(fake_anthropic)
    assert len(sent) == 4
    # the filler went where the sample's notes go: items under "## title" headings in the system
    # text, the question alone in the user turn, the front matter's tool declared
    assert all(
        str(r["system"] if isinstance(r["system"], str) else r["system"][0]["text"]).count("\n## ") > 2
        for r in sent
    )
    assert all(r["tools"][0]["name"] == "lookup_timetable" for r in sent)


def test_a_fixture_file_overrides_the_sample_key_by_key(tmp_path, fake_anthropic):
    project = _project(tmp_path, HARBOUR_PROMPTY, extra='fixtures = ["fixtures/late.yaml"]')
    project.fixture("fixtures/late.yaml", {"question": "Is there a ferry after midnight?"})
    done = needle_cli(
        ["render", "answer", "--config", str(project.config_path)], fake_anthropic, tmp_path / "c"
    )
    assert done.returncode == 0, done.stderr
    assert "Is there a ferry after midnight?" in done.stdout  # the fixture's question
    assert "06:40 on weekdays" in done.stdout  # the sample's notes, which the fixture does not give


JSONL = """{"sources": ["The tram depot opens at five."], "question": "When does the depot open?"}

{"sources": ["Bikes ride free on Sundays."], "question": "Do bikes pay on Sundays?"}
{"sources": ["Lost property waits at desk B."], "question": "Where is lost property?"}
"""


def test_a_jsonl_fixture_with_three_lines_gives_three_budget_cases(tmp_path, fake_anthropic):
    template = "system:\nAnswer from the notes.\n{% for s in sources %}- {{ s }}\n{% endfor %}user:\n{{ question }}\n"
    project = _project(tmp_path, template, extra='fixtures = ["data/cases.jsonl"]', name="prompts/answer.j2")
    project.file("data/cases.jsonl", JSONL)
    out = tmp_path / "budget.json"
    done = needle_cli(
        ["budget", "--config", str(project.config_path), "--json", str(out)], fake_anthropic, tmp_path / "c"
    )
    assert done.returncode == 0, done.stderr
    cases = json.loads(out.read_text())["prompts"][0]["cases"]
    assert [c["fixture"] for c in cases] == ["data/cases.jsonl:1", "data/cases.jsonl:3", "data/cases.jsonl:4"]
    assert len({c["content_hash"] for c in cases}) == 3  # three different cases, not one thrice
    assert "cases.jsonl:3" in done.stdout


def test_a_bad_jsonl_line_is_an_error_at_its_line(tmp_path, fake_anthropic):
    template = "user:\n{{ sources }} {{ question }}\n"
    project = _project(tmp_path, template, extra='fixtures = ["data/cases.jsonl"]', name="prompts/answer.j2")
    project.file("data/cases.jsonl", '{"sources": "a", "question": "b"}\n{"sources": "a", question: 1}\n')
    done = needle_cli(["budget", "--config", str(project.config_path)], fake_anthropic, tmp_path / "c")
    assert done.returncode == 2, done.stderr
    assert "data/cases.jsonl:2" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_csv_fixture_gives_one_case_a_row(tmp_path, fake_anthropic):
    template = "user:\n{{ sources }}\n\n{{ question }}\n"
    project = _project(tmp_path, template, extra='fixtures = ["data/cases.csv"]', name="prompts/answer.j2")
    project.file(
        "data/cases.csv",
        'sources,question\n"Gate 4 closes at noon, sharp.",When does gate 4 close?\n\nQuiet coach is car C.,Which car is quiet?\n',
    )
    out = tmp_path / "budget.json"
    done = needle_cli(
        ["budget", "--config", str(project.config_path), "--json", str(out)], fake_anthropic, tmp_path / "c"
    )
    assert done.returncode == 0, done.stderr
    cases = json.loads(out.read_text())["prompts"][0]["cases"]
    assert [c["fixture"] for c in cases] == ["data/cases.csv:1", "data/cases.csv:2"]
    render = needle_here(  # in this process: the budget above was the real one
        ["render", "answer", "--config", str(project.config_path), "--fixture", "data/cases.csv:1"],
        fake_anthropic,
        tmp_path / "c",
        cwd=tmp_path,
    )
    assert render.exit_code == 0, render.stderr
    assert "Gate 4 closes at noon, sharp." in render.stdout
    assert "Quiet coach" not in render.stdout


@pytest.mark.parametrize(
    ("key", "value"),
    [("question_var", "sources"), ("question_var", "querstion"), ("context_var", "documents")],
)
def test_slots_the_template_does_not_read_are_config_errors_before_any_call(
    tmp_path, fake_anthropic, key, value
):
    project = _project(tmp_path, HARBOUR_PROMPTY)
    project.edit(
        "needle.toml", f'{key} = "{"question" if key == "question_var" else "sources"}"', f'{key} = "{value}"'
    )
    done = needle_cli(["check", "--config", str(project.config_path)], fake_anthropic, tmp_path / "c")
    assert done.returncode == 2, done.stderr
    lines = project.config_path.read_text().splitlines()
    line = next(i for i, text in enumerate(lines, start=1) if text.startswith(f"{key} ="))
    assert f"needle.toml:{line}:" in done.stderr
    assert "Traceback" not in done.stderr
    assert not _messages(fake_anthropic)
    if value == "querstion":
        assert "did you mean 'question'" in done.stderr


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("{{ notes | truncate(60) }}", "truncate"),
        ("{{ notes | upper }}", "upper"),
        ("{% if show_notes %}{{ notes }}{% endif %}", "{% if %}"),
    ],
)
def test_a_needle_the_template_drops_is_explained(tmp_path, fake_anthropic, body, said):
    template = f"system:\nAnswer from the notes.\nuser:\n{body}\n\n{{{{ question }}}}\n"
    project = (
        Project(tmp_path / "repo")
        .template("prompts/qa.j2", template)
        .fixture(
            "fixtures/qa.yaml",
            {"notes": "The depot opens at nine.", "question": "When?", "show_notes": False},
        )
        .config(
            CLAUDE_DEFAULTS.format(model="claude-sonnet-5-5")
            + "[defaults.recall]\nsizes = [600]\ndepths = [0.5]\ntrials = 1\nmax_output_tokens = 32\n"
            + '[prompts.qa]\ntemplate = "prompts/qa.j2"\nfixtures = ["fixtures/qa.yaml"]\n'
            'context_var = "notes"\nquestion_var = "question"\nundefined = "lenient"\n',
            dedent=False,
        )
    )
    done = needle_here(
        ["recall", "--config", "needle.toml"], fake_anthropic, tmp_path / "c", cwd=project.root
    )
    assert done.exit_code == 2, done.stderr + done.stdout
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception  # no traceback
    assert "does not appear in the rendered prompt" in done.stderr
    assert said in done.stderr
    assert str(tmp_path) not in done.stderr  # a relative path
    assert "prompts/qa.j2" in done.stderr


# ----------------------------------------------------------------- shapes from real repositories

SHAPES = Path(__file__).resolve().parents[1] / "data" / "real_tpl"


def _shapes(tmp_path) -> Project:
    project = Project(tmp_path / "shapes")
    for path in SHAPES.rglob("*"):
        if path.is_file() and path.name != "README.md":
            project.file(path.relative_to(SHAPES).as_posix(), path.read_text())
    return project.config(
        CLAUDE_DEFAULTS.format(model="claude-sonnet-5-5")
        + """
[prompts.column]
template = "prompts/column.prompty"

[prompts.shop]
template = "prompts/shop.prompty"

[prompts.faq]
template = "prompts/faq.jinja2"
fixtures = ["data/questions.jsonl"]
context_var = "docs"
question_var = "question"
""",
        dedent=False,
    )


@pytest.mark.slow  # five CLI processes
def test_the_real_shapes_render_as_their_apps_would(tmp_path, fake_anthropic):
    project = _shapes(tmp_path)
    out = tmp_path / "budget.json"
    args = ["budget", "--config", str(project.config_path), "--json", str(out)]
    first = needle_cli(args, fake_anthropic, tmp_path / "c")
    assert first.returncode == 0, first.stderr
    cases = {p["name"]: p["cases"] for p in json.loads(out.read_text())["prompts"]}
    # a sample's ${file:...} values are read: the notes and the gear are in the column's prompt
    column = needle_cli(
        ["render", "column", "--config", str(project.config_path)], fake_anthropic, tmp_path / "c"
    )
    assert "ice on the puddles" in column.stdout
    assert "Trail spikes: Slip-on chains" in column.stdout
    assert "${file:" not in column.stdout
    # the JSON Lines dataset: three cases, named by their lines (line 3 is blank)
    assert [c["fixture"] for c in cases["faq"]] == [
        "data/questions.jsonl:1",
        "data/questions.jsonl:2",
        "data/questions.jsonl:4",
    ]
    # a method printed from a string has no address: the same prompt, the same hash, every run
    again = needle_cli(args, fake_anthropic, tmp_path / "c")
    assert again.returncode == 0, again.stderr
    shop_again = {p["name"]: p["cases"] for p in json.loads(out.read_text())["prompts"]}["shop"]
    assert shop_again[0]["content_hash"] == cases["shop"][0]["content_hash"]
    shop = needle_cli(
        ["render", "shop", "--config", str(project.config_path)], fake_anthropic, tmp_path / "c"
    )
    assert "item: <built-in method title of str object>" in shop.stdout
    assert " at 0x" not in shop.stdout


def test_a_user_turn_that_renders_empty_names_its_variable(tmp_path, fake_anthropic):
    # a Prompty 2 file whose question has no default: the user turn vanishes with it
    template = "---\nname: ask\ninputs:\n  - name: question\n    kind: string\n---\nsystem:\nBe brief.\n\nuser:\n{{question}}\n"
    project = _project(tmp_path, template)
    done = needle_cli(["budget", "--config", "needle.toml"], fake_anthropic, tmp_path / "c", cwd=project.root)
    assert done.returncode == 2, done.stderr
    assert "prompts/answer.prompty:11:" in done.stderr
    assert "prints only `question`" in done.stderr
