"""The model worker's crash handling with real processes and real signals, without the model: the
worker command is swapped for tiny Python programs that die the way llama.cpp can (a segfault, an
out-of-memory kill) or that die once and then serve. The real model's worker, killed mid-run, is
tested in tests/e2e/test_local_crash.py."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from needle_action.core.errors import ProviderUnavailable
from needle_action.providers.local import worker as local_worker
from needle_action.providers.local.worker import MAX_RESTARTS, MODULE, ModelWorker


def _dies_of(signame: str) -> list[str]:
    return [sys.executable, "-c", f"import os, signal; os.kill(os.getpid(), signal.{signame})"]


@pytest.fixture
def worker(tmp_path):
    w = ModelWorker(str(tmp_path / "model.gguf"))
    yield w
    w.close()


def test_a_worker_that_keeps_segfaulting_is_restarted_twice_then_named_in_the_error(
    worker, monkeypatch, capfd
):
    monkeypatch.setattr(local_worker, "worker_command", lambda: _dies_of("SIGSEGV"))
    with pytest.raises(ProviderUnavailable) as caught:
        worker.request("ping")
    err = caught.value
    assert (
        err.message
        == f"the embedded model crashed (SIGSEGV); it crashed again after {MAX_RESTARTS} restart(s)"
    )
    assert "--force-reinstall" in err.hint
    assert "--no-cache-dir" in err.hint
    assert "needle doctor" in err.hint
    assert worker.crashes == ["SIGSEGV"] * (MAX_RESTARTS + 1)
    warnings = [line for line in capfd.readouterr().err.splitlines() if line.startswith("warning:")]
    assert warnings == [
        *(
            f"warning: the embedded model crashed (SIGSEGV); restarting it ({n} of {MAX_RESTARTS})"
            for n in range(1, MAX_RESTARTS + 1)
        ),
        f"warning: {err.message}: giving up on it",
    ]
    # given up: later requests of this run fail at once, without starting more workers
    with pytest.raises(ProviderUnavailable):
        worker.request("ping")
    assert len(worker.crashes) == MAX_RESTARTS + 1
    worker.reset()  # a later run tries again
    with pytest.raises(ProviderUnavailable):
        worker.request("ping")
    assert len(worker.crashes) == 2 * (MAX_RESTARTS + 1)


def test_an_out_of_memory_kill_says_so(worker, monkeypatch):
    monkeypatch.setattr(local_worker, "worker_command", lambda: _dies_of("SIGKILL"))
    with pytest.raises(ProviderUnavailable) as caught:
        worker.request("ping")
    assert caught.value.message.startswith("the embedded model crashed (SIGKILL)")
    assert "out-of-memory" in caught.value.hint
    assert "n_ctx" in caught.value.hint


def test_a_worker_that_crashes_once_is_replaced_and_the_request_answered(worker, monkeypatch, tmp_path):
    marker = tmp_path / "crashed-once"
    program = (
        "import os, runpy, signal, sys\n"
        f"if not os.path.exists({str(marker)!r}):\n"
        f"    open({str(marker)!r}, 'w').close()\n"
        "    os.kill(os.getpid(), signal.SIGSEGV)\n"
        f"runpy.run_module({MODULE!r}, run_name='__main__')\n"
    )
    monkeypatch.setattr(local_worker, "worker_command", lambda: [sys.executable, "-c", program])
    answer = worker.request("ping")
    assert answer["pid"] == worker.pid
    assert worker.crashes == ["SIGSEGV"]
    assert worker.request("ping")["pid"] == answer["pid"]  # the same worker serves on: no reload


def test_the_real_worker_is_reused_and_exits_when_its_input_closes(worker):
    first = worker.request("ping")["pid"]
    assert worker.request("ping")["pid"] == first
    with pytest.raises(ProviderUnavailable, match="unknown request"):
        worker.request("nonsense")
    assert worker.request("ping")["pid"] == first  # an error answer is not a crash
    proc = worker._proc.proc  # noqa: SLF001
    worker.close()  # the end of its input: it exits by itself
    assert proc.returncode == 0
    assert worker.pid is None


def test_start_soon_runs_its_setup_in_the_background_and_requests_wait_for_it(worker):
    started = threading.Event()
    release = threading.Event()
    seen: list[int] = []

    def setup() -> None:
        seen.append(worker.request("ping")["pid"])
        with worker._lock:  # noqa: SLF001 - as a request does while the model loads
            started.set()
            release.wait(10)

    worker.start_soon(setup)
    assert started.wait(30)  # the caller went on while the worker started
    begun = time.monotonic()
    worker.start_soon(lambda: seen.append(-1))  # once per worker: a second setup is ignored...
    assert time.monotonic() - begun < 1  # ...at once, not after the loading setup's request
    release.set()
    worker.wait_started()
    assert worker.request("ping")["pid"] == seen[0]  # the same process answers: started once
    assert seen == [seen[0]]


def test_a_failing_setup_is_quiet_and_the_first_request_meets_the_cause(worker, monkeypatch):
    monkeypatch.setattr(local_worker, "worker_command", lambda: _dies_of("SIGSEGV"))
    worker.start_soon(lambda: worker.request("ping"))
    worker.wait_started()  # the setup's ProviderUnavailable stays in its thread
    assert worker.crashes == ["SIGSEGV"] * (MAX_RESTARTS + 1)
    with pytest.raises(ProviderUnavailable, match="SIGSEGV"):
        worker.request("ping")
