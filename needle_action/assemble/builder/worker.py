"""The builder worker: runs a pull request's prompt builder, and nothing of needle's.

This file is *standard library only* and is started as ``python -I -c <this source> <settings>``
(see :mod:`needle_action.assemble.builder.client`), so the worker reads none of needle's files, imports none
of its dependencies, and can run under a Python the unprivileged user may execute even when
needle's own environment lives in a folder that user cannot read (``/root/.pyenv``).

Before the first line of the builder runs, the worker closes every descriptor it inherited but its
pipes, caps its own address space, file size and process count (``setrlimit``: lowering a limit
needs no privilege), moves into the temporary copy of the repository, silences stdout (a stray
``print`` must not corrupt the answers) and takes its own network away with the guard whose source
the parent passes as the second argument (:mod:`~needle_action.assemble.builder.guard`: seccomp,
Landlock, a network namespace, an audit hook). Its first frame says what the guard achieved:
``{"guard": {"closed": ..., "layers": [...], "reason": ...}}``; unless the network is closed or
the settings allow a builder without (``unguarded_ok``), it stops there and never imports the
builder. Then it answers length-prefixed JSON requests on stdin: ``{"calls": [kwargs, ...]}`` (a
batch), answered by one frame per call, in order, each written as soon as that call returns:
``{"ok": <the JSON return value>}`` or ``{"error": {...}}`` with the builder's own traceback frames
(files inside the copy only, relative to it), both with ``seconds`` (the call's own time) and
``refused`` (network calls refused during it). A failure that comes from a refused network call is
of kind ``network``, with what was tried and at which line. Every call runs under a ``SIGALRM``
timer; the parent waits that long (and a grace) for each answer and kills the worker if even the
timer does not end a call. Only one call's result is held at a time, so the memory cap is one
call's too.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import signal
import struct
import sys
import time
import traceback
import types
from collections.abc import Callable
from types import FrameType, ModuleType, TracebackType
from typing import Any

HEADER = struct.Struct("!Q")


class BuildTimeout(BaseException):
    """The call's timer went off (a BaseException: ``except Exception`` in the builder cannot eat it)."""


def limit_resources(memory_bytes: int | None, file_bytes: int | None, processes: int | None) -> None:
    import resource

    for which, cap in (
        (resource.RLIMIT_AS, memory_bytes),
        (resource.RLIMIT_FSIZE, file_bytes),
        (getattr(resource, "RLIMIT_NPROC", None), processes),
        (resource.RLIMIT_CORE, 0),
    ):
        if which is None or cap is None:
            continue
        _soft, hard = resource.getrlimit(which)
        cap = cap if hard == resource.RLIM_INFINITY else min(cap, hard)
        resource.setrlimit(which, (cap, cap))


def load_builder(root: str, rel_file: str, func_name: str) -> Callable[..., Any]:
    """The builder function: ``app/prompts.py`` imports as ``app.prompts`` when its folders are
    packages (so its relative imports work), else by file name from its own folder."""
    parts = rel_file[:-3].split("/")
    packaged = all(
        os.path.isfile(os.path.join(root, *parts[:i], "__init__.py")) for i in range(1, len(parts))
    )
    sys.path.insert(0, root)
    if packaged:
        module = importlib.import_module(".".join(parts))
    else:
        sys.path.insert(0, os.path.join(root, *parts[:-1]))
        module = importlib.import_module(parts[-1])
    func: object = getattr(module, func_name, None)
    if not callable(func):
        raise LookupError(f"{rel_file} defines no function {func_name!r}")
    return func


def user_frames(tb: TracebackType | None, root: str) -> list[list[Any]]:
    """The traceback's frames in the user's files (inside ROOT), as [file, line, function, code]."""
    out: list[list[Any]] = []
    prefix = root.rstrip("/") + "/"
    for frame in traceback.extract_tb(tb):
        if frame.filename.startswith(prefix):
            out.append([frame.filename[len(prefix) :], frame.lineno, frame.name, (frame.line or "").strip()])
    return out


def load_guard(source: str) -> ModuleType:
    """The guard (guard.py's SOURCE, handed over by the parent) as a module of its own."""
    module = types.ModuleType("needle_builder_guard")
    sys.modules[module.__name__] = module
    exec(compile(source, "<needle builder guard>", "exec"), module.__dict__)  # noqa: S102 - needle's own source
    return module


def describe(exc: BaseException, root: str, kind: str, guard: ModuleType | None = None) -> dict[str, Any]:
    """EXC as the error of an answer; of kind ``network`` when it comes from a refused network call."""
    out = {
        "kind": kind,
        "type": type(exc).__name__,
        "message": str(exc)[:2000],
        "frames": user_frames(exc.__traceback__, root),
    }
    refusal = guard.refusal_behind(exc) if guard is not None and kind in ("raised", "import") else None
    if refusal is not None:
        out["kind"], out["network"] = "network", refusal
    elif guard is not None and guard.attempts:
        out["network_tried"] = guard.attempts[-1]  # refused, caught, and then something else failed
    return out


