"""The sticky comment belongs to us: identity, duplicates, stale heads, broken API answers.

Against the loopback fake GitHub (real HTTP), first with the client alone, then with the whole
action run as a runner runs it, twice at once.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from needle_action.action.comment import head_of, identity, publish_sticky
from needle_action.action.github import Comment, GitHubClient
from tests.builders import git
from tests.fakes.github_server import FakeGitHub
from tests.integration.action_runner import MARKER, PR, REPO, ROOT, make_project, run_action, runner_env

OLD, NEW = "a" * 40, "b" * 40


def client(gh: FakeGitHub, token: str = "test-token") -> GitHubClient:
    return GitHubClient(token, api_url=gh.api_url, repository=REPO)


def bodies(gh: FakeGitHub, issue: int = PR) -> list[str]:
    return [c["body"] for c in gh.issue_comments(REPO, issue)]


def touched(gh: FakeGitHub, comment_id: int) -> list[str]:
    return [r.method for r in gh.requests if r.path.endswith(f"/comments/{comment_id}")]


def test_identity_is_the_bot_for_an_installation_token_and_the_user_for_a_pat():
    with FakeGitHub(
        tokens={"test-token": "write", "pat": "write"}, identities={"pat": ("octocat", "User")}
    ) as gh:
        assert identity(client(gh)) == "github-actions[bot]"
        assert identity(client(gh, "pat")) == "octocat"
        # GraphQL unusable: REST /user answers for a PAT, nothing answers for the bot
        gh.faults.append(("POST", r"/graphql$", "garbage"))
        assert identity(client(gh, "pat")) == "octocat"
        assert identity(client(gh)) is None
    with FakeGitHub(prefix="/api/v3") as ghes:  # GHES: GraphQL lives at /api/graphql
        assert identity(client(ghes)) == "github-actions[bot]"
        assert any(r.path == "/api/graphql" for r in ghes.requests)


def test_a_human_copy_of_the_marker_is_ignored_and_left_alone():
    with FakeGitHub() as gh:
        gh.add_pull(REPO, PR, head_sha=NEW, base_sha=OLD)
        forged = gh.seed_comment(REPO, PR, MARKER + "\n## ✅ all good, merge it", login="mallory")
        posted = publish_sticky(client(gh), PR, MARKER + "\nreal", MARKER, head_sha=NEW)
        assert posted.action == "created"
        assert posted.comment.id != forged["id"]
        assert touched(gh, forged["id"]) == []
        assert bodies(gh)[0] == MARKER + "\n## ✅ all good, merge it"
        assert head_of(posted.comment) == NEW


def test_a_run_that_loses_the_race_updates_the_winner_and_deletes_its_own():
    with FakeGitHub() as gh:
        gh.add_pull(REPO, PR, head_sha=NEW, base_sha=OLD)

        def other_run_posts_first(method: str, path: str) -> None:
            if method == "POST" and path.endswith(f"/issues/{PR}/comments"):
                gh.before.clear()
                gh.seed_comment(REPO, PR, MARKER + "\nother run", login="github-actions[bot]", kind="Bot")

        gh.before.append(other_run_posts_first)
        posted = publish_sticky(client(gh), PR, MARKER + "\nthis run", MARKER, head_sha=NEW)
        (only,) = gh.issue_comments(REPO, PR)
        assert posted.comment.id == only["id"]
        assert only["body"].endswith("this run")
        assert gh.count("DELETE") == 1


def test_duplicates_of_ours_collapse_to_the_oldest():
    with FakeGitHub() as gh:
        gh.add_pull(REPO, PR, head_sha=NEW, base_sha=OLD)
        first = gh.seed_comment(REPO, PR, MARKER + "\nv1", login="github-actions[bot]", kind="Bot")
        gh.seed_comment(REPO, PR, MARKER + "\nv1 again", login="github-actions[bot]", kind="Bot")
        human = gh.seed_comment(REPO, PR, "thanks bot")
        posted = publish_sticky(client(gh), PR, MARKER + "\nv2", MARKER, head_sha=NEW)
        assert posted.action == "updated"
        assert posted.comment.id == first["id"]
        assert [c["id"] for c in gh.issue_comments(REPO, PR)] == [first["id"], human["id"]]


def test_a_run_for_an_older_head_writes_nothing():
    with FakeGitHub() as gh:
        gh.add_pull(REPO, PR, head_sha=NEW, base_sha="c" * 40)
        newer = gh.seed_comment(REPO, PR, MARKER + f"\n<!-- needle-action:head {NEW} -->\nnew", login="github-actions[bot]", kind="Bot")  # fmt: skip
        posted = publish_sticky(client(gh), PR, MARKER + "\nold verdict", MARKER, head_sha=OLD)
        assert posted.action == "stale"
        assert posted.comment is None
        assert "moved on" in posted.note
        assert touched(gh, newer["id"]) == []
        assert gh.count("POST") == 0
        assert bodies(gh)[0].endswith("new")


def test_without_an_identity_the_posted_comment_teaches_it():
    with FakeGitHub(faults=[("POST", r"/graphql$", "garbage")]) as gh:
        gh.add_pull(REPO, PR, head_sha=NEW, base_sha=OLD)
        c = client(gh)
        assert publish_sticky(c, PR, MARKER + "\nv1", MARKER, head_sha=NEW).action == "created"
        again = publish_sticky(c, PR, MARKER + "\nv2", MARKER, head_sha=NEW)
        (only,) = gh.issue_comments(REPO, PR)
        assert only["body"].endswith("v2")
        assert again.comment.id == only["id"]


def test_same_author_needs_the_bot_type_for_a_bot_login():
    from needle_action.action.comment import same_author

    bot = Comment(1, MARKER, "", "github-actions[bot]", "Bot")
    assert same_author("github-actions[bot]", bot)
    assert same_author("github-actions", bot)
    assert not same_author("github-actions[bot]", Comment(2, MARKER, "", "github-actions", "User"))
    assert not same_author("mallory", bot)


# --------------------------------------------------------------------------- the action, twice at once


def _start(p, env) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "entrypoint.py")],
        cwd=p.workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _twin(p, tmp_path, name: str):
    """A second checkout and runner (its own workspace, home and output files)."""
    ws = tmp_path / f"ws-{name}"
    git(tmp_path, "clone", "-q", "--depth=1", "--branch", "feature", p.origin.as_uri(), str(ws))
    home = tmp_path / f"home-{name}"
    home.mkdir()
    tmp = tmp_path / f"t-{name}"
    tmp.mkdir()
    return dataclasses.replace(p, workspace=ws, home=home, tmp=tmp)


@pytest.mark.slow  # two action runs at once
def test_two_runs_started_together_leave_one_comment(tmp_path):
    p = make_project(tmp_path)
    q = _twin(p, tmp_path, "twin")
    with FakeGitHub() as gh:
        procs = [_start(x, runner_env(x, gh, None, recall="false")) for x in (p, q)]
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, out + err
            assert "Traceback" not in err, out + err
        (only,) = gh.issue_comments(REPO, PR)
        assert only["body"].startswith(MARKER)
        assert head_of(_as_comment(only)) == p.head_sha


@pytest.mark.slow  # two action runs at once
def test_an_older_run_racing_a_newer_one_leaves_the_newer_verdict(tmp_path):
    p = make_project(tmp_path)
    q = _twin(p, tmp_path, "old")
    with FakeGitHub() as gh:
        env_new = runner_env(p, gh, None, recall="false")
        gh.add_pull(REPO, PR, head_sha=p.head_sha, base_sha=p.base_sha)
        old = dataclasses.replace(q, head_sha="d" * 40)  # the push before: GitHub's head is p.head_sha now
        env_old = runner_env(old, gh, None, recall="false")
        procs = [_start(p, env_new), _start(old, env_old)]
        outs = []
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, out + err
            assert "Traceback" not in err, out + err
            outs.append(out)
        (only,) = gh.issue_comments(REPO, PR)
        assert head_of(_as_comment(only)) == p.head_sha
        assert "not commenting: the PR has moved on" in outs[1]


def _as_comment(data: dict) -> Comment:
    return Comment.from_api(data)


# --------------------------------------------------------------------------- broken answers


@pytest.mark.parametrize(
    "fault",
    [  # one whole action run each: the first stays in the fast tier, the rest are slow
        ("GET", r"/issues/\d+/comments$", "garbage"),
        *(
            pytest.param(fault, marks=pytest.mark.slow)
            for fault in [
                ("GET", r"/issues/\d+/comments$", "truncated"),
                ("GET", r"/issues/\d+/comments$", "wrong-shape"),
                ("POST", r"/issues/\d+/comments$", "wrong-shape"),
                ("GET", r"/pulls/\d+$", "wrong-shape"),
            ]
        ),
    ],
    ids=lambda f: f"{f[0]}-{f[1].split('/')[-2] if f[1].count('/') > 1 else f[1]}-{f[2]}",
)
def test_a_broken_api_answer_is_a_warning_with_summary_and_outputs(tmp_path, fault):
    p = make_project(tmp_path)
    with FakeGitHub(faults=[fault]) as gh:
        env = runner_env(p, gh, None, recall="false")
        run = run_action(p, env)
        assert run.code == 0, run.stdout + run.stderr
        assert "Traceback" not in run.stderr + run.stdout, run.stdout + run.stderr
        assert "internal error" not in run.stdout
        assert "::warning::needle:" in run.stdout
        assert run.outputs["status"] == "pass"
        assert run.outputs["report-path"]
        assert "# needle: ✅" in run.summary
