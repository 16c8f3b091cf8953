"""Recall probes on a prompt that forces structured output: the request keeps the schema (or the
forced tool) the application sends, the model answers in JSON (or with a call), and the answer
is read inside it, so a forced schema never turns a hit into a miss under strict scoring."""

from __future__ import annotations

import json

import pytest

from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.simulated_model import SimulatedModel, flat
from tests.integration.recall_helpers import recall_of, run, write_project
from tests.samples import tool

SCHEMA_PARAMS = """
[prompts.qa.request_params.output_config.format]
type = "json_schema"
schema = { type = "object", properties = { reply = { type = "string" }, sure = { type = "boolean" } }, required = ["reply"] }
"""

REPORT_TOOL = [
    tool(
        "file_answer", "Record the answer to the user's question.", {"reply": {"type": "string"}}, ("reply",)
    )
]


class JsonWhenForced:
    """The simulated model, answering as a real one does when the request forces a shape: JSON
    when a schema is forced, a call of the forced tool when tool_choice names one."""

    def __init__(self) -> None:
        self.model = SimulatedModel(flat(1.0), seed=11)
        self.shapes: list[str] = []

    def __call__(self, body: dict):
        value = self.model(body)
        if (body.get("output_config") or {}).get("format"):
            self.shapes.append("json")
            return json.dumps({"reply": value, "sure": True})
        choice = body.get("tool_choice") or {}
        if choice.get("type") == "tool":
            self.shapes.append("tool")
            return [{"type": "tool_use", "name": choice["name"], "input": {"reply": value}}]
        self.shapes.append("text")
        return value


@pytest.fixture
def fake(monkeypatch):
    with FakeAnthropic(responder=JsonWhenForced()) as server:
        yield server.point_env(monkeypatch)


def _config(tmp_path, extra: str):
    config = write_project(
        tmp_path, sizes=(600,), depths=(0.0, 1.0), trials=3, recall_extra="early_stop = false"
    )
    config.write_text(config.read_text() + extra)
    return config


def test_a_forced_json_schema_keeps_hits_under_strict_scoring(tmp_path, fake):
    results = run(_config(tmp_path, SCHEMA_PARAMS))
    recall = recall_of(results)
    assert fake.responder.shapes == ["json"] * recall.calls  # the schema was sent as the app sends it
    sent = [r["json"] for r in fake.requests if r["path"] == "/v1/messages"]
    assert all(b["output_config"]["format"]["type"] == "json_schema" for b in sent)
    answers = [a for c in recall.cells for a in c.answers]
    assert answers
    assert all(a.answer.startswith("{") for a in answers)
    assert all(a.hit for a in answers)
    assert {c.status for c in recall.cells} == {"pass"}


def test_a_forced_tool_is_answered_by_its_input(tmp_path, fake):
    (tmp_path / "tools.json").write_text(json.dumps(REPORT_TOOL))
    extra = '\n[prompts.qa.tool_choice]\ntype = "tool"\nname = "file_answer"\n'
    config = _config(tmp_path, extra)
    config.write_text(
        config.read_text().replace(
            'question_var = "question"', 'question_var = "question"\ntools = "tools.json"', 1
        )
    )
    results = run(config)
    recall = recall_of(results)
    assert fake.responder.shapes == ["tool"] * recall.calls
    answers = [a for c in recall.cells for a in c.answers]
    assert answers
    assert all(a.hit for a in answers)
    assert not any(a.tool_call for a in answers)
