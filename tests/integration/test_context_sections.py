"""Every token of the context variable counts as context, whatever shape it takes in the request:
a chat history of flat turns (one message each), nested ``{inputs, outputs}`` turns, a
tool_result; and the sections always add up to the total."""

from __future__ import annotations

import json

import pytest
import tiktoken

from needle_action.assemble.render import render_case
from needle_action.config import load_config
from needle_action.tokens import count_prompts
from tests.builders import Project
from tests.samples import history_template, tool

pytestmark = pytest.mark.usefixtures("fresh_token_cache")

DEFAULTS = """[defaults]
model = "gpt-4o"
tokenizer = "tiktoken:o200k_base"
provider = "openai"
"""

# one message per turn: the history loop of tests/samples.py over `log`
FLAT = history_template(
    "You plan ferry crossings for travellers. Use the conversation so far.",
    turns="log",
    text="text",
    ask="ask",
)

FLAT_FIXTURE = {
    "ask": "So which sailing should I book?",
    "log": [
        {
            "role": "user",
            "text": "I need to cross to the island on Saturday with a camper van of six metres.",
        },
        {
            "role": "assistant",
            "text": "Saturday has sailings at 07:40 and 13:15; vehicles over five metres pay the long-vehicle fare.",
        },
    ],
}

NESTED = """system:
You plan ferry crossings for travellers.
{% for turn in log %}
user:
{{ turn.inputs.message }}
assistant:
{{ turn.outputs.reply }}
{% endfor %}
user:
{{ ask }}
"""

NESTED_FIXTURE = {
    "ask": "And the return trip?",
    "log": [
        {
            "inputs": {"message": "Is there a night crossing from the mainland on weekdays?"},
            "outputs": {"reply": "Only on Fridays, leaving at 23:30 and arriving shortly after two."},
        },
        {
            "inputs": {"message": "Can I bring a dog on the Friday night boat?"},
            "outputs": {"reply": "Dogs travel in the pet lounge on deck four; bring a lead and water."},
        },
    ],
}

TOOLS = [
    tool(
        "search_timetable",
        "Look up sailings between two ports on a date.",
        {"query": {"type": "string", "description": "what to look up"}},
        required=("query",),
    )
]

RESULT = """system:
You plan ferry crossings for travellers.
user:
{% for row in rows %}{{ row }}
{% endfor %}
{{ ask }}
"""

RESULT_FIXTURE = {
    "ask": "Which boat arrives before noon?",
    "rows": [
        "Harbour line: departs 06:50, arrives 09:05, car deck open.",
        "Coastal line: departs 10:20, arrives 12:40, foot passengers only.",
        "Express line: departs 08:15, arrives 09:30, no vehicles.",
    ],
}


def _counted(tmp_path, template: str, fixture: dict, extra: str = "", model: str | None = None):
    defaults = DEFAULTS if model is None else DEFAULTS.replace('"gpt-4o"', f'"{model}"')
    toml = f"""{defaults}
[prompts.ferry]
template = "prompts/ferry.j2"
fixtures = ["fixtures/ferry.json"]
context_var = "{next(k for k in fixture if k != "ask")}"
question_var = "ask"
{extra}
"""
    project = Project(tmp_path).template("prompts/ferry.j2", template)
    project.file("fixtures/ferry.json", json.dumps(fixture)).file("tools.json", json.dumps(TOOLS))
    config = load_config(project.config(toml, dedent=False).config_path)
    prompt = config.prompts["ferry"]
    rendered = render_case(config, prompt, config.fixture_paths(prompt)[0])
    return rendered, count_prompts([rendered], prompt)[0]


def _tokens(texts: list[str]) -> int:
    enc = tiktoken.get_encoding("o200k_base")
    return sum(len(enc.encode(t)) for t in texts)


def test_a_flat_two_turn_history_counts_both_turns_as_context(tmp_path):
    rendered, count = _counted(tmp_path, FLAT, FLAT_FIXTURE)
    assert [m.role for m in rendered.messages] == ["user", "assistant", "user"]  # one message per turn
    both = _tokens([t["text"] for t in FLAT_FIXTURE["log"]])
    one = _tokens([FLAT_FIXTURE["log"][0]["text"]])
    assert count.sections["context"] >= both - 2 > one  # each turn's text less its placeholder
    assert sum(count.sections.values()) == count.tokens


def test_nested_input_output_turns_count_as_context(tmp_path):
    rendered, count = _counted(tmp_path, NESTED, NESTED_FIXTURE)
    assert len(rendered.messages) == 5
    leaves = [t["inputs"]["message"] for t in NESTED_FIXTURE["log"]]
    leaves += [t["outputs"]["reply"] for t in NESTED_FIXTURE["log"]]
    assert count.sections["context"] >= _tokens(leaves) - 4
    assert sum(count.sections.values()) == count.tokens


def test_a_tool_result_context_counts_as_context(tmp_path):
    extra = 'tools = "tools.json"\ncontext_as = "tool_result"'
    rendered, count = _counted(tmp_path, RESULT, RESULT_FIXTURE, extra, model="claude-sonnet-5-5")
    kinds = [b.get("type") for m in rendered.messages for b in m.blocks]
    assert "tool_result" in kinds
    assert count.sections["context"] >= _tokens(RESULT_FIXTURE["rows"]) - 2
    assert count.sections["tools"] > 0
    assert sum(count.sections.values()) == count.tokens


def test_a_string_context_still_counts_only_its_own_text(tmp_path):
    template = "system:\nYou plan ferry crossings.\nuser:\nTimetable:\n{{ notes }}\n\n{{ ask }}\n"
    fixture = {
        "ask": "When is the last boat?",
        "notes": "The last boat leaves the island at 21:10 on weekdays.",
    }
    _, count = _counted(tmp_path, template, fixture)
    own = _tokens([fixture["notes"]])
    assert own - 2 <= count.sections["context"] <= own + 2
    assert sum(count.sections.values()) == count.tokens


def test_document_blocks_count_as_context(tmp_path):
    extra = 'context_as = "document"'
    rendered, count = _counted(tmp_path, RESULT, RESULT_FIXTURE, extra, model="claude-sonnet-5-5")
    kinds = [b.get("type") for m in rendered.messages for b in m.blocks]
    assert kinds.count("document") == len(RESULT_FIXTURE["rows"])
    assert count.sections["context"] >= _tokens(RESULT_FIXTURE["rows"]) - 3
    assert sum(count.sections.values()) == count.tokens
