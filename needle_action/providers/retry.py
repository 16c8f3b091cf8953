"""Retries for model calls: exponential backoff with full jitter, honouring retry-after.

The SDKs' own retries are switched off (``max_retries=0``) so every provider retries the same way
and every attempt is counted (``Completion.attempts``). What is transient: 408, 409, 429, every
5xx (529 "overloaded" included), connection errors, timeouts and responses we cannot parse. What
is not: other 4xx (a 400/422 ``invalid_request_error``, or one whose message names a Messages API
rule: :class:`RequestInvalid`, a request error naming the rule, exit 2; another 400, such as a
cloud's "invalid model identifier", stops that prompt like a 404); 401/403 (and "no key") become :class:`ProviderUnavailable` at once, with a hint
naming the environment variable, never its value.

The sleep function and the random source are injectable so unit tests run instantly and can assert
the exact delays a server asked for.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from needle_action.config import ProviderSettings
from needle_action.core.errors import EXIT_CONFIG, ProviderUnavailable
from needle_action.providers.base import Completion
from needle_action.providers.ratelimit import AdaptiveLimit
from needle_action.request.rules import rule_of

T = TypeVar("T")
DEFAULT_CEILING = 16  # until the scheduler configures the run's concurrency

RETRYABLE_4XX = frozenset({408, 409, 429})
REFUSED = frozenset({429, 529})  # the provider asks us to slow down: the adaptive window halves


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 7  # the first try plus ProviderSettings.max_retries (default 6)
    base_delay_s: float = 0.5  # the backoff window doubles from here: 0.5, 1, 2, 4, ...
    max_delay_s: float = 30.0  # cap of the backoff window
    max_retry_after_s: float = 60.0  # never wait longer than this, whatever the server says

    @classmethod
    def from_settings(cls, settings: object) -> RetryPolicy:
        return cls(max_attempts=1 + int(getattr(settings, "max_retries", 6)))

    def backoff(self, retry_number: int, rng: random.Random) -> float:
        """Full jitter: uniform over [0, min(cap, base * 2**(n-1))] (AWS architecture blog)."""
        window = min(self.max_delay_s, self.base_delay_s * (2 ** (retry_number - 1)))
        return rng.uniform(0.0, window)


@dataclass(frozen=True)
class Retry:
    """A classifier's verdict that an error is transient."""

    reason: str  # short, e.g. "429 rate_limit_error", "timeout", "malformed response"
    retry_after_s: float | None = None
    status: int | None = None
    headers: Mapping[str, str] | None = None


class MalformedResponse(Exception):
    """The provider answered 200 but the body is not the expected shape (transient)."""


class RetriesExhausted(ProviderUnavailable):
    """One request still failed after every attempt: that request is lost, the provider may be fine.
    The recall scheduler asks that trial once more, then loses it and goes on (several distinct
    trials lost in a row mean the provider is down)."""


