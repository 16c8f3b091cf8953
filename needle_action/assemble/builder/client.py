"""Prompts built in code: ``builder = "app/prompts.py:build_support"`` called like the app calls it.

The builder gets the fixture's variables as keyword arguments and returns a request body (Anthropic
Messages or OpenAI chat) or a messages list; :func:`render_built` turns that into the
:class:`~needle_action.request.prompt.RenderedPrompt` every later stage measures. Recall calls it
once per trial input with ``context_var`` / ``question_var`` replaced, so the team's real code
places the haystack.

The builder is code from the pull request, so it never runs in this process: a long-lived worker
(:mod:`~needle_action.assemble.builder.worker`, started by
:mod:`~needle_action.assemble.builder.sandbox`: empty environment, unprivileged user under root, a
copy of the repository, no network: :mod:`~needle_action.assemble.builder.guard`) answers batches
of calls over pipes, as JSON only; it first says what its guard achieved, and without one it runs
no builder unless the policy's ``[files] builders_unguarded`` allows it. One request frame
carries a batch (at most :data:`MAX_BATCH` calls, :data:`BATCH_BYTES` of arguments); the worker
answers each call in a frame of its own as soon as it is built, so the limits stay those of one
call however large the batch: a time limit per call (:data:`BUILD_SECONDS`, the worker's timer, and
the parent's deadline for the next answer) and an address-space cap (:data:`MEMORY_BYTES`) that
only one call's result at a time has to fit in. Recall sends a look's trial inputs ahead in one
batch (:func:`prefetch`), and calls from several threads (prompts and sides built concurrently)
are gathered into one batch while the previous batch runs; identical inputs are answered from a
cache, so the builds that follow cost no round trip. Everything the builder does wrong is a
:class:`BuilderError` in the user's own file and line, never a traceback of ours: a call that
fails because the network was refused says so at the line that made it (:data:`NO_NETWORK`). The
worker times each call; :func:`timing_report` gives each builder's mean time per call, and a
warning past :data:`SLOW_CALL_SECONDS`.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import dataclasses
import datetime as dt
import hashlib
import json
import math
import re
import signal
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from needle_action.assemble.builder import sandbox
from needle_action.config.model import Config, PromptConfig
from needle_action.core.dataformats import DataError, parse_json
from needle_action.core.errors import ConfigError, NeedleError, TemplateError
from needle_action.core.pipes import WorkerGone, close_every, receive, send, widen_pipe
from needle_action.request.contextparts import ANCHORS_KEY, anchors_of
from needle_action.request.prompt import RenderedPrompt

BUILD_SECONDS = 10.0
GRACE_SECONDS = 3.0
STARTUP_SECONDS = 30.0
MEMORY_BYTES = 2 * 1024**3
FILE_BYTES = 64 * 1024**2
PROCESSES = 64  # as the unprivileged user only: a fork bomb stops here
MAX_BATCH = 64
BATCH_BYTES = 16 * 1024**2  # keyword arguments per request frame (a batch ends at the first past it)
MAX_ANSWER_BYTES = 256 * 1024**2  # one call's answer
CACHE_ENTRIES = 2048
CACHE_BYTES = 256 * 1024**2  # of the calls' text: a trial's body is about as large as its inputs
SLOW_CALL_SECONDS = 0.2  # a builder's mean time per call past which the run warns
NO_NETWORK = (
    "builders run without network access: build the request from the fixture, not from a live service"
)


class BuilderError(TemplateError):
    """A prompt builder raised, returned something that is not a request, or ran out of time or
    memory: the user's error, at the user's file and line (exit 2)."""

    title = "needle builder error"


@dataclasses.dataclass(frozen=True)
class BuilderSpec:
    """``"app/prompts.py:build_support"`` split: the file (relative to the config root) and the function."""

    file: str
    function: str

    @classmethod
    def parse(cls, text: str) -> BuilderSpec:
        path, _, func = text.rpartition(":")
        return cls(path, func)

    def __str__(self) -> str:
        return f"{self.file}:{self.function}"


# --------------------------------------------------------------------------- JSON in, JSON out


def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.date | dt.time):  # TOML fixtures carry dates; builders get ISO strings
        return value.isoformat()
    raise TypeError(f"a {type(value).__name__} cannot be passed to a builder (JSON data only)")


def canonical(value: Any) -> str:
    """VALUE as canonical JSON text (sorted keys): the identity of a builder call."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_jsonable)


