"""The pipe protocol between needle and the worker processes it owns: the render workers
(:mod:`needle_action.assemble.templates.isolate`), the prompt builders' worker
(:mod:`needle_action.assemble.builder.client`) and the embedded model's worker
(:mod:`needle_action.providers.local.worker`).

One message is one frame: an 8-byte big-endian length, then that many bytes. The parent writes a
request frame to the worker's stdin and reads the answer frame from its stdout within a deadline;
a worker that is too slow or exits raises :class:`WorkerGone`, and its owner kills and replaces it.
Standard library only: the workers import this at start-up.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from needle_action.core import environment

HEADER = struct.Struct("!Q")
# what a worker inherits of our environment: never a key, a token or anything of the runner's
WORKER_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "PYTHONDONTWRITEBYTECODE", "SYSTEMROOT")


class WorkerGone(Exception):
    """The worker did not answer in time, exited, or answered out of protocol."""


class PlainData(pickle.Unpickler):
    """Unpickles only built-in data: a worker's answer can never name a class or a function."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"a worker sent a reference to {module}.{name}")


def worker_env(*extra: str) -> dict[str, str]:
    """A worker's environment: WORKER_ENV and the EXTRA names of ours, and a PYTHONPATH that imports
    this very ``needle_action`` first (a checkout's copy, not an installed one)."""
    ours = environment.process()
    env = {k: ours[k] for k in (*WORKER_ENV, *extra) if k in ours}
    package_root = str(Path(__file__).resolve().parents[2])  # needle_action/core/pipes.py
    env["PYTHONPATH"] = os.pathsep.join([package_root, *sys.path])
    return env


def widen_pipe(stream: Any) -> None:
    """1 MB pipe buffers (Linux): a 500 kB prompt crosses in one go instead of ~8 wake-ups."""
    try:  # POSIX only: elsewhere the ImportError below keeps the default buffer
        import fcntl

        fcntl.fcntl(stream.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (ImportError, OSError):
        pass  # other systems, or a lower /proc/sys/fs/pipe-max-size: the default size works too


def read_exactly(fd: int, size: int, deadline: float) -> bytes:
    """SIZE bytes from FD by the monotonic DEADLINE, or WorkerGone."""
    buf = bytearray()
    while len(buf) < size:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise WorkerGone("timeout")
        chunk = os.read(fd, min(size - len(buf), 1 << 20))
        if not chunk:
            raise WorkerGone("exited")
        buf += chunk
    return bytes(buf)


def send(proc: subprocess.Popen[bytes], payload: bytes) -> None:
    """One request frame to the worker's stdin."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(HEADER.pack(len(payload)) + payload)
        proc.stdin.flush()
    except OSError:
        raise WorkerGone("exited") from None


def receive(proc: subprocess.Popen[bytes], deadline: float, max_bytes: int | None = None) -> bytes:
    """One answer frame from the worker's stdout by DEADLINE (at most MAX_BYTES when given)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    size = HEADER.unpack(read_exactly(fd, HEADER.size, deadline))[0]
    if max_bytes is not None and size > max_bytes:
        raise WorkerGone("too large")
    return read_exactly(fd, size, deadline)


def exchange(proc: subprocess.Popen[bytes], payload: bytes, timeout: float) -> bytes:
    """Send PAYLOAD and return the answer's bytes, within TIMEOUT seconds."""
    send(proc, payload)
    return receive(proc, time.monotonic() + timeout)


def serve(answer: Callable[[Any], Any]) -> None:
    """The worker's side: answer pickled requests from stdin on the real stdout until stdin closes.

    Requests come from our own parent (trusted pickles). Stdout is kept for the answers only: fd 1
    is pointed at stderr, so a stray print (a template's, llama.cpp's) cannot corrupt a frame."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    while True:
        header = inp.read(HEADER.size)
        if len(header) < HEADER.size:
            return
        request = pickle.loads(inp.read(HEADER.unpack(header)[0]))  # noqa: S301 - from our own parent process
        reply = pickle.dumps(answer(request), protocol=5)
        out.write(HEADER.pack(len(reply)) + reply)
        out.flush()


def close_every(workers: dict[Any, Any], lock: threading.Lock) -> None:
    """Close every worker in WORKERS (a registry its owner guards with LOCK): the registry is
    emptied under the lock, the workers closed outside it (closing one may wait for it)."""
    with lock:
        found = list(workers.values())
        workers.clear()
    for worker in found:
        worker.close()


__all__ = [
    "HEADER",
    "PlainData",
    "WorkerGone",
    "close_every",
    "exchange",
    "read_exactly",
    "receive",
    "send",
    "serve",
    "widen_pipe",
]
