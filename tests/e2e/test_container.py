"""The real container: built from this repository's Dockerfile and run the way GitHub runs it.

Builds with ``../shared/tools/container-build`` (rootful podman on a local Debian base, the way this
machine can run containers) or, where that tool is absent, ``docker`` (a GitHub-hosted runner).

(a) the image itself: its Python set equals requirements/runtime.txt; ``needle --version``; budgets of the examples, mounted read-only, counted
    with the baked tiktoken files while every HTTP(S) request would hit a dead proxy, and equal to
    the host's counts; no compiler, no bpe-openai, root, git's safe.directory.
(b) the action as GitHub runs it: the checkout (a shallow clone of a PR with base and head commits,
    owned by the runner's uid 1001) at /github/workspace, the event and file-command files at their
    /github/... paths, INPUT_* for every input, GITHUB_API_URL at the loopback fake GitHub API and
    ANTHROPIC_BASE_URL at the fake Anthropic API on the host (``--network host``). Asserts the sticky
    comment was posted, then updated in place by a second run, and the outputs were written.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from needle_action import __version__
from needle_action.action.workflow import read_outputs
from needle_action.results import SCHEMA_VERSION
from needle_action.tokens import tiktoken_cache
from tests.builders import EXAMPLES, Project, PullRequest, pull_request
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.github_server import FakeGitHub
from tests.fakes.simulated_model import SimulatedModel, flat
from tests.integration.action_runner import DEFAULTS, RAG_ANSWER, SUPPORT_AGENT, action_inputs, rag_recall
from tests.lockfile import REQUIREMENTS, freeze_pins, pins

pytestmark = pytest.mark.container

ROOT = EXAMPLES.parent
TAG = os.environ.get("NEEDLE_CONTAINER_TAG", "needle-action:e2e")  # another tag: parallel checkouts
SCRIPT = Path(os.environ.get("NEEDLE_CONTAINER_BUILD", ROOT.parent / "shared" / "tools" / "container-build"))
BUILD_TIMEOUT = 1800  # a cold build on a busy 2-core machine; normally 2-5 minutes
RUNNER_UID = 1001  # the uid that owns the checkout on GitHub-hosted runners
REPO = "octo/widgets"
PR = 23
MARKER = "<!-- needle-action:comment -->"


# --------------------------------------------------------------------------- the engine


class Engine:
    """Build once, run many: the container-build script (podman) or docker."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def build(self) -> subprocess.CompletedProcess:
        cmd = (
            [str(SCRIPT), str(ROOT), TAG]
            if self.kind == "podman"
            else ["docker", "build", "-t", TAG, str(ROOT)]
        )
        return subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT)

    def run(self, args: list[str], cmd: list[str], *, timeout: int = 600) -> subprocess.CompletedProcess:
        if self.kind == "podman":  # the script re-checks the build (cached) and runs with --network host
            full = [str(SCRIPT), str(ROOT), TAG, *args, "--", *cmd]
        else:
            full = ["docker", "run", "--rm", "--network", "host", *args, TAG, *cmd]
        return subprocess.run(full, capture_output=True, text=True, timeout=timeout)


def _pick_engine() -> Engine:
    if SCRIPT.is_file():
        if os.geteuid() != 0:
            pytest.skip(f"{SCRIPT} needs root (rootful podman; it installs podman with apt)")
        return Engine("podman")
    if shutil.which("docker") and subprocess.run(["docker", "info"], capture_output=True).returncode == 0:
        return Engine("docker")
    pytest.skip(f"no container engine: neither {SCRIPT} nor a working docker")


@functools.cache
def built_engine() -> Engine:
    """The engine with the image built: once per session, for every container test module."""
    eng = _pick_engine()
    proc = eng.build()
    assert proc.returncode == 0, (
        f"image build failed (exit {proc.returncode}):\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    )
    return eng


@pytest.fixture(scope="module")
def engine() -> Engine:
    return built_engine()


def _fail(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-8000:]}\nstderr:\n{proc.stderr[-8000:]}"


# --------------------------------------------------------------------------- (a) the image


PROBE = r"""
section() { echo "@@@ $1"; }
section version;   needle --version
section uid;       id -u
section compilers; command -v gcc cc c++ make cmake || true
section bpe;       python -c "import bpe_openai" 2>/dev/null && echo importable || echo absent
section cache;     ls "$TIKTOKEN_CACHE_DIR"
section safe;      git config --system --get-all safe.directory
section budget
HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 http_proxy=http://127.0.0.1:9 \
  https_proxy=http://127.0.0.1:9 needle budget --config /examples/needle-tiktoken.toml --json /tmp/r.json >&2
echo "rc=$?"
section results;   cat /tmp/r.json
section local
needle budget --config /examples/needle.toml 2>&1
echo "rc=$?"
"""


