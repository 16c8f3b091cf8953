"""History on the data branch, with real git: main-branch results accumulate (one file per commit and
an index appended to), ``needle history`` prints the trend from the branch or from a folder, and a
pull request's comment charts the changed prompts' trend and calls out model drift.

The stored results are built in memory (tests/unit/_results_builder.py) and pushed with the action's
own ``databranch.store``, so the test controls the recall at each commit; the PR run is the real
entrypoint against the fake APIs.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from needle_action.cli import main
from needle_action.pullrequest import databranch
from needle_action.pullrequest.settings import Settings
from tests.builders import GitRepo, git
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.github_server import FakeGitHub
from tests.fakes.simulated_model import SimulatedModel, flat
from tests.integration.action_runner import PR, REPO, make_checkout, run_action, runner_env
from tests.needle_cli import needle_env, run_needle
from tests.unit._results_builder import case, grid, prompt, recall, results

BRANCH = "needle-action-data"
ROOT = Path(__file__).resolve().parents[2]
SHAS = ["1" * 40, "2" * 40, "3" * 40]


def _stored(sha: str, mid: int, key: str, tokens: int):
    rec = recall(grid({0.0: (10, 10), 0.5: (mid, 10), 1.0: (10, 10)}), pool_key=key)
    return results(prompt("rag_answer", [case(tokens)], rec=rec), commit=sha)


def _store_three(workspace: Path) -> None:
    """Three main commits: the prompt changes at the second; the third falls with the same prompt."""
    settings = Settings(workspace=workspace, data_branch=BRANCH)
    for sha, mid, key, tokens in zip(SHAS, (10, 9, 2), ("k1", "k2", "k2"), (640, 700, 700), strict=True):
        databranch.store(settings, _stored(sha, mid, key, tokens), b"[defaults]\n")


@pytest.fixture
def repo(tmp_path):
    """A PR checkout whose origin is a bare repository holding three main results on the data branch."""
    p = make_checkout(
        tmp_path,
        lambda r: r.edit(
            "prompts/rag_answer.j2", "using only the documents", "using only the retrieved documents"
        ),
    )
    bare = GitRepo(p.origin).clone(tmp_path / "origin.git", bare=True)
    git(p.workspace, "remote", "set-url", "origin", bare.path.as_uri())
    _store_three(p.workspace)
    return p, bare.path


def needle(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return run_needle(args, env=needle_env(NO_COLOR="1"), cwd=cwd, timeout=120)


def needle_here(args: list[str], cwd: Path) -> Result:
    """`needle ARGS` in this process (click's runner) from CWD: the same command without a child's start."""
    here = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args, env={"NO_COLOR": "1"})
    finally:
        os.chdir(here)


def test_main_results_accumulate_and_needle_history_prints_the_trend(repo, tmp_path):
    _p, bare = repo
    files = git(bare, "ls-tree", "-r", "--name-only", BRANCH).splitlines()
    assert all(f"results/{sha}.json" in files for sha in SHAS)  # appended, not overwritten
    assert git(bare, "rev-list", "--count", BRANCH) == "3"
    index = json.loads(git(bare, "show", f"{BRANCH}:results/index.json"))
    assert [e["commit"] for e in index] == SHAS

    clone = GitRepo(bare).clone(tmp_path / "dev")  # a developer's clone: the branch is origin's
    out = needle(["history", "--data-branch", BRANCH], clone.path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    rows = [line.split() for line in lines if line.strip()[:7] in {s[:7] for s in SHAS}]
    assert [r[0] for r in rows] == [s[:7] for s in SHAS]  # oldest first
    assert [r[1] for r in rows] == ["640", "700", "700"]
    assert [r[2] for r in rows] == ["8,000"] * 3
    assert [r[3] for r in rows] == ["100%", "90%", "20%"]
    drift_at = next(i for i, line in enumerate(lines) if "model drift" in line)
    assert lines[drift_at - 1].split()[0] == SHAS[2][:7]
    assert "90% → 20%" in lines[drift_at]

    # the same from a folder of results files, ordered by its index.json
    folder = tmp_path / "results"
    folder.mkdir()
    for name in [f"{s}.json" for s in SHAS] + ["index.json"]:
        (folder / name).write_text(git(bare, "show", f"{BRANCH}:results/{name}"))
    # in this process: the real process above already proved the command as a user starts it
    from_dir = needle_here(["history", "--dir", str(folder), "--json", str(tmp_path / "t.json")], tmp_path)
    assert from_dir.exit_code == 0, from_dir.output
    assert "model drift" in from_dir.stdout
    (trend,) = json.loads((tmp_path / "t.json").read_text())
    assert [pt["mid_rate"] for pt in trend["points"]] == [1.0, 0.9, 0.2]

    missing = needle_here(["history", "--data-branch", "nope"], clone.path)
    assert missing.exit_code == 2
    assert "git fetch origin nope:nope" in missing.stderr
    assert isinstance(missing.exception, SystemExit), missing.exception  # an error, not a traceback


@pytest.mark.slow  # an action run measuring head and base
def test_the_pr_comment_charts_the_trend_and_calls_out_drift(repo):
    p, _ = repo
    with FakeAnthropic(SimulatedModel(flat(0.99), seed=5)) as fake, FakeGitHub() as gh:
        run = run_action(p, runner_env(p, gh, fake, data_branch=BRANCH, trials="4"))
        (comment,) = gh.issue_comments(REPO, PR)
    assert run.code == 0, run.stdout + run.stderr
    body = comment["body"]
    assert "### Trend on main" in body
    trend = body[body.index("### Trend on main") :]
    assert "📉 **Model drift** in `rag_answer` at `3333333`" in trend
    assert "90% → 20%" in trend
    chart = trend[trend.index("```mermaid") : trend.index("```", trend.index("```mermaid") + 3)]
    ticks = ", ".join(f'"{s[:7]}"' for s in [*SHAS, p.head_sha])
    assert "xychart-beta" in chart
    assert f'x-axis "commit" [{ticks}]' in chart
    assert "line [100, 90, 20, " in chart  # the head's own mid-depth recall last
    assert "tokens 640 → 700 → 700 → " in trend
    comparison = json.loads((run.report / "comparison.json").read_text())
    assert [pt["commit"] for pt in comparison["history"][0]["points"]] == [*SHAS, p.head_sha]
