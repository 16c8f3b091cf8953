"""The adaptive window (AIMD) and the pacing from rate-limit headers, in virtual time."""

from __future__ import annotations

import asyncio
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
    assert lim.window == 16 and lim.cuts == 1
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
    gaps = [b - a for a, b in zip(starts[2:], starts[3:], strict=False)]
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
