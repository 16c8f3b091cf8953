"""The adaptive window (AIMD) and the pacing from rate-limit headers, in virtual time."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta

from needle_action.providers.ratelimit import AdaptiveLimit


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    async def sleep(self, s: float) -> None:
        self.t += s


def headers(limit: int, remaining: int) -> dict[str, str]:
    reset = (datetime.now(UTC) + timedelta(seconds=5)).isoformat()
    return {
        "anthropic-ratelimit-requests-limit": str(limit),
        "anthropic-ratelimit-requests-remaining": str(remaining),
        "anthropic-ratelimit-requests-reset": reset,
    }


def test_the_window_halves_once_per_burst_of_refusals_and_climbs_back():
    clock = Clock()
    lim = AdaptiveLimit(32, clock=clock, cooldown_s=1.0)
    assert lim.window == 32
    lim.on_refused(None, None)
    lim.on_refused(None, None)  # the same burst: no second cut
    assert lim.window == 16
    assert lim.cuts == 1
    clock.t = 2.0
    lim.on_refused(None, None)
    assert lim.window == 8
    for _ in range(100):
        lim.on_success(None)
    assert 8 < lim.window < 32  # about one slot more per window of successes: no jump
    for _ in range(500):
        lim.on_success(None)
    assert lim.window == 32  # additive increase back to the configured ceiling, never above


def test_pacing_follows_the_bucket_the_headers_describe():
    clock = Clock()
    lim = AdaptiveLimit(64, clock=clock, sleep=clock.sleep)
    lim.on_success(headers(limit=120, remaining=2))  # 2 per second, 2 left

    async def go(n: int) -> list[float]:
        starts = []
        for _ in range(n):
            await lim.acquire()
            starts.append(clock.t)
        return starts

    starts = asyncio.run(go(12))
    assert starts[:2] == [0.0, 0.0]
    # then one request per half second: exactly the refill rate, no faster
    gaps = [b - a for a, b in itertools.pairwise(starts[2:])]
    assert all(abs(g - 0.5) < 1e-6 for g in gaps), gaps


def test_retry_after_pauses_every_new_request():
    clock = Clock()
    lim = AdaptiveLimit(8, clock=clock, sleep=clock.sleep)
    lim.on_refused(3.0, None)
    asyncio.run(lim.acquire())
    assert clock.t == 3.0


def test_an_exhausted_token_limit_pauses_until_its_reset():
    clock = Clock()
    wall = [1_000_000.0]
    lim = AdaptiveLimit(8, clock=clock, sleep=clock.sleep, wall=lambda: wall[0])
    reset = datetime.fromtimestamp(wall[0] + 4, UTC).isoformat()
    lim.on_success(
        {"anthropic-ratelimit-input-tokens-remaining": "0", "anthropic-ratelimit-input-tokens-reset": reset}
    )
    asyncio.run(lim.acquire())
    assert abs(clock.t - 4.0) < 1e-6


def test_auto_opens_past_the_start_only_on_the_request_buckets_word():
    lim = AdaptiveLimit(64, 256, clock=Clock())
    lim.on_success(None)  # no headers: no evidence of room
    assert lim.window == 64
    assert not lim.opened
    lim.on_success(headers(limit=4000, remaining=3990))
    assert lim.window == 256
    assert lim.opened


def test_auto_opens_no_further_than_the_bucket_holds():
    lim = AdaptiveLimit(64, 256, clock=Clock())
    lim.on_success(headers(limit=4000, remaining=100))
    assert lim.window == 100  # what the bucket holds now, below the ceiling
    small = AdaptiveLimit(64, 256, clock=Clock())
    small.on_success(headers(limit=300, remaining=20))
    assert small.window == 64  # a bucket smaller than the window: stay, the pacing gate does the rest


def test_a_fixed_concurrency_never_opens():
    lim = AdaptiveLimit(16, clock=Clock())
    for _ in range(50):
        lim.on_success(headers(limit=50_000, remaining=49_000))
    assert lim.window == 16
    assert not lim.opened


def test_a_token_bucket_under_half_full_keeps_the_window_shut():
    lim = AdaptiveLimit(64, 256, clock=Clock())
    tight = headers(limit=4000, remaining=3990) | {
        "anthropic-ratelimit-input-tokens-limit": "2000000",
        "anthropic-ratelimit-input-tokens-remaining": "600000",
    }
    lim.on_success(tight)
    assert lim.window == 64
    assert not lim.opened
    roomy = tight | {"anthropic-ratelimit-input-tokens-remaining": "1900000"}
    lim.on_success(roomy)
    assert lim.window == 256


def test_after_a_refusal_the_window_never_opens_again():
    clock = Clock()
    lim = AdaptiveLimit(64, 256, clock=clock)
    lim.on_success(headers(limit=4000, remaining=3990))
    assert lim.window == 256
    lim.on_refused(None, None)
    assert lim.window == 128
    for _ in range(2000):
        lim.on_success(headers(limit=4000, remaining=3990))
    assert lim.window == 128  # no reopening, and additive growth stops at the start


def test_configure_sets_start_and_ceiling():
    lim = AdaptiveLimit(16, clock=Clock())
    lim.configure(64, 256)
    assert (lim.start, lim.ceiling, lim.window) == (64, 256, 64)
    lim.on_success(headers(limit=4000, remaining=3990))
    lim.configure(64, 128)  # a later run's narrower ceiling bounds an opened window
    assert lim.window == 128