def not_json(value: Any, path: str = "", depth: int = 0) -> tuple[str, str] | None:
    """The JSON Pointer and type of the first value in VALUE that JSON cannot carry, or None."""
    if depth > 100:
        return path, "nesting deeper than 100 levels"
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, f"the number {value}")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return path, f"a {type(key).__name__} key ({key!r}): keys must be strings"
            found = not_json(item, f"{path}/{key.replace('~', '~0').replace('/', '~1')}", depth + 1)
            if found:
                return found
        return None
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = not_json(item, f"{path}/{i}", depth + 1)
            if found:
                return found
        return None
    return path, f"a {type(value).__name__}"


def call_one(
    func: Callable[..., Any], kwargs: dict[str, Any], root: str, seconds: float, guard: ModuleType
) -> dict[str, Any]:
    """One call of the builder: its answer, with the call's own time and the network calls refused."""
    del guard.attempts[:]
    started = time.perf_counter()
    result = _call(func, kwargs, root, seconds, guard)
    result["seconds"] = time.perf_counter() - started
    result["refused"] = len(guard.attempts)
    return result


def _call(
    func: Callable[..., Any], kwargs: dict[str, Any], root: str, seconds: float, guard: ModuleType
) -> dict[str, Any]:
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        value = func(**kwargs)
    except BuildTimeout as exc:
        return {"error": describe(exc, root, "timeout", guard)}
    except MemoryError as exc:
        return {"error": describe(exc, root, "memory")}
    except RecursionError as exc:
        return {"error": describe(exc, root, "raised")}
    except Exception as exc:  # noqa: BLE001 - the user's code raised: their error, with their lines
        return {"error": describe(exc, root, "raised", guard)}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    bad = not_json(value)
    if bad is not None:
        where, what = bad
        return {"error": {"kind": "return", "type": "", "message": f"{where or '/'}: {what} is not JSON"}}
    return {"ok": value}


def on_alarm(signum: int, frame: FrameType | None) -> None:
    raise BuildTimeout("the time limit of one call")


def serve(settings: dict[str, Any], guard_source: str) -> None:
    """Guard, say so, load the builder, then answer batches of calls until stdin closes."""
    guard = load_guard(guard_source)
    guard.close_inherited()  # before our own descriptors exist: only stdin, stdout, stderr are ours
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print in the builder goes to stderr, not into the answers
    limit_resources(settings["memory_bytes"], settings["file_bytes"], settings["processes"])
    root = settings["root"]
    os.chdir(root)
    status = guard.take_network_away(root, keep=(0, 1, 2, out.fileno()))
    write_frame(out, {"guard": status})
    if not status["closed"] and not settings.get("unguarded_ok"):
        return  # the parent refuses, naming the reason: the builder is never imported
    sys.path.extend(settings.get("site") or [])  # the builders' requirements (installed by the action)
    func, loaded = load_timed(root, settings, guard)
    inp = sys.stdin.buffer
    # deliberately a copy of needle_action.core.pipes' framing (serve): this file runs as `python -I -c`
    # and may import nothing of needle's; tests/unit/test_worker_framing.py holds the two together
    while True:
        header = inp.read(HEADER.size)
        if len(header) < HEADER.size:
            return
        calls = json.loads(inp.read(HEADER.unpack(header)[0]))["calls"]
        for kwargs in calls:
            if func is None:
                write_frame(out, {"error": loaded, "seconds": 0.0, "refused": 0})
            else:
                write_frame(out, call_one(func, kwargs, root, settings["seconds"], guard))


def load_timed(
    root: str, settings: dict[str, Any], guard: ModuleType
) -> tuple[Callable[..., Any] | None, dict[str, Any] | None]:
    """(the builder function, None), or (None, the error of its import), under the call's timer."""
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, settings["seconds"])
    try:
        return load_builder(root, settings["file"], settings["function"]), None
    except BaseException as exc:  # noqa: BLE001 - the import of the user's module failed: report it
        kind = (
            "timeout"
            if isinstance(exc, BuildTimeout)
            else "memory"
            if isinstance(exc, MemoryError)
            else "import"
        )
        return None, describe(exc, root, kind, guard)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def write_frame(out: Any, result: Any) -> None:
    """RESULT as one answer frame, flushed."""
    answer = encode(result)
    out.write(HEADER.pack(len(answer)) + answer)
    out.flush()


def encode(result: Any) -> bytes:
    """RESULT as one answer frame's bytes (an error in its place when it cannot be encoded)."""
    try:
        return json.dumps(result, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (MemoryError, ValueError, RecursionError) as exc:
        failed = {
            "error": {"kind": "return", "type": "", "message": f"the answer could not be encoded: {exc}"}
        }
        return json.dumps(failed).encode("utf-8")


if __name__ == "__main__":  # pragma: no cover - the worker process
    serve(json.loads(sys.argv[1]), sys.argv[2])
