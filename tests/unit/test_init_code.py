"""needle init reads code with ast: SDK calls, request dicts, LangChain/LlamaIndex templates, SK files;
and guesses the question variable from names and position, never a pass-through."""

from __future__ import annotations

import pytest

from needle_action.assemble.templates.semantic_kernel import sk_format
from needle_action.config import load_config
from needle_action.core.errors import ConfigError, NeedleError
from needle_action.scaffold.code import find_sites
from needle_action.scaffold.starter import write_starter
from needle_action.scaffold.templates import FoundTemplate, _guess
from tests.builders import Project, write


def test_sdk_calls_request_dicts_and_templates_are_found_without_running_the_code(tmp_path):
    canary = tmp_path / "ran"
    Project(tmp_path).files(
        {
            "bot/chat.py": f"open({str(canary)!r}, 'w').write('x')\n"
            "from openai import OpenAI\n"
            "RULES = 'Keep answers short.'\n"
            "def ask(client, text):\n"
            "    return client.chat.completions.create(model='gpt-4o', messages=[\n"
            "        {'role': 'system', 'content': RULES}, {'role': 'user', 'content': text}])\n",
            "bot/raw.py": "def body(q):\n    return {'model': 'm', 'messages': [{'role': 'user', 'content': q}]}\n",
            "bot/resp.py": "def go(c, q):\n    return c.responses.create(model='m', instructions='Be kind.', input=q)\n",
            "bot/li.py": "from llama_index.core import PromptTemplate\n"
            "QA = PromptTemplate('Context: {context_str}\\nQ: {query_str}')\n",
            "bot/broken.py": "def (:\n",
            "tests/test_bot.py": "def t(c):\n    c.messages.create(model='m', messages=[])\n",
        }
    )
    sites = find_sites(tmp_path, tmp_path)
    assert not canary.exists()
    kinds = [(s.file, s.kind) for s in sites]
    assert kinds[-1] == ("tests/test_bot.py", "anthropic")  # code under tests/ comes last
    chat = next(s for s in sites if s.kind == "openai-chat")
    assert (chat.function, chat.constants.get("system"), chat.variables) == (
        "ask",
        "RULES",
        ["client", "text"],
    )
    assert any(s.kind == "openai-responses" and s.keywords["instructions"] == "'Be kind.'" for s in sites)
    assert ("bot/raw.py", "request-dict") in kinds
    qa = next(s for s in sites if s.kind == "llama_index")
    assert (qa.target, qa.variables) == ("QA", ["context_str", "query_str"])


def test_a_request_dict_inside_a_function_with_an_sdk_call_is_the_same_request(tmp_path):
    write(
        tmp_path,
        "a.py",
        "def go(c, q):\n    req = {'model': 'm', 'messages': [{'role': 'user', 'content': q}]}\n"
        "    return c.messages.create(**req)\n",
    )
    assert [s.kind for s in find_sites(tmp_path, tmp_path)] == ["anthropic"]


def test_code_built_starter_loads(tmp_path):
    write(
        tmp_path,
        "svc.py",
        "def f(c, q):\n    return c.messages.create(model='m', max_tokens=9, messages=[])\n",
    )
    config = load_config(write_starter(tmp_path, tmp_path / "needle.toml"))
    assert config.prompts["svc_f"].builder == "needle_builders/svc_f.py:build"
    assert config.files.builders


def test_a_symlinked_stub_folder_is_never_written_through(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "app"
    write(root, "svc.py", "def f(c, q):\n    return c.messages.create(model='m', messages=[])\n")
    (root / "needle_builders").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ConfigError, match="symlink"):
        write_starter(root, root / "needle.toml")
    assert not list(outside.iterdir())


@pytest.mark.parametrize(
    ("text", "name", "line"),
    [
        ("Hello\n{{$input}}\n", "skprompt.txt", 2),
        (
            'name: x\ntemplate: |\n  <message role="user">{{q}}</message>\ntemplate_format: handlebars\n',
            "p.yaml",
            4,
        ),
        ("{{ time.now }} and {{$city}}", "prompt.j2", 1),
    ],
)
def test_semantic_kernel_formats_are_recognised_at_their_line(text, name, line):
    found = sk_format(text, name)
    assert found is not None
    assert found[1] == line


