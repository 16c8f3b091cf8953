"""The Messages API's rules end to end: the fake refuses what the API refuses (empty and
whitespace-only text blocks, cache_control on an empty block) with the API's 400, on every
endpoint; needle's requests stay within the rules for a history loop that indents its turns with
prompt caching on; a refusal is a request error (exit 2) naming the rule, never an outage."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

import needle_action.request.wire as wire
from needle_action.config import load_config
from needle_action.core.errors import EXIT_CONFIG, TemplateError
from needle_action.pipeline.measure import RecallOverrides, run_budget, run_recall
from needle_action.pipeline.policy import results_exit_code
from needle_action.providers.retry import RequestInvalid
from tests.builders import Project
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.simulated_model import SimulatedModel, flat
from tests.samples import history_template

MODEL = "claude-sonnet-5-5"

# a history loop that indents each turn's text: a layout teams write for readability
INDENTED_HISTORY = history_template(
    "You are the scheduling assistant of a bicycle workshop. Answer from the conversation only.",
    turns="chat",
    role="speaker",
    text="words",
    ask="request",
    indent="    ",
)

WORKSHOP_CHAT = """request: "Which bay is the tandem booked into?"
chat:
  - speaker: user
    words: "Morning! I would like to book a wheel truing for Thursday afternoon."
  - speaker: assistant
    words: "Thursday at two works, the tandem goes into bay three with Priya."
  - speaker: user
    words: "Great, and can you check the rear hub bearings while it is there?"
  - speaker: assistant
    words: "Of course, a bearing check adds about twenty minutes to the slot."
"""


def workshop_project(root, *, fixture: str = WORKSHOP_CHAT, sizes: str = "[1600, 3200]"):
    toml = f"""[defaults]
model = "{MODEL}"
provider = "anthropic"
tokenizer = "tiktoken:o200k_base"
tokenizer_safety_factor = 1.0
reserve_output_tokens = 256

[defaults.recall]
sizes = {sizes}
depths = [0.0, 0.5, 1.0]
trials = 3
threshold = 0.8
max_output_tokens = 32
early_stop = false

