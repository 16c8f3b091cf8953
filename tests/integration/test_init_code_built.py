"""`needle init` on apps that build their requests in code, then `needle budget` as a new user runs it.

The apps are ours, small and of the shapes real ones have: an agent calling the Anthropic SDK with
a module-level system prompt and tool list, a Semantic Kernel plugin folder (skprompt.txt with
<message> tags), and a LangChain-style template module. The builders run for real (sandboxed
worker); nothing of the app is imported by init.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import yaml

from tests.builders import write
from tests.needle_cli import run_needle

AGENT = """
import anthropic

client = anthropic.Anthropic()

GUIDE = "You answer for a ferry company. Use only the timetable notes you are given."
TOOLS = [
    {
        "name": "find_crossing",
        "description": "Look up a crossing by its departure port and date.",
        "input_schema": {
            "type": "object",
            "properties": {"port": {"type": "string"}, "date": {"type": "string"}},
            "required": ["port"],
        },
    }
]


def reply(question: str, notes: str) -> str:
    answer = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=600,
        system=GUIDE,
        tools=TOOLS,
        messages=[{"role": "user", "content": notes + "\\n\\n" + question}],
    )
    return answer.content[0].text
"""


def _init_and_budget(root: Path) -> tuple[dict, str, str]:
    init = run_needle(["init"], cwd=root)
    assert init.returncode == 0, init.stderr
    budget = run_needle(["budget"], cwd=root)
    return (
        tomllib.loads((root / "needle.toml").read_text()),
        budget.stdout + budget.stderr,
        str(budget.returncode),
    )


@pytest.mark.slow
def test_init_on_an_sdk_agent_writes_a_builder_entry_that_budgets(tmp_path):
    root = tmp_path / "ferry"
    write(root, "ferry/agent.py", AGENT, dedent=True)
    write(root, "ferry/__init__.py", "")
    config, out, rc = _init_and_budget(root)
    prompt = config["prompts"]["agent_reply"]
    assert prompt["builder"] == "needle_builders/agent_reply.py:build"
    assert config["files"]["builders"] is True
    stub = (root / "needle_builders/agent_reply.py").read_text()
    assert "app_constant('GUIDE')" in stub
    assert "app_constant('TOOLS')" in stub
    assert rc == "0", out
    assert "agent_reply" in out
    assert "PASS" in out
    assert "note:" not in out  # nothing is wrong: no word about the builders' Python
    rendered = run_needle(["render", "agent_reply"], cwd=root)
    assert "You answer for a ferry company." in rendered.stdout  # the app's own system prompt
    assert "find_crossing" in rendered.stdout


@pytest.mark.slow
def test_init_never_overwrites_a_stub_and_a_second_init_keeps_the_users_edits(tmp_path):
    root = tmp_path / "ferry"
    write(root, "agent.py", AGENT, dedent=True)
    write(
        root,
        "needle_builders/agent_reply.py",
        "def build(**_):\n    return [{'role': 'user', 'content': 'mine'}]\n",
    )
    assert run_needle(["init"], cwd=root).returncode == 0
    assert "mine" in (root / "needle_builders/agent_reply.py").read_text()
    assert "kept as they were" in (root / "needle.toml").read_text()


@pytest.mark.slow
def test_semantic_kernel_plugin_is_a_template_with_a_sample_fixture(tmp_path):
    root = tmp_path / "skapp"
    write(
        root,
        "plugins/Harbour/Answer/skprompt.txt",
        '<message role="system">You help travellers with the harbour timetable.</message>\n'
        '<message role="user">Timetable:\n{{$notes}}\n\nQuestion: {{$question}}</message>\n',
    )
    write(root, "plugins/Harbour/Answer/config.json", '{"schema": 1, "description": "answers"}')
    config, out, rc = _init_and_budget(root)
    prompt = config["prompts"]["answer"]  # the function's folder names it
    assert prompt["template"] == "plugins/Harbour/Answer/skprompt.txt"  # rendered as SK does
    assert prompt["fixtures"] == ["fixtures/answer.yaml"]  # written: SK functions keep no data
    assert "files" not in config  # no builder: nothing of the app's runs
    assert (prompt["context_var"], prompt["question_var"]) == ("notes", "question")
    assert rc == "0", out
    rendered = run_needle(["render", "answer"], cwd=root).stdout
    assert "--- system ---\nYou help travellers" in rendered
    assert "Which plan includes priority support" in rendered  # the fixture's question, in the user turn


@pytest.mark.slow
def test_a_template_module_is_formatted_and_a_missing_package_is_named_at_its_import(tmp_path):
    root = tmp_path / "chain"
    # the app's module, as a LangChain app writes it (the library is not installed here)
    write(
        root,
        "app/prompts.py",
        "from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder\n\n"
        "ANSWER = ChatPromptTemplate.from_messages([\n"
        '    ("system", "Answer from these passages:\\n{passages}"),\n'
        '    MessagesPlaceholder("chat_history"),\n'
        '    ("human", "{user_question}"),\n'
        "])\n",
    )
    write(root, "app/__init__.py", "")
    config, out, rc = _init_and_budget(root)
    prompt = config["prompts"]["answer"]
    assert prompt["builder"] == "needle_builders/answer.py:build"
    assert prompt["question_var"] == "user_question"
    fixture = yaml.safe_load((root / prompt["fixtures"][0]).read_text())
    assert isinstance(fixture["chat_history"], list)  # a placeholder holds turns
    assert "from app.prompts import ANSWER as TEMPLATE" in (root / "needle_builders/answer.py").read_text()
    assert rc == "2"
    assert (
        "app/prompts.py:1: the builder needle_builders/answer.py:build imports `langchain_core`, which "
        in out
    )
    assert "the builder's Python cannot import" in out
    assert "builder_python" in out  # what to do
    assert "Traceback" not in out


@pytest.mark.slow
def test_the_readme_demo_prints_no_builder_note():
    from tests.builders import EXAMPLES

    budget = run_needle(["budget", "--config", str(EXAMPLES / "needle.toml")])
    assert budget.returncode in (0, 1), budget.stderr
    assert "support_built" in budget.stdout  # the builder ran
    assert "note:" not in budget.stderr
    assert "NEEDLE_BUILDER_PYTHON" not in budget.stdout + budget.stderr


def test_nothing_found_names_builders_and_recorded_requests(tmp_path):
    write(tmp_path, "main.py", "print('hello')\n")
    out = run_needle(["init"], cwd=tmp_path)
    assert out.returncode == 2
    assert "builder = " in out.stdout + out.stderr
    assert 'request = "x.json"' in out.stdout + out.stderr
    assert not (tmp_path / "needle.toml").exists()


def _venv_with(folder: Path, module: str) -> Path:
    """A venv (no pip) at FOLDER/.venv whose site-packages holds MODULE.py; its Python."""
    import glob
    import shutil
    import subprocess
    import sys

    base = shutil.which("python3.11", path="/usr/bin:/usr/local/bin") or sys.executable
    subprocess.run([base, "-m", "venv", "--without-pip", str(folder / ".venv")], check=True, timeout=120)
    (site,) = glob.glob(str(folder / ".venv/lib/python3*/site-packages"))
    Path(site, f"{module}.py").write_text("HARBOUR_RULES = 'Boarding closes ten minutes before departure.'\n")
    return folder / ".venv/bin/python"


BUILDS_WITH_PACKAGE = (
    "from harbour_rules_pkg import HARBOUR_RULES\n\n\n"
    "def build(question, **_):\n"
    "    return [{'role': 'system', 'content': HARBOUR_RULES}, {'role': 'user', 'content': question}]\n"
)
CONFIG = '[prompts.built]\nbuilder = "b.py:build"\nfixtures = ["f.yaml"]\n\n[files]\nbuilders = true\n'


@pytest.mark.slow
def test_the_projects_venv_runs_the_builders_when_its_user_can_use_it(tmp_path):
    import os
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="needle-venv-", dir="/tmp"))
    try:
        os.chmod(shared, 0o755)  # noqa: S103 - the builders user must reach the venv, as in /opt
        write(shared, "b.py", BUILDS_WITH_PACKAGE)
        write(shared, "f.yaml", "question: When does boarding close?\n")
        write(shared, "needle.toml", CONFIG)
        _venv_with(shared, "harbour_rules_pkg")
        out = run_needle(["render", "built"], cwd=shared)
        assert out.returncode == 0, out.stderr
        assert "Boarding closes ten minutes" in out.stdout
        assert "note:" not in out.stderr
    finally:
        import shutil

        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.slow
def test_a_venv_the_builders_user_cannot_enter_is_named_with_the_way_out(tmp_path):
    import os

    if os.geteuid() != 0:
        pytest.skip("builders drop to `nobody` only when needle runs as root")
    root = tmp_path / "app"  # under pytest's own folder, closed to other users (0700), like /root
    write(root, "b.py", BUILDS_WITH_PACKAGE)
    write(root, "f.yaml", "question: When does boarding close?\n")
    write(root, "needle.toml", CONFIG)
    _venv_with(root, "harbour_rules_pkg")
    out = run_needle(["render", "built"], cwd=root)
    assert out.returncode == 2
    text = out.stdout + out.stderr
    assert "b.py:1: the builder b.py:build imports `harbour_rules_pkg`" in text
    assert "the project's venv" in text
    assert "is closed to other users" in text
    assert "builder_python" in text
    assert "Traceback" not in text


@pytest.mark.slow
def test_a_semantic_kernel_handlebars_chat_renders_its_history_loop(tmp_path):
    root = tmp_path / "skchat"
    write(
        root,
        "prompts/Desk.yaml",
        """
        name: Desk
        template: |
          <message role="system">You staff the front desk of a rowing club.</message>
          {{#each history}}
            <message role="{{Role}}">{{~Content~}}</message>
          {{/each}}
        template_format: handlebars
        input_variables:
          - name: history
        """,
        dedent=True,
    )
    config, out, rc = _init_and_budget(root)
    prompt = config["prompts"]["Desk"]
    assert prompt["template"] == "prompts/Desk.yaml"
    assert prompt["context_var"] == "history"
    assert rc == "0", out
    rendered = run_needle(["render", "Desk"], cwd=root).stdout
    turns = [line for line in rendered.splitlines() if line.startswith("--- ")]
    assert turns == ["--- system ---", "--- user ---", "--- assistant ---", "--- user ---"]
    assert "Is the Starter plan enough" in rendered  # {{~Content~}} of the fixture's first turn


@pytest.mark.slow
def test_semantic_kernel_prompts_kept_in_methods_get_one_builder_each(tmp_path):
    root = tmp_path / "skcode"
    method = (
        "    async def prompt(self, question):\n"
        "        prompt_template = '''\n        {intro}\n        Earlier turns:\n        {{{{$history}}}}\n"
        "        Question: {{{{$input}}}}\n        '''\n"
        "        return self.kernel.create_semantic_function(prompt_template, max_tokens=500)\n"
    )
    write(
        root,
        "app/patterns.py",
        "class Brief:\n"
        + method.format(intro="You brief the lifeguards on duty.")
        + "\n\nclass Long:\n"
        + method.format(intro="You write the season report of the lido."),
    )
    config, out, rc = _init_and_budget(root)
    assert sorted(config["prompts"]) == ["brief_prompt", "long_prompt"]
    assert rc == "0", out
    brief = run_needle(["render", "brief_prompt"], cwd=root).stdout
    assert "You brief the lifeguards" in brief  # each method's own string, read from the source
    assert "season report" not in brief
    assert "Which plan includes priority support" in brief


@pytest.mark.slow
def test_an_f_string_system_prompt_is_measured_with_its_run_time_values_as_placeholders(tmp_path):
    rules = "Answer questions about the tide tables of the harbour. " * 5
    write(
        tmp_path,
        "tides.py",
        "import datetime\n"
        f'HARBOUR_SYSTEM_PROMPT = f"""{rules}Today is {{datetime.date.today():%d %B}}."""\n'
        "def ask(client, q):\n"
        "    return client.messages.create(model='m', max_tokens=99, system=HARBOUR_SYSTEM_PROMPT, messages=[])\n",
    )
    assert run_needle(["init"], cwd=tmp_path).returncode == 0
    out = run_needle(["render", "tides_ask"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Today is {datetime.date.today()}." in out.stdout
    assert "tide tables of the harbour" in out.stdout