def test_jinja_is_not_taken_for_semantic_kernel():
    assert sk_format("{{ question }}{% for d in docs %}{{ d }}{% endfor %}", "a.j2") is None
    assert sk_format("template_format: jinja2\ntemplate: '{{ q }}'\n", "p.yaml") is None


def test_a_config_pointing_at_an_skprompt_renders_it_as_sk_does(tmp_path):
    from needle_action.assemble.render import render_case

    write(
        tmp_path,
        "plugins/Qa/skprompt.txt",
        '<message role="system">You answer for the allotment society.</message>\n'
        "Plot notes:\n{{$notes}}\nQuestion: {{$question}}\n",
    )
    write(tmp_path, "f.yaml", "notes: Water is off in January.\nquestion: When is the water off?\n")
    write(
        tmp_path, "needle.toml", '[prompts.qa]\ntemplate = "plugins/Qa/skprompt.txt"\nfixtures = ["f.yaml"]\n'
    )
    config = load_config(tmp_path / "needle.toml")
    rendered = render_case(config, config.prompts["qa"], tmp_path / "f.yaml")
    assert rendered.system == "You answer for the allotment society."
    # text outside the <message> tags is a user turn, as SK's chat history reads a rendered prompt
    assert [m.role for m in rendered.messages] == ["user"]
    assert rendered.texts()[-1] == "Plot notes:\nWater is off in January.\nQuestion: When is the water off?"


def test_sk_literal_text_keeps_jinjas_delimiters_verbatim(tmp_path):
    """SK text is not Jinja: a literal `{% endraw %}`, `{#`, `}}` or a `{` right before a variable is
    text the model reads, not template syntax (nor a way out of it)."""
    from needle_action.assemble.render import render_case

    literal = "Keep {% endraw %}{% if x %}, {# note #}, 100%} and }} as written: {"
    write(tmp_path, "plugins/Qa/skprompt.txt", literal + "{{$question}}\n")
    write(tmp_path, "f.yaml", "question: Why?\n")
    write(
        tmp_path, "needle.toml", '[prompts.qa]\ntemplate = "plugins/Qa/skprompt.txt"\nfixtures = ["f.yaml"]\n'
    )
    config = load_config(tmp_path / "needle.toml")
    rendered = render_case(config, config.prompts["qa"], tmp_path / "f.yaml")
    assert rendered.texts()[-1] == literal + "Why?"


def test_an_sk_function_call_is_an_error_at_its_line(tmp_path):
    from needle_action.assemble.render import render_case

    write(tmp_path, "p/skprompt.txt", "Today:\n{{time.today}}\n{{$input}}\n")
    write(tmp_path, "f.yaml", "input: hello\n")
    write(tmp_path, "needle.toml", '[prompts.p]\ntemplate = "p/skprompt.txt"\nfixtures = ["f.yaml"]\n')
    config = load_config(tmp_path / "needle.toml")
    with pytest.raises(NeedleError, match="function call") as err:
        render_case(config, config.prompts["p"], tmp_path / "f.yaml")
    assert err.value.location.line == 2
    assert err.value.exit_code == 2
    assert "builder" in (err.value.hint or "")


def test_a_handlebars_yaml_chat_loops_its_history_with_roles_from_the_data(tmp_path):
    from needle_action.assemble.render import render_case

    write(
        tmp_path,
        "Desk.yaml",
        'name: Desk\ntemplate: |\n  <message role="system">You staff the boathouse desk.</message>\n'
        '  {{#each history}}\n    <message role="{{Role}}">{{~Content~}}</message>\n  {{/each}}\n'
        "template_format: handlebars\n",
    )
    write(
        tmp_path,
        "h.yaml",
        "history:\n  - {role: user, content: 'Is the slipway open?'}\n"
        "  - {Role: assistant, Content: 'Until dusk.'}\n  - {role: user, content: 'And on Sundays?'}\n",
    )
    write(tmp_path, "needle.toml", '[prompts.d]\ntemplate = "Desk.yaml"\nfixtures = ["h.yaml"]\n')
    config = load_config(tmp_path / "needle.toml")
    rendered = render_case(config, config.prompts["d"], tmp_path / "h.yaml")
    assert rendered.system == "You staff the boathouse desk."
    assert [(m.role, t) for m, t in zip(rendered.messages, rendered.texts()[1:], strict=True)] == [
        ("user", "Is the slipway open?"),
        ("assistant", "Until dusk."),
        ("user", "And on Sundays?"),
    ]


