"""A loopback fake of the Anthropic Messages API, faithful to what the anthropic 2.x SDK speaks.

Real HTTP on 127.0.0.1 (stdlib ``ThreadingHTTPServer`` in a background thread), so the real SDK
client, its headers, its JSON parsing and its error classes are all exercised. We cannot reach
api.anthropic.com from tests, so this is the one thing we fake; everything it does is modelled on
the SDK source (``anthropic/_client.py``, ``_exceptions.py``, ``types/message.py``):

* ``POST /v1/messages`` -> ``{"id", "type": "message", "role": "assistant", "model",
  "content": [{"type": "text", "text"}], "stop_reason", "stop_sequence", "usage": {...}}``
* ``POST /v1/messages/count_tokens`` -> ``{"input_tokens": n}``: a documented, deterministic rule
  (``tests/fakes/anthropic_request.py``): tiktoken ``o200k_base`` over every tool's JSON, the
  system and every message's blocks, plus a fixed overhead when there are tools and each image's
  price from its pixels (the vision guide's rule). An approximation of Claude's tokenizer that counts everything a request carries.
* content blocks ``text``, ``tool_use``, ``tool_result``, ``document``, ``image``; an unknown
  block type, a bad ``tools`` list or a ``tool_result`` without its ``tool_use`` in the message
  before it -> 400, on both endpoints, like the API.
* a responder may answer with a string (one text block) or a list of content blocks (e.g. a
  ``tool_use``: ``stop_reason`` is then ``tool_use``).
* errors as ``{"type": "error", "error": {"type", "message"}, "request_id"}`` with the status
  codes the SDK maps to its exception classes; a ``request-id`` header on every response.
* auth: ``Authorization: Bearer KEY`` (what the SDK sends) or ``x-api-key: KEY``; 401 otherwise.
* ``anthropic-version`` header required (400 without it), like the real API.
* like the 2026-10-21 API, Claude 5.x models reject the sampling parameters ``temperature``,
  ``top_p`` and ``top_k`` with 400 ``invalid_request_error``: a provider that sends them fails.
* unknown model -> 404 ``not_found_error``; a ``system`` role inside ``messages`` -> 400; unknown
  top-level fields -> 400; prompt + max_tokens beyond the context window -> 400.

Faults (``faults=``) inject 429 (with ``retry-after``), 529 ``overloaded_error``, 500
``api_error``, ``timeout`` (hold the request, then drop the connection without an answer),
``disconnect`` (drop it at once) and ``malformed`` (200 with a body that is not JSON). Whether a
request gets a fault is a pure function of (seed, sha256 of the request body, how many times that
same body has arrived): concurrent scheduling does not change which attempts fail, so runs are
reproducible, and ``max_consecutive`` bounds how many times in a row one request can fail (real
outages are transient; this keeps "every call eventually succeeds" a property rather than luck).

Usage::

    with FakeAnthropic(responder=lambda req: "42", faults={"rate": 0.3}) as fake:
        client = AsyncAnthropic(base_url=fake.base_url, api_key=fake.api_key, max_retries=0)
        ...
        fake.requests[-1]["json"], fake.calls["429"]

Fixtures ``fake_anthropic`` and ``anthropic_env`` live at the bottom; tests/conftest.py lists this
module in ``pytest_plugins``, so any test can ask for them by name, without an import.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import re
import socket
import threading
import time
import typing
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

import pytest

from tests.fakes.anthropic_features import Batches, CacheError, PromptCache, TokenBucket, blocks_of_request
from tests.fakes.anthropic_request import BodyError, count_request, request_parts, validate_blocks
from tests.fakes.loopback import Loopback

FAULT_KINDS = ("429", "529", "500", "timeout", "disconnect", "malformed")
DEFAULT_KINDS = ("429", "529", "500", "timeout", "malformed")
DEFAULT_TEXT = "I could not find that in the context."
DEFAULT_API_KEY = "sk-ant-test-fake-0000"
# the real API describes the account's request bucket on every answer; by default the fake is a large
# account no test reaches (0: no rate-limit headers at all, like a proxy that strips them)
DEFAULT_RPM = 50_000

# Fields the Messages API accepts on POST /v1/messages (the SDK's create() body, plus the
# sampling parameters older models accept and Claude 5.x rejects).
MESSAGES_FIELDS = {
    "max_tokens",
    "messages",
    "model",
    "cache_control",
    "container",
    "diagnostics",
    "inference_geo",
    "metadata",
    "output_config",
    "service_tier",
    "speed",
    "stop_sequences",
    "stream",
    "system",
    "thinking",
    "tool_choice",
    "tools",
    "temperature",
    "top_p",
    "top_k",
}
COUNT_FIELDS = {
    "messages",
    "model",
    "cache_control",
    "output_config",
    "system",
    "thinking",
    "tool_choice",
    "tools",
    "speed",
}
SAMPLING_PARAMS = ("temperature", "top_p", "top_k")
# claude-sonnet-5, claude-opus-5-5, claude-haiku-5-5, ...: the generation that rejects sampling params
_CLAUDE5 = re.compile(r"^claude-[a-z]+-5(?:-\d+)?$")


def known_models() -> set[str]:
    """Model ids the installed SDK knows (its ``Model`` literal), i.e. what the API would serve."""
    from anthropic.types.model import Model

    ids: set[str] = set()
    for arg in typing.get_args(Model):
        ids.update(a for a in typing.get_args(arg) if isinstance(a, str))
    return ids


@dataclass
class Faults:
    """Fault injection settings. ``rate`` is the chance that one attempt fails."""

    rate: float = 0.0
    kinds: tuple[str, ...] = DEFAULT_KINDS
    retry_after_s: float = 0.05  # the real API sends whole seconds; tests want speed
    hold_s: float = 1.0  # how long a "timeout" fault holds the request before dropping it
    max_consecutive: int = 3  # after this many faults in a row for one request body, answer it

    def __post_init__(self) -> None:
        bad = [k for k in self.kinds if k not in FAULT_KINDS]
        if bad:
            raise ValueError(f"unknown fault kinds {bad}; choose from {FAULT_KINDS}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError("fault rate must be between 0 and 1")
        self.kinds = tuple(str(k) for k in self.kinds)

    @classmethod
    def coerce(cls, value: Faults | Mapping | float | None) -> Faults:
        if value is None:
            return cls()
        if isinstance(value, Faults):
            return value
        if isinstance(value, int | float):
            return cls(rate=float(value))
        data = dict(value)
        if "kinds" in data:
            data["kinds"] = tuple(str(k) for k in data["kinds"])
        return cls(**data)


@dataclass
class _State:
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: list[dict] = field(default_factory=list)
    calls: Counter = field(default_factory=Counter)
    seen: Counter = field(default_factory=Counter)  # body hash -> attempts so far
    streak: Counter = field(default_factory=Counter)  # body hash -> consecutive faults
    serial: int = 0


class ApiError(Exception):
    def __init__(self, status: int, kind: str, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.kind, self.message, self.headers = status, kind, message, headers or {}


class FakeAnthropic:
    """The fake server. Start with ``with FakeAnthropic(...) as fake`` or ``.start()``/``.stop()``."""

    name = "anthropic"
    handler: type[BaseHTTPRequestHandler] | None = None  # None: the Messages API's routes (_Handler)

    def __init__(
        self,
        responder: Callable[[dict], str | list[dict]] | None = None,
        *,
        latency_s: float = 0.0,
        faults: Faults | Mapping | float | None = None,
        seed: int = 0,
        api_key: str = DEFAULT_API_KEY,
        models: Iterable[str] | None = None,
        context_window: int = 200_000,
        cache_min_tokens: int = 1024,
        cache_ttl_s: float = 300.0,
        rate_limit_rpm: int | None = DEFAULT_RPM,
        rate_limit_burst: int | None = None,
        batch_item_s: float = 0.0,
    ) -> None:
        self.responder = responder or (lambda _req: DEFAULT_TEXT)
        self.latency_s = latency_s
        self.faults = Faults.coerce(faults)
        self.seed = seed
        self.api_key = api_key
        self.models = set(models) if models is not None else known_models()
        self.context_window = context_window
        self._state = _State()
        self._server: Loopback | None = None
        self._enc = None
        self.responder_errors: list[str] = []  # exceptions a test's responder raised
        self.peak_in_flight = 0  # the most requests the server held at once (in their latency)
        self._in_flight = 0
        self._flight_lock = threading.Lock()
        self.cache = PromptCache(min_tokens=cache_min_tokens, ttl_s=cache_ttl_s)
        self.bucket = TokenBucket(rate_limit_rpm, rate_limit_burst) if rate_limit_rpm else None
        self.batches = Batches(lambda params: self.message_for(params, batch=True), item_s=batch_item_s)

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> FakeAnthropic:
        handler = self.handler or _Handler  # a cloud's fake serves its own routes (tests/fakes/*_server.py)
        self._server = Loopback(type("Handler", (handler,), {"fake": self}), name=f"fake-{self.name}")
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def point_env(self, monkeypatch) -> FakeAnthropic:
        """Point ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY`` (via MONKEYPATCH) at this fake."""
        monkeypatch.setenv("ANTHROPIC_BASE_URL", self.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", self.api_key)
        return self

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start the fake first"
        return self._server.url

    @property
    def requests(self) -> list[dict]:
        """Every request received: ``{"path", "headers" (lower-case keys), "json"}``, in order."""
        with self._state.lock:
            return list(self._state.requests)

    @property
    def calls(self) -> Counter:
        """Counters: ``total``, per path (``messages``, ``count_tokens``), per outcome (``ok``,
        ``429``, ``529``, ``500``, ``timeout``, ``disconnect``, ``malformed``, ``400``, ``401``,
        ``404``) and ``faults`` (all injected ones)."""
        with self._state.lock:
            return Counter(self._state.calls)

    def reset(self) -> None:
        with self._state.lock:
            self._state.requests.clear()
            self._state.calls.clear()
            self._state.seen.clear()
            self._state.streak.clear()

    # ---- model-side helpers ----------------------------------------------------------------
    def encoding(self):
        """tiktoken ``o200k_base``, loaded once (offline, seeded from bpe-openai)."""
        if self._enc is None:
            import tiktoken

            from needle_action.core import environment
            from needle_action.tokens import tiktoken_cache

            if not os.environ.get("TIKTOKEN_CACHE_DIR"):
                os.environ["TIKTOKEN_CACHE_DIR"] = str(environment.tiktoken_cache_dir())
            tiktoken_cache.seed(os.environ["TIKTOKEN_CACHE_DIR"])
            self._enc = tiktoken.get_encoding("o200k_base")
        return self._enc

    def count_tokens(self, text: str) -> int:
        return len(self.encoding().encode(text, disallowed_special=()))

    def prompt_tokens(self, body: dict) -> int:
        """count_tokens' answer for BODY: the documented rule of :func:`count_request`."""
        return count_request(body, self.count_tokens)

    def message_for(self, body: dict, *, batch: bool = False) -> dict:
        """The Message answering BODY (prompt caching applied); raises ApiError like the API."""
        input_tokens = self.prompt_tokens(body)
        if input_tokens + body["max_tokens"] > self.context_window:
            raise ApiError(
                400,
                "invalid_request_error",
                f"prompt is too long: {input_tokens} tokens > {self.context_window - body['max_tokens']} maximum",
            )
        try:
            usage, keys = self.cache.lookup(body["model"], blocks_of_request(body), self.count_tokens)
        except CacheError as exc:
            raise ApiError(400, "invalid_request_error", str(exc)) from None
        try:
            reply = self.responder(body)
        except Exception as exc:  # a bug in a test's responder: record it, answer like a server bug
            with self._state.lock:
                self.responder_errors.append(repr(exc))
            raise ApiError(500, "api_error", "Internal server error (the fake's responder raised)") from None
        self.cache.commit(body["model"], keys)
        content, ids, stop_reason = self._content(reply, body["max_tokens"])
        with self._state.lock:
            self._state.calls["cache_read_tokens"] += usage.read
            self._state.calls["cache_write_tokens"] += usage.written
        return {
            "id": self._next_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": max(0, input_tokens - usage.read - usage.written),
                "output_tokens": max(1, len(ids)),
                "cache_creation_input_tokens": usage.written,
                "cache_read_input_tokens": usage.read,
                "cache_creation": {
                    "ephemeral_5m_input_tokens": usage.written,
                    "ephemeral_1h_input_tokens": 0,
                },
                "service_tier": "batch" if batch else "standard",
            },
        }

    def _content(self, reply, max_tokens: int) -> tuple[list[dict], list[int], str]:
        """(content blocks, output token ids, stop_reason) of a responder's REPLY: a string is one
        text block, cut at MAX_TOKENS as the model would be; a list of blocks is sent as it is
        (``stop_reason`` ``tool_use`` when it holds one)."""
        enc = self.encoding()
        if isinstance(reply, list):
            blocks = [dict(b) for b in reply]
            for b in blocks:
                if b.get("type") == "tool_use":
                    b.setdefault("id", self._next_id("toolu_"))
            text = "".join(b.get("text", "") or json.dumps(b.get("input", {})) for b in blocks)
            stop = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
            return blocks, enc.encode(text, disallowed_special=()), stop
        text = str(reply)
        ids = enc.encode(text, disallowed_special=())
        if len(ids) <= max_tokens:
            return [{"type": "text", "text": text}], ids, "end_turn"
        ids = ids[:max_tokens]  # cut the answer at max_tokens, as the model would be cut off
        return [{"type": "text", "text": enc.decode(ids)}], ids, "max_tokens"

    # ---- fault decision --------------------------------------------------------------------
    def _draw_fault(self, raw: bytes) -> str | None:
        f = self.faults
        digest = hashlib.sha256(raw).hexdigest()
        with self._state.lock:
            occurrence = self._state.seen[digest]
            self._state.seen[digest] += 1
            if f.rate <= 0 or not f.kinds or self._state.streak[digest] >= f.max_consecutive:
                self._state.streak[digest] = 0
                return None
            rng = random.Random(f"{self.seed}:{digest}:{occurrence}")
            if rng.random() >= f.rate:
                self._state.streak[digest] = 0
                return None
            self._state.streak[digest] += 1
            return rng.choice(f.kinds)

    def _next_id(self, prefix: str) -> str:
        with self._state.lock:
            self._state.serial += 1
            n = self._state.serial
        return prefix + hashlib.sha256(f"{self.seed}:{n}".encode()).hexdigest()[:24]

    def _count(self, *keys: str) -> None:
        with self._state.lock:
            for k in keys:
                self._state.calls[k] += 1


