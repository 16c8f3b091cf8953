"""The cross-run study of issue 31 (``bench/runs_e2e.py``) end to end on 2 pull requests: main's stored
runs by ``needle check --seed``, the base by ``needle check``, the head by ``needle recall --baseline``
(``--history DIR`` when the CLI has it), the verdict by ``needle report``; every run against the fake
Anthropic server with the simulated model at its own run level. The bench runs 40 PRs; this keeps the
harness working."""

from __future__ import annotations

import json

import pytest

from bench.runs_e2e import study
from tests.fakes.simulated_model import SimulatedModel, flat, run_level, shifted

pytestmark = pytest.mark.slow


def test_the_study_runs_two_pull_requests_through_the_cli(tmp_path):
    result = study("unchanged", 2, 0.6, tmp_path, history_runs=3, echo=False)
    assert [o.pr for o in result.outcomes] == [0, 1]
    for o in result.outcomes:
        assert o.exit_code in (0, 1)
        assert o.blocked == (o.exit_code == 1)
        assert o.verdict in ("pass", "fail-recall"), o
        assert o.head_trials is not None, o
        assert o.head_trials >= 5, o
        assert 0 < o.head_calls <= 15 * o.head_trials, o
        assert o.history_used == result.history_flag
        if result.history_flag:  # the stored runs share the base's fingerprint: the spread is estimated
            assert o.tau_method == "moments", o
    # every run answered at its own level: the base's and the head's differ, and across PRs
    levels = [x for o in result.outcomes for x in (o.base_level, o.head_level)]
    assert len(set(levels)) == 4, levels
    stored = sorted((tmp_path / "main-runs").glob("0*.json"))
    assert len(stored) == 4  # PRS + history_runs - 1 main runs, a rolling window
    assert json.loads((tmp_path / "pr1" / "history" / "index.json").read_text()) == [
        p.stem for p in stored[1:]
    ]


def test_a_run_level_moves_every_probability_on_the_logit_scale():
    assert run_level(7, 0.0) == 0.0
    assert run_level(7, 0.6) == run_level(7, 0.6) != run_level(8, 0.6)
    assert abs(run_level(7, 0.6) / run_level(7, 0.3) - 2.0) < 1e-9  # the same draw, scaled
    assert shifted(0.8, 0.0) == 0.8
    assert shifted(0.5, 1.0) == pytest.approx(0.7310585786)
    assert shifted(1.0, -2.0) == 1.0
    assert shifted(0.0, 2.0) == 0.0
    model = SimulatedModel.for_run(flat(0.8), run=3, run_sd=0.6)
    assert model.seed == 3
    assert model.level == run_level(3, 0.6)
