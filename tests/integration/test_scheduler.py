"""The one scheduler against the fake Anthropic API: speculation that changes no verdict, several
jobs (head and base) in one run, lost trials, a dead provider, a provider rate cap, shards."""

from __future__ import annotations

import hashlib
import time

import pytest

from needle_action.config import load_config
from needle_action.core.errors import ConfigError
from needle_action.pipeline.measure import RecallOverrides, run_recall
from needle_action.recall.run.engine import RecallJob, run_recall_jobs
from needle_action.recall.run.merge import merge
from needle_action.recall.run.shard import Shard
from needle_action.results import Results
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.simulated_model import SimulatedModel, flat, u_shape
from tests.integration.recall_helpers import outcomes, run, verdicts, write_project

U = u_shape(edge=0.97, middle=0.1, margin=0.08)
FAST_RETRIES = "\n[defaults.providers.anthropic]\nmax_retries = 1\n"


@pytest.fixture
def fake(monkeypatch):
    with FakeAnthropic(SimulatedModel(U, seed=11), latency_s=0.02) as server:
        yield server.point_env(monkeypatch)


@pytest.mark.slow  # >= 3 s (CONTRIBUTING: the fast tier stays under 2 minutes)
def test_speculation_keeps_the_sequential_verdicts_and_answers(tmp_path, fake):
    # concurrency far above the grid: slots idle without speculation, so speculative calls go out
    # (answers slower than building trials, else every trial is needed by the time it is built)
    fake.latency_s = 0.2
    early = run(write_project(tmp_path / "e", concurrency=64, seed=4))
    fake.latency_s = 0.02
    one = run(write_project(tmp_path / "o", concurrency=1, seed=4))
    full = run(write_project(tmp_path / "f", concurrency=64, seed=4, recall_extra="early_stop = false"))
    e = early.prompt("qa").recall
    assert verdicts(early) == verdicts(one) == verdicts(full)
    assert outcomes(early) == outcomes(one)  # the same trials counted, with the same answers
    assert e.calls == one.prompt("qa").recall.calls < full.prompt("qa").recall.calls
    assert e.speculative_calls > 0
    assert early.totals.speculative_calls == e.speculative_calls
    # never more requests than without early stopping (here the whole grid fits in the slots, so
    # the run is all tail: idle slots take every trial that might be needed, for no added wall time)
    assert e.calls + e.speculative_calls <= full.prompt("qa").recall.calls == 75


def test_two_jobs_share_one_run_and_match_separate_runs(tmp_path, fake):
    a_path = write_project(tmp_path / "a", seed=1)
    b_path = write_project(tmp_path / "b", seed=2, sizes=(500, 900))
    alone_a, alone_b = run(a_path), run(b_path)
    jobs = []
    for path in (a_path, b_path):
        config = load_config(path)
        jobs.append(RecallJob(config, list(config.prompts.values()), Results(config=str(path))))
    run_recall_jobs(jobs, cache=False)
    assert outcomes(jobs[0].results) == outcomes(alone_a)
    assert outcomes(jobs[1].results) == outcomes(alone_b)
    assert jobs[0].results.totals.calls == alone_a.totals.calls


def test_a_call_that_exhausts_its_retries_loses_one_trial_and_the_rest_go_on(tmp_path, fake):
    sim = SimulatedModel(flat(0.97), seed=3)

    def flaky(body):
        obs = sim.observe(body)
        if obs.value and int(hashlib.sha256(obs.value.encode()).hexdigest(), 16) % 19 == 0:
            raise RuntimeError("this request always fails")  # the fake answers 500, every time
        return obs.answer

    fake.responder = flaky
    res = run(write_project(tmp_path, seed=8, recall_extra="early_stop = false" + FAST_RETRIES))
    r = res.prompt("qa").recall
    assert r.lost_trials > 0  # some trials were lost...
    assert r.calls == 75 - r.lost_trials  # ...and every other trial was still asked and counted
    assert not res.totals.provider_unavailable
    assert sum(c.trials for c in r.cells) == r.calls


def test_slow_failures_finishing_last_are_not_an_outage(tmp_path, fake):
    # failing calls retry, so they finish after every success: by completion order they would
    # be "in a row"; by sending order, successes sent after them show the provider is up
    sim = SimulatedModel(flat(0.97), seed=3)

    def slow_failure(body):
        obs = sim.observe(body)
        if obs.value and int(hashlib.sha256(obs.value.encode()).hexdigest(), 16) % 8 == 0:
            time.sleep(0.2)
            raise RuntimeError("this request always fails, slowly")
        return obs.answer

    fake.responder = slow_failure
    res = run(write_project(tmp_path, seed=8, recall_extra="early_stop = false" + FAST_RETRIES))
    r = res.prompt("qa").recall
    assert r.lost_trials >= 5  # more than DEAD_AFTER distinct trials were lost...
    assert not res.totals.provider_unavailable  # ...and it is still not an outage
    assert r.calls == 75 - r.lost_trials