def call_key(prompt_name: str, kwargs: dict[str, Any]) -> str:
    """The digest naming one builder call of PROMPT_NAME (captured requests are filed under it)."""
    return hashlib.sha256(canonical({"prompt": prompt_name, "kwargs": kwargs}).encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- time spent in builders


@dataclasses.dataclass
class BuilderTiming:
    """One builder's own time, as its worker measured each call (calls answered from the cache
    cost nothing and are not counted), and the network calls refused during them."""

    builder: str
    calls: int = 0
    seconds: float = 0.0
    refused: int = 0

    def add(self, answer: dict[str, Any]) -> None:
        """Count one answer; it crossed from the builder's process, so only plausible numbers count."""
        seconds, refused = answer.get("seconds"), answer.get("refused")
        if isinstance(seconds, int | float) and not isinstance(seconds, bool) and 0 <= seconds < math.inf:
            with _timings_lock:
                self.calls += 1
                self.seconds += seconds
        if isinstance(refused, int) and not isinstance(refused, bool) and refused > 0:
            with _timings_lock:
                self.refused += refused

    @property
    def per_call(self) -> float:
        """Mean seconds per call."""
        return self.seconds / self.calls if self.calls else 0.0


_timings: dict[str, BuilderTiming] = {}
_timings_lock = threading.Lock()


def _timing_of(spec: BuilderSpec) -> BuilderTiming:
    """The record of SPEC's time, shared by every worker of it (base and head sides, restarts)."""
    with _timings_lock:
        return _timings.setdefault(str(spec), BuilderTiming(str(spec)))


def timings() -> list[BuilderTiming]:
    """Each builder that answered calls in this process, with its calls and own time (copies)."""
    with _timings_lock:
        return [dataclasses.replace(t) for t in _timings.values() if t.calls]


def _ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:.1f} ms" if ms < 10 else f"{ms:,.0f} ms"


def timing_report() -> tuple[list[str], list[str]]:
    """(a line per builder: its calls and mean time per call; a warning per builder slower than
    SLOW_CALL_SECONDS per call, with the likely cause)."""
    lines, warnings = [], []
    for t in timings():
        line = (
            f"builder {t.builder}: {t.calls:,} call{'s' if t.calls != 1 else ''}, {_ms(t.per_call)} per call"
        )
        if t.refused:
            line += f", {t.refused:,} network call{'s' if t.refused != 1 else ''} refused (builders have no network)"
        lines.append(line)
        if t.per_call > SLOW_CALL_SECONDS:
            warnings.append(
                f"the builder {t.builder} takes {_ms(t.per_call)} per call (over {_ms(SLOW_CALL_SECONDS)}): "
                "likely a client created or a service called on every build; create clients once, at "
                "import, and build the request from the fixture (builders have no network)"
            )
    return lines, warnings


# --------------------------------------------------------------------------- the client


