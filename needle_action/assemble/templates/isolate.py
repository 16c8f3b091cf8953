"""Templates run in a worker process with hard bounds on time and memory.

The sandbox (:mod:`~needle_action.assemble.templates.sandbox`) decides what a template may *reach*, and its
size checks (:mod:`~needle_action.assemble.templates.limits`) refuse the obvious blow-ups with a clear line.
Neither can stop a template that simply computes for a long time (``{% for i in range(100000) %}
{% for j in range(100000) %}``, a macro that calls itself twice per level) or the allocation no
estimate foresaw; and the renders run in threads (recall builds prompts in ``asyncio.to_thread``),
where no signal can interrupt them. So a template runs in a separate, long-lived Python process:

* its address space is capped with ``RLIMIT_AS`` (:data:`MEMORY_BYTES`): an allocation beyond it is
  a ``MemoryError`` inside the template, reported at its line, and never the runner's OOM killer;
* a ``SIGALRM`` timer (:data:`RENDER_SECONDS`) interrupts a render in Python code with
  :class:`RenderTimeout`, also at its line; if it is stuck in C code the parent kills the worker
  after a grace period and reports the template without a line;
* it gets no environment beyond what Python needs (no API keys, no tokens), so even a sandbox
  escape would find no secret in ``os.environ``;
* the parent only unpickles plain data from it (strings, numbers, tuples: no classes), so a
  compromised worker cannot run code in the parent.

Workers are started on first use (a pool of :data:`POOL_SIZE`, one render each at a time), reused
(compiled templates stay cached in them), replaced after a timeout or a memory error, and stopped
at exit. A second worker starts in the background while the first serves: a render never waits
for a start when another worker is about to be free. A render costs one round trip of its variables and its output through pipes: measured
+0.12 ms for a small prompt (0.21 ms instead of 0.09 ms) and +3.5 ms for a 120k-token one
(6.9 ms instead of 3.4 ms); starting a worker costs ~0.2 s once. Where ``resource`` is missing
(Windows) the render runs in-process with the sandbox's size checks only.

``python -m needle_action.assemble.templates.isolate`` is the worker's entry point.
"""

from __future__ import annotations

import atexit
import io
import os
import pickle
import signal
import subprocess
import sys
import threading
from typing import Any

from needle_action.assemble.templates.limits import MEMORY_BYTES, SIZE_HINT, RenderLimit
from needle_action.assemble.templates.raw import RenderJob, render_raw
from needle_action.core.errors import ConfigError, NeedleError, TemplateError
from needle_action.core.pipes import PlainData, WorkerGone, exchange, serve, widen_pipe, worker_env
from needle_action.core.workspace import Workspace

RENDER_SECONDS = 5.0
GRACE_SECONDS = 3.0
STARTUP_SECONDS = 30.0
POOL_SIZE = 2
_ERRORS: dict[str, type[NeedleError]] = {
    "TemplateError": TemplateError,
    "ConfigError": ConfigError,
    "NeedleError": NeedleError,
}


# what the worker needs from the parent's environment: nothing secret
class RenderTimeout(RenderLimit):
    """The worker's timer went off while a template was rendering."""


# --------------------------------------------------------------------------- the parent side