class RequestRejected(ProviderUnavailable):
    """The provider refused this request for good (400/404/413/422...): retrying cannot help."""

    def __init__(self, message: str, *, status: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


class RequestInvalid(RequestRejected):
    """The provider refused the request itself as invalid (400/422): a bug in the request needle
    sent or the template shaped, never an outage (exit 2, like any error in the user's input)."""

    exit_code = EXIT_CONFIG
    title = "needle request error"


def invalid_request(provider: str, label: str, message: str | None, status: int | None) -> RequestInvalid:
    """The error for a request PROVIDER refused as invalid: the Messages API rule it names, when known."""
    rule = rule_of(message)
    detail = f": {message}" if message else ""
    if rule is None:
        return RequestInvalid(
            f"{provider} refused the request as invalid ({label}){detail}",
            status=status,
            hint="this request cannot succeed as sent; see the provider's message above",
        )
    return RequestInvalid(
        f"{provider} refused the request ({label}): it breaks the Messages API rule "
        f"`{rule.code}` ({rule.text}){detail}",
        status=status,
        hint=f"{rule.hint}; needle brings the requests it builds within the rules, so this is a bug "
        "in needle or a request the template fixes: please report it with `needle render` output",
    )


Classifier = Callable[[BaseException], "Retry | BaseException"]


def retry_after_from_headers(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, ``retry-after`` (seconds or an HTTP date), else None."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def classify_status(
    status: int,
    *,
    provider: str,
    model: str,
    headers: Mapping[str, str] | None = None,
    error_type: str | None = None,
    message: str | None = None,
    key_env: str | None = None,
) -> Retry | BaseException:
    """Shared HTTP status policy for every HTTP provider."""
    label = f"{status} {error_type}" if error_type else str(status)
    if status in RETRYABLE_4XX or status >= 500:
        return Retry(label, retry_after_from_headers(headers), status, headers)
    detail = f": {message}" if message else ""
    if status in (401, 403):
        where = f"${key_env}" if key_env else "the API key"
        return ProviderUnavailable(
            f"{provider} refused our credentials ({label}){detail}",
            hint=f"check that {where} holds a valid key with access to {model!r}",
        )
    if status == 404:
        return RequestRejected(
            f"{provider} does not know model {model!r} ({label}){detail}",
            status=status,
            hint="check the model id in needle.toml (e.g. claude-sonnet-5-5) and the provider's base_url",
        )
    if status in (400, 422) and (error_type == "invalid_request_error" or rule_of(message) is not None):
        return invalid_request(provider, label, message, status)
    return RequestRejected(
        f"{provider} rejected the request ({label}){detail}",
        status=status,
        hint="this request cannot succeed as sent; see the message above",
    )


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    classify: Classifier,
    *,
    policy: RetryPolicy,
    provider: str,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rng: random.Random | None = None,
    on_retry: Callable[[int, Retry, float], None] | None = None,
    limiter: AdaptiveLimit | None = None,
) -> tuple[T, int]:
    """Run ``attempt`` until it succeeds; returns (result, attempts used).

    ``classify`` turns an exception into ``Retry`` (transient) or an exception to raise now.
    LIMITER (optional) gates every attempt and hears of every 429/529. After
    ``policy.max_attempts`` transient failures, raises RetriesExhausted naming the last one.
    """
    rng = rng or random.Random()
    last: Retry | None = None
    for number in range(1, policy.max_attempts + 1):
        if limiter is not None:
            await limiter.acquire()
        try:
            return await attempt(), number
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            verdict = classify(exc)
            if not isinstance(verdict, Retry):
                raise verdict from None
            last = verdict
            if limiter is not None and verdict.status in REFUSED:
                limiter.on_refused(verdict.retry_after_s, verdict.headers)
        if number == policy.max_attempts:
            break
        if last.retry_after_s is not None:
            delay = min(last.retry_after_s, policy.max_retry_after_s)
        else:
            delay = policy.backoff(number, rng)
        if on_retry is not None:
            on_retry(number, last, delay)
        await sleep(delay)
    raise RetriesExhausted(
        f"{provider} still failing after {policy.max_attempts} attempts (last: {last.reason if last else '?'})",
        hint="the provider may be down or rate-limiting; retry later, lower recall.concurrency, "
        "or raise providers.<name>.max_retries",
    )


class _SDKClient(Protocol):
    async def close(self) -> None: ...


class RetryingProvider:
    """What the HTTP providers share: settings, the retry policy, an injectable sleep and random
    source, a count of transient failures retried over the provider's life, and closing the client.

    Subclasses set ``name``, build their SDK client (``_client``) in ``__init__`` after calling
    this one, and implement ``_classify``; ``_complete_with_retries`` runs one SDK call under the
    policy.
    """

    name: str
    _client: _SDKClient

    def __init__(
        self,
        model: str,
        settings: ProviderSettings | None = None,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.model = model
        self.settings = settings or ProviderSettings()
        self.policy = RetryPolicy.from_settings(self.settings)
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.retries = 0
        self.limiter = AdaptiveLimit(DEFAULT_CEILING)  # real time: its pauses are the server's

    def _classify(self, exc: BaseException) -> Retry | BaseException:
        raise NotImplementedError

    async def aclose(self) -> None:
        await self._client.close()

    async def _complete_with_retries(self, attempt: Callable[[], Awaitable[Reply]]) -> Completion:
        """``attempt`` makes one SDK call and returns its Reply; the limiter hears of each outcome."""

        def count(_n: int, _retry: Retry, _delay: float) -> None:
            self.retries += 1

        reply, attempts = await call_with_retries(
            attempt,
            self._classify,
            on_retry=count,
            policy=self.policy,
            provider=self.name,
            sleep=self._sleep,
            rng=self._rng,
            limiter=self.limiter,
        )
        self.limiter.on_success(reply.headers)
        return replace(reply.answer, attempts=attempts)


@dataclass(frozen=True)
class Reply:
    """What one successful SDK call gave: the answer and its usage (as one attempt's Completion) and
    the response headers (the limiter reads them)."""

    answer: Completion
    headers: Mapping[str, str] | None = None