class _Client:
    """One builder's worker and the batches sent to it."""

    def __init__(
        self,
        spec: BuilderSpec,
        home: Path,
        chosen: sandbox.BuilderPython,
        who: sandbox.RunAs,
        unguarded_ok: bool = False,
    ) -> None:
        self.spec, self.home, self.chosen, self.who = spec, home, chosen, who
        self.python = chosen.path
        self.unguarded_ok = unguarded_ok  # the policy's [files] builders_unguarded
        self.refusal: NeedleError | None = None  # no guard here and no policy allowing that: never starts
        self.timing = _timing_of(spec)
        self.proc: Any = None
        self.first = True
        self.pending: list[tuple[str, Future[dict[str, Any]]]] = []
        self.cond = threading.Condition()
        self.cache: OrderedDict[str, Any] = OrderedDict()
        self.cache_bytes = 0
        self.closed = False
        self.starts = 0  # worker processes started (one per run unless one died)
        self.batches = 0
        self.largest = 0  # calls in the largest request frame
        self.calls = 0
        self.seconds = 0.0  # wall time of the batches: the overhead builders add, measured
        self.thread = threading.Thread(
            target=self._dispatch, name=f"needle-builder-{spec.function}", daemon=True
        )
        self.thread.start()

    # ---- the callers' side
    def build_many(self, calls: list[str]) -> list[dict[str, Any]]:
        """The worker's result per call (each canonical JSON kwargs): ``{"ok": value}`` or ``{"error": ...}``."""
        futures: list[Future[dict[str, Any]] | None] = []
        out: list[dict[str, Any] | None] = []
        with self.cond:
            for text in calls:
                hit = self.cache.get(text)
                if hit is not None:
                    self.cache.move_to_end(text)
                    out.append({"ok": copy.deepcopy(hit)})
                    futures.append(None)
                else:
                    fut: Future[dict[str, Any]] = Future()
                    self.pending.append((text, fut))
                    out.append(None)
                    futures.append(fut)
            self.cond.notify()
        return [fut.result() if fut is not None else got or {} for got, fut in zip(out, futures, strict=True)]

    # ---- the dispatcher thread
    def _dispatch(self) -> None:
        while True:
            with self.cond:
                while not self.pending and not self.closed:
                    self.cond.wait()
                if self.closed:
                    return
                batch = self._take_batch()
            started = time.perf_counter()
            try:
                results = self._send([text for text, _ in batch])
            except BaseException as exc:  # noqa: BLE001 - handed to every caller of the batch
                for _, fut in batch:
                    fut.set_exception(exc)
                continue
            finally:
                self.seconds += time.perf_counter() - started
                self.calls += len(batch)
            with self.cond:
                for (text, _), result in zip(batch, results, strict=True):
                    if "ok" in result:
                        self._remember(text, result["ok"])
            for (_, fut), result in zip(batch, results, strict=True):
                fut.set_result(result)

    def _take_batch(self) -> list[tuple[str, Future[dict[str, Any]]]]:
        """The next request frame's calls: up to MAX_BATCH of them and BATCH_BYTES of arguments."""
        size, n = 0, 0
        for text, _ in self.pending[:MAX_BATCH]:
            if n and size + len(text) > BATCH_BYTES:
                break
            size, n = size + len(text), n + 1
        batch, self.pending = self.pending[:n], self.pending[n:]
        return batch

    def _remember(self, text: str, value: Any) -> None:
        if text in self.cache:
            return
        self.cache[text] = copy.deepcopy(value)
        self.cache_bytes += len(text)
        while len(self.cache) > CACHE_ENTRIES or self.cache_bytes > CACHE_BYTES:
            old, _ = self.cache.popitem(last=False)
            self.cache_bytes -= len(old)

    def _start(self) -> None:
        settings = json.dumps(
            {
                "root": str(self.home),
                "file": self.spec.file,
                "function": self.spec.function,
                "seconds": BUILD_SECONDS,
                "memory_bytes": MEMORY_BYTES,
                "file_bytes": FILE_BYTES,
                "processes": PROCESSES if self.who.drops else None,
                "site": sandbox.site_folders(),
                "unguarded_ok": self.unguarded_ok,
            }
        )
        if self.refusal is not None:
            raise self.refusal
        try:
            self.proc = sandbox.start_worker(self.python, settings, self.home, self.who)
        except OSError as exc:
            raise ConfigError(
                f"cannot start the builder worker ({self.python}): {exc.strerror or exc}",
                hint=f"set ${sandbox.PYTHON_ENV} to a Python that user {self.who.name or 'this user'} can run",
            ) from None
        self.first = True
        self.starts += 1
        widen_pipe(self.proc.stdin)
        widen_pipe(self.proc.stdout)
        self._greeted()

    def _greeted(self) -> None:
        """Read the worker's first frame, what its guard achieved; refuse to go on without a guard
        unless the policy allows builders without one (then say so, once)."""
        try:
            raw = receive(self.proc, time.monotonic() + STARTUP_SECONDS, max_bytes=1 << 20)
            guard = parse_json(raw.decode("utf-8"))["guard"]
            closed, reason = bool(guard["closed"]), str(guard.get("reason") or "")
        except (OSError, WorkerGone, DataError, UnicodeDecodeError, KeyError, TypeError) as exc:
            error = self._gone(exc)
            self.kill()
            raise error from None
        if closed:
            return
        if not self.unguarded_ok:
            self.kill()
            self.refusal = unguarded_error(self.spec, reason)
            raise self.refusal
        _note(
            f"builders run with this machine's network: needle cannot take it away here ({reason}), "
            "and [files] builders_unguarded = true allows that"
        )

    def _send(self, calls: list[str]) -> list[dict[str, Any]]:
        """One request frame with CALLS; the worker answers each in a frame of its own, and the
        deadline is per answer (one call's limit, whatever the batch's length)."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        payload = ('{"calls":[' + ",".join(calls) + "]}").encode("utf-8")
        self.batches += 1
        self.largest = max(self.largest, len(calls))
        results: list[dict[str, Any]] = []
        try:
            send(self.proc, payload)
            for _ in calls:
                timeout = BUILD_SECONDS + GRACE_SECONDS + (STARTUP_SECONDS if self.first else 0.0)
                raw = receive(self.proc, time.monotonic() + timeout, max_bytes=MAX_ANSWER_BYTES)
                self.first = False
                result = parse_json(raw.decode("utf-8"))
                if not isinstance(result, dict) or not ("ok" in result or "error" in result):
                    raise WorkerGone("bad answer")
                self.timing.add(result)
                results.append({k: result[k] for k in ("ok", "error") if k in result})
        except (OSError, WorkerGone, DataError, UnicodeDecodeError) as exc:
            error = self._gone(exc)
            self.kill()
            raise error from None
        return results

    def _gone(self, exc: BaseException) -> BuilderError:
        """Why the worker stopped answering (read before it is killed: its exit status tells)."""
        if self.proc is not None and str(exc) == "exited":
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(1)  # its pipe closed: its status follows at once
        if self.proc is not None and self.proc.poll() == -signal.SIGSYS:
            return BuilderError(
                f"the builder {self.spec} made a system call through another ABI (32-bit or x32 code), "
                "which the builder's sandbox does not allow, and was stopped",
                file=self.spec.file,
                hint=f"builders run as 64-bit code; {NO_NETWORK}",
            )
        if str(exc) == "timeout":
            return BuilderError(
                f"the builder {self.spec} did not answer within its limit of {BUILD_SECONDS:g} s per "
                "call and was stopped",
                file=self.spec.file,
                hint="a builder assembles a request in milliseconds: look for a loop that never ends, "
                "or a call that waits on the network (builders have none)",
            )
        return BuilderError(
            f"the builder {self.spec}'s worker exited without answering (it ran out of memory, "
            f"crashed, or sent something that is not JSON)",
            file=self.spec.file,
            hint=f"a builder may use {MEMORY_BYTES // 2**20} MB and must return JSON data",
        )

    def kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        self.kill()


_clients: dict[tuple[Any, ...], _Client] = {}
_clients_lock = threading.Lock()
_notices: set[str] = set()
_notices_lock = threading.Lock()


def _note(notice: str) -> None:
    """NOTICE on stderr, once per process."""
    with _notices_lock:
        if notice in _notices:
            return
        _notices.add(notice)
    print(f"note: {notice}", file=sys.stderr)


def unguarded_error(spec: BuilderSpec, reason: str) -> ConfigError:
    """Builders refused: this machine has no guard to take their network away, and the policy does
    not allow them without one."""
    return ConfigError(
        f"the builder {spec} did not run: builders run without network access, and needle cannot "
        f"take the network away on this machine ({reason})",
        hint="run builders on Linux (the action's container is), or let them run with the network "
        "where no guard exists: `[files] builders_unguarded = true` (in the action only the base "
        "branch's needle.toml counts; see docs/security.md)",
    )


def client_for(config: Config, prompt: PromptConfig) -> _Client:
    """The worker of PROMPT's builder (one per builder and repository copy, reused by every call)."""
    assert prompt.builder is not None
    spec = BuilderSpec.parse(prompt.builder)
    who = sandbox.run_as()
    # how the Python was chosen is said only if a builder's import fails (builder_error)
    chosen = sandbox.choose_python(who, config.root, config.files.builder_python)
    home = sandbox.repository_copy(config.workspace, who)
    if who.drops:
        sandbox.shield_git(config.root.resolve())
    unguarded_ok = config.files.builders_unguarded
    key = (str(home), str(spec), chosen.path, who, unguarded_ok)
    with _clients_lock:
        if key not in _clients:
            _clients[key] = _Client(spec, home, chosen, who, unguarded_ok)
        return _clients[key]


