"""Adaptive request rate: an AIMD window of requests in flight, paced by the provider's own
rate-limit headers.

* **Window (AIMD).** It starts at the run's concurrency (``start``). Each success adds ``1/window``
  (about one more slot per window of successes) up to ``start``; a 429 or 529 halves it, at most
  once per ``cooldown_s`` so one burst of refusals counts as one signal. The scheduler never has
  more requests of this provider in flight than ``window``.
* **Opening (``concurrency = "auto"``).** When the ``ceiling`` is above the start, the window may
  open past it, but only on the provider's word: an answer's ``anthropic-ratelimit-requests-*``
  headers show a bucket holding more requests than the window, and every other reported bucket
  (input, output tokens) is at least half full. It opens to what the request bucket holds (at most
  the ceiling) and grows additively up to the ceiling from there. Without such headers (an
  OpenAI-compatible server, a proxy that strips them) it never opens; after the first refusal it
  never opens again. Slots the account has paid for are not left idle while trials wait.
* **Pacing.** Anthropic sends ``anthropic-ratelimit-requests-limit`` / ``-remaining`` / ``-reset``
  on every answer: a token bucket of ``limit`` requests refilled continuously over a minute. We keep
  a mirror of that bucket (filled from the first answer's ``remaining``, then counted ourselves, and
  emptied by a 429) and start a request only when it holds a token, so a run at a cap of R requests per minute goes at R per minute
  instead of bouncing off 429s. Any ``anthropic-ratelimit-*-remaining: 0`` (tokens included) and any
  ``retry-after`` pause every new request until the reset.

The clock and sleep are injectable so unit tests run in virtual time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime

REQUESTS = "anthropic-ratelimit-requests-"
PREFIX = "anthropic-ratelimit-"


def _seconds_until(stamp: str, now_wall: float) -> float | None:
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, when.timestamp() - now_wall)


def _under_half(headers: Mapping[str, str], key: str) -> bool:
    """KEY is some bucket's ``-remaining`` and it holds less than half its ``-limit``."""
    if not key.endswith("-remaining"):
        return False
    try:
        left = float(headers[key])
        cap = float(headers.get(key.removesuffix("remaining") + "limit", "nan"))
    except ValueError:
        return True  # a bucket we cannot read is no evidence of room
    return cap != cap or left < cap / 2  # (nan: no limit given)


class AdaptiveLimit:
    """The window of requests in flight and the pacing gate of one provider."""

    def __init__(
        self,
        start: int,
        ceiling: int | None = None,
        *,
        cooldown_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.start = max(1, int(start))
        self.ceiling = max(self.start, int(ceiling or start))
        self.limit = float(self.start)
        self.cooldown_s = cooldown_s
        self._clock, self._wall, self._sleep = clock, wall, sleep
        self._last_cut = float("-inf")
        self._pause_until = 0.0
        self._rate: float | None = None  # requests per second the server refills
        self._capacity = 0.0
        self._tokens = 0.0
        self._most_seen = 0.0
        self._stamp = 0.0
        self._tight = False  # the last answer showed a token bucket under half full
        self.opened = False  # the window went past START on the provider's word
        self.cuts = 0  # how often the window was halved (reported by benches and tests)

    def configure(self, start: int, ceiling: int | None = None) -> None:
        """Set the run's concurrency: the window starts at START (unless already cut, or opened)
        and may open up to CEILING (default START) when the provider's headers show room."""
        self.start = max(1, int(start))
        self.ceiling = max(self.start, int(ceiling or start))
        if self.cuts:
            self.limit = min(self.limit, float(self.start))
        elif self.opened:
            self.limit = max(float(self.start), min(self.limit, float(self.ceiling)))
        else:
            self.limit = float(self.start)

    @property
    def window(self) -> int:
        """Requests this provider may have in flight now."""
        return max(1, int(self.limit))

    # ---- signals -----------------------------------------------------------------------------
    def on_success(self, headers: Mapping[str, str] | None) -> None:
        """An answer: read its rate-limit headers, open the window if they show room, and widen
        it a little."""
        self._read(headers)
        if self._may_open():
            self.opened = True
            self.limit = max(self.limit, min(float(self.ceiling), float(int(self._tokens))))
        grow_to = float(self.ceiling if self.opened and not self.cuts else self.start)
        if self.limit < grow_to:
            self.limit = min(grow_to, self.limit + 1.0 / max(1.0, self.limit))

    def _may_open(self) -> bool:
        return (
            self.ceiling > self.start
            and not self.cuts
            and not self._tight
            and self._rate is not None  # the provider described its request bucket
            and self._clock() >= self._pause_until
            and self._tokens > self.limit
        )

    def on_refused(self, retry_after_s: float | None, headers: Mapping[str, str] | None) -> None:
        """A 429 or 529: halve the window (once per cooldown) and pause for retry-after."""
        now = self._clock()
        if now - self._last_cut >= self.cooldown_s:
            self.limit = max(1.0, self.limit / 2.0)
            self._last_cut = now
            self.cuts += 1
        if retry_after_s is not None:
            self._pause_until = max(self._pause_until, now + retry_after_s)
        if self._rate is not None:
            self._tokens = min(self._tokens, 0.0)
        self._read(headers)

    def _read(self, headers: Mapping[str, str] | None) -> None:
        if not headers:
            return
        lower = {k.lower(): v for k, v in headers.items() if k.lower().startswith(PREFIX)}
        if not lower:
            return
        now = self._clock()
        limit, remaining = lower.get(REQUESTS + "limit"), lower.get(REQUESTS + "remaining")
        if limit is not None and remaining is not None:
            try:
                cap, left = float(limit), float(remaining)
            except ValueError:
                cap = left = -1.0
            if cap > 0:
                self._refill(now)
                if self._rate is None:
                    # the first answer tells the bucket's size and what was left; from then on our
                    # own count is fresher than the headers (which were written when the request
                    # arrived, before the requests we started since); a 429 resets it to empty
                    self._tokens = left
                # the bucket holds at most LIMIT; never assume more than the most it was seen to hold
                self._most_seen = max(self._most_seen, left)
                self._rate, self._capacity = cap / 60.0, max(1.0, min(cap, self._most_seen))
        self._tight = any(_under_half(lower, key) for key in lower if not key.startswith(REQUESTS))
        for key, value in lower.items():
            if key.endswith("-remaining") and value.strip() == "0":
                reset = lower.get(key.removesuffix("remaining") + "reset")
                wait = _seconds_until(reset, self._wall()) if reset else None
                if wait is not None and not key.startswith(REQUESTS):  # requests: the bucket paces
                    self._pause_until = max(self._pause_until, now + wait)

    def _refill(self, now: float) -> None:
        if self._rate is not None:
            self._tokens = min(self._capacity, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now

    # ---- the gate ----------------------------------------------------------------------------
    def delay(self) -> float:
        """Seconds until a request may start (0: now); takes the token when it is 0."""
        now = self._clock()
        if now < self._pause_until:
            return self._pause_until - now
        self._refill(now)
        if self._rate is None:
            return 0.0
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / self._rate

    async def acquire(self) -> None:
        """Wait until the pause is over and the bucket mirror holds a token."""
        while (wait := self.delay()) > 0:
            await self._sleep(wait)
