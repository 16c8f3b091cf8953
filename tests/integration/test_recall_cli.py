"""`needle recall` end to end: the real CLI in a subprocess, a temporary project and threshold file,
the fake Anthropic API over real HTTP (ANTHROPIC_BASE_URL, a dummy key)."""

from __future__ import annotations

import json

import pytest

from tests.fakes.simulated_model import SimulatedModel, flat, u_shape
from tests.integration.recall_helpers import needle_cli, write_project


@pytest.mark.slow  # three CLI processes, two of them measuring
def test_lost_in_the_middle_fails_the_check_then_reruns_from_cache(tmp_path, fake_anthropic):
    cache = tmp_path / "cache"
    fake_anthropic.responder = SimulatedModel(u_shape(edge=0.97, middle=0.1, margin=0.08), seed=4)
    cfg = write_project(tmp_path / "proj", sizes=(400, 800))
    out = tmp_path / "out.json"
    first = needle_cli(["recall", "--config", str(cfg), "--json", str(out)], fake_anthropic, cache)
    assert first.returncode == 1, first.stderr
    assert "Traceback" not in first.stderr
    text = first.stdout
    assert "recall qa" in text
    assert "400 tok" in text
    assert "800 tok" in text
    assert "diagnosis: lost-in-the-middle" in text
    assert "edge_order" in text
    assert "recall FAIL" in text
    # not a terminal: progress comes as plain lines on stderr
    assert "trials settled" in first.stderr
    data = json.loads(out.read_text())
    recall = data["prompts"][0]["recall"]
    assert recall["diagnosis"]["kind"] == "lost-in-the-middle"
    assert len(recall["cells"]) == 10
    assert data["totals"]["calls"] == recall["calls"] > 0
    assert all(c["token_offset"] is not None for c in recall["cells"])

    sent = len(fake_anthropic.requests)
    again = needle_cli(["recall", "--config", str(cfg), "--json", str(out)], fake_anthropic, cache)
    assert again.returncode == 1
    assert len(fake_anthropic.requests) == sent
    assert f"reused from cache: {recall['calls']:,} calls" in again.stdout
    assert json.loads(out.read_text())["totals"]["cached_calls"] == recall["calls"]

    fresh = needle_cli(["recall", "--config", str(cfg), "--no-cache", "--no-progress"], fake_anthropic, cache)
    assert fresh.returncode == 1
    assert len(fake_anthropic.requests) > sent
    assert "trials settled" not in fresh.stderr


@pytest.mark.slow  # >= 3 s (CONTRIBUTING: the fast tier stays under 2 minutes)
def test_flat_high_recall_passes(tmp_path, fake_anthropic):
    fake_anthropic.responder = SimulatedModel(flat(0.99), seed=1)
    # 5 trials a cell (4/4, then stop) cannot show that recall clears 80%; 20 can
    cfg = write_project(tmp_path / "proj", sizes=(400,), depths=(0.0, 0.5, 1.0), trials=20)
    res = needle_cli(["recall", "--config", str(cfg), "--seed", "3"], fake_anthropic, tmp_path / "cache")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "diagnosis: all-pass" in res.stdout
    assert "recall PASS" in res.stdout
    assert "seed 3" in res.stdout
    assert "trials: 20 per cell (as set): this run detects drops >= " in res.stdout


@pytest.mark.slow  # >= 3 s (CONTRIBUTING: the fast tier stays under 2 minutes)
def test_a_cap_is_reported_as_partial(tmp_path, fake_anthropic):
    fake_anthropic.responder = SimulatedModel(flat(0.99), seed=1)
    cfg = write_project(tmp_path / "proj", recall_extra="max_calls = 6")
    out = tmp_path / "out.json"
    res = needle_cli(["recall", "--config", str(cfg), "--json", str(out)], fake_anthropic, tmp_path / "cache")
    assert res.returncode == 1  # a run cut short never passes (a cap: 1; an outage: 3)
    assert "PARTIAL: max_calls (6) reached" in res.stdout
    assert "PARTIAL RUN" in res.stdout
    assert "recall PASS" not in res.stdout
    assert "recall PARTIAL" in res.stdout
    assert "inconclusive" in res.stdout
    data = json.loads(out.read_text())
    assert data["totals"]["partial"]
    assert data["prompts"][0]["recall"]["partial_reason"] == "max_calls (6) reached"
    assert data["prompts"][0]["recall"]["status"] == "partial"


@pytest.mark.slow  # >= 3 s (CONTRIBUTING: the fast tier stays under 2 minutes)
def test_refused_key_exits_3_without_leaking_it(tmp_path, fake_anthropic):
    cfg = write_project(tmp_path / "proj")
    res = needle_cli(
        ["recall", "--config", str(cfg)], fake_anthropic, tmp_path / "cache", key="sk-ant-not-the-right-one"
    )
    assert res.returncode == 3, res.stdout + res.stderr
    assert "provider unavailable" in res.stdout
    assert "sk-ant-not-the-right-one" not in res.stdout + res.stderr
    assert "Traceback" not in res.stderr