# --------------------------------------------------------------------------- errors, the user's


def _frames_text(frames: list[Any]) -> str:
    lines = []
    for frame in frames[-8:]:
        try:
            file, line, func, code = frame
        except (TypeError, ValueError):
            continue
        lines.append(f"  {file}:{line} in {func}" + (f": {code}" if code else ""))
    return "\n".join(lines)


def _call_mismatch(error: dict[str, Any]) -> bool:
    """Whether the builder raised a TypeError about its arguments before running a line of its own."""
    text = str(error.get("message") or "")
    return error.get("type") == "TypeError" and ("keyword argument" in text or "positional argument" in text)


def _line_of(where: Any) -> tuple[str | None, int | None]:
    """(file, line) of a refused network call as the worker reported it (untrusted: checked)."""
    if not isinstance(where, dict):
        return None, None
    file, line = where.get("file"), where.get("line")
    return (file if isinstance(file, str) else None), (line if isinstance(line, int) else None)


def network_error(spec: BuilderSpec, error: dict[str, Any]) -> BuilderError:
    """A builder that failed because a network call was refused: at the line that made the call."""
    tried = error.get("network")
    what = tried.get("what") if isinstance(tried, dict) else None
    file, line = _line_of(tried)
    message = f"the builder {spec} tried to {what or 'use the network'}: {NO_NETWORK}"
    if error.get("type") != "NetworkRefused":  # an HTTP client's own error around the refusal
        message += f"\n  it raised {error.get('type')}: {error.get('message')}"
    trace = _frames_text(error.get("frames") or [])
    if trace:
        message += "\n" + trace
    return BuilderError(
        message,
        file=file or spec.file,
        line=line,
        hint="a builder returns the request the app would send: data the app fetches from a service "
        "at run time belongs in the fixture (its keys are the builder's keyword arguments), and a "
        "client the app creates is not needed to build the request",
    )


