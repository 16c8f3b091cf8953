"""The group-sequential comparison end to end (issue 21): ``needle recall --baseline base.json`` on
the loopback fake Anthropic server, the head on the same curve as the base, asks its trials look by
look and stops early; the calls the server counts are well under the fixed plan; `needle report`
re-derives the same verdict from the results files; `needle plan` predicts the calls and tokens.
The base comes from another run (`needle check` before), so the comparison is the cross-run one
(issue 31, docs/recall.md "Runs have levels"): its plan and its looks, the same rules.
"""

from __future__ import annotations

import json
import resource
import subprocess
from pathlib import Path

import pytest

from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.simulated_model import SimulatedModel
from tests.integration.recall_helpers import (
    TEMPLATE,
    base_and_head,
    flat95,
    middle_minus_30,
    needle_cli,
    write_project,
)
from tests.needle_cli import needle_env, run_needle

REPO = Path(__file__).resolve().parents[2]
SIZES = (400, 800, 1200)
PRS = 3

pytestmark = pytest.mark.slow


def _ok(res: subprocess.CompletedProcess) -> None:
    assert res.returncode in (0, 1), res.stdout + res.stderr
    assert "Traceback" not in res.stderr, res.stdout + res.stderr


def _pr(tmp: Path, fake: FakeAnthropic, head_curve, pr: int) -> tuple[int, dict, dict, dict]:
    """(head calls at the server, head results, comparison, plan) of one pull request."""
    base_cfg, head_cfg = base_and_head(tmp, SIZES)
    fake.responder = SimulatedModel(flat95, seed=1000 * pr, exact_size=False)
    _ok(needle_cli(["check", "--config", str(base_cfg), "--json", str(tmp / "base.json")], fake, tmp / "c1"))
    plan = needle_cli(
        [
            "plan",
            "--config",
            str(head_cfg),
            "--baseline",
            str(tmp / "base.json"),
            "--json",
            str(tmp / "plan.json"),
        ],
        fake,
        tmp / "c2",
    )
    assert plan.returncode == 0, plan.stdout + plan.stderr
    fake.responder = SimulatedModel(head_curve, seed=1000 * pr + 1, exact_size=False)
    before = fake.calls["messages"]
    args = ["recall", "--config", str(head_cfg), "--baseline", str(tmp / "base.json"), "--no-progress"]
    _ok(needle_cli([*args, "--json", str(tmp / "head.json")], fake, tmp / "c2"))
    calls = fake.calls["messages"] - before
    report = needle_cli(
        ["report", str(tmp / "head.json"), "--base", str(tmp / "base.json"), "--format", "json"], fake, tmp
    )
    assert "Traceback" not in report.stderr, report.stderr
    head = json.loads((tmp / "head.json").read_text())
    return calls, head, json.loads(report.stdout), json.loads((tmp / "plan.json").read_text())


@pytest.fixture(scope="module")
def fake():
    with FakeAnthropic() as server:
        yield server


def test_no_change_stops_early_and_plan_predicts_the_run(tmp_path, fake):
    calls = []
    for pr in range(PRS):
        n, head, comparison, plan = _pr(tmp_path / str(pr), fake, flat95, pr)
        recall = head["prompts"][0]["recall"]
        rc = comparison["prompts"][0]["recall"]
        assert comparison["verdict"] == "pass"
        assert rc["status"] == "pass"
        assert recall["calls"] == n  # the server saw exactly the counted calls: none beyond a look
        p = plan["prompts"][0]
        # the base's measured rate plans the trials on both (fewer than the assumed 90%'s 20)
        assert p["planned_calls"] == 15 * recall["power"]["trials"] == 15 * p["trials_per_cell"]
        assert set(p["usd"]) == {"uncached", "cached", "batch"}
        assert p["detectable_drop"]
        # tokens: the full plan's input tokens scale to the calls this run made (within 10%)
        tokens = (
            recall["usage"]["input_tokens"]
            + recall["usage"]["cache_read_tokens"]
            + recall["usage"]["cache_write_tokens"]
        )
        assert abs(tokens - p["input_tokens"] * n / p["planned_calls"]) <= 0.1 * tokens
        calls.append(n)
    mean, fixed = sum(calls) / len(calls), plan["prompts"][0]["planned_calls"]
    assert mean <= 0.6 * fixed, (calls, fixed)
    expected = plan["prompts"][0]["expected_calls_no_change"]
    assert abs(mean - expected) <= 0.1 * fixed, (calls, expected)  # noisy over 3 PRs: a tenth of the plan