[prompts.workshop]
template = "prompts/workshop.j2"
fixtures = ["fixtures/workshop.yaml"]
context_var = "chat"
question_var = "request"
max_input_tokens = 8000
"""
    project = Project(root).template("prompts/workshop.j2", INDENTED_HISTORY)
    return project.fixture("fixtures/workshop.yaml", fixture).config(toml, dedent=False).config_path


@pytest.fixture
def fake(monkeypatch):
    with FakeAnthropic(responder=SimulatedModel(flat(1.0), seed=5)) as server:
        yield server.point_env(monkeypatch)


def _client(fake: FakeAnthropic) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=fake.base_url, api_key=fake.api_key, max_retries=0)


BLANK_BLOCKS = [
    {"type": "text", "text": "Bay three is free on Thursday."},
    {"type": "text", "text": "\n    ", "cache_control": {"type": "ephemeral"}},
    {"type": "text", "text": "Which bay is free?"},
]


@pytest.mark.parametrize("endpoint", ["messages", "count_tokens", "batches"])
def test_the_fake_refuses_whitespace_only_text_blocks_like_the_api(fake, endpoint):
    client = _client(fake)
    messages: Any = [{"role": "user", "content": BLANK_BLOCKS}]
    params: Any = {"model": MODEL, "max_tokens": 8, "messages": messages}
    calls = {
        "messages": lambda: client.messages.create(**params),
        "count_tokens": lambda: client.messages.count_tokens(model=MODEL, messages=messages),
        "batches": lambda: client.messages.batches.create(requests=[{"custom_id": "one", "params": params}]),
    }
    with pytest.raises(anthropic.BadRequestError) as info:
        calls[endpoint]()
    assert info.value.status_code == 400
    body = info.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert "text content blocks must contain non-whitespace text" in body["error"]["message"]


def test_the_fake_refuses_empty_text_and_cache_control_on_it(fake):
    client = _client(fake)
    empty: Any = [{"type": "text", "text": "Which bay?"}, {"type": "text", "text": ""}]
    with pytest.raises(anthropic.BadRequestError, match="must be non-empty"):
        client.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": empty}])
    marked: Any = [
        {"type": "text", "text": "", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "q"},
    ]
    with pytest.raises(anthropic.BadRequestError, match="cache_control cannot be set for empty text blocks"):
        client.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": marked}])
    with pytest.raises(anthropic.BadRequestError, match="non-empty content"):
        client.messages.create(
            model=MODEL,
            max_tokens=8,
            messages=[
                {"role": "user", "content": ""},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "q"},
            ],
        )


def test_indented_history_with_prompt_caching_runs_recall_with_no_trial_lost(tmp_path, fake):
    config = load_config(workshop_project(tmp_path))
    results = run_recall(config, overrides=RecallOverrides(), cache=False)
    recall = results.prompt("workshop").recall
    assert recall is not None
    assert results_exit_code(results, stages=["recall"]) in (0, 1)
    assert not results.totals.provider_unavailable
    assert recall.lost_trials == 0
    assert fake.calls["400"] == 0
    sent = [r["json"] for r in fake.requests if r["path"] == "/v1/messages"]
    assert len(sent) == recall.calls == 2 * 3 * 3
    marked: Any = [
        b
        for body in sent
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if "cache_control" in b
    ]
    assert marked, "prompt caching placed no breakpoint: the test would not exercise the split"
    assert all(b.get("text", "x").strip() for b in marked)


def test_a_refused_request_is_a_request_error_naming_the_rule_not_an_outage(tmp_path, fake, monkeypatch):
    """With the rules switched off, the same run sends what the API refuses: the 400 stops the run
    as a request error (exit 2) that names the rule, and no trial is retried as if it were lost."""
    monkeypatch.setattr(wire, "normalise", lambda body: body)
    config = load_config(workshop_project(tmp_path))
    with pytest.raises(RequestInvalid) as info:
        run_recall(config, overrides=RecallOverrides(), cache=False)
    assert info.value.exit_code == EXIT_CONFIG
    assert "`whitespace-text`" in info.value.message
    assert str(info.value.location.file).endswith("workshop.j2")
    assert fake.calls["429"] == fake.calls["500"] == 0
    assert fake.calls["400"] >= 1


def test_a_history_loop_over_a_missing_variable_is_an_error_at_its_line(tmp_path):
    fixture = 'request: "Which bay is the tandem booked into?"\n'
    template = "system:\nRewrite the last question as a search query.\n{% for turn in chat %}\n{{ turn.speaker }}:\n{{ turn.words }}\n{% endfor %}\n"
    config_path = workshop_project(tmp_path, fixture=fixture)
    (tmp_path / "prompts" / "workshop.j2").write_text(template)
    config = load_config(config_path)
    config.prompts["workshop"].undefined = "lenient"
    with pytest.raises(TemplateError) as info:
        run_budget(config)
    assert info.value.exit_code == EXIT_CONFIG
    assert "`chat`, which the fixture does not set" in info.value.message
    assert "no-messages" in info.value.message
    assert info.value.location.line == 3


def test_the_fake_counts_no_request_with_five_cache_breakpoints(fake):
    blocks: Any = [
        {"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}} for i in range(5)
    ]
    with pytest.raises(anthropic.BadRequestError, match="maximum of 4 blocks with cache_control"):
        _client(fake).messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": blocks}])


def test_a_recorded_request_without_turns_is_an_error_not_a_silent_pass(tmp_path):
    body = {
        "model": MODEL,
        "max_tokens": 64,
        "system": "Rewrite the question as a search query.",
        "messages": [],
    }
    project = (
        Project(tmp_path)
        .file("requests/rewrite.json", json.dumps(body))
        .config(
            f"""
            [defaults]
            model = "{MODEL}"
            tokenizer = "tiktoken:o200k_base"

            [prompts.rewrite]
            request = "requests/rewrite.json"
            max_input_tokens = 1000
            """
        )
    )
    with pytest.raises(TemplateError) as info:
        run_budget(load_config(project.config_path))
    assert "no-messages" in info.value.message
    assert str(info.value.location.file).endswith("rewrite.json")


def test_the_fake_refuses_a_prefill_that_ends_with_whitespace(fake):
    messages: Any = [{"role": "user", "content": "Which bay?"}, {"role": "assistant", "content": "Bay "}]
    with pytest.raises(
        anthropic.BadRequestError, match="final assistant content cannot end with trailing whitespace"
    ):
        _client(fake).messages.create(model=MODEL, max_tokens=8, messages=messages)
