"""A hostile prompt builder (pull request code) finds no secret and cannot write where it should not.

The builder runs in needle's builder worker (assemble/builder/sandbox.py): an empty environment,
user ``nobody`` when needle runs as root, a copy of the repository, time and memory limits. These
tests start needle as a real process with a canary secret in its environment and in the checkout's
``.git/config``, and let the builder try every route to it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest

from needle_action.assemble.builder import client as builder
from needle_action.config.loader import load_config
from tests.builders import builder_project
from tests.needle_cli import needle_env, run_needle

REPO = Path(__file__).resolve().parents[2]
AS_ROOT = os.name == "posix" and os.geteuid() == 0

HOSTILE = """
import json, os, pathlib

def _read(path):
    try:
        return pathlib.Path(path).read_text(errors="replace")[:2000]
    except Exception as exc:
        return "DENIED " + type(exc).__name__

def _write(path):
    try:
        with open(path, "a") as f:
            f.write("pwned")
        return "WROTE"
    except Exception as exc:
        return "DENIED " + type(exc).__name__

def build(question, checkout, home):
    found = {
        "environ": json.dumps(dict(os.environ)),
        "proc1": _read("/proc/1/environ"),
        "parent": _read(f"/proc/{os.getppid()}/environ"),
        "self": _read("/proc/self/environ"),
        "home_config": _read(os.path.join(home, ".config", "needle-canary")),
        "git_config": _read(os.path.join(checkout, ".git", "config")),
        "copy_git": _read(".git/config"),
        "write_checkout": _write(os.path.join(checkout, "pwned.txt")),
        "write_config": _write(os.path.join(checkout, "needle.toml")),
        "write_home": _write(os.path.join(home, "pwned.txt")),
        "uid": str(os.getuid()),
    }
    return {"messages": [{"role": "user", "content": question + json.dumps(found)}]}
