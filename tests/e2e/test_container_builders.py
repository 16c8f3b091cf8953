"""The hostile prompt builder, inside the action's container (the image tests/e2e/test_container.py
builds, once per session): needle runs as root there, as it does on GitHub, with a canary secret in
its environment, in the checkout's ``.git/config`` (the checkout owned by the runner's uid, mounted
at /github/workspace) and in a credentials file of its home folder (/github/home). The builder runs
as ``nobody`` with the image's Python and must find none of them, write into neither folder, and
stop at the time and memory limits with the user's error (exit 2). The builders' requirements (the
action's ``requirements`` input) install there with the image's pip wheel, as ``nobody``. The
network builder of tests/integration/test_builder_network.py tries every route to listeners on
the host's loopback (the container shares the host's network, as a self-hosted runner's job would
reach its metadata endpoint): they receive nothing, through ``needle render`` and ``needle budget``.

The same builders as the CLI's test (tests/integration/test_builder_sandbox.py), run by
``needle render`` in the container through one shell script.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.e2e.test_container import RUNNER_UID, Engine, _fail, _sections, built_engine
from tests.integration.test_action_builders import TINY_VALUE, WITH_DEPENDENCY, write_wheel
from tests.integration.test_builder_network import NO_NETWORK, PROBES, Listeners
from tests.integration.test_builder_sandbox import HOSTILE, SLOW_AND_BIG

pytestmark = [pytest.mark.container, pytest.mark.slow]

CONFIG = (
    '[prompts.hostile]\nbuilder = "app/hostile.py:build"\nfixtures = ["fixture.yaml"]\n\n'
    + "".join(
        f'[prompts.{name}]\nbuilder = "app/{module}.py:{function}"\nfixtures = ["limits.yaml"]\n\n'
        for name, module, function in (
            ("loop", "limits", "loop"),
            ("big", "limits", "big"),
            ("dep", "dep", "build"),
        )
    )
    + "".join(
        f'[prompts.{name}]\nbuilder = "app/net.py:{name}"\nfixtures = ["net.yaml"]\n\n'
        for name in ("build", "plain")
    )
    + "[files]\nbuilders = true\n"
)
SCRIPT = r"""
section() { echo "@@@ $1"; }
cd /github/workspace
section hostile; needle render hostile --config needle.toml --format json 2>/tmp/err; echo "rc=$?"
section hostile_err; cat /tmp/err
section loop; needle render loop --config needle.toml 2>&1; echo "rc=$?"
section big; needle render big --config needle.toml 2>&1; echo "rc=$?"
section guard
python -c 'from needle_action.assemble.builder import sandbox as s; w = s.run_as(); print(s.guard_report(s.interpreter(w)[0], w))'
section net; needle render build --config needle.toml --format json 2>/tmp/err; echo "rc=$?"
section net_err; cat /tmp/err
section net_budget; needle budget --offline -p build --config needle.toml 2>&1; echo "rc=$?"
section plain; needle render plain --config needle.toml 2>&1; echo "rc=$?"
section git_mode; stat -c %a .git
section requirements
python - <<'EOF' 2>&1
from needle_action.assemble.builder import sandbox as s
from needle_action.assemble.render import render_case
from needle_action.config import load_config
who = s.run_as()
python, _ = s.interpreter(who)
s.install_requirements("--no-index\n/wheels/tinydep-1.0-py3-none-any.whl\n", "requirements.txt", who, python)
config = load_config("needle.toml")
prompt = config.prompts["dep"]
print("system:", render_case(config, prompt, config.fixture_paths(prompt)[0]).system)
EOF
echo "rc=$?"
"""


@pytest.fixture
def engine() -> Engine:
    return built_engine()


@pytest.fixture
def listeners():
    """Listeners on the host's loopback; the Unix socket's folder is mounted at the same path."""
    folder = Path(tempfile.mkdtemp(prefix="needle-listeners-", dir="/tmp"))
    found = Listeners(folder)
    yield found, folder
    found.close()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def runner(tmp_path, listeners):
    """The checkout (owned by the runner's uid, world-traversable as on a runner) and the home folder."""
    top = Path(tempfile.mkdtemp(prefix="needle-container-builders-", dir="/tmp"))
    top.chmod(0o755)
    canary = f"canary-{uuid.uuid4().hex}"
    checkout, home = top / "workspace", top / "home"
    (checkout / ".git").mkdir(parents=True)
    (checkout / ".git" / "config").write_text(f"[http]\n\textraheader = AUTHORIZATION: basic {canary}\n")
    (checkout / "app").mkdir()
    (checkout / "app" / "hostile.py").write_text(HOSTILE)
    (checkout / "app" / "limits.py").write_text(SLOW_AND_BIG)
    (checkout / "app" / "dep.py").write_text(WITH_DEPENDENCY.replace(", chunks", ""))
    (checkout / "app" / "net.py").write_text(PROBES)
    values = {"question": "Q? ", **listeners[0].fixture()}
    (checkout / "net.yaml").write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in values.items()))
    (top / "wheels").mkdir(mode=0o755)
    write_wheel(top / "wheels")
    (checkout / "fixture.yaml").write_text(
        "question: 'Q? '\ncheckout: /github/workspace\nhome: /github/home\n"
    )
    (checkout / "limits.yaml").write_text("question: hi\n")
    (checkout / "needle.toml").write_text(CONFIG)
    (top / "probe.sh").write_text(SCRIPT)
    # a credentials file as tools write them: the folder and the file the owner's only
    (home / ".config").mkdir(parents=True, mode=0o700)
    (home / ".config" / "needle-canary").write_text(canary)
    (home / ".config" / "needle-canary").chmod(0o600)
    for folder in (checkout, home):
        folder.chmod(0o755)
    for path in [checkout, *checkout.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    subprocess.run(["chown", "-R", f"{RUNNER_UID}:{RUNNER_UID}", str(checkout)], check=True)
    yield top, canary
    shutil.rmtree(top, ignore_errors=True)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="the container engine here needs root")