def _guessed(text: str, variables: set[str]) -> FoundTemplate:
    found = FoundTemplate(path=None, rel="t.j2", name="t")  # type: ignore[arg-type]
    _guess(found, variables, text)
    return found


def test_a_pass_through_template_gets_no_question():
    found = _guessed("user:\n{{ prompt_text }}\n", {"prompt_text"})
    assert found.question_var is None
    assert found.context_var is None
    assert "builder" in (found.problem or "")
    assert "request" in (found.problem or "")


def test_the_question_printed_in_the_last_user_turn_wins():
    text = "system:\nYou rewrite {{ query }} for search.\n{{ documents }}\nuser:\n{{ input }}\n"
    found = _guessed(text, {"query", "documents", "input"})
    assert (found.context_var, found.question_var) == ("documents", "input")


def test_without_a_known_name_the_last_variable_of_the_user_turn_is_the_question():
    text = "system:\nHelp.\n{% for s in sources %}{{ s }}{% endfor %}\nuser:\nTicket {{ ticket_id }}: {{ ticket_body }}\n"
    found = _guessed(text, {"sources", "ticket_id", "ticket_body"})
    assert (found.context_var, found.question_var) == ("sources", "ticket_body")


def test_an_assistants_thread_message_is_no_request(tmp_path):
    # the Assistants API adds a user message to a thread: `client.beta.threads.messages.create`
    write(
        tmp_path,
        "a.py",
        "def send(c, t, text):\n    c.beta.threads.messages.create(t, role='user', content=text)\n",
    )
    assert find_sites(tmp_path, tmp_path) == []


def test_a_call_with_spread_params_takes_the_body_built_in_another_method(tmp_path):
    write(
        tmp_path,
        "loop.py",
        "GUIDE = 'Be precise.'\n"
        "class Bot:\n"
        "    def _params(self):\n"
        "        return {'model': self.model, 'system': GUIDE, 'messages': self.turns, 'tools': self.tools}\n"
        "    def run(self):\n"
        "        params = self._params()\n"
        "        return self.client.messages.create(**params)\n",
    )
    (site,) = find_sites(tmp_path, tmp_path)
    assert (site.kind, site.function, site.constants) == ("anthropic", "run", {"system": "GUIDE"})
    assert site.keywords["tools"] == "self.tools"


def test_a_system_prompt_kept_in_a_constant_is_measured_and_a_local_template_only_listed(tmp_path):
    long_text = "You are the assistant of a seed library. " * 10
    write(tmp_path, "prompts/main_prompt.py", f"librarian_prompt = {long_text!r}\nshort_prompt = 'hi'\n")
    write(
        tmp_path,
        "scripts/publish.py",
        "from langchain_core.prompts import ChatPromptTemplate\n"
        "def main():\n    return ChatPromptTemplate.from_messages([('system', '{x}')])\n",
    )
    text = write_starter(tmp_path, tmp_path / "needle.toml").read_text()
    config = load_config(tmp_path / "needle.toml")
    assert list(config.prompts) == ["librarian_prompt"]
    assert "#   scripts/publish.py:3 (langchain)" in text
    stub = (tmp_path / "needle_builders/librarian_prompt.py").read_text()
    assert "app_constant('librarian_prompt')" in stub


def test_a_stripped_system_constant_with_format_fields_gets_them_in_its_fixture(tmp_path):
    body = "You analyse the filings of {company} as of {today}. " + "Cite the page of each figure. " * 8
    write(tmp_path, "app/consts.py", f"GUIDE_SYSTEM = '''\n{body}\n'''.strip()\n")
    write_starter(tmp_path, tmp_path / "needle.toml")
    config = load_config(tmp_path / "needle.toml")
    assert config.prompts["guide_system"].builder == "needle_builders/guide_system.py:build"
    fixture = (tmp_path / "needle_builders/guide_system.yaml").read_text()
    assert "company:" in fixture
    assert "today:" in fixture
    assert ".format(**fields)" in (tmp_path / "needle_builders/guide_system.py").read_text()


