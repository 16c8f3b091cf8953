"""Running ``python entrypoint.py`` the way a runner runs the Docker action, for the tests in this
folder (test_action_entrypoint.py, test_data_branch.py).

:func:`make_checkout` builds the repository (tests/builders.py ``pull_request``: the base on
``main``, the PR on ``feature``, the workspace a one-commit-deep clone of the PR head), plus the
runner's HOME; :func:`runner_env` is the environment a runner gives the action (the event file,
``GITHUB_*``, every ``INPUT_*`` of action.yml at its default unless given, the fake APIs' URLs);
:func:`run_action` runs the entrypoint in a subprocess and reads back its outputs and summary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from needle_action.action.workflow import read_outputs
from tests.builders import EXAMPLES, Project, prompt_table, pull_request
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.github_server import FakeGitHub

ROOT = EXAMPLES.parent
REPO = "octo/widgets"
PR = 17
MARKER = "<!-- needle-action:comment -->"

# The needle.toml of the test repository (Claude via the fake API, counted with tiktoken), in parts
# that the tests of the action in a container and on the embedded model put together their own way.
DEFAULTS = """[defaults]
model = "claude-sonnet-5-5"
provider = "anthropic"
tokenizer = "tiktoken:o200k_base"
tokenizer_safety_factor = 1.0
reserve_output_tokens = 256
max_growth = "{growth}"

[defaults.recall]
enabled = false
"""

RAG_ANSWER = prompt_table(
    "rag_answer", "prompts/rag_answer.j2", "fixtures/rag_answer/typical.yaml", "documents", "question", 6000
)
SUPPORT_AGENT = prompt_table(
    "support_agent",
    "prompts/support_agent.j2",
    "fixtures/support_agent/typical.toml",
    "history",
    "customer_message",
    6000,
)


def rag_recall(*, size: int, trials: int, seed: int, threshold: float | None = None) -> str:
    """rag_answer's recall table: SIZE-token prompts at three depths, TRIALS a cell, 32-token answers."""
    lines = ["[prompts.rag_answer.recall]", "enabled = true", f"sizes = [{size}]", "depths = [0.0, 0.5, 1.0]"]
    lines += [f"trials = {trials}"] + ([f"threshold = {threshold}"] if threshold is not None else [])
    return "\n".join([*lines, "max_output_tokens = 32", f"seed = {seed}", ""])


# ``CONFIG.format(growth="10%")``: the whole file, with the max_growth the test wants
CONFIG = "\n".join(
    [DEFAULTS, RAG_ANSWER, rag_recall(size=1500, trials=10, threshold=0.8, seed=3), SUPPORT_AGENT]
)

# A "style guide" a PR inserts between the documents and the question: it pushes the documents
# (and whatever key fact sits near their end) into the middle of the request.
STYLE_GUIDE = "\n".join(
    f"Style rule {i}: write in plain words, keep sentences short, prefer the active voice, and avoid "
    f"jargon unless the customer used it first; mention limits and settings exactly as documented."
    for i in range(1, 25)
)


@dataclass
class Checkout:
    """A pull request checked out for the action: TMP holds the runner's files (event, outputs)."""

    tmp: Path
    origin: Path
    workspace: Path
    base_sha: str
    head_sha: str
    home: Path


def make_checkout(
    tmp: Path,
    change: Callable[[Project], object] | None = None,
    *,
    base_growth: str = "10%",
    base_config: str | None = None,
    base_files: Callable[[Project], object] | None = None,
) -> Checkout:
    """The examples' prompts and fixtures with CONFIG on ``main`` (and what BASE_FILES adds); the PR
    edits the README, then applies CHANGE (given the origin's :class:`~tests.builders.Project`)."""

    def base(project: Project) -> None:
        config = base_config or CONFIG.format(growth=base_growth)
        project.examples("prompts", "fixtures").config(config, dedent=False)
        project.file("README.md", "# widgets\n")
        if base_files:
            base_files(project)

    def the_pull_request(project: Project) -> None:
        project.file("README.md", "# widgets\n\nNow with docs.\n")
        if change:
            change(project)

    pr = pull_request(tmp, base, the_pull_request)
    home = tmp / "home"
    home.mkdir()
    return Checkout(tmp, pr.origin, pr.workspace, pr.base_sha, pr.head_sha, home)