def test_a_hostile_builder_in_the_container_finds_no_canary_writes_nowhere_and_stops_at_the_limits(
    engine, runner, listeners
):
    top, canary = runner
    received, sockets_folder = listeners
    before = (top / "workspace" / "needle.toml").read_text()
    args = ["--entrypoint", "/bin/sh", "-e", "HOME=/github/home"]
    for name in (
        "ANTHROPIC_API_KEY",
        "GITHUB_TOKEN",
        "ACTIONS_RUNTIME_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    ):
        args += ["-e", f"{name}={canary}"]
    args += [
        "-v",
        f"{top / 'workspace'}:/github/workspace",
        "-v",
        f"{top / 'home'}:/github/home",
        "-v",
        f"{top / 'probe.sh'}:/probe.sh:ro",
        "-v",
        f"{top / 'wheels'}:/wheels:ro",
        "-v",
        f"{sockets_folder}:{sockets_folder}",
    ]
    proc = engine.run(args, ["/probe.sh"], timeout=900)
    assert proc.returncode == 0, _fail(proc)
    out = _sections(proc.stdout)

    hostile, _, rc = out["hostile"].rpartition("rc=")
    assert rc.strip() == "0", _fail(proc)
    assert canary not in proc.stdout
    assert canary not in proc.stderr
    rendered = json.loads(hostile)
    found = json.loads(rendered["messages"][0]["content"].removeprefix("Q? "))
    env = json.loads(found["environ"])
    assert not any(k.endswith(("_KEY", "_TOKEN")) or k.startswith(("GITHUB_", "ACTIONS_")) for k in env)
    for probe in ("proc1", "parent", "home_config", "git_config", "copy_git"):
        assert found[probe].startswith("DENIED"), (probe, found[probe])
    for probe in ("write_checkout", "write_config", "write_home"):
        assert found[probe].startswith("DENIED"), (probe, found[probe])
    assert found["uid"] not in ("0", str(RUNNER_UID))
    assert not (top / "workspace" / "pwned.txt").exists()
    assert not (top / "home" / "pwned.txt").exists()
    assert (top / "workspace" / "needle.toml").read_text() == before
    assert out["git_mode"].strip() == "755"  # closed while the builder ran, restored after

    assert out["loop"].strip().endswith("rc=2"), out["loop"]
    assert "app/limits.py:loop took longer than its limit of 10 s" in out["loop"]
    assert out["big"].strip().endswith("rc=2"), out["big"]
    assert "more than the 2048 MB of memory a builder may use" in out["big"]
    # the action's requirements: installed as nobody with the image's pip wheel, imported by the builder
    assert out["requirements"].endswith("rc=0"), out["requirements"]
    assert f"system: {TINY_VALUE}" in out["requirements"]
    for section in ("loop", "big", "hostile_err", "requirements", "net_err", "net_budget", "plain"):
        assert "Traceback" not in out[section]

    # no network: every route refused, in render and budget; an uncaught refusal is the user's error
    assert "'closed': True" in out["guard"], out["guard"]
    assert "seccomp" in out["guard"], out["guard"]
    print(f"\nthe guard in the container: {out['guard'].strip()}")
    net, _, rc = out["net"].rpartition("rc=")
    assert rc.strip() == "0", out["net_err"]
    found = json.loads(json.loads(net)["messages"][0]["content"].removeprefix("Q? "))
    for probe, outcome in found.items():
        assert outcome.startswith("REFUSED"), (probe, outcome)
    assert out["net_budget"].strip().endswith("rc=0"), out["net_budget"]
    assert "network calls refused (builders have no network)" in out["net_budget"]
    assert out["plain"].strip().endswith("rc=2"), out["plain"]
    assert f"the builder app/net.py:plain tried to resolve '127.0.0.1': {NO_NETWORK}" in out["plain"]
    assert received.settle() == b""
