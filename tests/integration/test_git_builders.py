"""tests/builders.py's git helpers make the history the action tests rely on (real git)."""

from __future__ import annotations

import subprocess

import pytest

from tests.builders import GitRepo, Project, git, pull_request


def test_pull_request_has_base_on_main_head_on_feature_and_a_shallow_workspace(tmp_path):
    pr = pull_request(
        tmp_path,
        base=lambda p: p.examples("prompts", "fixtures").file("README.md", "# widgets\n"),
        change=lambda p: p.edit("README.md", "# widgets\n", "# widgets\n\nNow with docs.\n"),
    )
    assert git(pr.origin, "rev-parse", "main") == pr.base_sha
    assert git(pr.origin, "rev-parse", "feature") == pr.head_sha != pr.base_sha
    assert git(pr.workspace, "rev-parse", "HEAD") == pr.head_sha
    assert git(pr.workspace, "rev-parse", "--is-shallow-repository") == "true"
    with pytest.raises(subprocess.CalledProcessError):  # the base is not there: it must be fetched
        git(pr.workspace, "cat-file", "-e", f"{pr.base_sha}^{{commit}}")
    assert (pr.workspace / "README.md").read_text().endswith("Now with docs.\n")


def test_commits_use_the_fixed_identity_and_clones_can_be_bare(tmp_path):
    repo = GitRepo.init(tmp_path / "r")
    Project(repo.path).file("a.txt", "a\n")
    sha = repo.commit("first")
    assert repo.git("log", "-1", "--format=%an <%ae> %s") == "t <t@example.com> first"
    bare = repo.clone(tmp_path / "r.git", bare=True)
    assert bare.git("rev-parse", "--is-bare-repository") == "true"
    assert bare.sha("main") == sha