_NO_MODULE = re.compile(r"No module named '([^']+)'")


def missing_module_error(
    spec: BuilderSpec, error: dict[str, Any], chosen: sandbox.BuilderPython | None
) -> BuilderError | None:
    """A builder whose import of a package failed (ModuleNotFoundError): at the import's line, with
    the one message about the builders' Python (which one, why, what to do)."""
    m = _NO_MODULE.search(str(error.get("message") or ""))
    if error.get("type") != "ModuleNotFoundError" or m is None:
        return None
    frames = error.get("frames") or []
    file, line = spec.file, None
    if frames and isinstance(frames[-1], list) and len(frames[-1]) == 4:
        file, line = frames[-1][0], frames[-1][1]
    python = chosen.why if chosen is not None else "the builders' Python"
    return BuilderError(
        f"the builder {spec} imports `{m.group(1)}`, which the builder's Python cannot import: "
        f"builders run with {python}",
        file=str(file),
        line=line if isinstance(line, int) else None,
        hint=chosen.advice if chosen is not None else "install the package for the builders' Python",
    )


def builder_error(
    spec: BuilderSpec, error: dict[str, Any], chosen: sandbox.BuilderPython | None = None
) -> BuilderError:
    """The worker's report of a failed call as the user's error, at the innermost line of theirs."""
    kind = error.get("kind")
    if kind == "network":
        return network_error(spec, error)
    missing = missing_module_error(spec, error, chosen)
    if missing is not None:
        return missing
    frames = error.get("frames") or []
    what = f"{error.get('type')}: {error.get('message')}".strip(": ")
    if kind == "timeout":
        message = f"the builder {spec} took longer than its limit of {BUILD_SECONDS:g} s on one call and was stopped"
        hint = "a builder assembles a request in milliseconds: look for a loop that never ends"
    elif kind == "memory":
        message = (
            f"the builder {spec} needed more than the {MEMORY_BYTES // 2**20} MB of memory a builder may use"
        )
        hint = "builders assemble requests; they should not need gigabytes"
    elif kind == "import":
        message = f"importing the builder {spec} failed: {what}"
        hint = 'check the path and function name in `builder = "file.py:function"`'
    elif kind == "return":
        message = f"the builder {spec} returned a value that is not JSON: {error.get('message')}"
        hint = "return a request body (a dict) or a messages list of plain data: str, numbers, lists, dicts"
    elif not _frames_text(frames) and _call_mismatch(error):
        message = f"the builder {spec} cannot be called with the fixture's variables: {error.get('message')}"
        hint = (
            "needle passes every key of the fixture as a keyword argument: accept them all (**_ takes "
            "the ones the builder does not use), or give the prompt fixtures holding only its arguments"
        )
    else:
        message = f"the builder {spec} raised {what}"
        hint = "an error in the builder's own code: the lines above are its traceback, innermost call last"
    trace = _frames_text(frames)
    if trace:
        message += "\n" + trace
    tried = error.get("network_tried")
    if isinstance(tried, dict):
        at = ":".join(str(x) for x in _line_of(tried) if x is not None)
        hint += f" (it also tried to {tried.get('what')}{' at ' + at if at else ''}, refused: {NO_NETWORK})"
    file, line = spec.file, None
    if frames and isinstance(frames[-1], list) and len(frames[-1]) == 4:
        file, line = frames[-1][0], frames[-1][1]
    return BuilderError(message, file=file, line=line if isinstance(line, int) else None, hint=hint)