def test_a_template_built_from_module_strings_reads_their_fields(tmp_path):
    # a template wrapping a list of messages that wraps a string: the fields are the string's
    text = "Draft the instructions of a bot for this job: {job}. " + "Keep it short. " * 20
    write(
        tmp_path,
        "core/maker.py",
        "from llama_index.core import ChatPromptTemplate\nfrom llama_index.core.llms import ChatMessage\n"
        f"MAKER_PROMPT_STR = {text!r}\n"
        "turns = [ChatMessage(role='system', content='You write prompts.'), "
        "ChatMessage(role='user', content=MAKER_PROMPT_STR)]\n"
        "MAKER = ChatPromptTemplate(turns)\n",
    )
    write(
        tmp_path,
        "core/old.py",
        "from llama_index.core.prompts.prompts import QuestionAnswerPrompt\n"
        "def qa(titles):\n    return QuestionAnswerPrompt(template=f'{titles} {{context_str}} {{query_str}}')\n",
    )
    sites = find_sites(tmp_path, tmp_path)
    assert [(s.kind, s.target, s.variables) for s in sites] == [
        ("llama_index", "MAKER", ["job"]),
        ("llama_index", None, ["context_str", "query_str"]),  # the older class, in a function
    ]  # and MAKER_PROMPT_STR is no prompt of its own: the template uses it


def test_the_action_never_runs_a_venv_of_the_checkout_unless_the_base_names_one(tmp_path):
    from needle_action.config.trust import apply_trust

    write(tmp_path, "t.j2", "user:\n{{ q }}\n")
    write(tmp_path, "needle.toml", '[prompts.p]\ntemplate = "t.j2"\n')
    head = load_config(tmp_path / "needle.toml")
    assert head.files.builder_python is None  # the developer's own run: the project's venv if usable
    effective, _ = apply_trust(head, head)
    assert effective.files.builder_python == "system"
    effective, _ = apply_trust(head, None)
    assert effective.files.builder_python == "system"
    based = head.model_copy(
        update={"files": head.files.model_copy(update={"builder_python": "/opt/v/bin/python"})}
    )
    effective, _ = apply_trust(head, based)
    assert effective.files.builder_python == "/opt/v/bin/python"


@pytest.mark.parametrize("setting", [".venv/bin/python", "{root}/.venv/bin/python", "{link}"])
def test_a_base_builder_python_inside_the_checkout_is_not_run_in_the_action(tmp_path, setting):
    """The checkout is the pull request's: an interpreter there (named relative, absolute, or through
    a link from outside that points in) could be replaced and would run before the builders' guard."""
    from needle_action.config.trust import apply_trust

    root = tmp_path / "repo"
    write(root, "t.j2", "user:\n{{ q }}\n")
    write(root, "needle.toml", '[prompts.p]\ntemplate = "t.j2"\n')
    link = tmp_path / "outside-python"
    link.symlink_to(root / ".venv" / "bin" / "python")
    head = load_config(root / "needle.toml")
    named = setting.format(root=root, link=link)
    based = head.model_copy(update={"files": head.files.model_copy(update={"builder_python": named})})
    effective, changes = apply_trust(head, based)
    assert effective.files.builder_python == "system"
    notes = [c.describe() for c in changes if c.key == "builder_python"]
    assert len(notes) == 1
    assert "lies in the checkout" in notes[0]
    assert named in notes[0]


def test_a_builder_python_that_does_not_exist_is_a_config_error(tmp_path):
    from needle_action.assemble.builder.sandbox import RunAs, choose_python

    with pytest.raises(ConfigError, match=r"builder_python names \.venv/bin/python, which does not exist"):
        choose_python(RunAs(), tmp_path, ".venv/bin/python")
    assert choose_python(RunAs(), tmp_path, "system").path  # needle's own (or a system one)


def test_init_never_writes_the_threshold_file_through_a_symlink(tmp_path):
    target = tmp_path / "elsewhere.toml"
    root = tmp_path / "app"
    write(root, "svc.py", "def f(c, q):\n    return c.messages.create(model='m', messages=[])\n")
    (root / "needle.toml").symlink_to(target)  # dangling: exists() is False
    for force in (False, True):
        with pytest.raises(ConfigError, match="symlink"):
            write_starter(root, root / "needle.toml", force=force)
    assert not target.exists()


