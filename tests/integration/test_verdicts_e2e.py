"""A handful of pull requests through the real CLI, against the fake Anthropic server answering with
the simulated model, agree with the replay of ``bench/verdicts.py``:

    needle check --json base.json     (the base's project; its own model draws)
    needle check --json head.json     (the head's project: a changed prompt)
    needle report head.json --base base.json   -> exit 1 exactly when the PR must be blocked

on a 3 sizes x 5 depths grid at the default recall settings (trials "auto", family alpha 0.01,
min_drop 0.2). Noise alone (flat .95 on both sides) blocks none of them (the replay: under 1%); a
30-point drop in the middle depths blocks every one (the replay: 100%); ``needle report``'s exit code
is 1 exactly when ``comparison.json`` says the PR fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.verdicts import DROPS, NULLS, replay
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.simulated_model import SimulatedModel
from tests.integration.recall_helpers import (
    base_and_head,
    flat95,
    middle_minus_30,
    needle_cli,
)

SIZES = (400, 800, 1200)
PRS = 3

pytestmark = pytest.mark.slow


def _pr(tmp: Path, fake: FakeAnthropic, base_curve, head_curve, pr: int) -> tuple[int, dict, dict]:
    """One pull request: (exit code of needle report, comparison, head results)."""
    base_cfg, head_cfg = base_and_head(tmp, SIZES)
    out = {}
    for side, cfg, curve in (("base", base_cfg, base_curve), ("head", head_cfg, head_curve)):
        # independent draws per side and per PR, as two runs of a real model give
        fake.responder = SimulatedModel(curve, seed=1000 * pr + (side == "head"), exact_size=False)
        res = needle_cli(
            ["check", "--config", str(cfg), "--json", str(tmp / f"{side}.json")], fake, tmp / side
        )
        assert res.returncode in (0, 1), res.stdout + res.stderr
        assert "Traceback" not in res.stderr, res.stdout + res.stderr
        out[side] = json.loads((tmp / f"{side}.json").read_text())
    # the replay is the same-job design (one run level, the action's default): the two files name one
    # job, as the action's base and head do (two jobs would be tested across runs: stats/runs.py)
    out["head"]["run_id"] = out["base"]["run_id"]
    (tmp / "head.json").write_text(json.dumps(out["head"]))
    report = needle_cli(
        ["report", str(tmp / "head.json"), "--base", str(tmp / "base.json"), "--format", "json"], fake, tmp
    )
    assert "Traceback" not in report.stderr, report.stderr
    return report.returncode, json.loads(report.stdout), out["head"]


@pytest.fixture(scope="module")
def fake():
    with FakeAnthropic() as server:
        yield server


@pytest.mark.parametrize(
    ("name", "base_curve", "head_curve", "replayed"),
    [("noise", flat95, flat95, NULLS[0]), ("middle -30 pt", flat95, middle_minus_30, DROPS[0])],
)
def test_the_cli_agrees_with_the_replay(tmp_path, fake, name, base_curve, head_curve, replayed):
    expected = replay(replayed, 400, seed=7, check=0)
    blocked = 0
    for pr in range(PRS):
        code, comparison, head = _pr(tmp_path / str(pr), fake, base_curve, head_curve, pr)
        rc = comparison["prompts"][0]["recall"]
        must_block = comparison["recall_regressed"] or comparison["budget_failed"]
        assert code == (1 if must_block else 0), (code, comparison["verdict"])
        assert comparison["verdict"] in ("pass", "fail-recall")  # never inconclusive at full trials
        recall = head["prompts"][0]["recall"]
        assert recall["power"]["trials"] == 20
        assert recall["calls"] == 15 * 20
        assert rc["base"]["trials"] == rc["head"]["trials"] == 300
        blocked += code == 1
    replay_rate = expected.blocked / expected.prs
    if replayed.must_block:
        assert replay_rate >= 0.99, (name, blocked, replay_rate)
        assert blocked == PRS, (name, blocked, replay_rate)
    else:
        assert replay_rate <= 0.01, (name, blocked, replay_rate)
        assert blocked == 0, (name, blocked, replay_rate)
