"""`needle init && needle budget` on Prompty repositories as a new user runs them: the provider a
`.prompty` names, a system-only template, and a template that does not render yet.

Real Prompty and prompt flow repositories hold templates written for Azure OpenAI, some of them a
single `system:` section (a valid chat request there; the Messages API refuses a request with no
user turn), and test prompts that render nothing a model could answer. The fixtures are ours, in
those shapes.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests.builders import write
from tests.needle_cli import run_needle

AZURE_V1 = """---
name: Trail guide
model:
  api: chat
  configuration:
    type: azure_openai
    azure_deployment: gpt-4o-mini
    azure_endpoint: ${ENV:AZURE_OPENAI_ENDPOINT}
sample:
  hiker: Ada
  question: Which trail suits a first hike?
---
system:
You suggest hiking trails for {{hiker}}, kindly and briefly.

# Question
{{question}}
"""

PROMPTY_2 = """---
name: Rota helper
model:
  id: gpt-4o
  provider: openai
  connection:
    kind: key
inputs:
  - name: shift
    kind: string
    example: night
---
system:
You plan the {{shift}} rota.

user:
Who is on call?
"""

PLACEHOLDER = """---
name: Ticket triage
model:
  configuration:
    type: azure_openai
    azure_deployment: ${env:TRIAGE_DEPLOYMENT}
sample:
  ticket: The printer is on fire.
---
system:
Sort this ticket: {{ticket}}

user:
Which queue?
"""

NOTHING_TO_ASK = """---
name: Empty probe
model:
  id: claude-haiku-5-5
---
system:
Say nothing.
"""


def _tables(root: Path) -> dict:
    return tomllib.loads((root / "needle.toml").read_text())["prompts"]


def test_init_measures_a_prompty_where_its_requests_go(tmp_path):
    write(tmp_path, "prompts/guide.prompty", AZURE_V1)
    write(tmp_path, "prompts/rota.prompty", PROMPTY_2)
    write(tmp_path, "prompts/triage.prompty", PLACEHOLDER)
    init = run_needle(["init"], cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    prompts = _tables(tmp_path)
    assert (prompts["guide"]["provider"], prompts["guide"]["model"]) == ("azure", "gpt-4o-mini")
    assert (prompts["rota"]["provider"], prompts["rota"]["model"]) == ("openai", "gpt-4o")
    # a placeholder is the application's to fill: the provider is known, the model is left to the user
    assert prompts["triage"]["provider"] == "azure"
    assert "model" not in prompts["triage"]
    assert "left out" not in init.stdout
    budget = run_needle(["budget"], cwd=tmp_path)
    assert budget.returncode == 0, budget.stdout + budget.stderr
    assert "3 passed" in budget.stdout


def test_a_system_only_template_is_a_request_on_azure_not_on_the_messages_api(tmp_path):
    write(tmp_path, "prompts/guide.prompty", AZURE_V1)
    assert run_needle(["init"], cwd=tmp_path).returncode == 0
    render = run_needle(["render", "guide"], cwd=tmp_path)
    assert render.returncode == 0, render.stderr
    assert "Which trail suits a first hike?" in render.stdout
    config = (tmp_path / "needle.toml").read_text()
    (tmp_path / "needle.toml").write_text(config.replace('provider = "azure"', 'provider = "anthropic"'))
    refused = run_needle(["render", "guide"], cwd=tmp_path)
    assert refused.returncode == 2
    assert "no-messages" in refused.stderr
    assert "guide.prompty" in refused.stderr


def test_a_template_that_does_not_render_waits_in_comments_while_the_others_run(tmp_path):
    write(tmp_path, "prompts/rota.prompty", PROMPTY_2)
    write(tmp_path, "prompts/probe.prompty", NOTHING_TO_ASK)
    init = run_needle(["init"], cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    assert "left out until they render (1): probe" in init.stdout
    assert set(_tables(tmp_path)) == {"rota"}
    budget = run_needle(["budget"], cwd=tmp_path)
    assert budget.returncode == 0, budget.stdout + budget.stderr
    # one "# " off each commented line gives the table back as init would have written it
    text = (tmp_path / "needle.toml").read_text()
    start = text.index("# Left out until it renders")
    block = text[start:].split("\n\n")[0].splitlines()[1:]
    restored = tomllib.loads("\n".join(line.removeprefix("# ") for line in block))
    assert restored["prompts"]["probe"]["template"] == "prompts/probe.prompty"
    assert "NOTE: does not render yet" in "\n".join(block)


def test_when_nothing_renders_the_tables_stay_and_the_error_is_shown(tmp_path):
    write(tmp_path, "prompts/probe.prompty", NOTHING_TO_ASK)
    init = run_needle(["init"], cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    assert "probe" in _tables(tmp_path)
    budget = run_needle(["budget"], cwd=tmp_path)
    assert budget.returncode == 2
    assert "probe.prompty" in budget.stderr


def test_a_chat_on_its_first_turn_is_a_request_on_openai_and_an_error_on_the_messages_api(tmp_path):
    """A retail chat's shape: the question inside the system text, the history appended after it as
    turns, empty on the first turn. OpenAI's chat API takes that request; the Messages API refuses
    it, and the error names the loop whose turns are missing."""
    write(
        tmp_path,
        "prompts/chat.jinja2",
        "system:\nYou answer about the ferry timetable.\n# question\n{{ question }}\n"
        "{% for turn in history %}\n{{ turn.role }}:\n{{ turn.content }}\n{% endfor %}\n",
    )
    write(tmp_path, "fixtures/chat.yaml", "question: When does the last ferry leave?\nhistory: []\n")
    table = '[prompts.chat]\ntemplate = "prompts/chat.jinja2"\nfixtures = ["fixtures/chat.yaml"]\n'
    write(tmp_path, "needle.toml", table + 'provider = "openai"\nmodel = "gpt-4o"\n')
    budget = run_needle(["budget"], cwd=tmp_path)
    assert budget.returncode == 0, budget.stdout + budget.stderr
    write(tmp_path, "needle.toml", table + 'provider = "anthropic"\n')
    refused = run_needle(["budget"], cwd=tmp_path)
    assert refused.returncode == 2
    assert "chat.jinja2:5" in refused.stderr  # the loop's line
    assert "`history`" in refused.stderr
