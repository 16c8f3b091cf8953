"""`--history DIR` end to end (issue 31): stored main-branch runs tell how far runs differ; the head's
`needle recall --baseline` tests across runs with them and records it, and `needle report` re-derives
the same verdict from the files, with the folder or from the record alone."""

from __future__ import annotations

import json

import pytest

from tests.fakes.simulated_model import SimulatedModel, flat
from tests.integration.recall_helpers import TEMPLATE, needle_cli, write_project


@pytest.mark.slow  # seven CLI processes, five of them measuring
def test_recall_and_report_with_history_test_across_runs(tmp_path, fake_anthropic):
    cache = tmp_path / "cache"
    fake_anthropic.responder = SimulatedModel(flat(0.9), seed=2)
    cfg = write_project(tmp_path / "proj", sizes=(400, 800), depths=(0.0, 0.5, 1.0), trials=8)
    stored = tmp_path / "stored"
    for seed in (1, 2, 3):  # three unchanged main-branch runs, each its own run
        ran = needle_cli(
            ["check", "--config", str(cfg), "--seed", str(seed), "--json", str(stored / f"run{seed}.json")],
            fake_anthropic,
            cache,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
    base = tmp_path / "base.json"
    ran = needle_cli(
        ["check", "--config", str(cfg), "--seed", "7", "--json", str(base)], fake_anthropic, cache
    )
    assert ran.returncode == 0, ran.stderr
    # the pull request edits the prompt (a new fingerprint); the model is the same
    (tmp_path / "proj" / "prompts" / "qa.j2").write_text(TEMPLATE.replace("Answer from", "Answer only from"))
    head = tmp_path / "head.json"
    ran = needle_cli(
        [
            "recall",
            "--config",
            str(cfg),
            "--seed",
            "7",
            "--baseline",
            str(base),
            "--history",
            str(stored),
            "--json",
            str(head),
        ],
        fake_anthropic,
        cache,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    record = json.loads(head.read_text())["prompts"][0]["recall"]["cross_run"]
    assert record["method"] == "moments"
    assert record["runs"] == 4  # three stored runs and the base run itself
    assert len(record["history"]) == 3

    verdicts = []
    for extra in (["--history", str(stored)], []):  # the folder again, or the head's record alone
        out = needle_cli(
            ["report", str(head), "--base", str(base), "--format", "json", *extra], fake_anthropic, cache
        )
        assert out.returncode == 0, out.stdout + out.stderr
        rc = json.loads(out.stdout)["prompts"][0]["recall"]
        assert rc["test"] == "cross-run"
        assert any("estimated from 4 stored runs" in n for n in rc["notes"])
        verdicts.append([(g["label"], g["verdict"], g["p_value"]) for g in rc["groups"]])
    assert verdicts[0] == verdicts[1]
    assert any(label.startswith("every cell") for label, _, _ in verdicts[0])


def test_an_empty_history_folder_is_a_clear_error(tmp_path, fake_anthropic):
    head = tmp_path / "head.json"
    head.write_text(json.dumps({"schema_version": 2, "config": "needle.toml"}))
    (tmp_path / "empty").mkdir()
    out = needle_cli(
        ["report", str(head), "--history", str(tmp_path / "empty")], fake_anthropic, tmp_path / "cache"
    )
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert "no results files in" in out.stderr
