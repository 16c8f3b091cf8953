"""The embedded model runs in a worker process that needle owns, so a native crash cannot take a run
down.

llama.cpp is C++ compiled for the machine it was installed on; a miscompiled CPU path (the AMX /
AVX-512 kernels of a ``GGML_NATIVE`` build on some Xeons, docs/decisions.md) or an out-of-memory
kill ends the process that runs it. Here that process is a worker, not the run:

* one worker per model file and process, started on first use and **reused** across calls and
  providers (the weights load once; the live KV state stays for :mod:`.kv_reuse`'s prefix reuse);
* requests and answers are plain data through pipes (pickled built-ins only, as in
  :mod:`needle_action.assemble.templates.isolate`), one at a time under a lock;
* when the worker dies, its exit is **named** (``SIGSEGV``, ``SIGILL``, ``SIGABRT``, ``SIGKILL``: the
  out-of-memory killer's signal), a warning goes to stderr, and a fresh worker answers the same
  request; after :data:`MAX_RESTARTS` restarts in a row the call raises ``ProviderUnavailable``
  naming the signal, with a hint (a portable reinstall for a crash, smaller windows for a kill).
  The recall engine treats that as an outage: budgets and finished prompts are kept and reported;
  the CLI exits 3, the action posts its comment;
* the worker gets no environment beyond what Python and llama.cpp need (no keys), ignores Ctrl-C
  (the parent decides), and exits when the parent's end of its pipe closes;
* its stderr (llama.cpp's log lines) goes to a temporary file, so the terminal stays clean.

This module is the parent's side; the worker runs :mod:`needle_action.providers.local.serve`.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from needle_action.core import environment
from needle_action.core.errors import ProviderUnavailable
from needle_action.core.pipes import PlainData, WorkerGone, close_every, exchange, widen_pipe, worker_env
from needle_action.providers.local.build import crash_hint, installed_version
from needle_action.providers.retry import RequestRejected

MAX_RESTARTS = 2  # fresh workers tried for one request after a crash; then the model is unavailable
# start, load and one answer: only a hung worker takes this long (a 32K-token prompt on a busy
# 2-core machine takes ~20 min)
ANSWER_SECONDS = 3600.0
TRACE_ENV = environment.LOCAL_TRACE  # set (to anything but "" or "0"): one line per call on stderr
MODULE = "needle_action.providers.local.serve"  # the worker's entry point; how tests and `ps` find it
# what the worker needs from the parent's environment: nothing secret
_WORKER_ENV = (  # beside core.pipes.WORKER_ENV
    "LD_LIBRARY_PATH",
    "LLAMA_CPP_LIB_PATH",  # llama-cpp-python's own switch to another libllama
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "GOMP_SPINCOUNT",
    "NEEDLE_LOCAL_THREADS",  # llama.cpp's decoding threads (threading_env chooses when unset)
)


# CPUs kept busy by other processes (per CPU) below which the machine counts as idle
IDLE_LOAD_PER_CPU = 0.35
SAMPLE_SECONDS = 0.25  # how long others_busy watches the machine
SPIN_COUNT = "20000"  # a bounded spin at OpenMP barriers (libgomp's default spins far longer)


def others_busy(seconds: float = SAMPLE_SECONDS) -> float:
    """How many CPUs other processes kept busy over the next SECONDS: from /proc/stat, without this
    process and its children (the render and builder workers building the next trials are needle's
    own work, not a neighbour's); elsewhere the 1-minute load average. A load average would still
    count a compilation that ended a minute ago (the README's install, then the demo)."""
    try:
        before, mine = _cpu_ticks(), _family_ticks()
        time.sleep(seconds)
        after, mine_after = _cpu_ticks(), _family_ticks()
    except (OSError, ValueError, IndexError):
        return os.getloadavg()[0]
    ours = sum(mine_after.get(pid, 0) - ticks for pid, ticks in mine.items())
    ours += sum(ticks for pid, ticks in mine_after.items() if pid not in mine)
    busy = (after[0] - before[0]) - ours
    return max(0.0, busy / os.sysconf("SC_CLK_TCK") / seconds)


def _cpu_ticks() -> tuple[int, int]:
    """(busy, idle) clock ticks of all CPUs since boot: /proc/stat's first line."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields[:8]) - idle, idle


def _family_ticks() -> dict[int, int]:
    """User + system clock ticks of this process and each of its live descendants, by pid."""
    stats: dict[int, tuple[int, int]] = {}  # pid -> (parent, ticks)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):  # a process that just ended
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                stats[int(entry.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    family, grew = {os.getpid()}, True
    while grew:
        more = {pid for pid, (parent, _) in stats.items() if parent in family} - family
        family |= more
        grew = bool(more)
    return {pid: stats[pid][1] for pid in family if pid in stats}


def threading_env(env: dict[str, str], busy: float, cpus: int) -> dict[str, str]:
    """llama.cpp's threads for the worker's life, from BUSY (CPUs other processes keep busy) when it
    starts (docs/decisions.md).

    Idle machine: every CPU decodes, and OpenMP threads spin briefly at each barrier before they
    sleep (a 578-token prompt 3.4 ms a token, an answer token 19.5 ms, here). Busy machine: half the
    CPUs decode and the threads wait passively, since a spinning thread takes the core its partner
    needs (spinning: 10.5 ms a token beside one busy process; passive: 6.0). The user's own
    ``OMP_WAIT_POLICY`` / ``GOMP_SPINCOUNT`` / ``NEEDLE_LOCAL_THREADS`` win."""
    out: dict[str, str] = {}
    idle = busy < IDLE_LOAD_PER_CPU * cpus
    if "OMP_WAIT_POLICY" not in env and "GOMP_SPINCOUNT" not in env:
        out["GOMP_SPINCOUNT" if idle else "OMP_WAIT_POLICY"] = SPIN_COUNT if idle else "PASSIVE"
    if "NEEDLE_LOCAL_THREADS" not in env:
        out["NEEDLE_LOCAL_THREADS"] = str(cpus if idle else max(1, cpus // 2))
    return out


def describe_exit(returncode: int) -> str:
    """``SIGSEGV`` for a process killed by signal 11, else ``exit status N``."""
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


def worker_command() -> list[str]:
    """How the worker process starts (a function: the tests swap in workers that crash)."""
    return [sys.executable, "-m", MODULE]


class _Crashed(Exception):
    def __init__(self, returncode: int) -> None:
        super().__init__(describe_exit(returncode))
        self.returncode = returncode


class _Process:
    """One worker process, its pipes and its log."""

    def __init__(self) -> None:
        env = worker_env(*_WORKER_ENV)
        threads = threading_env(env, others_busy(), os.cpu_count() or 1)
        env.update(threads)
        if environment.local_trace():
            chosen = " ".join(f"{k}={v}" for k, v in sorted(threads.items())) or "as the environment says"
            print(f"local: model worker threads: {chosen}", file=sys.stderr, flush=True)
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - the worker's stderr for its life; stop() closes it
        self.proc = subprocess.Popen(  # noqa: S603 - our own worker module, a fixed argv
            worker_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=env,
            close_fds=True,
        )
        widen_pipe(self.proc.stdin)
        widen_pipe(self.proc.stdout)

    def call(self, request: tuple[Any, ...], timeout: float) -> Any:
        answer = exchange(self.proc, pickle.dumps(request, protocol=5), timeout)
        return PlainData(io.BytesIO(answer)).load()

    def reap(self) -> int:
        """Wait for the exited worker and return its exit code (negative: the signal)."""
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._close_streams()
        return code

    def stop(self) -> None:
        """Ask the worker to exit (end of its input), kill it if it does not."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._close_streams()

    def _close_streams(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout, self.log):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


class ModelWorker:
    """The worker of one model file: ``request(kind, payload)`` answers in it, restarting it after a
    crash (up to :data:`MAX_RESTARTS` times in a row), else raises ``ProviderUnavailable``."""

    def __init__(self, model_path: str) -> None:
        self.model_path = model_path
        self.failure: ProviderUnavailable | None = None  # set when the worker cannot be used any more
        self.crashes: list[str] = []  # every crash seen, named ("SIGSEGV"), for reports and tests
        self.probed = False  # the self-test (local_build.ensure_probed) passed in this process
        self._proc: _Process | None = None
        self._info: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._setup: threading.Thread | None = None  # start_soon's thread
        self._setup_lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The live worker's process id (None before the first request)."""
        return self._proc.proc.pid if self._proc is not None else None

    def info(self) -> dict[str, Any]:
        """``version`` and ``system_info`` (``llama_print_system_info``) of the build the worker runs."""
        if self._info is None:
            self._info = self.request("info")
        return self._info

    def start_soon(self, setup: Callable[[], object]) -> None:
        """Run SETUP (start the worker, self-test, load the model) in a background thread, once per
        worker and before its first request: the caller goes on (budgets are counted meanwhile), and
        :meth:`wait_started` waits for it. SETUP's errors are not raised there: the first real
        request meets the same cause (a crash is recorded in ``failure`` / ``crashes``)."""
        with self._setup_lock:  # not the request lock: the setup holds that one while it loads
            if self._setup is not None or self._proc is not None or self.failure is not None:
                return
            self._setup = threading.Thread(
                target=_quietly, args=(setup,), name="needle-model-start", daemon=True
            )
            self._setup.start()

    def wait_started(self) -> None:
        """Wait for :meth:`start_soon`'s SETUP, if one runs (a no-op from its own thread)."""
        setup = self._setup
        if setup is not None and setup is not threading.current_thread():
            setup.join()

    def request(
        self, kind: str, payload: dict[str, Any] | None = None, *, timeout: float = ANSWER_SECONDS
    ) -> dict[str, Any]:
        """The worker's answer to one request; raises what the worker raised (``RequestRejected``,
        ``ProviderUnavailable``), or ``ProviderUnavailable`` when it crashed past its restarts."""
        with self._lock:
            if self.failure is not None:
                raise self.failure
            crashed: list[str] = []
            while True:
                try:
                    reply = self._call((kind, payload), timeout)
                except _Crashed as crash:
                    crashed.append(str(crash))
                    self.crashes.append(str(crash))
                    if len(crashed) > MAX_RESTARTS:
                        self.failure = _crash_error(crash.returncode, len(crashed) - 1)
                        # the outage keeps the message only: the hint (what to reinstall) goes here
                        _warn(f"{self.failure.message}: giving up on it\n  hint: {self.failure.hint}")
                        raise self.failure from None
                    _warn(
                        f"the embedded model crashed ({crash}); restarting it "
                        f"({len(crashed)} of {MAX_RESTARTS})"
                    )
                    continue
                return _unpack(reply)

    def _call(self, request: tuple[Any, ...], timeout: float) -> Any:
        if self._proc is None:
            try:
                self._proc = _Process()
            except OSError as exc:
                raise ProviderUnavailable(
                    f"cannot start the embedded model's worker: {exc.strerror or exc}",
                    hint="check that this Python can start subprocesses (ulimit -u, memory)",
                ) from None
        proc = self._proc
        try:
            return proc.call(request, timeout)
        except WorkerGone as gone:
            self._proc = None
            if str(gone) == "timeout":
                proc.proc.kill()
                proc.reap()
                self.failure = ProviderUnavailable(
                    f"the embedded model did not answer within {timeout:g} s and was stopped",
                    hint="a smaller window (providers.local.n_ctx, recall sizes) answers faster",
                )
                raise self.failure from None
            raise _Crashed(proc.reap()) from None

    def reset(self) -> None:
        """Forget a failure: the next request (of a later run) starts a fresh worker."""
        with self._lock:
            self.failure = None

    def close(self) -> None:
        """Stop the worker process."""
        with self._lock:
            if self._proc is not None:
                self._proc.stop()
                self._proc = None


def _quietly(setup: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):  # the first real request meets the same error, and reports it
        setup()


def _crash_error(returncode: int, restarts: int) -> ProviderUnavailable:
    what = describe_exit(returncode)
    again = f"; it crashed again after {restarts} restart(s)" if restarts else ""
    return ProviderUnavailable(
        f"the embedded model crashed ({what}){again}", hint=crash_hint(what, installed_version())
    )


def _unpack(reply: tuple[Any, ...]) -> dict[str, Any]:
    if reply[0] == "ok":
        result: dict[str, Any] = reply[1]
        return result
    _, cls, message, hint = reply
    if cls == "TooLong":  # the prompt beyond the largest window: refused for good, the run goes on
        raise RequestRejected(message, status=None, hint=hint)
    raise ProviderUnavailable(message, hint=hint)


def _warn(message: str) -> None:
    """A line on stderr now (the run goes on): the user sees the crash named even when a restart saves it."""
    print(f"warning: {message}", file=sys.stderr, flush=True)


_workers: dict[str, ModelWorker] = {}
_workers_lock = threading.Lock()


def worker_for(model_path: str | Path) -> ModelWorker:
    """The one worker of MODEL_PATH in this process (created on first use, started on first request)."""
    key = str(Path(model_path).resolve())
    with _workers_lock:
        if key not in _workers:
            _workers[key] = ModelWorker(key)
        return _workers[key]


@atexit.register
def close_all() -> None:
    """Stop every worker (at exit; tests call it too)."""
    close_every(_workers, _workers_lock)