def test_a_drop_stops_early_and_blocks(tmp_path, fake):
    n, head, comparison, plan = _pr(tmp_path, fake, middle_minus_30, 7)
    rc = comparison["prompts"][0]["recall"]
    assert comparison["verdict"] == "fail-recall"
    assert rc["status"] == "fail"
    assert rc["test"] == "cross-run"  # the base is another run's (issue 31)
    assert n < 0.75 * plan["prompts"][0]["planned_calls"]
    assert head["prompts"][0]["recall"]["look"] is not None
    assert rc["stopped_early"]
    assert any("Stopped at look" in note for note in rc["notes"])


def test_plan_runs_offline_on_the_examples_in_under_two_seconds(tmp_path):
    # CPU seconds of the child, not wall time: the test machine's cores are shared
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = needle_env(NO_COLOR="1", ANTHROPIC_API_KEY="")
    args = ["plan", "--config", str(REPO / "examples" / "needle.toml"), "--json", str(tmp_path / "plan.json")]
    res = run_needle(args, env=env, timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    elapsed = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert res.returncode == 0, res.stdout + res.stderr
    plans = json.loads((tmp_path / "plan.json").read_text())["prompts"]
    # 1 size x 5 depths x 3 trials; the code-built agent's own small grid: 3 depths x 2 trials
    planned = {p["name"]: p["planned_calls"] for p in plans}
    assert planned == {"rag_answer": 15, "support_agent": 15, "trip_planner": 15, "support_built": 6}
    assert elapsed < 2.0, elapsed


def _plan(cfg: Path, out: Path, fake: FakeAnthropic, cache: Path, baseline: Path | None = None) -> dict:
    args = ["plan", "--config", str(cfg), "--json", str(out)]
    res = needle_cli([*args, "--baseline", str(baseline)] if baseline else args, fake, cache)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(out.read_text())["prompts"][0]


def test_plan_counts_what_the_cache_and_history_save_and_the_runs_agree(tmp_path, fake):
    fake.responder = SimulatedModel(flat95, seed=4242, exact_size=False)
    cfg = write_project(tmp_path / "p", sizes=SIZES, trials="auto", concurrency=16)
    cache, base = tmp_path / "cache", tmp_path / "base.json"
    # an earlier base run at another seed: the next one pools it as history
    _ok(
        needle_cli(
            ["check", "--config", str(cfg), "--seed", "7", "--json", str(tmp_path / "old.json")], fake, cache
        )
    )
    _ok(needle_cli(["check", "--config", str(cfg), "--json", str(base)], fake, cache))
    plan = _plan(cfg, tmp_path / "plan.json", fake, cache, base)
    # the prompt is unchanged: its identical result is in the baseline, the run makes no call
    assert plan["cache_source"] == "baseline"
    assert plan["calls_saved_by_cache"] == plan["expected_calls_no_change"] > 0
    before = fake.calls["messages"]
    args = ["recall", "--config", str(cfg), "--baseline", str(base), "--no-progress"]
    _ok(needle_cli([*args, "--json", str(tmp_path / "again.json")], fake, cache))
    assert fake.calls["messages"] == before
    assert _plan(cfg, tmp_path / "plan2.json", fake, cache)["cache_source"] == "cache"  # no baseline
    # history: the trials the base's own run alone would plan, minus those planned with it
    assert plan["history_runs"] == 1
    data = json.loads(base.read_text())
    data["prompts"][0]["recall"]["history"] = None
    alone = tmp_path / "alone.json"
    alone.write_text(json.dumps(data))
    without = _plan(cfg, tmp_path / "plan3.json", fake, cache, alone)
    assert without["history_runs"] == 0
    assert without["calls_saved_by_history"] == 0
    assert plan["calls_saved_by_history"] == without["planned_calls"] - plan["planned_calls"]
    # a changed prompt then runs the trials the plan said (history included), within 10% of its calls
    head_cfg = write_project(
        tmp_path / "h",
        sizes=SIZES,
        trials="auto",
        concurrency=16,
        template=TEMPLATE.replace("Answer from the notes.", "Answer from the notes, briefly."),
    )
    head_plan = _plan(head_cfg, tmp_path / "plan4.json", fake, tmp_path / "c2", base)
    assert head_plan["cache_source"] is None
    assert head_plan["calls_saved_by_cache"] == 0
    before = fake.calls["messages"]
    args = ["recall", "--config", str(head_cfg), "--baseline", str(base), "--no-progress"]
    _ok(needle_cli([*args, "--json", str(tmp_path / "head.json")], fake, tmp_path / "c2"))
    recall = json.loads((tmp_path / "head.json").read_text())["prompts"][0]["recall"]
    assert recall["power"]["trials"] == head_plan["trials_per_cell"]
    calls = fake.calls["messages"] - before
    assert calls == recall["calls"]
    assert calls <= head_plan["planned_calls"]
