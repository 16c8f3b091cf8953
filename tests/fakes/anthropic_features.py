"""What the fake Anthropic API adds to plain messages: prompt caching, a rate limiter, batches.

Modelled on the Messages API documentation and the SDK's types (``types/usage.py``,
``types/messages/message_batch*.py``):

**Prompt caching** (:class:`PromptCache`). A content block with ``cache_control`` is a breakpoint:
at most 4 per request (400 otherwise). The cacheable prefix is everything up to and including that
block, in the order tools, system, messages. A request reads the longest prefix that an earlier
request wrote, found at its breakpoints or at any block boundary up to 20 blocks before one (the
API's lookback); then it writes an entry at every breakpoint whose prefix holds at least
``min_tokens`` tokens (1,024 for Sonnet/Opus): shorter prefixes are not cached, silently. Usage
reports ``cache_read_input_tokens`` (the prefix read), ``cache_creation_input_tokens`` (from there
to the last cached breakpoint) and ``input_tokens`` (the rest). An entry lives ``ttl_s`` (300 s)
from its last write or read, and becomes readable when the request that wrote it is answered.

**Rate limits** (:class:`TokenBucket`). A bucket of ``burst`` requests refilled at ``rpm`` per
minute. Every answer carries ``anthropic-ratelimit-requests-limit`` / ``-remaining`` /
``-reset`` (RFC 3339: when the bucket is full again); a request finding it empty gets 429
``rate_limit_error`` with ``retry-after`` in whole seconds, as the real API sends it.

**Message Batches** (:class:`Batches`). ``POST /v1/messages/batches`` validates every request and
queues it; a worker answers them one by one (the same answering code as ``/v1/messages``, caching
included, usage ``service_tier: "batch"``); ``GET /v1/messages/batches/{id}`` reports
``processing_status`` (``in_progress`` -> ``ended``), ``request_counts`` and, once ended, the
``results_url``; that URL serves JSON Lines ``{"custom_id", "result": {"type": "succeeded",
"message"}}`` (or ``errored`` with an error object).
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from tests.fakes.anthropic_request import cache_blocks

MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20


def blocks_of_request(body: dict) -> list[tuple[str, str, bool]]:
    """(role, text, has cache_control) of every content block in prompt order: tools, system,
    messages (the reading of tests/fakes/anthropic_request.py)."""
    return list(cache_blocks(body))


class CacheError(Exception):
    """A request the API refuses because of its cache_control markers."""


@dataclass
class CacheUsage:
    read: int = 0
    written: int = 0


class PromptCache:
    """Entries keyed by (model, prefix digest) with an expiry time."""

    def __init__(
        self, *, min_tokens: int = 1024, ttl_s: float = 300.0, clock: Callable[[], float] = time.monotonic
    ):
        self.min_tokens, self.ttl_s, self.clock = min_tokens, ttl_s, clock
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], float] = {}

    def lookup(
        self, model: str, blocks: list[tuple[str, str, bool]], count: Callable[[str], int]
    ) -> tuple[CacheUsage, list]:
        """What the request would read and write; the writes are applied by :meth:`commit`."""
        marked = [i for i, b in enumerate(blocks) if b[2]]
        if len(marked) > MAX_BREAKPOINTS:
            raise CacheError(
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(marked)}."
            )
        if not marked:
            return CacheUsage(), []
        digests, tokens = _prefixes(model, blocks, count)
        now = self.clock()
        read_at = -1
        with self._lock:
            for bp in marked:  # the lookback window before each breakpoint, longest first
                for i in range(bp, max(-1, bp - LOOKBACK_BLOCKS), -1):
                    if self._entries.get((model, digests[i]), 0.0) > now:
                        read_at = max(read_at, i)
                        break
        read = tokens[read_at] if read_at >= 0 else 0
        writes = [(digests[i], tokens[i]) for i in marked if tokens[i] >= self.min_tokens]
        top = max((t for _, t in writes), default=0)
        usage = CacheUsage(read=read, written=max(0, top - read))
        refresh = [digests[read_at]] if read_at >= 0 else []
        return usage, [d for d, _ in writes] + refresh

    def commit(self, model: str, keys: list[str]) -> None:
        until = self.clock() + self.ttl_s
        with self._lock:
            for d in keys:
                self._entries[(model, d)] = until

    def __len__(self) -> int:
        return len(self._entries)


_block_tokens: dict[str, int] = {}
_block_lock = threading.Lock()


def _prefixes(
    model: str, blocks: list[tuple[str, str, bool]], count: Callable[[str], int]
) -> tuple[list[str], list[int]]:
    """Digest and token count of the prompt up to and including each block."""
    h = hashlib.sha256(model.encode())
    digests: list[str] = []
    tokens: list[int] = []
    total = 0
    for role, text, _ in blocks:
        h.update(b"\0" + role.encode() + b"\0" + text.encode("utf-8", "surrogatepass"))
        digests.append(h.copy().hexdigest())
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        with _block_lock:
            n = _block_tokens.get(key)
        if n is None:
            n = count(text)
            with _block_lock:
                _block_tokens[key] = n
        total += n
        tokens.append(total)
    return digests, tokens


class TokenBucket:
    """``burst`` requests, refilled at ``rpm`` per minute."""

    def __init__(self, rpm: int, burst: int | None = None, *, clock: Callable[[], float] = time.monotonic):
        self.rpm = rpm
        self.capacity = float(burst if burst is not None else rpm)
        self.rate = rpm / 60.0
        self.clock = clock
        self.tokens = self.capacity
        self.stamp = clock()
        self.lock = threading.Lock()
        self.refused = 0

    def take(self) -> tuple[bool, dict[str, str]]:
        """(allowed, headers to send)."""
        with self.lock:
            now = self.clock()
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            ok = self.tokens >= 1.0
            if ok:
                self.tokens -= 1.0
            else:
                self.refused += 1
            full_in = (self.capacity - self.tokens) / self.rate
            reset = datetime.now(UTC) + timedelta(seconds=full_in)
            headers = {
                "anthropic-ratelimit-requests-limit": str(self.rpm),
                "anthropic-ratelimit-requests-remaining": str(int(self.tokens)),
                "anthropic-ratelimit-requests-reset": reset.isoformat().replace("+00:00", "Z"),
            }
            if not ok:
                headers["retry-after"] = str(max(1, math.ceil((1.0 - self.tokens) / self.rate)))
        return ok, headers


@dataclass
class Batch:
    id: str
    requests: list[dict]
    created: datetime
    results: list[dict] = field(default_factory=list)
    ended: datetime | None = None
    canceled: bool = False

    def view(self, base_url: str) -> dict:
        done = {"succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        for r in self.results:
            done[r["result"]["type"]] += 1
        stamp = lambda d: d.isoformat().replace("+00:00", "Z") if d else None  # noqa: E731
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": "ended" if self.ended else ("canceling" if self.canceled else "in_progress"),
            "request_counts": {"processing": len(self.requests) - len(self.results), **done},
            "created_at": stamp(self.created),
            "expires_at": stamp(self.created + timedelta(hours=24)),
            "ended_at": stamp(self.ended),
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{base_url}/v1/messages/batches/{self.id}/results" if self.ended else None,
        }


class Batches:
    """The batches a fake holds; ``answer(params) -> message dict`` does the work (raises ApiError)."""

    def __init__(self, answer: Callable[[dict], dict], *, item_s: float = 0.0) -> None:
        self.answer = answer
        self.item_s = item_s
        self.lock = threading.Lock()
        self.batches: dict[str, Batch] = {}
        self.created = 0

    def create(self, batch_id: str, requests: list[dict]) -> Batch:
        batch = Batch(batch_id, requests, datetime.now(UTC))
        with self.lock:
            self.batches[batch_id] = batch
            self.created += 1
        threading.Thread(target=self._work, args=(batch,), daemon=True, name=f"fake-batch-{batch_id}").start()
        return batch

    def _work(self, batch: Batch) -> None:
        for req in batch.requests:
            if self.item_s:
                time.sleep(self.item_s)
            try:
                result = {"type": "succeeded", "message": self.answer(req["params"])}
            except Exception as exc:  # an ApiError for this request: reported, the batch goes on
                kind = getattr(exc, "kind", "api_error")
                result = {
                    "type": "errored",
                    "error": {"type": "error", "error": {"type": kind, "message": str(exc)}},
                }
            with self.lock:
                batch.results.append({"custom_id": req["custom_id"], "result": result})
        with self.lock:
            batch.ended = datetime.now(UTC)

    def get(self, batch_id: str) -> Batch | None:
        with self.lock:
            return self.batches.get(batch_id)
