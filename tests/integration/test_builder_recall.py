"""Prompts built in code and recorded requests, measured end to end against the fake Anthropic
server: recall fills the builder's keyword argument and the request's pointer slot, and
``needle capture`` + ``check --requests`` measures exactly what running the builders measures."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from bench.workload import CLAUDE_DEFAULTS
from needle_action.assemble.builder import client as builder
from needle_action.config import load_config
from needle_action.core.errors import ConfigError
from needle_action.pipeline.capture import capture, measuring_captured
from needle_action.pipeline.measure import RecallOverrides, run_check
from needle_action.request.wire import anthropic_body
from tests.builders import Project
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.simulated_model import SimulatedModel, u_shape
from tests.integration.recall_helpers import FIXTURE, outcomes
from tests.needle_cli import run_needle

REPO = Path(__file__).resolve().parents[2]
BUILDER = '''
def build(notes, question):
    """The app's request: the notes, then the question, in one user turn."""
    return {
        "system": "Answer from the notes.",
        "messages": [{"role": "user", "content": notes + "\\n\\n" + question}],
    }
'''
CONFIG = (
    CLAUDE_DEFAULTS.format(model="claude-sonnet-5-5")
    + """max_input_tokens = 4000

[defaults.recall]
sizes = [400, 800]
depths = [0.0, 0.5, 1.0]
trials = 3
concurrency = 8
max_output_tokens = 32
seed = 5

[prompts.built]
builder = "app/prompts.py:build"
fixtures = ["fixtures/qa.yaml"]
context_var = "notes"
question_var = "question"

[prompts.recorded]
request = "requests/qa.json"
context_path = "/system"
question_path = "/messages/0/content"

[files]
builders = true
"""
)
RECORDED = {
    "model": "claude-sonnet-5-5",
    "max_tokens": 64,
    "system": "The depot opens at nine. Deliveries arrive on the north ramp.",
    "messages": [{"role": "user", "content": "When does the depot open?"}],
}


@pytest.fixture
def fake(monkeypatch):
    with FakeAnthropic(SimulatedModel(u_shape(edge=0.97, middle=0.1, margin=0.08), seed=11)) as server:
        yield server.point_env(monkeypatch)


@pytest.fixture
def project(tmp_path):
    path = (
        Project(tmp_path / "repo")
        .file("app/prompts.py", BUILDER)
        .fixture("fixtures/qa.yaml", FIXTURE)
        .file("requests/qa.json", json.dumps(RECORDED, indent=1) + "\n")
        .config(CONFIG)
        .config_path
    )
    yield path
    builder.close_all()


def _cells(results, name):
    recall = results.prompt(name).recall
    return {(c.size, c.depth): (c.status, c.hits, c.trials) for c in recall.cells}


def _tokens(results, name):
    return [(c.fixture, c.content_hash, c.count.tokens, c.status) for c in results.prompt(name).cases]


@pytest.mark.slow
def test_capture_then_check_requests_equals_running_the_builders(project, fake, tmp_path):
    config = load_config(project)
    direct = run_check(config, only=["built"], cache=False)
    asked = [r for r in fake.requests if r["path"].endswith("/v1/messages")]
    assert len(asked) == 2 * 3 * 3
    # the builder placed every needle: each trial's body is the builder's shape with the needle inside
    for r in asked:
        body = r["json"]
        assert body["system"] == "Answer from the notes."
        assert len(body["messages"]) == 1

    counts = capture(config, tmp_path / "captured", overrides=RecallOverrides())
    assert counts["built"] >= 1 + 2 * 3 * 3 // 3  # the fixture, and at least one trial input per cell
    manifest = json.loads((tmp_path / "captured" / "manifest.json").read_text())
    assert manifest["seeds"] == {"built": 5}
    assert manifest["prompts"]["built"]["calls"] == counts["built"]

    fake.reset()
    with measuring_captured(config, tmp_path / "captured", RecallOverrides()) as replay_config:
        # no builder may run: a call to one would raise, the worker is never reached
        before = builder.batches_sent()
        replayed = run_check(replay_config, only=["built"], cache=False)
        assert builder.batches_sent() == before
    assert _tokens(replayed, "built") == _tokens(direct, "built")
    assert _cells(replayed, "built") == _cells(direct, "built")
    assert outcomes(replayed, "built") == outcomes(direct, "built")


def test_captured_requests_from_another_seed_are_refused(project, fake, tmp_path):
    config = load_config(project)
    capture(config, tmp_path / "captured", overrides=RecallOverrides(trials=1))
    with (
        pytest.raises(ConfigError) as err,
        measuring_captured(config, tmp_path / "captured", RecallOverrides(seed=9, trials=1)),
    ):
        pass
    assert "another recall seed" in err.value.message
    (project.parent / "fixtures" / "qa.yaml").write_text(FIXTURE.replace("nine", "ten"))
    with (
        pytest.raises(ConfigError) as err,
        measuring_captured(load_config(project), tmp_path / "captured", RecallOverrides(trials=1)),
    ):
        pass
    assert "another threshold file, fixtures or builder module" in err.value.message


def test_recall_fills_a_recorded_requests_pointer_slot(project, fake):
    config = load_config(project)
    results = run_check(config, only=["recorded"], cache=False, overrides=RecallOverrides(trials=1))
    asked = [r["json"] for r in fake.requests if r["path"].endswith("/v1/messages")]
    assert len(asked) == 2 * 3
    for body in asked:
        system = body["system"] if isinstance(body["system"], str) else body["system"][0]["text"]
        assert "The depot opens at nine." in system  # the recorded context is kept as hay
        assert len(system) > 1000  # ... and filled to the size
        question = body["messages"][0]["content"]
        question = question if isinstance(question, str) else question[0]["text"]
        assert question != RECORDED["messages"][0]["content"]  # the needle's question took its place
    assert results.prompt("recorded").cases[0].count.tokens > 20


def _render_recorded_json(project: Path) -> subprocess.CompletedProcess:
    """`needle render recorded --format json` as bytes, in a scrubbed environment."""
    args = ["render", "recorded", "--config", str(project), "--format", "json"]
    return run_needle(args, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=120, text=False)


def test_render_json_prints_a_recorded_request_byte_for_byte(project):
    path = project.parent / "requests" / "qa.json"
    path.write_bytes(b'{"messages": [{"role": "user",\r\n "content": "caf\xc3\xa9?"}],   "model": "m"}\r\n')
    run = _render_recorded_json(project)
    assert run.returncode == 2  # the pointers no longer resolve in the new body: an error, at the key
    assert b"does not resolve" in run.stderr
    toml = (
        project.read_text()
        .replace('context_path = "/system"\n', "")
        .replace('question_path = "/messages/0/content"\n', "")
    )
    project.write_text(toml.replace("[prompts.recorded]", "[prompts.recorded]\nrecall.enabled = false"))
    run = _render_recorded_json(project)
    assert run.returncode == 0, run.stderr
    assert run.stdout == path.read_bytes()


TEMPLATE_TWIN = """system:
Answer from the notes.
user:
{{ notes }}

{{ question }}
"""


@pytest.mark.slow
def test_builder_overhead_is_under_a_fifth_of_a_recall_run_at_500_ms(project, monkeypatch):
    """Two prompts' recall (2 sizes x 3 depths x 3 trials each) through the builder, and through a
    template that renders the same request, against the fake at 500 ms a call. The scheduler builds
    one trial of a prompt at a time, so the builder's calls batch across prompts (and a PR's sides)."""
    Project(project.parent).template("prompts/qa.j2", TEMPLATE_TWIN)
    twins = ""
    for name, kind, seed in (
        ("b1", "builder", 5),
        ("b2", "builder", 6),
        ("t1", "template", 5),
        ("t2", "template", 6),
    ):
        source = 'builder = "app/prompts.py:build"' if kind == "builder" else 'template = "prompts/qa.j2"'
        twins += (
            f'[prompts.{name}]\n{source}\nfixtures = ["fixtures/qa.yaml"]\ncontext_var = "notes"\n'
            f'question_var = "question"\n[prompts.{name}.recall]\nseed = {seed}\n\n'
        )
    project.write_text(project.read_text().replace("[prompts.recorded]", twins + "[prompts.recorded]"))
    config = load_config(project)
    with FakeAnthropic(
        SimulatedModel(u_shape(edge=0.97, middle=0.1, margin=0.08), seed=11), latency_s=0.5
    ) as srv:
        srv.point_env(monkeypatch)
        run_check(config, only=["t1", "t2"], cache=False, recall=False)  # tokenizer and render workers warm
        started = time.perf_counter()
        run_check(config, only=["t1", "t2"], cache=False)
        templated = time.perf_counter() - started
        before = builder.usage()
        started = time.perf_counter()
        built = run_check(config, only=["b1", "b2"], cache=False)
        wall = time.perf_counter() - started
    calls, batches, seconds = (a - b for a, b in zip(builder.usage(), before, strict=True))
    print(
        f"\nbuilder overhead: {calls} builder calls in {batches} batches, {seconds:.3f} s of a {wall:.2f} s "
        f"recall run ({seconds / wall:.1%}, worker start included); the template twins took {templated:.2f} s"
    )
    assert built.prompt("b1").recall.calls == built.prompt("b2").recall.calls == 18
    assert calls > 36
    assert batches < calls
    assert seconds <= 0.2 * wall


@pytest.mark.slow
def test_the_example_agent_builder_is_measured_in_its_full_shape(fake, examples_dir):
    """examples/agent/support.py: 3 tool schemas, the search call, the chunks in a tool_result. Recall
    against the fake puts each needle inside that tool_result, at the planned depth."""
    config = load_config(examples_dir / "needle.toml")
    prompt = config.prompts["support_built"].model_copy(
        update={"provider": "anthropic", "model": "claude-sonnet-5-5", "tokenizer": "tiktoken:o200k_base"}
    )
    # counted as Claude counts it (the tool-use system prompt included), the request is ~650 tokens
    # before any hay: a size above the example's local-model 576
    prompt.recall = prompt.recall.model_copy(update={"sizes": [1024]})
    config.prompts = {"support_built": prompt}
    try:
        results = run_check(config, cache=False)
    finally:
        builder.close_all()
    from needle_action.assemble.render import render_case

    rendered = render_case(config, prompt, config.fixture_paths(prompt)[0])
    body = anthropic_body(rendered, "claude-sonnet-5-5", 64)
    assert [t["name"] for t in body["tools"]] == ["search_docs", "lookup_order", "escalate_to_human"]
    assert results.prompt("support_built").cases[0].status == "pass"
    recall = results.prompt("support_built").recall
    assert recall.calls == 6
    asked = [r["json"] for r in fake.requests if r["path"].endswith("/v1/messages")]
    assert len(asked) == 6
    values = {a.needle for c in recall.cells for a in c.answers}
    assert len(values) == 6
    positions = []
    for trial in asked:
        turns = trial["messages"]
        assert turns[1]["content"][0]["type"] == "tool_use"
        result = turns[2]["content"][0]
        assert result["type"] == "tool_result"
        assert result["tool_use_id"] == "toolu_search_1"
        chunks = [b["text"] for b in result["content"]]
        hits = [i for i, c in enumerate(chunks) if any(v in c for v in values)]
        assert len(hits) == 1  # the needle is one chunk among the hay chunks
        positions.append(hits[0] / max(1, len(chunks) - 1))
    assert min(positions) == 0.0
    assert max(positions) == 1.0