def call_builder(config: Config, prompt: PromptConfig, kwargs: dict[str, Any]) -> Any:
    """PROMPT's builder called with KWARGS (in its worker): the JSON value it returned."""
    spec = BuilderSpec.parse(prompt.builder or "")
    try:
        text = canonical(kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"the builder {spec} cannot be called with these variables: {exc}") from None
    client = client_for(config, prompt)
    (result,) = client.build_many([text])
    if "ok" not in result:
        raise builder_error(spec, result.get("error") or {}, client.chosen)
    return result["ok"]


def prefetch(config: Config, prompt: PromptConfig, calls: list[dict[str, Any]]) -> int:
    """Send PROMPT's builder CALLS (keyword arguments each) ahead, in as few request frames as the
    batch limits allow, so the builds that follow are answered from the cache without a round trip.

    Returns how many calls went to the worker (those cached already do not). Nothing is raised: a
    call that fails is not cached, and the build that needs it calls again and reports the error at
    the user's line. Replaying captured requests, or with builders off, nothing is sent."""
    if _replay is not None or prompt.builder is None or not config.files.builders:
        return 0
    texts = []
    for kwargs in calls:
        try:
            texts.append(canonical(kwargs))
        except (TypeError, ValueError):
            continue  # the build itself reports it
    try:
        client = client_for(config, prompt)
        with client.cond:
            fresh = list(dict.fromkeys(t for t in texts if t not in client.cache))
        client.build_many(fresh)
    except NeedleError:
        return 0
    return len(fresh)


# --------------------------------------------------------------------------- prompts built in code

# captured requests (``needle check --requests DIR``): call key -> body; no code runs while set
_replay: dict[str, Any] | None = None
# ``needle capture``: called with (prompt name, call key, kwargs, body) after every build
_recorder: Callable[[str, str, dict[str, Any], Any], None] | None = None


