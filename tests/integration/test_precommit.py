"""The ``needle-budget`` pre-commit hook, run by the real pre-commit in a temporary git repository:
as the README's ``repos:`` snippet configures it (``pre-commit run``), and as a user trying it
before adding it (``pre-commit try-repo``).

The hook repository is a snapshot of this work tree (tracked and new files, committed or not) in
one commit. pre-commit builds a virtualenv and pip-installs the repository into it (from the
package index pip is configured with): about half a minute, once for ``pre-commit run`` (its store,
a temporary PRE_COMMIT_HOME, keeps it) and once more for ``try-repo`` (which uses a store of its own).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders import IDENTITY, GitRepo, Project

REPO = Path(__file__).resolve().parents[2]

CONFIG = """
[defaults]
model = "claude-sonnet-5-5"
tokenizer = "anthropic"          # the hook must not call the API: counted with tiktoken instead
reserve_output_tokens = 1000

[prompts.qa]
template = "prompts/qa.j2"
fixtures = ["fixtures/qa.yaml"]
max_input_tokens = 1100
"""


def pre_commit() -> str:
    found = shutil.which("pre-commit") or shutil.which("pre-commit", path=str(Path(sys.executable).parent))
    if not found:
        pytest.fail("pre-commit is not installed: pip install -e '.[dev]' (it is part of the dev extra)")
    return found


def snapshot(dest: Path) -> Path:
    """This work tree's files (tracked and untracked, not ignored) committed in a new repository."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = REPO / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    repo = GitRepo.init(dest)
    repo.commit("snapshot")
    return dest


def pre_commit_in(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        **IDENTITY,
        "PRE_COMMIT_HOME": str(home),
        # no key and an API address where nothing listens: any attempt to count online would fail
        "ANTHROPIC_API_KEY": "",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
        "NO_COLOR": "1",
    }
    env.pop("PYTHONPATH", None)  # the hook runs the needle pip-installed into its own environment
    return subprocess.run(
        [pre_commit(), *args, "--color", "never"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.slow  # pre-commit builds two virtualenvs and installs needle into them (~1 min)
def test_hook_passes_a_good_template_and_fails_one_that_breaks_its_budget(tmp_path):
    hooks = snapshot(tmp_path / "needle-action")
    rev = GitRepo(hooks).sha()
    project = (
        Project(tmp_path / "app")
        .template("prompts/qa.j2", "system:\nBe brief.\nuser:\n{{ notes }}\n{{ question }}\n")
        .fixture("fixtures/qa.yaml", {"notes": "The depot opens at nine.", "question": "When?"})
        .config(CONFIG)
        .file("README.md", "# app\n")
        # the README's snippet, pointing at the snapshot instead of GitHub
        .file(
            ".pre-commit-config.yaml",
            f"repos:\n  - repo: {hooks}\n    rev: {rev}\n    hooks:\n      - id: needle-budget\n",
        )
    )
    repo = GitRepo.init(project.root)
    repo.commit("prompts")
    home = tmp_path / "pre-commit-home"

    good = pre_commit_in(project.root, home, "run", "--all-files")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "needle budget (prompt token budgets, offline)" in good.stdout
    assert "Passed" in good.stdout

    # a commit that touches no template, fixture or threshold file does not run the hook
    readme_only = pre_commit_in(project.root, home, "run", "--files", "README.md")
    assert readme_only.returncode == 0, readme_only.stdout
    assert "Skipped" in readme_only.stdout, readme_only.stdout

    # the template grows past max_input_tokens: the hook fails and says by how much
    project.edit("prompts/qa.j2", "Be brief.", "Be brief. " + "Follow the house style guide carefully. " * 40)
    repo.git("add", "-A")
    for args in (
        ["run", "--files", "prompts/qa.j2"],
        ["try-repo", str(hooks), "needle-budget", "--all-files"],
    ):
        bad = pre_commit_in(project.root, home, *args)
        out = bad.stdout + bad.stderr
        assert bad.returncode == 1, out
        assert "Failed" in bad.stdout, out
        assert "budget FAIL: 1 case in 1 prompt" in bad.stdout, out
        assert "> 1,100 budget by" in bad.stdout
        assert "tiktoken:o200k_base (estimate, x1.15 safety factor)" in bad.stdout  # offline, a Claude model
        assert "Traceback" not in out
