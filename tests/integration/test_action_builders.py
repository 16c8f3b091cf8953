"""Prompts built in code in the action (``python entrypoint.py`` as a runner runs it): the
``requests`` input (the two-job pattern: the head's builder prompts measured from what
``needle capture`` wrote, no builder run), and the ``requirements`` input (the builders'
dependencies, from the base commit, installed only when the base enables builders)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from needle_action.core.errors import ConfigError
from needle_action.pullrequest import builder_env
from needle_action.pullrequest.settings import Settings
from tests.builders import Project
from tests.fakes.github_server import FakeGitHub
from tests.integration.action_runner import CONFIG, ROOT, make_checkout, report_json, run_action, runner_env

BUILDER = '''
def build(question, chunks):
    """The app's request: the chunks, then the question."""
    return {
        "system": "SYSTEM_TEXT",
        "messages": [{"role": "user", "content": "\\n\\n".join(chunks) + "\\n\\n" + question}],
    }
'''
WITH_DEPENDENCY = """
import tinydep

def build(question, chunks):
    return {"system": tinydep.VALUE, "messages": [{"role": "user", "content": question}]}
"""
FIXTURE = (
    "question: Where is the depot?\nchunks:\n  - The depot is on the north ramp.\n  - It opens at nine.\n"
)
BUILT = """
[prompts.built]
builder = "app/prompts.py:build"
fixtures = ["fixtures/built.yaml"]
max_input_tokens = 2000
"""
BUILDERS_ON = "\n[files]\nbuilders = true\n"
TINY_VALUE = "tiny-dependency-42"

pytestmark = pytest.mark.slow  # each test runs the action (and git) in a subprocess: 5-12 s


def _base(builders: bool, builder: str = BUILDER, requirements: str | None = None):
    def lay_out(project: Project) -> None:
        project.file("app/prompts.py", builder).file("fixtures/built.yaml", FIXTURE)
        if requirements is not None:
            project.file("requirements.txt", requirements)

    config = CONFIG.format(growth="10%") + BUILT + (BUILDERS_ON if builders else "")
    return config, lay_out


def _pull_request(tmp_path, *, builders: bool, builder: str = BUILDER, requirements=None, change=None):
    """A PR whose base (main) has the builder prompt, its module and fixture (and REQUIREMENTS)."""
    config, lay_out = _base(builders, builder, requirements)

    def the_pull_request(project: Project) -> None:
        if not builders:  # the base has builders off; the PR turns them on for itself
            project.file("needle.toml", project.config_path.read_text() + BUILDERS_ON)
        if change:
            change(project)

    return make_checkout(tmp_path, the_pull_request, base_config=config, base_files=lay_out)


def _plain(markdown: str) -> str:
    """The summary's text without its Markdown escapes."""
    return markdown.replace("\\", "")


def _case(run, side: str, name: str = "built") -> dict:
    prompts = {p["name"]: p for p in report_json(run, side)["prompts"]}
    return prompts[name]


def test_requests_measure_the_heads_builders_from_the_captured_folder_and_run_none(tmp_path):
    p = _pull_request(
        tmp_path,
        builders=True,
        change=lambda project: project.edit("app/prompts.py", "SYSTEM_TEXT", "SYSTEM_TEXT, now longer"),
    )
    # job 1 (no secrets): needle capture on the pull request's checkout
    capture = subprocess.run(
        [sys.executable, "-m", "needle_action", "capture", "--config", "needle.toml", "--output", "captured"],
        cwd=p.workspace,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert capture.returncode == 0, capture.stderr
    with FakeGitHub() as gh:
        # job 2: a builder may not run at all here; if one tried, its Python would not exist
        env = runner_env(p, gh, None, requests="captured")
        env["NEEDLE_BUILDER_PYTHON"] = "/nonexistent/python3"
        run = run_action(p, env)
    assert run.code == 0, run.stdout + run.stderr
    head = _case(run, "head")
    view = json.dumps(head["cases"][0])
    assert "SYSTEM_TEXT, now longer" in view  # the head's captured request, as its builder returned it
    assert "built" not in {p["name"] for p in report_json(run, "base")["prompts"]}
    assert "base's prompts built in code (built) were not measured" in _plain(run.summary)


def test_requests_from_another_checkout_are_a_config_error(tmp_path):
    p = _pull_request(tmp_path, builders=True)
    (p.workspace / "captured").mkdir()
    (p.workspace / "captured" / "manifest.json").write_text(
        json.dumps({"format": 1, "needle_version": "0", "config_hash": "x", "seeds": {}, "prompts": {}})
    )
    with FakeGitHub() as gh:
        run = run_action(p, runner_env(p, gh, None, requests="captured"))
    assert run.code == 2, run.stdout + run.stderr
    assert "another needle version" in run.stdout + run.summary
    assert "Traceback" not in run.stderr


def write_wheel(folder: Path) -> Path:
    """The wheel of ``tinydep`` (``VALUE = TINY_VALUE``) in FOLDER, readable by every user."""
    wheel = folder / "tinydep-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("tinydep/__init__.py", f'VALUE = "{TINY_VALUE}"\n')
        z.writestr("tinydep-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tinydep\nVersion: 1.0\n")
        z.writestr(
            "tinydep-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        z.writestr("tinydep-1.0.dist-info/RECORD", "")
    wheel.chmod(0o644)
    return wheel


@pytest.fixture
def wheel_folder():
    """A folder every user can read, holding the wheel of ``tinydep``."""
    folder = Path(tempfile.mkdtemp(prefix="needle-wheels-", dir="/tmp"))
    folder.chmod(0o755)
    wheel = write_wheel(folder)
    yield wheel
    shutil.rmtree(folder, ignore_errors=True)


def test_requirements_come_from_the_base_and_reach_the_builder(tmp_path, wheel_folder):
    requirements = f"--no-index\n{wheel_folder}\n"
    # the PR's copy names a package no index has: were it used, the install would fail (exit 2)
    p = _pull_request(
        tmp_path,
        builders=True,
        builder=WITH_DEPENDENCY,
        requirements=requirements,
        change=lambda project: project.file("requirements.txt", "--no-index\nnot-a-package-anywhere==9\n"),
    )
    with FakeGitHub() as gh:
        run = run_action(p, runner_env(p, gh, None, requirements="requirements.txt"))
    assert run.code == 0, run.stdout + run.stderr
    assert TINY_VALUE in json.dumps(_case(run, "head")["cases"][0])  # the builder imported it
    assert "requirements (requirements.txt, as of the base) were installed" in _plain(run.summary)
    # each builder's time per call in the log, between stop-commands markers (its name is the PR's)
    assert re.search(r"::stop-commands::(\w+)\n(builder [^\n]+ per call\n)+::\1::", run.stdout), run.stdout


def test_requirements_are_not_installed_when_the_base_has_builders_off(tmp_path):
    # the base's file would fail to install: a run that tried would stop with exit 2
    p = _pull_request(tmp_path, builders=False, requirements="--no-index\nnot-a-package-anywhere==9\n")
    with FakeGitHub() as gh:
        run = run_action(p, runner_env(p, gh, None, requirements="requirements.txt"))
    assert run.code != 2, run.stdout + run.stderr
    assert "built" not in {p["name"] for p in report_json(run, "head")["prompts"]}
    assert "built is built in code" in _plain(run.summary)
    assert "was not measured" in _plain(run.summary)


def test_a_requirements_path_outside_the_repository_is_an_input_error(tmp_path):
    for rel in ("../../etc/passwd", "/etc/passwd"):
        with pytest.raises(ConfigError, match="a path inside the repository"):
            builder_env._install(Settings(workspace=tmp_path), rel, None, [])