"""


@pytest.fixture
def checkout():
    """A checkout other users may traverse (as a runner's workspace is), with a canary in .git/config."""
    folder = Path(tempfile.mkdtemp(prefix="needle-checkout-", dir="/tmp"))
    folder.chmod(0o755)
    canary = f"canary-{uuid.uuid4().hex}"
    (folder / ".git").mkdir(mode=0o755)
    (folder / ".git" / "config").write_text(f"[http]\n\textraheader = AUTHORIZATION: basic {canary}\n")
    (folder / ".git" / "config").chmod(0o644)
    (folder / "app").mkdir()
    (folder / "app" / "hostile.py").write_text(HOSTILE)
    (folder / "fixture.yaml").write_text(f"question: 'Q? '\ncheckout: {folder}\nhome: {Path.home()}\n")
    (folder / "needle.toml").write_text(
        textwrap.dedent(
            """\
            [prompts.hostile]
            builder = "app/hostile.py:build"
            fixtures = ["fixture.yaml"]
            [files]
            builders = true
            """
        )
    )
    yield folder, canary
    shutil.rmtree(folder, ignore_errors=True)


def _needle(args: list[str], env_extra: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return run_needle(args, env=needle_env(**env_extra), cwd=cwd, timeout=120)


@pytest.mark.skipif(not AS_ROOT, reason="the unprivileged user is taken only when needle runs as root")
def test_a_hostile_builder_finds_no_canary_and_writes_nowhere(checkout):
    folder, canary = checkout
    home_config = Path.home() / ".config" / "needle-canary"
    home_config.parent.mkdir(exist_ok=True)
    home_config.write_text(canary)
    before = (folder / "needle.toml").read_text()
    try:
        secrets = {"ANTHROPIC_API_KEY": canary, "GITHUB_TOKEN": canary, "ACTIONS_RUNTIME_TOKEN": canary}
        run = _needle(
            ["render", "hostile", "--config", str(folder / "needle.toml"), "--format", "json"],
            secrets,
            folder,
        )
    finally:
        home_config.unlink(missing_ok=True)
    assert run.returncode == 0, run.stderr
    rendered = json.loads(run.stdout)
    found = json.loads(rendered["messages"][0]["content"].removeprefix("Q? "))
    assert canary not in run.stdout
    env = json.loads(found["environ"])
    assert not any(k.endswith(("_KEY", "_TOKEN")) or k.startswith("GITHUB_") for k in env)
    for probe in ("proc1", "parent", "home_config", "git_config", "copy_git"):
        assert found[probe].startswith("DENIED"), (probe, found[probe])
    for probe in ("write_checkout", "write_config", "write_home"):
        assert found[probe].startswith("DENIED"), (probe, found[probe])
    assert found["uid"] != "0"
    assert not (folder / "pwned.txt").exists()
    assert not (Path.home() / "pwned.txt").exists()
    assert (folder / "needle.toml").read_text() == before
    assert (folder / ".git").stat().st_mode & 0o777 == 0o755  # closed during the run, restored after


SLOW_AND_BIG = """
def loop(question):
    n = 0
    while True:
        n += 1

def big(question):
    data = bytearray(8 * 1024 ** 3)
    return {"messages": [{"role": "user", "content": str(len(data))}]}

def raises(question):
    return _helper({})

def _helper(table):
    return table["missing"]

def not_a_request(question):
    return {"messages": [{"role": "user", "content": [{"type": "picture", "url": "x"}]}]}
"""


@pytest.fixture
def limits_repo(tmp_path):
    names = ("loop", "big", "raises", "not_a_request")
    builder_project(tmp_path, "app/limits.py", SLOW_AND_BIG, names, "question: hi\n")
    yield tmp_path
    builder.close_all()


def _render(config, name):
    from needle_action.assemble.render import render_case

    prompt = config.prompts[name]
    return render_case(config, prompt, config.fixture_paths(prompt)[0])


@pytest.mark.slow
def test_an_endless_loop_ends_at_the_time_limit_naming_the_builder(limits_repo, monkeypatch):
    monkeypatch.setattr(builder, "BUILD_SECONDS", 1.0)
    config = load_config(limits_repo / "needle.toml")
    with pytest.raises(builder.BuilderError) as err:
        _render(config, "loop")
    text = err.value.format()
    assert "app/limits.py:loop took longer than its limit of 1 s" in text
    assert "app/limits.py:5 in loop" in text or "app/limits.py:4 in loop" in text


def test_an_8_gb_allocation_stops_at_the_memory_limit(limits_repo):
    config = load_config(limits_repo / "needle.toml")
    with pytest.raises(builder.BuilderError) as err:
        _render(config, "big")
    assert f"more than the {builder.MEMORY_BYTES // 2**20} MB" in err.value.message
    assert err.value.location.file == "app/limits.py"
    assert err.value.location.line == 8


def test_an_exception_shows_the_builders_own_lines(limits_repo):
    config = load_config(limits_repo / "needle.toml")
    with pytest.raises(builder.BuilderError) as err:
        _render(config, "raises")
    text = err.value.format()
    assert text.startswith("app/limits.py:15: the builder app/limits.py:raises raised KeyError: 'missing'")
    assert "app/limits.py:12 in raises: return _helper({})" in text
    assert "needle_action" not in text
    assert "builder_worker" not in text


def test_a_return_value_that_is_not_a_request_names_the_field(limits_repo):
    config = load_config(limits_repo / "needle.toml")
    with pytest.raises(builder.BuilderError) as err:
        _render(config, "not_a_request")
    assert "messages[0].content[0]" in err.value.message
    assert "picture" in err.value.message


def test_the_cli_frames_a_builder_error_as_the_users_and_exits_2(limits_repo):
    run = _needle(["render", "raises", "--config", str(limits_repo / "needle.toml")], {}, limits_repo)
    assert run.returncode == 2
    assert "app/limits.py:15: the builder app/limits.py:raises raised KeyError" in run.stderr
    assert "Traceback" not in run.stderr
    assert "needle_action" not in run.stderr