def request_texts(body: dict) -> list[str]:
    """Every tool's JSON, the system text, then every message's text (tests/fakes/anthropic_request.py:
    a part given as blocks reads as their concatenation, so splitting a text for cache breakpoints
    does not change it)."""
    return [text for _, text in request_parts(body)]


def _validate(fake: FakeAnthropic, body: object, *, count_only: bool) -> None:
    """Raise ApiError exactly where the real API refuses a request."""
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_request_error", "Request body must be a JSON object")
    allowed = COUNT_FIELDS if count_only else MESSAGES_FIELDS
    for key in body:
        if key not in allowed:
            raise ApiError(400, "invalid_request_error", f"{key}: Extra inputs are not permitted")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "invalid_request_error", "model: Field required")
    if not count_only:
        _validate_generation(body)
    _validate_messages(body.get("messages"))
    try:
        validate_blocks(body)
    except BodyError as exc:
        raise ApiError(400, "invalid_request_error", str(exc)) from None
    if model not in fake.models:
        raise ApiError(404, "not_found_error", f"model: {model}")
    if _CLAUDE5.match(model):
        for p in SAMPLING_PARAMS:
            if p in body:
                raise ApiError(
                    400,
                    "invalid_request_error",
                    f"`{p}` is not supported for this model. Remove it from the request.",
                )