def make_project(
    tmp: Path,
    change: Callable[[Path], object] | None = None,
    *,
    base_growth: str = "10%",
    base_config: str | None = None,
) -> Checkout:
    """:func:`make_checkout` (BASE: its ``base_growth``, ``base_config``) for CHANGE callbacks that
    edit the origin folder directly."""
    edit = (lambda project: change(project.root)) if change else None
    return make_checkout(tmp, edit, base_growth=base_growth, base_config=base_config)


def runner_env(
    p: Checkout, gh: FakeGitHub, fake: FakeAnthropic | None, *, token="test-token", **inputs
) -> dict:
    event = {
        "action": "synchronize",
        "number": PR,
        "pull_request": {
            "number": PR,
            "base": {"sha": p.base_sha, "ref": "main", "repo": {"full_name": REPO}},
            "head": {
                "sha": p.head_sha,
                "ref": "feature",
                "repo": {"full_name": inputs.pop("head_repo", REPO)},
            },
        },
        "repository": {"full_name": REPO},
    }
    event_path = p.tmp / "event.json"
    event_path.write_text(json.dumps(event))
    if (*REPO.split("/"), PR) not in gh.pulls:  # GitHub knows the pull request it runs for
        gh.add_pull(REPO, PR, head_sha=p.head_sha, base_sha=p.base_sha)
    (p.tmp / "runner_temp").mkdir(exist_ok=True)
    for name in ("output", "summary"):
        (p.tmp / name).write_text("")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(p.home),
        "LANG": "C.UTF-8",
        "TIKTOKEN_CACHE_DIR": os.environ["TIKTOKEN_CACHE_DIR"],
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_WORKSPACE": str(p.workspace),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_SHA": p.head_sha,
        "GITHUB_RUN_ID": "4242",
        "GITHUB_API_URL": gh.api_url,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_OUTPUT": str(p.tmp / "output"),
        "GITHUB_STEP_SUMMARY": str(p.tmp / "summary"),
        "RUNNER_TEMP": str(p.tmp / "runner_temp"),
    }
    env.update(action_inputs(token, **inputs))
    if fake is not None:
        env["ANTHROPIC_BASE_URL"] = fake.base_url
        env["ANTHROPIC_API_KEY"] = fake.api_key
    return env


def action_inputs(token: str, **inputs: object) -> dict[str, str]:
    """``INPUT_*`` for every input of action.yml, as the runner sets them all: the default unless
    given in INPUTS (``snake_case`` names, written ``kebab-case``), the GitHub token TOKEN."""
    env: dict[str, str] = {}
    declared = yaml.safe_load((ROOT / "action.yml").read_text())["inputs"]
    for name, spec in declared.items():
        env[f"INPUT_{name.upper()}"] = str(spec.get("default", ""))
    env["INPUT_GITHUB-TOKEN"] = token
    for key, value in inputs.items():
        env[f"INPUT_{key.replace('_', '-').upper()}"] = str(value)
    return env


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    outputs: dict
    summary: str
    report: Path | None


def run_action(p: Checkout, env: dict) -> Run:
    (p.tmp / "output").write_text("")
    (p.tmp / "summary").write_text("")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "entrypoint.py")],
        cwd=p.workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    outputs = read_outputs(p.tmp / "output")
    report = p.workspace / outputs["report-path"] if outputs.get("report-path") else None
    assert report is None or not Path(outputs["report-path"]).is_absolute()  # valid on the host too
    return Run(proc.returncode, proc.stdout, proc.stderr, outputs, (p.tmp / "summary").read_text(), report)


def report_json(run: Run, side: str) -> dict:
    """``head.json``, ``base.json`` or ``comparison.json`` from the run's report folder, parsed."""
    assert run.report is not None, "the run wrote no report folder"
    return json.loads((run.report / f"{side}.json").read_text())


def everything_published(run: Run, gh: FakeGitHub) -> str:
    """All the run made public: its log (masking commands left out), step summary, outputs, report
    files and the pull request's comments; where a leaked secret would show."""
    report = "".join(f.read_text() for f in run.report.iterdir()) if run.report else ""
    comments = "".join(c["body"] for c in gh.issue_comments(REPO, PR))
    log = "\n".join(line for line in run.stdout.splitlines() if not line.startswith("::add-mask::"))
    return log + run.stderr + run.summary + json.dumps(run.outputs) + report + comments