class _Worker:
    def __init__(self) -> None:
        env = worker_env()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "needle_action.assemble.templates.isolate"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            close_fds=True,
        )
        self.first = True
        widen_pipe(self.proc.stdin)
        widen_pipe(self.proc.stdout)

    def call(self, payload: bytes, timeout: float) -> bytes:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        if self.first:  # the first call also waits for the interpreter to start and import Jinja
            timeout += STARTUP_SECONDS
            self.first = False
        return exchange(self.proc, payload, timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


class _Pool:
    """Up to POOL_SIZE workers, each serving one render at a time."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.idle: list[_Worker] = []
        self.count = 0
        self.start_failed = False
        self.cond = threading.Condition()

    def acquire(self) -> _Worker:
        with self.cond:
            while not self.idle and self.count > 0:
                if self.count < self.size and not self.start_failed:
                    # another worker exists and will be free in a moment (a render takes
                    # milliseconds, starting a worker ~0.2 s): start this one in the background
                    # and take whichever is free first, rather than wait for the start
                    self.count += 1
                    threading.Thread(target=self._start_idle, name="needle-render-start", daemon=True).start()
                self.cond.wait()
            if self.idle:
                return self.idle.pop()
            self.count += 1  # no worker at all: start one here, its errors are the caller's
        try:
            return _Worker()
        except BaseException:
            self.discard(None)
            raise

    def prestart(self) -> None:
        """Start the missing workers in the background: renders are about to run concurrently."""
        with self.cond:
            if self.count == 0 or self.start_failed:
                return  # the first starts with the first render (its errors are that render's)
            while self.count < self.size:
                self.count += 1
                threading.Thread(target=self._start_idle, name="needle-render-start", daemon=True).start()

    def _start_idle(self) -> None:
        """Start a worker, wait until it answers, and make it idle (or give its place back)."""
        worker = None
        try:
            worker = _Worker()
            if PlainData(io.BytesIO(worker.call(_PING, STARTUP_SECONDS))).load() != ("ok", ""):
                raise WorkerGone("bad answer")
        except BaseException:  # noqa: BLE001 - the callers wait for the workers that did start
            with self.cond:
                self.start_failed = True  # make do with the workers there are
            self.discard(worker)
            return
        self.release(worker)

    def release(self, worker: _Worker) -> None:
        with self.cond:
            self.idle.append(worker)
            self.cond.notify()

    def discard(self, worker: _Worker | None) -> None:
        if worker is not None:
            worker.kill()
        with self.cond:
            self.count -= 1
            self.cond.notify()

    def close(self) -> None:
        with self.cond:
            workers, self.idle = self.idle, []
        for w in workers:
            w.kill()


_PING = pickle.dumps(None, protocol=5)  # "are you up?": the worker answers ("ok", "")
_pool = _Pool(POOL_SIZE)
atexit.register(_pool.close)


def prestart() -> None:
    """Start the rest of the pool in the background, once a first worker runs: recall is about to
    render concurrently, and a start takes ~0.2 s of the other core, better spent while the caller
    does something else than while a render waits."""
    if available():
        _pool.prestart()


def available() -> bool:
    """Whether renders can run isolated here (POSIX with ``resource``)."""
    try:
        import resource  # noqa: F401
    except ImportError:
        return False
    return os.name == "posix"


def render(workspace: Workspace, job: RenderJob) -> str:
    """The raw output of JOB's template in the WORKSPACE, rendered in a worker process.

    Raises the TemplateError (or ConfigError) the render raised, with its file and line, or a
    TemplateError naming the job's file when the worker ran out of time or died.
    """
    if not available():
        return render_raw(workspace, job)
    try:
        fields = (job.name, job.variables, job.file, job.lenient, job.blocks)
        payload = pickle.dumps((workspace.plain(), os.getcwd(), *fields), protocol=5)
    except Exception:  # noqa: BLE001 - data we cannot send: render here, size checks still apply
        return render_raw(workspace, job)
    worker = _pool.acquire()
    try:
        answer = worker.call(payload, RENDER_SECONDS + GRACE_SECONDS)
    except WorkerGone as exc:
        _pool.discard(worker)
        raise _gone(str(exc), job.file) from None
    except BaseException:
        _pool.discard(worker)
        raise
    reply = PlainData(io.BytesIO(answer)).load()
    if reply[0] == "ok":
        _pool.release(worker)
        rendered: str = reply[1]
        return rendered
    _, cls, message, efile, line, column, hint, restart = reply
    if restart:
        _pool.discard(worker)
    else:
        _pool.release(worker)
    raise _ERRORS.get(cls, TemplateError)(message, file=efile, line=line, column=column, hint=hint)


def _gone(why: str, file: str) -> TemplateError:
    if why == "timeout":
        return TemplateError(
            f"rendering took longer than {RENDER_SECONDS:g} s and was stopped",
            file=file,
            hint="a template renders in milliseconds; look for loops inside loops, or a macro that "
            "calls itself more than once",
        )
    return TemplateError(
        "rendering stopped: the render worker exited (out of memory, or a crash)",
        file=file,
        hint=SIZE_HINT,
    )


# --------------------------------------------------------------------------- the worker side


def _on_alarm(signum: int, frame: Any) -> None:
    raise RenderTimeout(f"rendering took longer than {RENDER_SECONDS:g} s and was stopped")


def _limit_memory() -> None:
    import resource  # POSIX only, and needed only in the worker process

    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = MEMORY_BYTES if hard == resource.RLIM_INFINITY else min(MEMORY_BYTES, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def _answer(request: tuple[Any, ...]) -> tuple[Any, ...]:
    workspace, cwd, *fields = request
    job = RenderJob(*fields)
    if os.getcwd() != cwd:
        os.chdir(cwd)  # display paths in messages are relative to the parent's working directory
    signal.setitimer(signal.ITIMER_REAL, RENDER_SECONDS)
    try:
        return ("ok", render_raw(Workspace.from_plain(workspace), job))
    except NeedleError as exc:
        loc = exc.location
        # after a timeout or a memory error the worker is replaced: its heap may be in a sorry state
        restart = isinstance(exc.__context__, RenderTimeout | MemoryError)
        return ("error", type(exc).__name__, exc.message, loc.file, loc.line, loc.column, exc.hint, restart)
    except BaseException as exc:  # noqa: BLE001 - a MemoryError while mapping the error, a bug of ours
        return (
            "error",
            "TemplateError",
            f"rendering failed: {type(exc).__name__}",
            job.file,
            None,
            None,
            None,
            True,
        )
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _serve() -> None:
    """Read pickled requests from stdin, write pickled answers to the real stdout, until EOF."""
    _limit_memory()
    signal.signal(signal.SIGALRM, _on_alarm)
    serve(lambda request: ("ok", "") if request is None else _answer(request))


if __name__ == "__main__":  # pragma: no cover - the worker process
    _serve()
