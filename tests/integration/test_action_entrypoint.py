"""``python entrypoint.py`` with exactly the environment a runner gives a Docker action.

A real git history (base on ``main``, the PR on ``feature``) lives in a local "origin"; the
workspace is a one-commit-deep clone of the PR head, like actions/checkout makes, so the action
must fetch the base commit itself. GitHub is the loopback fake REST API, the model provider the
fake Anthropic API answering with the simulated model. Inputs arrive as ``INPUT_<NAME>`` with
hyphens kept (``INPUT_GITHUB-TOKEN``), every declared input set to its default as the runner does.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.builders import Project
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.github_server import FakeGitHub
from tests.fakes.simulated_model import SimulatedModel, u_shape
from tests.integration.action_runner import (
    MARKER,
    PR,
    REPO,
    STYLE_GUIDE,
    make_checkout,
    report_json,
    run_action,
    runner_env,
)


@pytest.fixture
def fake_model():
    with FakeAnthropic(SimulatedModel(u_shape(edge=0.97, middle=0.1, margin=0.05), seed=5)) as fake:
        yield fake


@pytest.mark.slow  # two action runs, each measuring recall on head and base
def test_unchanged_pr_two_runs_one_comment_and_a_free_base(tmp_path, fake_model):
    p = make_checkout(tmp_path)  # the PR only touches the README
    with FakeGitHub() as gh:
        gh.seed_comment(REPO, PR, "LGTM, but let's see what the bot says")
        env = runner_env(p, gh, fake_model)
        first = run_action(p, env)
        assert first.code == 0, first.stdout + first.stderr
        assert "Traceback" not in first.stderr
        head, base = report_json(first, "head"), report_json(first, "base")
        calls_first = fake_model.calls["messages"]
        # every request was the head's: the answers it counted and the speculative ones it did not
        spent = head["totals"]["calls"] + head["totals"]["speculative_calls"]
        assert head["totals"]["calls"] > 0
        assert calls_first == spent
        assert base["totals"]["calls"] == 0
        assert base["totals"]["cached_calls"] > 0
        assert base["commit"] == p.base_sha
        assert first.outputs["status"] == "pass"
        assert first.outputs["recall-verdict"] == "pass"
        assert first.outputs["comment-url"].startswith(
            "https://github.com/octo/widgets/pull/17#issuecomment-"
        )
        assert "rag_answer[fixtures/rag_answer/typical.yaml]:" in first.outputs["token-deltas"]
        assert "(+0)" in first.outputs["token-deltas"]
        assert "# needle: ✅" in first.summary

        second = run_action(p, env)
        assert second.code == 0, second.stdout + second.stderr
        assert fake_model.calls["messages"] == calls_first  # both sides from the cache now
        ours = [c for c in gh.issue_comments(REPO, PR) if c["body"].startswith(MARKER)]
        assert len(ours) == 1
        assert len(gh.issue_comments(REPO, PR)) == 2
        assert gh.count("POST") == 1
        assert gh.count("PATCH") == 1
        assert second.outputs["comment-url"] == first.outputs["comment-url"]
        assert "## ✅" in ours[0]["body"]
        assert "🟩→🟩" in ours[0]["body"]
    # inside Actions the workspace was marked safe for git (a container's bind mount is not ours)
    assert str(p.workspace) in (p.home / ".gitconfig").read_text()


@pytest.mark.slow  # >= 3 s (CONTRIBUTING: the fast tier stays under 2 minutes)
def test_growth_beyond_max_growth_fails_with_an_annotation_on_the_template(tmp_path):
    def grow(repo: Project):
        t = repo.path("prompts/rag_answer.j2")
        lines = t.read_text().splitlines(keepends=True)
        at = next(i for i, line in enumerate(lines) if line.startswith("- Keep the answer"))
        lines.insert(at, STYLE_GUIDE + "\n")
        t.write_text("".join(lines))

    p = make_checkout(tmp_path, grow)
    with FakeGitHub() as gh:
        r = run_action(p, runner_env(p, gh, None, recall="false"))
        assert r.code == 1, r.stdout + r.stderr
        changed_line = 1 + next(
            i
            for i, line in enumerate((p.workspace / "prompts/rag_answer.j2").read_text().splitlines())
            if line.startswith("Style rule 1:")
        )
        m = re.search(
            r"^::error file=prompts/rag_answer\.j2,line=(\d+),title=needle%3A rag_answer grew beyond "
            r"max_growth::rag_answer \[fixtures/rag_answer/typical\.yaml\]: grew by \d+ tokens",
            r.stdout,
            re.M,
        )
        assert m, r.stdout
        assert int(m.group(1)) == changed_line
        assert r.outputs["status"] == "fail-budget"
        assert r.outputs["failed"] == "true"
        body = gh.issue_comments(REPO, PR)[0]["body"]
        assert "## ❌ Token budget exceeded" in body
        assert "| 🔴 | `rag_answer`" in body
        assert "recall disabled" in body

        # the same PR with fail-on-budget: false passes, still reported
        r2 = run_action(p, runner_env(p, gh, None, recall="false", fail_on_budget="false"))
        assert r2.code == 0
        assert r2.outputs["failed"] == "false"
        assert "::error file=prompts/rag_answer.j2" in r2.stdout


@pytest.mark.slow  # two action runs, each measuring recall on head and base
def test_moving_key_content_into_the_middle_loses_recall_and_is_flagged(tmp_path, fake_model):
    def restructure(repo: Project):
        repo.edit(
            "prompts/rag_answer.j2",
            "Question: {{ question }}",
            "Before you answer, follow the house style.\n" + STYLE_GUIDE + "\n\nQuestion: {{ question }}",
        )

    # the base already accepts the longer prompt (a PR cannot loosen its own gate: test_hostile_pr.py)
    p = make_checkout(tmp_path, restructure, base_growth="300%")
    with FakeGitHub() as gh:
        r = run_action(p, runner_env(p, gh, fake_model))
        assert r.code == 1, r.stdout + r.stderr
        assert r.outputs["status"] == "fail-recall"
        assert r.outputs["recall-verdict"] == "regressed"
        assert re.search(
            r"^::error file=prompts/rag_answer\.j2,line=\d+,title=needle%3A rag_answer recall "
            r"regressed::rag_answer: recall at depth 100%25 fell from",
            r.stdout,
            re.M,
        ), r.stdout
        comp = json.loads((r.report / "comparison.json").read_text())
        rc = comp["prompts"][0]["recall"]
        cells = {c["depth"]: c for c in rc["cells"]}
        groups = {g["label"]: g for g in rc["groups"]}
        assert groups["depth 100%"]["verdict"] == "regressed"
        assert groups["depth 100%"]["p_value"] < 0.01
        assert cells[1.0]["verdict"] == "regressed"
        assert cells[0.0]["verdict"] == "ok"
        body = gh.issue_comments(REPO, PR)[0]["body"]
        assert "## ❌ Positional recall regressed" in body
        assert "🟩→🟥 ‼️" in body
        # the changed prompt's recall by depth, base (bars) against head (line), as a Mermaid chart
        assert "```mermaid\nxychart-beta\n" in body
        assert "(bars: base · line: head)" in body
        # issue 22: how it missed: three of the head's replies in the regressed group, with their
        # depth and expected answer, and the diff of the request that moved the documents
        (group,) = [g for g in rc["misses"] if g["label"] == "depth 100%"]
        assert len(group["misses"]) == 3
        assert all(m["depth"] == 1.0 for m in group["misses"])
        shown = re.findall(r"^- depth 1 of 1,500 tokens: expected `([^`]+)`, answered `([^`]*)`", body, re.M)
        assert len(shown) >= 3, body
        assert all(expected != reply for expected, reply in shown), body
        assert "**How it missed** (`codeword`, depth 100%):" in body
        assert "```diff\n@@ " in body
        assert "+Before you answer, follow the house style." in body
        # the report folder holds the HTML report (both sides' heatmaps) and the JUnit file
        html = (r.report / "report.html").read_text()
        assert html.count('data-side="head"') >= len(rc["sizes"]) * len(rc["depths"])
        assert 'data-side="base"' in html
        assert "<script" not in html
        junit = (r.report / "junit.xml").read_text()
        assert 'classname="recall.rag_answer" name="depth 100%"' in junit
        assert "<failure" in junit


@pytest.mark.slow  # a whole action run (~3.5 s idle); the fork without a key below stays fast
def test_fork_with_read_only_token_writes_the_summary_and_does_not_crash(tmp_path, fake_model):
    p = make_checkout(tmp_path)
    with FakeGitHub(tokens={"ro-token": "read"}) as gh:
        r = run_action(
            p, runner_env(p, gh, fake_model, token="ro-token", head_repo="mallory/widgets", recall="false")
        )
        assert r.code == 0, r.stdout + r.stderr
        assert "Traceback" not in r.stderr
        assert gh.issue_comments(REPO, PR) == []
        assert r.outputs["comment-url"] == ""
        assert (
            "::warning::needle: could not comment on the pull request: this pull request comes from a fork"
            in r.stdout
        )
        assert "# needle: ✅" in r.summary
        assert "workflow\\_run pattern" in r.summary
        assert (r.report / "comment.md").read_text().startswith(MARKER)


def test_fork_without_api_key_runs_budgets_and_skips_recall_with_a_note(tmp_path, fake_model):
    p = make_checkout(tmp_path)
    with FakeGitHub() as gh:
        env = runner_env(p, gh, fake_model)
        del env["ANTHROPIC_API_KEY"]
        r = run_action(p, env)
        assert r.code == 0, r.stdout + r.stderr
        assert fake_model.calls["messages"] == 0
        assert r.outputs["recall-verdict"] == "skipped"
        body = gh.issue_comments(REPO, PR)[0]["body"]
        assert "ANTHROPIC\\_API\\_KEY is not set" in body
        assert "budgets still ran offline" in body
        assert "### Token budgets" in body
        assert "| 🟢 | `rag_answer`" in body


def test_bad_input_and_bad_config_exit_2_without_traceback(tmp_path):
    def break_config(repo: Project):
        repo.edit("needle.toml", "max_input_tokens = 6000\n", 'max_input_tokens = "lots"\n', count=1)

    p = make_checkout(tmp_path, break_config)
    with FakeGitHub() as gh:
        r = run_action(p, runner_env(p, gh, None, fail_on_budget="maybe"))
        assert r.code == 2
        assert "Traceback" not in r.stderr + r.stdout
        assert "::error" in r.stdout
        assert "fail-on-budget" in r.stdout
        assert "true or false" in r.stdout

        r = run_action(p, runner_env(p, gh, None))
        assert r.code == 2
        assert "Traceback" not in r.stderr + r.stdout
        assert re.search(r"^::error file=needle\.toml,line=\d+,", r.stdout, re.M), r.stdout
        assert r.outputs["status"] == "error"
        assert "configuration error" in r.summary


@pytest.mark.slow  # >= 3 s (CONTRIBUTING: the fast tier stays under 2 minutes)
def test_fork_workflow_run_pattern_posts_a_resanitised_comment_for_the_right_commit(tmp_path):
    p = make_checkout(tmp_path)
    with FakeGitHub(tokens={"ro-token": "read", "test-token": "write"}) as gh:
        # 1. on: pull_request from a fork: read-only token, no comment, the report is the artifact
        measured = run_action(
            p,
            runner_env(
                p, gh, None, token="ro-token", head_repo="mallory/widgets", recall="false", comment="false"
            ),
        )
        assert measured.code == 0, measured.stdout + measured.stderr
        assert gh.count("POST") == 0, measured.stdout + measured.stderr
        artifact = tmp_path / "artifact"
        shutil.copytree(measured.report, artifact)
        assert json.loads((artifact / "pr.json").read_text())["number"] == PR

        # 2. on: workflow_run in the base repository: write token, only posts
        gh.add_pull(REPO, PR, head_sha=p.head_sha, base_sha=p.base_sha, head_repo="mallory/widgets")
        env = runner_env(p, gh, None, post_report=str(artifact))
        env["GITHUB_EVENT_NAME"] = "workflow_run"
        Path(env["GITHUB_EVENT_PATH"]).write_text(
            json.dumps({"action": "completed", "workflow_run": {"head_sha": p.head_sha, "pull_requests": []}})
        )
        posted = run_action(p, env)
        assert posted.code == 0, posted.stdout + posted.stderr
        (comment,) = gh.issue_comments(REPO, PR)
        assert comment["body"] == (artifact / "comment.md").read_text()  # same rendering, same comment

        # a tampered artifact is rendered through the sanitiser again, not posted as is
        comp = json.loads((artifact / "comparison.json").read_text())
        comp["headline"] = "@octocat <img src=https://evil.example/x.png> approved"
        comp["prompts"][0]["name"] = "x` | <script>"
        (artifact / "comparison.json").write_text(json.dumps(comp))
        (artifact / "comment.md").write_text("@everyone pwned")
        assert run_action(p, env).code == 0
        (comment,) = gh.issue_comments(REPO, PR)
        assert "@octocat" not in comment["body"]
        assert "<img" not in comment["body"]
        assert "<script>" not in comment["body"]
        assert "pwned" not in comment["body"]

        # a report for another commit (the PR moved on, or a forged PR number) is refused
        gh.add_pull(REPO, PR, head_sha="f" * 40, base_sha=p.base_sha)
        refused = run_action(p, env)
        assert refused.code == 2
        assert "not at the commit" in refused.stdout
        assert gh.count("PATCH") == 1
