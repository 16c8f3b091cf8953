"""Recall in the agent shape (``context_as = "tool_result"``) against the fake Anthropic API: the
trials send the prompt's tools and hide the needle inside a tool_result at the planned depth, and
a U-shaped model is diagnosed lost-in-the-middle through that shape."""

from __future__ import annotations

import json
import os

import pytest

from examples.agent.tools import TOOLS as AGENT_TOOLS
from needle_action.recall.trials.needles import VALUE_RE
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.simulated_model import SimulatedModel, flat, u_shape
from tests.integration.recall_helpers import run, write_project

TOOLS = AGENT_TOOLS[:1]  # the example agent's search tool, as the application registers it
SEARCH = TOOLS[0]["name"]
SEEDS = int(os.environ.get("NEEDLE_TOOL_RESULT_SEEDS", "20"))


def agent_project(tmp_path, **kw):
    config = write_project(tmp_path, **kw)
    (tmp_path / "tools.json").write_text(json.dumps(TOOLS))
    text = config.read_text().replace(
        'context_var = "notes"', 'context_var = "notes"\ntools = "tools.json"\ncontext_as = "tool_result"'
    )
    config.write_text(text)
    return config


@pytest.fixture
def fake(monkeypatch):
    with FakeAnthropic() as server:
        yield server.point_env(monkeypatch)


def _tool_result(body: dict) -> str:
    """The text of the request's tool_result block (its content split for caching reads joined)."""
    for m in body["messages"]:
        for b in m["content"] if isinstance(m["content"], list) else []:
            if b.get("type") == "tool_result":
                c = b["content"]
                return c if isinstance(c, str) else "".join(x["text"] for x in c)
    raise AssertionError("no tool_result block in the request")


def test_every_trial_sends_the_tools_and_the_needle_in_a_tool_result(tmp_path, fake):
    fake.responder = SimulatedModel(flat(1.0), seed=3)
    depths = (0.0, 0.5, 1.0)
    config = agent_project(
        tmp_path, sizes=(1000, 2000), depths=depths, trials=3, recall_extra="early_stop = false"
    )
    results = run(config)
    sent = [r["json"] for r in fake.requests if r["path"] == "/v1/messages"]
    recall = results.prompt("qa").recall
    assert sent
    assert recall.calls == len(sent) == 2 * 3 * 3
    seen_depths = []
    for body in sent:
        assert [t["name"] for t in body["tools"]] == [SEARCH]
        assert body["tools"][0]["input_schema"] == TOOLS[0]["input_schema"]
        uses = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
        assert any(b["type"] == "tool_use" and b["name"] == SEARCH for b in uses)
        result = _tool_result(body)
        value = VALUE_RE.search(result)
        assert value is not None, "the needle is inside the tool_result"
        seen_depths.append(value.start() / len(result))
    # each planned depth has its trials, the needle where it was planned (to the filler's grain:
    # the needle goes between passages)
    for d in depths:
        assert sum(abs(x - d) < 0.15 for x in seen_depths) == 2 * 3, " ".join(
            f"{x:.3f}" for x in sorted(seen_depths)
        )
    assert recall.diagnosis.kind == "all-pass"
    # the needle's offset counts everything before it, the tool schemas included
    shallow = min(c.token_offset for c in recall.cells if c.depth == 0.0)
    assert shallow > len(json.dumps(TOOLS)) // 8


@pytest.mark.slow  # SEEDS engine runs
def test_a_u_shaped_model_is_diagnosed_lost_in_the_middle_through_tool_results(tmp_path, fake):
    fake.responder = SimulatedModel(u_shape(edge=0.97, middle=0.1, margin=0.1), seed=10_000)
    config = agent_project(
        tmp_path, sizes=(800, 1600), depths=(0.0, 0.25, 0.5, 1.0), seeds=list(range(SEEDS))
    )
    results = run(config, only=[f"qa{s}" for s in range(SEEDS)])
    kinds = [results.prompt(f"qa{s}").recall.diagnosis.kind for s in range(SEEDS)]
    rate = kinds.count("lost-in-the-middle") / SEEDS
    print(f"\nU-shape via tool_result -> lost-in-the-middle in {rate:.0%} of {SEEDS} seeds: {kinds}")
    assert rate >= 0.9
    assert all(_tool_result(r["json"]) for r in fake.requests if r["path"] == "/v1/messages")


def test_replies_that_call_a_tool_are_misses_reported_apart(tmp_path, fake, capsys):
    from needle_action.report.terminal import print_recall

    model = SimulatedModel(flat(1.0), seed=5, tool_call_rate=0.3)
    fake.responder = model
    config = agent_project(
        tmp_path, sizes=(1000,), depths=(0.0, 1.0), trials=10, recall_extra="early_stop = false"
    )
    results = run(config)
    recall = results.prompt("qa").recall
    answers = [a for c in recall.cells for a in c.answers]
    called = [a for a in answers if a.tool_call is not None]
    assert len(called) == model.tool_calls > 0  # every tool_use reply, and only those
    assert all(a.tool_call == SEARCH and not a.hit for a in called)
    assert all(a.hit for a in answers if a.tool_call is None)  # flat(1.0): every text reply hits
    (style,) = recall.styles
    assert style.tool_call_answers == len(called)
    assert style.hits == len(answers) - len(called)
    print_recall(results)
    out = capsys.readouterr().out
    assert f"answered with a tool call in {len(called)}/{len(answers)}" in out