def _sections(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        if line.startswith("@@@ "):
            name = line[4:].strip()
            out[name] = ""
        elif name is not None:
            out[name] += line + "\n"
    return {k: v.strip() for k, v in out.items()}


def _tiktoken_examples(tmp: Path) -> Path:
    """A copy of examples/ plus a threshold file counting with tiktoken (the default image has no
    [local] extra, hence no Gemma tokenizer); gpt-4o so that counts are exact, no safety factor."""
    project = Project(tmp / "examples").examples()
    text = project.path("needle.toml").read_text()
    assert 'tokenizer = "local"' in text, "examples/needle.toml changed shape"
    assert 'model = "gemma3-270m"' in text, "examples/needle.toml changed shape"
    text = text.replace('tokenizer = "local"', 'tokenizer = "tiktoken:o200k_base"')
    text = text.replace('model = "gemma3-270m"', 'model = "gpt-4o"')
    project.file("needle-tiktoken.toml", text).file("probe.sh", PROBE)
    return project.root


def _case_tokens(results: dict) -> dict[tuple[str, str], int]:
    return {(p["name"], c["fixture"]): c["count"]["tokens"] for p in results["prompts"] for c in p["cases"]}


def test_image_counts_tokens_offline_and_is_lean(engine, tmp_path):
    examples = _tiktoken_examples(tmp_path)
    proc = engine.run(["-v", f"{examples}:/examples:ro", "--entrypoint", "/bin/sh"], ["/examples/probe.sh"])
    assert proc.returncode == 0, _fail(proc)
    s = _sections(proc.stdout)

    assert s["version"] == f"needle, version {__version__}"
    assert s["uid"] == "0"  # GitHub runs Docker actions as root (docs/container.md)
    assert s["compilers"] == "", f"compilers in the image: {s['compilers']}"
    assert s["bpe"] == "absent"  # the encodings were baked at build time, not seeded now
    assert sorted(s["cache"].split()) == sorted(
        tiktoken_cache.cache_path("/", enc).name for enc in tiktoken_cache.URLS
    )
    assert "/github/workspace" in s["safe"].split()

    # budgets ran with every download blocked, with the examples read-only
    assert s["budget"].endswith("rc=0"), _fail(proc)
    inside = json.loads(s["results"])
    assert inside["schema_version"] == SCHEMA_VERSION, inside
    assert inside["prompts"], inside
    assert all(
        c["count"]["counter"] == "tiktoken:o200k_base" and c["count"]["exact"]
        for p in inside["prompts"]
        for c in p["cases"]
    )

    # ... and counted exactly what the host counts
    host_json = tmp_path / "host.json"
    host = subprocess.run(
        [
            sys.executable,
            "-m",
            "needle_action",
            "budget",
            "--config",
            str(examples / "needle-tiktoken.toml"),
            "--json",
            str(host_json),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert host.returncode == 0, _fail(host)
    assert _case_tokens(inside) == _case_tokens(json.loads(host_json.read_text()))

    # the default image has no embedded model: a clear exit 2, no traceback
    assert s["local"].endswith("rc=2"), s["local"]
    assert "llama-cpp-python" in s["local"]
    assert "Traceback" not in s["local"]


def test_image_installs_exactly_the_lock_and_starts_without_the_action(engine):
    """The image's Python set is requirements/runtime.txt, version for version: minus bpe-openai
    (removed once it baked the tiktoken files), plus needle-action itself. And the entrypoint's
    --version (docs/container.md's start-up probe) answers without running the action."""
    # --all: setuptools or wheel left over from the build would show; --path: only the venv, not
    # the pip that runs from Debian's wheel (/opt/pip.whl)
    site = "/opt/needle/lib/python3.11/site-packages"
    proc = engine.run(
        ["--entrypoint", "/opt/needle/bin/python"], ["/opt/pip.whl/pip", "freeze", "--all", "--path", site]
    )
    assert proc.returncode == 0, _fail(proc)
    installed = freeze_pins(proc.stdout)
    expected = {n: v for n, v in pins(REQUIREMENTS / "runtime.txt").items() if n != "bpe-openai"}
    assert installed == expected, {
        "not in the lock": sorted(installed.keys() - expected.keys()),
        "missing": sorted(expected.keys() - installed.keys()),
        "other version": sorted(n for n in installed.keys() & expected.keys() if installed[n] != expected[n]),
    }
    assert "needle-action @ file:" in proc.stdout  # the package, built from this checkout

    version = engine.run([], ["--version"])
    assert version.returncode == 0, _fail(version)
    # the podman script prints the (cached) build first: the probe's answer is the last line
    assert version.stdout.strip().splitlines()[-1] == f"needle-action {__version__}", _fail(version)


# --------------------------------------------------------------------------- (b) the action


CONFIG = "\n".join(
    [DEFAULTS.format(growth="10%"), RAG_ANSWER, rag_recall(size=1200, trials=3, seed=11), SUPPORT_AGENT]
)


def _pull_request(tmp: Path) -> PullRequest:
    """origin: base on main, the PR on feature (a whitespace-only template change: same budgets, a
    new head commit); workspace: a depth-1 clone of the PR head, as actions/checkout makes by
    default, so the base must be fetched."""

    def base(project: Project) -> None:
        project.examples("prompts", "fixtures").config(CONFIG, dedent=False)

    def change(project: Project) -> None:
        tpl = project.path("prompts/rag_answer.j2")
        project.file("prompts/rag_answer.j2", tpl.read_text() + "\n").file("NOTES.md", "the pull request\n")

    return pull_request(tmp, base, change)


def _github_dirs(tmp: Path, base: str, head: str) -> dict[str, Path]:
    """The runner's host folders that GitHub mounts into a Docker action under /github/."""
    dirs = {name: tmp / "runner" / name for name in ("home", "workflow", "file_commands", "runner_temp")}
    for d in dirs.values():
        d.mkdir(parents=True)
    event = {
        "action": "synchronize",
        "number": PR,
        "pull_request": {
            "number": PR,
            "base": {"sha": base, "ref": "main", "repo": {"full_name": REPO}},
            "head": {"sha": head, "ref": "feature", "repo": {"full_name": REPO}},
        },
        "repository": {"full_name": REPO},
    }
    (dirs["workflow"] / "event.json").write_text(json.dumps(event))
    (dirs["file_commands"] / "set_output_e2e").write_text("")
    (dirs["file_commands"] / "step_summary_e2e").write_text("")
    return dirs


def _runner_args(
    origin: Path, workspace: Path, dirs: dict[str, Path], head: str, gh: FakeGitHub, fake: FakeAnthropic
) -> list[str]:
    env = {
        "HOME": "/github/home",
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": "/github/workflow/event.json",
        "GITHUB_WORKSPACE": "/github/workspace",
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_SHA": head,
        "GITHUB_RUN_ID": "777",
        "GITHUB_API_URL": gh.api_url,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_OUTPUT": "/github/file_commands/set_output_e2e",
        "GITHUB_STEP_SUMMARY": "/github/file_commands/step_summary_e2e",
        # mapped to /github/runner_temp since actions/runner#4011 (older runners passed the host path)
        "RUNNER_TEMP": "/github/runner_temp",
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": fake.api_key,
    }
    env.update(action_inputs("test-token", config="needle.toml"))
    args = ["--workdir", "/github/workspace"]
    for k, v in env.items():
        args += ["-e", f"{k}={v}"]
    args += [
        "-v",
        f"{workspace}:/github/workspace",
        "-v",
        f"{dirs['home']}:/github/home",
        "-v",
        f"{dirs['workflow']}:/github/workflow",
        "-v",
        f"{dirs['file_commands']}:/github/file_commands",
        "-v",
        f"{dirs['runner_temp']}:/github/runner_temp",
        # the clone's origin, at the same path, so `git fetch` of the base works inside
        "-v",
        f"{origin}:{origin}:ro",
    ]
    return args


def test_action_in_the_container_posts_then_updates_one_comment(engine, tmp_path):
    pr = _pull_request(tmp_path)
    origin, workspace, base, head = pr.origin, pr.workspace, pr.base_sha, pr.head_sha
    dirs = _github_dirs(tmp_path, base, head)
    if os.geteuid() == 0:  # the checkout belongs to the runner's user, not to root
        subprocess.run(["chown", "-R", f"{RUNNER_UID}:{RUNNER_UID}", str(workspace)], check=True)

    with FakeGitHub() as gh, FakeAnthropic(SimulatedModel(flat(0.95), seed=3)) as fake:
        gh.seed_comment(REPO, PR, "Looks fine to me")
        args = _runner_args(origin, workspace, dirs, head, gh, fake)

        first = engine.run(args, [])
        assert first.returncode == 0, _fail(first)
        assert "Traceback" not in first.stdout + first.stderr
        comments = gh.issue_comments(REPO, PR)
        assert len(comments) == 2, comments
        ours = [c for c in comments if MARKER in c["body"]]
        assert len(ours) == 1
        assert ours[0]["user"]["login"] == gh.bot_login
        assert "rag_answer" in ours[0]["body"]
        assert "support_agent" in ours[0]["body"]
        assert gh.count("POST") == 1
        assert fake.calls["messages"] > 0  # recall ran through the SDK inside the image

        outputs = read_outputs(dirs["file_commands"] / "set_output_e2e")
        assert outputs["status"] == "pass", outputs
        assert outputs["comment-url"], outputs
        # the report folder is on a mounted path, given relative to the workspace, so that the
        # next steps (upload-artifact, on the host) find it under the same name
        report = Path(outputs["report-path"])
        assert not report.is_absolute(), outputs
        on_host = workspace / report
        head_results = json.loads((on_host / "head.json").read_text())
        assert head_results["commit"] == head
        assert head_results["schema_version"] == SCHEMA_VERSION
        assert (dirs["file_commands"] / "step_summary_e2e").read_text().strip()

        second = engine.run(args, [])
        assert second.returncode == 0, _fail(second)
        comments = gh.issue_comments(REPO, PR)
        assert len(comments) == 2
        assert sum(MARKER in c["body"] for c in comments) == 1
        assert gh.count("POST") == 1
        assert gh.count("PATCH") == 1
        assert read_outputs(dirs["file_commands"] / "set_output_e2e")["status"] == "pass"