def test_errors_in_a_translated_sk_yaml_point_at_the_files_own_line(tmp_path):
    from needle_action.assemble.render import render_case

    write(
        tmp_path,
        "Desk.yaml",
        'name: Desk\ntemplate: |\n  <message role="system">Short answers.</message>\n\n'
        '  {{#each turns}}\n    <message role="{{Role}}">{{Content}}</message>\n  {{/each}}\n'
        "template_format: handlebars\n",
    )
    write(tmp_path, "f.yaml", "other: 1\n")
    write(tmp_path, "needle.toml", '[prompts.d]\ntemplate = "Desk.yaml"\nfixtures = ["f.yaml"]\n')
    config = load_config(tmp_path / "needle.toml")
    with pytest.raises(NeedleError, match="'turns' is undefined") as err:
        render_case(config, config.prompts["d"], tmp_path / "f.yaml")
    assert err.value.location.line == 5  # the {{#each turns}} line, not the translation's


def test_an_sk_prompt_file_named_dot_prompt_is_no_dotprompt(tmp_path):
    # SK's older YAML prompt files use the .prompt extension too: read as Dotprompt, their YAML was
    # counted as the prompt's text, with no word
    from needle_action.assemble.render import render_case

    sk = (
        "name: Greeter\ndescription: says hello\n"
        'prompt: "You greet the members of the chess club.\\n\\n{{$history}}\\nBot: "\n'
        "input:\n  parameters:\n    - name: history\n"
    )
    write(tmp_path, "Plugins/Club/Prompts/Greeter.prompt", sk)
    write(tmp_path, "f.yaml", "history: hi\n")
    write(
        tmp_path,
        "needle.toml",
        '[prompts.g]\ntemplate = "Plugins/Club/Prompts/Greeter.prompt"\nfixtures = ["f.yaml"]\n',
    )
    config = load_config(tmp_path / "needle.toml")
    with pytest.raises(ConfigError, match="not Dotprompt") as err:
        render_case(config, config.prompts["g"], tmp_path / "f.yaml")
    assert err.value.location.line == 3
    (tmp_path / "needle.toml").unlink()
    write_starter(tmp_path, tmp_path / "needle.toml")
    config = load_config(tmp_path / "needle.toml")
    assert config.prompts["greeter"].builder == "needle_builders/greeter.py:build"
    assert config.prompts["greeter"].context_var == "history"


def test_a_call_through_with_raw_response_is_the_same_request(tmp_path):
    write(
        tmp_path,
        "loop.py",
        "def step(client, turns, tools):\n"
        "    return client.beta.messages.with_raw_response.create(model='m', max_tokens=9, messages=turns, tools=tools)\n",
    )
    (site,) = find_sites(tmp_path, tmp_path)
    assert (site.kind, site.function) == ("anthropic", "step")


def test_a_short_name_matches_only_a_whole_word():
    from needle_action.scaffold.templates import QUESTION_NAMES, guess_var

    assert guess_var({"task", "notes"}, QUESTION_NAMES) is None  # `ask` is not in `task`
    assert guess_var({"user_ask", "notes"}, QUESTION_NAMES) == "user_ask"


def test_a_stub_pastes_only_literals_from_the_apps_call():
    """The stub is code the builders run: a keyword's value is pasted only when it is a literal; an
    expression of the app's (even one starting with a quote) leaves the stub's own default."""
    from needle_action.scaffold.code import CodeSite
    from needle_action.scaffold.stubs import request_stub

    def stub(**keywords: str) -> str:
        site = CodeSite(file="app.py", line=3, kind="anthropic", keywords=keywords)
        return request_stub(site, "needle_builders/app.py", "claude-sonnet-5-5")

    literal = stub(model="'claude-haiku-5'", max_tokens="512")
    assert "\"model\": 'claude-haiku-5'," in literal
    crafted = stub(model="'x' + __import__('os').getcwd()", max_tokens="int('9' * 9)")
    code = "\n".join(line for line in crafted.splitlines() if not line.lstrip().startswith("#"))
    assert "__import__" not in code  # shown to the user in a comment, never in the code
    assert "int('9'" not in code
    assert '"model": "claude-sonnet-5-5",' in code