def _validate_generation(body: dict) -> None:
    """What only POST /v1/messages checks: max_tokens, and no streaming from this fake."""
    mt = body.get("max_tokens")
    if isinstance(mt, bool) or not isinstance(mt, int):
        raise ApiError(400, "invalid_request_error", "max_tokens: Field required")
    if mt < 1:
        raise ApiError(400, "invalid_request_error", "max_tokens: Input should be greater than or equal to 1")
    if body.get("stream"):
        raise ApiError(400, "invalid_request_error", "stream: this fake serves non-streaming requests only")


def _validate_messages(messages: object) -> None:
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "invalid_request_error", "messages: at least one message is required")
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role == "system":
            raise ApiError(
                400,
                "invalid_request_error",
                f'messages.{i}.role: Unexpected role "system". The Messages API accepts a top-level '
                '`system` parameter, not "system" as an input message role.',
            )
        if role not in ("user", "assistant"):
            raise ApiError(
                400, "invalid_request_error", f"messages.{i}.role: Input should be 'user' or 'assistant'"
            )
        content = m.get("content")
        if not isinstance(content, str | list):
            raise ApiError(400, "invalid_request_error", f"messages.{i}.content: Field required")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real API; every answer has Content-Length
    fake: FakeAnthropic  # set on the subclass built by FakeAnthropic.start()

    def setup(self):
        super().setup()
        # headers and body go out in two writes; without NODELAY, Nagle + delayed ACK add ~40 ms
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format, *args):  # noqa: A002 - keep test output quiet
        return

    # ---- plumbing ---------------------------------------------------------------------------
    content_type = "application/json"
    rate_limit_headers = True  # the clouds answer without Anthropic's anthropic-ratelimit-* headers

    def _service_headers(self) -> dict[str, str]:
        """The headers this service adds to every answer (request ids and the like)."""
        return {
            "request-id": self.fake._next_id("req_"),
            "anthropic-organization-id": "00000000-0000-0000-0000-000000000000",
        }

    def _send(self, status: int, payload: bytes, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", self.content_type)
        self.send_header("content-length", str(len(payload)))
        for k, v in {**self._service_headers(), **(headers or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(payload)

    def _send_json(self, status: int, obj: dict, headers: dict | None = None) -> None:
        self._send(status, json.dumps(obj).encode("utf-8"), headers)

    def _send_error(self, err: ApiError, *, injected: bool = False) -> None:
        if not injected:  # injected faults are counted under their kind
            self.fake._count(str(err.status))
        self._send_json(
            err.status,
            {
                "type": "error",
                "error": {"type": err.kind, "message": err.message},
                "request_id": self.fake._next_id("req_"),
            },
            err.headers,
        )

    def _drop(self) -> None:
        """Close the socket without an answer: the client sees a dropped connection."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(2)

    def do_POST(self):  # noqa: N802
        request = self._read()
        if request is None:
            return None
        return self._post(*request)

    def _post(self, path: str, headers: dict, raw: bytes, body: object) -> None:
        """Answer one POST (subclasses serve their cloud's routes)."""
        fake = self.fake
        if path == "/v1/messages":
            fake._count("messages")
        elif path == "/v1/messages/count_tokens":
            fake._count("count_tokens")
        elif path.startswith("/v1/messages/batches"):
            try:
                self._check_auth(headers)
                return self._batches(path, body)
            except ApiError as err:
                return self._send_error(err)
        else:
            return self._send_error(ApiError(404, "not_found_error", f"Not found: {path}"))

        try:
            self._check_auth(headers)
            if body is None:
                raise ApiError(400, "invalid_request_error", "There was an issue with the JSON body")
        except ApiError as err:
            return self._send_error(err)
        counting = path.endswith("count_tokens")
        return self._serve(body, counting=counting, validate_as_count=counting, route=path, raw=raw)

    def _serve(
        self,
        body: typing.Any,
        *,
        counting: bool,
        validate_as_count: bool,
        route: str,
        raw: bytes,
        count_field="input_tokens",
    ) -> None:
        """Validate BODY (a Messages request) as the API does, then count its tokens or answer it;
        ROUTE is the path rate limits and injected faults are keyed by."""
        fake = self.fake
        try:
            _validate(fake, body, count_only=validate_as_count)
        except ApiError as err:
            return self._send_error(err)
        limits = self._limit_and_fault(route, raw)
        if limits is None:
            return None
        try:
            if counting:
                fake._count("ok")
                return self._send_json(200, {count_field: fake.prompt_tokens(body)})
            return self._answer(body, limits if self.rate_limit_headers else {})
        except ApiError as err:
            return self._send_error(err)

    def _read(self) -> tuple[str, dict, bytes, object] | None:
        """(path, headers, raw body, parsed body) of the request, recorded and counted; None when
        the client gave up mid-request (the socket is dropped)."""
        fake = self.fake
        length = int(self.headers.get("content-length") or 0)
        try:
            raw = self.rfile.read(length) if length else b""
        except ConnectionError:
            raw = b""
        if len(raw) < length:  # the client gave up mid-request (a cancelled call): nothing to answer
            fake._count("aborted")
            self._drop()
            return None
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        path = self.path.split("?", 1)[0]
        with fake._state.lock:
            fake._state.requests.append({"path": path, "headers": headers, "json": body})
        fake._count("total")
        return path, headers, raw, body

    def _limit_and_fault(self, path: str, raw: bytes) -> dict | None:
        """The rate-limit headers to answer with; None when the request was answered already (the
        token bucket is empty: 429; or a fault was injected). Latency is served here too."""
        fake = self.fake
        limits: dict = {}
        if fake.bucket is not None and path == "/v1/messages":
            allowed, limits = fake.bucket.take()
            if not allowed:
                fake._count("429", "rate_limited")
                self._send_error(
                    ApiError(
                        429, "rate_limit_error", "Number of requests has exceeded your rate limit.", limits
                    ),
                    injected=True,
                )
                return None
        if fake.latency_s:
            with fake._flight_lock:
                fake._in_flight += 1
                fake.peak_in_flight = max(fake.peak_in_flight, fake._in_flight)
            time.sleep(fake.latency_s)
            with fake._flight_lock:
                fake._in_flight -= 1
        fault = fake._draw_fault(raw)
        if fault is not None:
            fake._count(fault, "faults")
            self._inject(fault)
            return None
        return limits

    def _check_auth(self, headers: dict) -> None:
        if "anthropic-version" not in headers:
            raise ApiError(400, "invalid_request_error", "anthropic-version: header is required")
        auth = headers.get("authorization", "")
        key = auth[len("Bearer ") :] if auth.startswith("Bearer ") else headers.get("x-api-key")
        if not key:
            raise ApiError(401, "authentication_error", "x-api-key header is required")
        if key != self.fake.api_key:
            raise ApiError(401, "authentication_error", "invalid x-api-key")

    def _inject(self, fault: str) -> None:
        f = self.fake.faults
        if fault == "429":
            return self._send_error(
                ApiError(
                    429,
                    "rate_limit_error",
                    "This request would exceed your organization's rate limit. Please try again later.",
                    {"retry-after": f"{f.retry_after_s:g}"},
                ),
                injected=True,
            )
        if fault == "529":
            return self._send_error(ApiError(529, "overloaded_error", "Overloaded"), injected=True)
        if fault == "500":
            return self._send_error(ApiError(500, "api_error", "Internal server error"), injected=True)
        if fault == "timeout":
            time.sleep(f.hold_s)
            return self._drop()
        if fault == "disconnect":
            return self._drop()
        if fault == "malformed":
            return self._send(200, b'{"id": "msg_trunc", "type": "message", "content": [{"ty')
        raise AssertionError(fault)

    def _answer(self, body: dict, headers: dict | None = None) -> None:
        message = self.fake.message_for(body)
        self.fake._count("ok")
        self._send_json(200, message, headers)

    def _batches(self, path: str, body) -> None:
        fake = self.fake
        if path == "/v1/messages/batches":
            requests = body.get("requests") if isinstance(body, dict) else None
            if not isinstance(requests, list) or not requests:
                raise ApiError(400, "invalid_request_error", "requests: at least one request is required")
            seen = set()
            for i, r in enumerate(requests):
                cid = r.get("custom_id") if isinstance(r, dict) else None
                if not isinstance(cid, str) or not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", cid) or cid in seen:
                    raise ApiError(
                        400, "invalid_request_error", f"requests.{i}.custom_id: invalid or duplicate"
                    )
                seen.add(cid)
                _validate(fake, r.get("params"), count_only=False)
            batch = fake.batches.create(fake._next_id("msgbatch_"), requests)
            fake._count("ok", "batch_create")
            return self._send_json(200, batch.view(fake.base_url))
        raise ApiError(404, "not_found_error", f"Not found: {path}")

    def do_GET(self):  # noqa: N802
        fake = self.fake
        path = self.path.split("?", 1)[0]
        m = re.fullmatch(r"/v1/messages/batches/([A-Za-z0-9_]+)(/results)?", path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            self._check_auth(headers)
            batch = fake.batches.get(m.group(1)) if m else None
            if batch is None:
                raise ApiError(404, "not_found_error", f"Not found: {path}")
        except ApiError as err:
            return self._send_error(err)
        fake._count("batch_results" if m.group(2) else "batch_retrieve")
        if not m.group(2):
            return self._send_json(200, batch.view(fake.base_url))
        if batch.ended is None:
            return self._send_error(ApiError(400, "invalid_request_error", "batch has not ended"))
        lines = "".join(json.dumps(r) + "\n" for r in batch.results).encode()
        self.send_response(200)
        self.send_header("content-type", "application/binary")
        self.send_header("content-length", str(len(lines)))
        self.end_headers()
        self.wfile.write(lines)


# ---- pytest fixtures ---------------------------------------------------------------------------


@pytest.fixture(name="fake_anthropic")
def fake_anthropic_fixture():
    """A started fault-free fake; tweak ``.responder`` / ``.faults`` / ``.latency_s`` in the test."""
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture(name="anthropic_env")
def anthropic_env_fixture(fake_anthropic, monkeypatch):
    """The fake plus ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY`` pointing at it."""
    return fake_anthropic.point_env(monkeypatch)


class FakeClaudeCloud(FakeAnthropic):
    """Claude on a cloud (Bedrock, Vertex AI): this fake's Messages model behind the cloud's own
    routes, credentials and error shapes. Subclasses say which variables point the SDK here."""

    # the developer's own cloud login, cleared so that it can never reach the fake (or the cloud)
    foreign_envs: tuple[str, ...] = ()

    # the environment a workflow's cloud login leaves, pointed at this fake (options: the cloud's own)
    env: Callable[..., dict[str, str]]

    def point_env(self, monkeypatch, **options: bool):
        """Point the SDK here for one test (through MONKEYPATCH); returns the fake."""
        for name in self.foreign_envs:
            monkeypatch.delenv(name, raising=False)
        for name, value in self.env(**options).items():
            monkeypatch.setenv(name, value)
        return self
