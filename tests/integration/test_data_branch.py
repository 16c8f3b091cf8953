"""The data branch, end to end with real git: a push to main stores its results on an orphan branch
of a bare ``origin``; a pull request whose base is that commit reads them instead of measuring.

The PR edits ``rag_answer`` (one word) and runs with a fresh recall cache, so measuring the base
would cost model calls: the fake provider's call count tells whether the base was measured.
The runner environment and the checkout come from action_runner.py, the repositories from
tests/builders.py.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from tests.builders import GitRepo, Project, git
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.github_server import FakeGitHub
from tests.fakes.simulated_model import SimulatedModel, flat
from tests.integration.action_runner import MARKER, PR, REPO, Checkout, make_checkout, run_action, runner_env

BRANCH = "needle-action-data"
INPUTS = {"data_branch": BRANCH, "trials": "4"}  # few trials: the file stays fast


def _edit_prompt(repo: Project) -> None:
    repo.edit("prompts/rag_answer.j2", "using only the documents", "using only the retrieved documents")


@pytest.fixture
def fake_model():
    # recall passes everywhere, so main (judged on absolute thresholds, no base) exits 0
    with FakeAnthropic(SimulatedModel(flat(0.99), seed=5)) as fake:
        yield fake


@pytest.fixture
def setup(tmp_path):
    """A bare origin (main = base, feature = the PR), a clone of main for the push run, and the PR's
    one-commit-deep clone pointed at the bare origin."""
    p = make_checkout(tmp_path, _edit_prompt)
    bare = GitRepo(p.origin).clone(tmp_path / "origin.git", bare=True)
    git(p.workspace, "remote", "set-url", "origin", bare.path.as_uri())
    main_ws = bare.clone(tmp_path / "main-ws", branch="main", depth=1)
    main_home = tmp_path / "main-home"  # another job: its own runner, its own recall cache
    main_home.mkdir()
    return p, bare.path, dataclasses.replace(p, workspace=main_ws.path, home=main_home)


def push_run(main: Checkout, gh: FakeGitHub, fake: FakeAnthropic):
    env = runner_env(main, gh, fake, **INPUTS)
    env.update(GITHUB_EVENT_NAME="push", GITHUB_REF="refs/heads/main", GITHUB_SHA=main.base_sha)
    Path(env["GITHUB_EVENT_PATH"]).write_text(
        json.dumps(
            {
                "ref": "refs/heads/main",
                "after": main.base_sha,
                "repository": {"full_name": REPO, "default_branch": "main"},
            }
        )
    )
    return run_action(main, env)


def _ls(bare: Path) -> list[str]:
    return git(bare, "ls-tree", "-r", "--name-only", BRANCH).splitlines()


@pytest.mark.slow  # four action runs in subprocesses
def test_push_stores_results_and_the_pr_reads_its_base_from_the_data_branch(setup, fake_model):
    p, bare, main = setup
    with FakeGitHub() as gh:
        pushed = push_run(main, gh, fake_model)
        assert pushed.code == 0, pushed.stdout + pushed.stderr
        assert gh.issue_comments(REPO, PR) == []  # a push has no PR to comment on
        assert sorted(_ls(bare)) == sorted(
            [
                f"results/{p.base_sha}.json",
                f"results/{p.base_sha}.meta.json",
                "results/latest.json",
                "results/index.json",
            ]
        )
        stored = json.loads(git(bare, "show", f"{BRANCH}:results/{p.base_sha}.json"))
        assert stored == json.loads((pushed.report / "head.json").read_text())
        assert stored["commit"] == p.base_sha
        assert stored["totals"]["calls"] > 0
        assert (
            git(bare, "log", "-1", "--format=%an <%ae> parents=%P", BRANCH)
            == "github-actions[bot] <41898282+github-actions[bot]@users.noreply.github.com> parents="
        )  # orphan
        logged = [
            line
            for line in (pushed.stdout + pushed.stderr).splitlines()
            if not line.startswith("::add-mask::")
        ]
        assert not [
            line for line in logged if "test-token" in line or "eC1hY2Nlc3MtdG9rZW46dGVzdC10b2tlbg" in line
        ]
        # plumbing only: the workspace's config, branch and index are as the checkout left them
        assert "extraheader" not in git(main.workspace, "config", "--local", "--list")
        assert git(main.workspace, "rev-parse", "--abbrev-ref", "HEAD") == "main"
        assert git(main.workspace, "diff", "--cached", "--name-only") == ""
        assert "Results stored on the data branch" in pushed.summary
        assert f"results/{p.base_sha}.json" in pushed.summary

        # a second main-branch run adds a commit on top instead of replacing the branch
        again = push_run(main, gh, fake_model)
        assert again.code == 0, again.stdout + again.stderr
        assert git(bare, "rev-list", "--count", BRANCH) == "2"
        # the same commit again keeps its one place in the history's index
        assert json.loads(git(bare, "show", f"{BRANCH}:results/index.json")) == [{"commit": p.base_sha}]
        stored = json.loads(git(bare, "show", f"{BRANCH}:results/{p.base_sha}.json"))  # now from the cache
        assert stored == json.loads(git(bare, "show", f"{BRANCH}:results/latest.json"))

        calls_before = fake_model.calls["messages"]
        pr = run_action(p, runner_env(p, gh, fake_model, **INPUTS))
        assert pr.code == 0, pr.stdout + pr.stderr
        assert "in a git worktree" not in pr.stdout
        assert "read from the data branch" in pr.stdout
        head = json.loads((pr.report / "head.json").read_text())
        base = json.loads((pr.report / "base.json").read_text())
        assert base == stored  # the stored results, as they were
        assert head["totals"]["calls"] > 0
        assert fake_model.calls["messages"] - calls_before == head["totals"]["calls"]  # the base cost 0 calls
        assert "rag_answer[fixtures/rag_answer/typical.yaml]: " in pr.outputs["token-deltas"]
        assert " -> " in pr.outputs["token-deltas"]
        assert "(new)" not in pr.outputs["token-deltas"]
        (comment,) = gh.issue_comments(REPO, PR)
        assert comment["body"].startswith(MARKER)
        assert "read from the data branch" in comment["body"]


def _commit_on_data_branch(tmp: Path, bare: Path, path: str, text: str) -> None:
    clone = GitRepo(bare).clone(tmp / "tamper", branch=BRANCH)
    Project(clone.path).file(path, text)
    clone.commit("tamper")
    clone.git("push", "-q", "origin", BRANCH)


@pytest.mark.slow  # two action runs and a push each
@pytest.mark.parametrize(
    ("path", "text", "why"),
    [
        ("results/{sha}.json", '{"schema_version": 1, "prompts": "oops"', "invalid"),
        ("results/{sha}.meta.json", '{"fingerprint": {"config_sha256": "0"}}', "another threshold file"),
    ],
)
def test_a_corrupt_or_mismatched_data_branch_falls_back_to_measuring(
    setup, fake_model, tmp_path, path, text, why
):
    p, bare, main = setup
    with FakeGitHub() as gh:
        assert push_run(main, gh, fake_model).code == 0
        _commit_on_data_branch(tmp_path, bare, path.format(sha=p.base_sha), text)

        pr = run_action(p, runner_env(p, gh, fake_model, **INPUTS))
        assert pr.code == 0, pr.stdout + pr.stderr
        assert "Traceback" not in pr.stderr
        assert "in a git worktree" in pr.stdout
        base = json.loads((pr.report / "base.json").read_text())
        assert base["commit"] == p.base_sha
        assert base["totals"]["calls"] > 0
        (comment,) = gh.issue_comments(REPO, PR)
        assert why in comment["body"]
        assert "the base was measured instead" in comment["body"]


@pytest.mark.slow  # two action runs, measuring the base
def test_no_data_branch_yet_measures_the_base_and_a_bad_name_is_a_usage_error(setup, fake_model):
    p, _, _ = setup
    with FakeGitHub() as gh:
        pr = run_action(p, runner_env(p, gh, fake_model, **INPUTS))
        assert pr.code == 0, pr.stdout + pr.stderr
        assert "not found on origin" in pr.stdout
        assert "in a git worktree" in pr.stdout
        bad = run_action(p, runner_env(p, gh, None, data_branch="../x"))
        assert bad.code == 2
        assert "data-branch" in bad.stdout
        assert "Traceback" not in bad.stderr
    assert (
        subprocess.run(["git", "check-ref-format", "--branch", BRANCH], capture_output=True).returncode == 0
    )


def test_the_push_header_replaces_a_persisted_one_and_stays_out_of_the_repository(setup):
    """What git sends over HTTP: only our Authorization header (one actions/checkout persisted would
    clash), and the repository's config keeps only what was there."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from needle_action.pullrequest.databranch import _env
    from needle_action.pullrequest.settings import Settings

    seen: list[list[str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append(self.headers.get_all("Authorization") or [])
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    _, _, main = setup
    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        key = f"http.{url}/.extraheader"
        git(main.workspace, "config", "--local", key, "AUTHORIZATION: basic cGVyc2lzdGVk")
        env = _env(Settings(github_token="s3cret", workspace=main.workspace, server_url=url))
        subprocess.run(
            ["git", "ls-remote", f"{url}/octo/widgets.git"],
            cwd=main.workspace,
            env=env,
            capture_output=True,
            timeout=60,
        )
    finally:
        server.shutdown()
    assert seen
    assert all(h == ["basic eC1hY2Nlc3MtdG9rZW46czNjcmV0"] for h in seen)
    assert git(main.workspace, "config", "--local", "--get-all", key) == "AUTHORIZATION: basic cGVyc2lzdGVk"