def test_a_provider_that_fails_every_call_is_declared_dead_quickly(tmp_path, fake):
    def broken(body):
        raise RuntimeError("down")

    fake.responder = broken
    res = run(write_project(tmp_path, concurrency=2, recall_extra=FAST_RETRIES))
    assert res.prompt("qa").recall is None
    assert res.totals.provider_unavailable
    assert "still failing" in res.prompt("qa").recall_skipped
    assert fake.calls["messages"] <= 2 * 2 * 7  # a few calls (each tried twice, some asked again), not 75


@pytest.mark.slow  # the fake's rate cap runs in real time (~5 s)
def test_a_provider_rate_cap_is_followed_not_fought(tmp_path, monkeypatch):
    rpm, burst = 600, 5
    with FakeAnthropic(
        SimulatedModel(flat(0.97), seed=1), rate_limit_rpm=rpm, rate_limit_burst=burst
    ) as server:
        server.point_env(monkeypatch)
        started = time.perf_counter()
        res = run(write_project(tmp_path, sizes=(400, 600), recall_extra="early_stop = false"))
        took = time.perf_counter() - started
        refused = server.calls["rate_limited"]
    calls = res.prompt("qa").recall.calls
    assert calls == 50
    allowed = (calls - burst) / (rpm / 60)
    assert took >= allowed * 0.9  # the cap really applied...
    # ...the first window (32 calls, before any header was read) overshoots the bucket once; from
    # then on the calls are paced by the headers rather than refused
    assert refused <= 32 + burst
    # 1 s: the whole-second retry-after of that first refusal; 1 s: planning and the last answers
    assert took <= 1.25 * allowed + 2.0, (took, allowed)


def test_shards_merge_into_the_unsharded_run(tmp_path, fake):
    cfg = load_config(write_project(tmp_path, seed=6))
    whole = run_recall(cfg, cache=False, overrides=RecallOverrides())
    parts = [(tmp_path / f"{i}.json", run_recall(cfg, cache=False, shard=Shard(i, 3))) for i in (1, 2, 3)]
    assert all(p.prompt("qa").recall.shard == f"{i}/3" for i, (_, p) in enumerate(parts, start=1))
    merged = merge(parts)
    keep = {"cells", "effective_context", "diagnosis", "status", "calls", "saved_calls"}
    assert merged.prompt("qa").recall.model_dump(include=keep) == whole.prompt("qa").recall.model_dump(
        include=keep
    )
    with pytest.raises(ConfigError, match="missing"):
        merge(parts[:2])
    with pytest.raises(ConfigError, match="also in"):
        merge([parts[0], parts[0], parts[1], parts[2]])


@pytest.mark.slow  # >= 3 s (CONTRIBUTING: the fast tier stays under 2 minutes)
def test_shards_of_several_styles_merge_into_the_unsharded_run(tmp_path, fake):
    # every style is a grid of its own: cells pair by (style, size, depth), the merged file keeps
    # the run's style order, and the verdict (per-style summaries, range, power) is recomputed
    extra = 'needle = ["codeword", "absent"]\nearly_stop = false'
    cfg = load_config(write_project(tmp_path, seed=3, recall_extra=extra))
    whole = run_recall(cfg, cache=False)
    parts = [(tmp_path / f"{i}.json", run_recall(cfg, cache=False, shard=Shard(i, 2))) for i in (1, 2)]
    merged = merge(parts).prompt("qa").recall
    one = whole.prompt("qa").recall
    assert next(c.style for c in one.cells) == "codeword"
    assert {c.style for c in one.cells} == {
        "codeword",
        "absent",
    }
    keep = {
        "cells",
        "styles",
        "effective_context",
        "effective_context_low",
        "effective_context_high",
        "diagnosis",
        "status",
        "power",
        "calls",
    }
    assert merged.model_dump(include=keep) == one.model_dump(include=keep)


def test_the_cli_shards_and_merges(tmp_path, fake):
    from click.testing import CliRunner

    from needle_action.cli import main
    from needle_action.results import load_results

    cfg = write_project(tmp_path / "p", seed=2)
    runner = CliRunner()
    files = []
    for i in (1, 2, 3):
        out = tmp_path / f"s{i}.json"
        res = runner.invoke(
            main,
            [
                "recall",
                "-c",
                str(cfg),
                "--no-progress",
                "--no-cache",
                "--shard",
                f"{i}/3",
                "--json",
                str(out),
            ],
        )
        assert res.exit_code in (0, 1), res.output
        files.append(str(out))
    merged = tmp_path / "all.json"
    res = runner.invoke(main, ["merge", *files, "--output", str(merged)])
    assert res.exit_code in (0, 1), res.output
    whole = run(cfg)
    assert verdicts(load_results(merged)) == verdicts(whole)
    bad = runner.invoke(main, ["recall", "-c", str(cfg), "--shard", "4/3"])
    assert bad.exit_code == 2
    assert "--shard must look like i/n" in bad.output
    assert "Traceback" not in bad.output
    missing = runner.invoke(main, ["merge", *files[:2], "--output", str(tmp_path / "x.json")])
    assert missing.exit_code == 2
    assert "3/3 missing" in missing.output
