"""A prompt built in code is built in batches by one worker: recall sends a plan's trial inputs to the
builder ahead in one request frame, the worker process is reused across trials and batches, and the
requests are exactly those of building one trial at a time. Each call of a batch keeps its own limit."""

from __future__ import annotations

import json
import time
from collections import Counter
from unittest import mock

import pytest

from needle_action.assemble.builder import client as builder
from needle_action.config import load_config
from needle_action.pipeline.capture import capture
from needle_action.pipeline.measure import RecallOverrides, run_recall
from needle_action.recall.run import prebuild
from tests.builders import Project
from tests.fakes.simulated_model import SimulatedModel, u_shape
from tests.integration.recall_helpers import FIXTURE
from tests.integration.test_builder_recall import BUILDER as RECALL_BUILDER
from tests.integration.test_builder_recall import CONFIG as RECALL_CONFIG

# the recall test's builder and config, with a builder that never ends for one question, 4 trials a
# cell and no early stopping (every planned trial is asked)
BUILDER = (
    RECALL_BUILDER
    + """
def loop(notes, question):
    if question == "loop forever":
        while True:
            pass
    return build(notes, question)
"""
)
CONFIG = (
    RECALL_CONFIG.split("[prompts.recorded]")[0].replace("trials = 3", "trials = 4\nearly_stop = false")
    + '[prompts.looping]\nbuilder = "app/prompts.py:loop"\nfixtures = ["fixtures/qa.yaml"]\n'
    + "\n[files]\nbuilders = true\n"
)
CELLS, TRIALS = 2 * 3, 4


@pytest.fixture
def config(tmp_path):
    path = (
        Project(tmp_path / "repo")
        .file("app/prompts.py", BUILDER)
        .fixture("fixtures/qa.yaml", FIXTURE)
        .config(CONFIG)
        .config_path
    )
    yield load_config(path)
    builder.close_all()


@pytest.fixture
def fake(anthropic_env):
    anthropic_env.responder = SimulatedModel(u_shape(edge=0.97, middle=0.1, margin=0.08), seed=11)
    return anthropic_env


def _run(config, fake) -> tuple[Counter, list, tuple[int, int, int, int]]:
    """(the request bodies sent, the cells, (worker processes, frames, largest frame, calls))."""
    builder.close_all()
    fake.reset()
    results = run_recall(config, only=["built"], overrides=RecallOverrides(), cache=False)
    clients = list(builder._clients.values())
    counts = (
        builder.workers_started(),
        sum(c.batches for c in clients),
        max(c.largest for c in clients),
        sum(c.calls for c in clients),
    )
    bodies = Counter(
        json.dumps(r["json"], sort_keys=True) for r in fake.requests if r["path"].endswith("/v1/messages")
    )
    return bodies, _cells(results), counts


def _cells(results) -> list:
    return [
        (c.size, c.depth, c.hits, c.trials, [a.needle for a in c.answers])
        for c in results.prompt("built").recall.cells
    ]


@pytest.mark.slow
def test_one_worker_builds_a_plans_trials_in_batches_and_the_requests_are_unchanged(config, fake):
    bodies, cells, (workers, frames, largest, calls) = _run(config, fake)
    assert sum(bodies.values()) == CELLS * TRIALS
    assert workers == 1  # one process for every trial, search and calibration of the run
    assert calls >= CELLS * TRIALS  # every trial's inputs went through the builder
    # the trials after each cell's first went ahead together: one frame holds all of them
    assert largest >= CELLS * (TRIALS - 1)
    assert frames < calls - CELLS * (TRIALS - 1) + 2

    with (
        mock.patch.object(prebuild, "prefetch", return_value=0),
        mock.patch.object(builder, "MAX_BATCH", 1),
    ):
        one_by_one, cells_one, (workers_one, frames_one, largest_one, calls_one) = _run(config, fake)
    assert largest_one == 1
    assert frames_one == calls_one
    assert workers_one == 1
    assert one_by_one == bodies  # the same requests, byte for byte
    assert cells_one == cells


@pytest.mark.slow
def test_each_call_of_a_batch_keeps_its_own_time_limit(config, monkeypatch):
    """A batch of 3 where the middle call never ends: that call fails at 1 s, the others are built,
    and the parent does not wait 3 limits for the frame (each answer has its own deadline)."""
    monkeypatch.setattr(builder, "BUILD_SECONDS", 1.0)
    prompt = config.prompts["looping"]
    calls = [{"notes": "n", "question": q} for q in ("first?", "loop forever", "third?")]
    client = builder.client_for(config, prompt)
    started = time.monotonic()
    results = client.build_many([builder.canonical(c) for c in calls])
    took = time.monotonic() - started
    assert [sorted(r) for r in results] == [["ok"], ["error"], ["ok"]]
    assert results[1]["error"]["kind"] == "timeout"
    assert results[2]["ok"]["messages"][0]["content"] == "n\n\nthird?"
    assert client.batches == 1
    assert client.starts == 1
    assert took < 1.0 + builder.GRACE_SECONDS
    # prefetched calls are answered from the cache afterwards: no frame, no new worker
    assert builder.prefetch(config, prompt, [calls[0], calls[2]]) == 0
    assert builder.call_builder(config, prompt, calls[2]) == results[2]["ok"]
    assert client.batches == 1
    assert client.starts == 1


@pytest.mark.slow
def test_the_batch_api_path_sends_the_builder_every_later_trial_in_one_frame(config, fake, tmp_path):
    """``needle recall --batch`` builds every planned trial up front: the cells' first trials, then
    all the others' inputs in one frame; the answers are those of the live run."""
    config.path.write_text(
        config.path.read_text() + "\n[defaults.providers.anthropic]\nbatch_poll_s = 0.05\n"
    )
    batched = load_config(config.path)
    builder.close_all()
    results = run_recall(batched, only=["built"], cache=str(tmp_path / "cache"), batch=True)
    clients = list(builder._clients.values())
    assert builder.workers_started() == 1
    assert max(c.largest for c in clients) == CELLS * (TRIALS - 1)
    _, live_cells, _ = _run(batched, fake)
    assert _cells(results) == live_cells


def test_needle_capture_sends_every_later_trial_input_in_one_frame(config, tmp_path):
    builder.close_all()
    counts = capture(config, tmp_path / "captured", overrides=RecallOverrides(), only=["built"])
    clients = list(builder._clients.values())
    assert builder.workers_started() == 1
    assert max(c.largest for c in clients) == CELLS * (TRIALS - 1)
    assert counts["built"] >= CELLS * TRIALS  # every trial input captured (and the fixture's call)