@contextmanager
def replaying(bodies: dict[str, Any]) -> Iterator[None]:
    """Within the block, builder prompts are answered from BODIES (call key -> body) only."""
    global _replay
    before, _replay = _replay, bodies
    try:
        yield
    finally:
        _replay = before


@contextmanager
def recording(record: Callable[[str, str, dict[str, Any], Any], None]) -> Iterator[None]:
    """Within the block, every builder call is also handed to RECORD(prompt, key, kwargs, body)."""
    global _recorder
    before, _recorder = _recorder, record
    try:
        yield
    finally:
        _recorder = before


def _enabled(config: Config, prompt: PromptConfig) -> None:
    if not config.files.builders:
        raise ConfigError(
            f"prompt {prompt.name!r} is built by code ({prompt.builder}), and builders are off",
            file=config.path,
            line=config.line_of(f"prompts.{prompt.name}.builder") or config.line_of(f"prompts.{prompt.name}"),
            hint="builders run the repository's code: enable them with `[files] builders = true` "
            "(in the action only the base branch's value counts; see docs/security.md)",
        )


def built_body(config: Config, prompt: PromptConfig, kwargs: dict[str, Any]) -> Any:
    """What PROMPT's builder returns for KWARGS: from the captured requests when replaying, else
    from its worker (recorded when capturing)."""
    key = call_key(prompt.name, kwargs)
    if _replay is not None:
        if key not in _replay:
            raise ConfigError(
                f"the captured requests hold no request of {prompt.name!r} for these inputs",
                file=config.path,
                line=config.line_of(f"prompts.{prompt.name}"),
                hint="run `needle capture` again with this config and seed (fixtures or recall settings changed)",
            )
        return copy.deepcopy(_replay[key])
    _enabled(config, prompt)
    body = call_builder(config, prompt, kwargs)
    if _recorder is not None:
        _recorder(prompt.name, key, kwargs, body)
    return body


def render_built(
    config: Config, prompt: PromptConfig, variables: dict[str, Any], fixture: str | None
) -> RenderedPrompt:
    """PROMPT's builder called with VARIABLES, as the request every stage measures."""
    from needle_action.assemble.recorded import as_rendered  # recorded imports fixtures: keep this light

    spec = BuilderSpec.parse(prompt.builder or "")
    body = built_body(config, prompt, variables)
    rendered = as_rendered(
        body,
        source=prompt.builder or "",
        fixture=fixture,
        file=spec.file,
        error_cls=BuilderError,
        what=f"the value the builder {spec} returned",
    )
    var = prompt.context_var
    anchors = anchors_of(variables[var]) if var and var in variables else None
    if anchors:  # wherever the builder put the context (a tool_result, documents), it counts as context
        rendered = dataclasses.replace(rendered, meta={**rendered.meta, ANCHORS_KEY: anchors})
    return rendered


@atexit.register
def close_all() -> None:
    """Stop every builder worker (at exit, and between tests)."""
    close_every(_clients, _clients_lock)


def batches_sent() -> int:
    """How many batches every builder worker has answered (the overhead benchmark reads it)."""
    with _clients_lock:
        return sum(c.batches for c in _clients.values())


def workers_started() -> int:
    """How many builder worker processes this process has started (a run reuses one per builder)."""
    with _clients_lock:
        return sum(c.starts for c in _clients.values())


def usage() -> tuple[int, int, float]:
    """(calls sent to builder workers, batches, seconds spent waiting for them) in this process."""
    with _clients_lock:
        clients = list(_clients.values())
    return sum(c.calls for c in clients), sum(c.batches for c in clients), sum(c.seconds for c in clients)


__all__ = [
    "BUILD_SECONDS",
    "MEMORY_BYTES",
    "NO_NETWORK",
    "SLOW_CALL_SECONDS",
    "BuilderError",
    "BuilderSpec",
    "BuilderTiming",
    "batches_sent",
    "builder_error",
    "built_body",
    "call_builder",
    "call_key",
    "canonical",
    "client_for",
    "close_all",
    "prefetch",
    "recording",
    "render_built",
    "replaying",
    "timing_report",
    "timings",
    "unguarded_error",
    "usage",
    "workers_started",
]
