"""``needle check --base-ref REF`` / ``needle diff REF``: the pull request preview.

The acceptance floor of issue 11: in a repository whose HEAD~1 is a pull request's base, the CLI
prints the same verdict, and writes the same comment body, as the action run on that pair of
commits (action_runner.py runs the real entrypoint; the fake Anthropic API answers both). Both
start from a fresh recall cache of their own, so both spend the same model calls.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from needle_action.core.errors import EXIT_CONFIG
from tests.builders import GitRepo, Project, git
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.github_server import FakeGitHub
from tests.fakes.simulated_model import SimulatedModel, u_shape
from tests.integration.action_runner import (
    CONFIG,
    PR,
    REPO,
    STYLE_GUIDE,
    make_checkout,
    run_action,
    runner_env,
)
from tests.needle_cli import run_needle

ROOT = Path(__file__).resolve().parents[2]


def needle(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The CLI in its own process, as a developer runs it."""
    return run_needle(args, env={**env, "PYTHONPATH": str(ROOT)}, cwd=cwd, timeout=600)


def _cli_env(tmp: Path, fake: FakeAnthropic | None) -> dict[str, str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "TIKTOKEN_CACHE_DIR": os.environ["TIKTOKEN_CACHE_DIR"],
        "NEEDLE_CACHE_DIR": str(tmp / "cli-cache"),  # fresh: the CLI measures what the action measured
    }
    if fake is not None:
        env.update(ANTHROPIC_BASE_URL=fake.base_url, ANTHROPIC_API_KEY=fake.api_key)
    return env


def _model() -> FakeAnthropic:
    return FakeAnthropic(SimulatedModel(u_shape(edge=0.97, middle=0.1, margin=0.05), seed=5))


def _worktrees(repo: Path) -> list[str]:
    return [
        line
        for line in git(repo, "worktree", "list", "--porcelain").splitlines()
        if line.startswith("worktree ")
    ]


@pytest.mark.slow  # the action and the CLI, each measuring recall on head and base
def test_check_base_ref_prints_the_actions_verdict_and_writes_its_comment(tmp_path):
    def restructure(repo: Project):  # moves the documents into the middle: recall falls
        repo.edit(
            "prompts/rag_answer.j2",
            "Question: {{ question }}",
            "Before you answer, follow the house style.\n" + STYLE_GUIDE + "\n\nQuestion: {{ question }}",
        )

    p = make_checkout(tmp_path, restructure, base_growth="300%")
    # one fake per run: the fake keeps a prompt cache as Anthropic does, which would bill the second
    # run's calls lower; the model (same seed) answers both alike
    with _model() as fake, FakeGitHub() as gh:
        env = runner_env(p, gh, fake, trials="10")  # the sequential design needs 10 to see this drop
        env.pop("GITHUB_RUN_ID")  # no job summary to link to: the CLI has none either
        action = run_action(p, env)
        assert action.code == 1, action.stdout + action.stderr
        action_comment = (action.report / "comment.md").read_text()
        (posted,) = gh.issue_comments(REPO, PR)
        assert posted["body"] == action_comment

    # the origin has the PR checked out: HEAD~1 is the pull request's base
    assert git(p.origin, "rev-parse", "HEAD~1") == p.base_sha
    out = tmp_path / "out" / "comment.md"
    status_before = git(p.origin, "status", "--porcelain")
    with _model() as fake:
        args = ["check", "--base-ref", "HEAD~1", "--trials", "10", "--no-progress", "-o", str(out)]
        cli = needle(args, p.origin, _cli_env(tmp_path, fake))

    assert cli.returncode == action.code == 1, cli.stdout + cli.stderr
    assert "Traceback" not in cli.stderr
    assert f"verdict: {action.outputs['status']}:" in cli.stdout
    assert out.read_text() == action_comment
    assert "recall regressed" in action_comment.lower() or "regressed" in action_comment
    # nothing left behind in the user's repository: no worktree, no file
    assert len(_worktrees(p.origin)) == 1
    assert git(p.origin, "status", "--porcelain") == status_before


@pytest.mark.slow  # four CLI processes, one measuring budgets on both sides
def test_diff_is_check_base_ref_and_bad_refs_are_usage_errors(tmp_path):
    repo = GitRepo.init(tmp_path / "repo")
    project = (
        Project(repo.path).examples("prompts", "fixtures").config(CONFIG.format(growth="10%"), dedent=False)
    )
    repo.commit("base")
    project.edit("prompts/rag_answer.j2", "using only the documents", "using only the retrieved documents")
    repo.commit("change")
    env = _cli_env(tmp_path, None)

    good = needle(["diff", "HEAD~1", "--no-recall", "-o", str(tmp_path / "c.md")], repo.path, env)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "verdict: pass:" in good.stdout
    assert "rag_answer [typical.yaml]: " in good.stdout
    body = (tmp_path / "c.md").read_text()
    assert body.startswith("<!-- needle-action:comment -->")
    assert git(repo.path, "rev-parse", "HEAD~1")[:7] in body

    bad = needle(["check", "--base-ref", "no-such-branch", "--no-recall"], repo.path, env)
    assert bad.returncode == EXIT_CONFIG
    assert "--base-ref 'no-such-branch'" in bad.stderr
    assert "hint:" in bad.stderr
    assert "Traceback" not in bad.stderr

    mixed = needle(["diff", "HEAD~1", "--model", "x"], repo.path, env)
    assert mixed.returncode == EXIT_CONFIG
    assert "--model cannot be combined" in mixed.stderr

    missing = needle(["diff", "HEAD~1", "--config", str(tmp_path / "nowhere" / "needle.toml")], tmp_path, env)
    assert missing.returncode == EXIT_CONFIG
    assert "threshold file not found" in missing.stderr
    elsewhere = Project(tmp_path / "not-a-repo").config(CONFIG.format(growth="10%"), dedent=False)
    outside = needle(["diff", "HEAD~1", "--config", str(elsewhere.config_path)], tmp_path, env)
    assert outside.returncode == EXIT_CONFIG
    assert "needs a git repository" in outside.stderr
    assert "Traceback" not in missing.stderr + outside.stderr
    assert len(_worktrees(repo.path)) == 1


def test_the_base_worktree_is_removed_when_the_run_is_interrupted(tmp_path, monkeypatch):
    """Ctrl-C while both sides are measured: the worktree goes, the checkout is as it was."""
    from needle_action.pipeline.measure import Measure
    from needle_action.pullrequest import sides

    repo = GitRepo.init(tmp_path / "repo")
    Project(repo.path).examples("prompts", "fixtures").config(CONFIG.format(growth="10%"), dedent=False)
    repo.commit("base")
    Project(repo.path).file("README.md", "x\n")
    repo.commit("readme")
    seen: list[int] = []

    def interrupted(*args, **kwargs):
        seen.append(len(_worktrees(repo.path)))
        raise KeyboardInterrupt

    monkeypatch.setattr(sides, "measure_sides", interrupted)
    settings = sides.local_settings(repo.path / "needle.toml", "HEAD~1", Measure(recall=False))
    with pytest.raises(KeyboardInterrupt):
        sides.measure_pull_request(settings)
    assert seen == [2]  # the worktree existed while measuring
    assert len(_worktrees(repo.path)) == 1
    assert not list(tmp_path.glob("needle-base-*"))
    assert git(repo.path, "status", "--porcelain") == ""
