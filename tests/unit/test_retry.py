"""Backoff, retry-after parsing and the status policy, with an injected sleep (no real waiting)."""

from __future__ import annotations

import asyncio
import email.utils
import random

import pytest

from needle_action.core.errors import EXIT_PROVIDER, ProviderUnavailable
from needle_action.providers.retry import (
    RequestRejected,
    Retry,
    RetryPolicy,
    call_with_retries,
    classify_status,
    retry_after_from_headers,
)


class Recorder:
    def __init__(self):
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def run(coro):
    return asyncio.run(coro)


def flaky(failures: list[BaseException], result="ok"):
    """An attempt function that raises the given exceptions in turn, then returns ``result``."""
    calls = {"n": 0}

    async def attempt():
        calls["n"] += 1
        if failures:
            raise failures.pop(0)
        return result

    return attempt, calls


def classify(exc):
    return exc.args[0] if isinstance(exc.args[0], Retry | BaseException) else exc


def test_succeeds_after_transient_failures_and_counts_attempts():
    sleep = Recorder()
    attempt, calls = flaky([RuntimeError(Retry("500")), RuntimeError(Retry("timeout"))])
    result, attempts = run(
        call_with_retries(
            attempt, classify, policy=RetryPolicy(), provider="p", sleep=sleep, rng=random.Random(1)
        )
    )
    assert result == "ok"
    assert attempts == 3
    assert calls["n"] == 3
    assert len(sleep.delays) == 2


def test_full_jitter_stays_inside_the_doubling_window():
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=4.0)
    rng = random.Random(7)
    for n in range(1, 10):
        window = min(4.0, 0.5 * 2 ** (n - 1))
        draws = [policy.backoff(n, rng) for _ in range(200)]
        assert all(0.0 <= d <= window for d in draws)
        assert max(draws) > 0.8 * window  # jitter spans the window, not a fixed delay
        assert min(draws) < 0.2 * window


def test_retry_after_is_honoured_exactly_and_capped():
    sleep = Recorder()
    attempt, _ = flaky(
        [RuntimeError(Retry("429", retry_after_s=3.0)), RuntimeError(Retry("429", retry_after_s=500.0))]
    )
    policy = RetryPolicy(max_retry_after_s=20.0)
    run(call_with_retries(attempt, classify, policy=policy, provider="p", sleep=sleep))
    assert sleep.delays == [3.0, 20.0]


def test_gives_up_after_max_attempts_with_provider_unavailable():
    sleep = Recorder()
    attempt, calls = flaky([RuntimeError(Retry("529 overloaded_error")) for _ in range(10)])
    with pytest.raises(ProviderUnavailable) as info:
        run(
            call_with_retries(
                attempt, classify, policy=RetryPolicy(max_attempts=4), provider="anthropic", sleep=sleep
            )
        )
    assert calls["n"] == 4
    assert len(sleep.delays) == 3
    assert "4 attempts" in info.value.message
    assert "529" in info.value.message
    assert info.value.exit_code == EXIT_PROVIDER


def test_non_retryable_error_raises_at_once():
    sleep = Recorder()
    fatal = RequestRejected("bad", status=400)
    attempt, calls = flaky([RuntimeError(fatal)])
    with pytest.raises(RequestRejected):
        run(call_with_retries(attempt, classify, policy=RetryPolicy(), provider="p", sleep=sleep))
    assert calls["n"] == 1
    assert sleep.delays == []


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"Retry-After": "0.25"}, 0.25),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "soon"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_retry_after_header_forms(headers, expected):
    assert retry_after_from_headers(headers) == expected


def test_retry_after_http_date():
    now = 1_800_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after_from_headers({"retry-after": date}, now=now) == pytest.approx(30.0, abs=1.0)


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])
def test_transient_statuses_are_retried(status):
    verdict = classify_status(status, provider="anthropic", model="m", headers={"retry-after": "1"})
    assert isinstance(verdict, Retry)
    assert verdict.retry_after_s == 1.0


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failures_are_provider_unavailable_and_name_the_variable_not_the_key(status, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-ant-secret-value")
    verdict = classify_status(
        status, provider="anthropic", model="claude-sonnet-5-5", key_env="MY_KEY", message="invalid x-api-key"
    )
    assert isinstance(verdict, ProviderUnavailable)
    assert not isinstance(verdict, RequestRejected)
    text = verdict.format()
    assert "$MY_KEY" in text
    assert "sk-ant-secret-value" not in text


def test_unknown_model_is_a_clear_rejection():
    verdict = classify_status(404, provider="anthropic", model="claude-nope", error_type="not_found_error")
    assert isinstance(verdict, RequestRejected)
    assert verdict.status == 404
    assert "claude-nope" in verdict.message
    assert "model" in verdict.hint


def test_bad_request_is_rejected_not_retried():
    verdict = classify_status(400, provider="openai", model="m", message="prompt is too long")
    assert isinstance(verdict, RequestRejected)
    assert "prompt is too long" in verdict.message


def test_policy_from_settings_counts_the_first_try():
    from needle_action.config import ProviderSettings

    assert RetryPolicy.from_settings(ProviderSettings(max_retries=3)).max_attempts == 4


@pytest.mark.parametrize(
    ("provider", "model", "error_type", "message", "rule"),
    [
        pytest.param(
            "anthropic",
            "claude-sonnet-5-5",
            "invalid_request_error",
            "messages: text content blocks must contain non-whitespace text",
            "`whitespace-text`",
            id="a-request-rule",
        ),
        # a cloud's 400 about the model id is no request bug: that prompt stops, as for a 404
        pytest.param(
            "bedrock",
            "gpt-4o",
            "ValidationException",
            "The provided model identifier is invalid.",
            None,
            id="model-id",
        ),
    ],
)
def test_a_request_the_api_refuses_as_invalid_is_a_request_error_naming_the_rule(
    provider, model, error_type, message, rule
):
    from needle_action.core.errors import EXIT_CONFIG
    from needle_action.providers.retry import RequestInvalid

    verdict = classify_status(400, provider=provider, model=model, error_type=error_type, message=message)
    assert isinstance(verdict, RequestRejected)
    assert isinstance(verdict, RequestInvalid) is (rule is not None)
    if rule is not None:
        assert verdict.exit_code == EXIT_CONFIG
        assert rule in verdict.message
