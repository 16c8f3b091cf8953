"""The runtime library's pre-flight guard against the real anthropic SDK and the fake Messages API
(loopback HTTP), and its import hygiene checked in a fresh interpreter."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import anthropic
import pytest

from needle_action.runtime import BudgetExceeded, PreflightGuard
from tests.samples import MESSAGES, SYSTEM


def test_guard_with_the_exact_anthropic_counter(anthropic_env):
    fake = anthropic_env
    est = PreflightGuard("claude-sonnet-5-5", tokenizer="anthropic").estimate(
        system=SYSTEM, messages=MESSAGES
    )
    assert est.exact is True
    assert est.tokenizer == "anthropic"
    count_req = [r for r in fake.requests if r["path"].endswith("/count_tokens")][-1]
    assert est.tokens == fake.prompt_tokens(count_req["json"])


# --------------------------------------------------------------------------- wrapping the SDK


def test_wrap_sends_under_budget_and_sends_nothing_over_budget(fake_anthropic):
    client = anthropic.Anthropic(
        base_url=fake_anthropic.base_url, api_key=fake_anthropic.api_key, max_retries=0
    )
    n = PreflightGuard("claude-sonnet-5-5").estimate(system=SYSTEM, messages=MESSAGES).tokens

    create = PreflightGuard("claude-sonnet-5-5", max_input_tokens=n).wrap(client.messages.create)
    reply = create(model="claude-sonnet-5-5", max_tokens=64, system=SYSTEM, messages=MESSAGES)
    assert reply.content[0].text
    assert fake_anthropic.calls["messages"] == 1

    tight = PreflightGuard("claude-sonnet-5-5", max_input_tokens=n - 1)
    with pytest.raises(BudgetExceeded):
        tight.wrap(client.messages.create)(
            model="claude-sonnet-5-5", max_tokens=64, system=SYSTEM, messages=MESSAGES
        )
    with pytest.raises(ValueError, match="prices 'claude-sonnet-5-5'"):
        create(model="claude-opus-5-5", max_tokens=64, system=SYSTEM, messages=MESSAGES)
    assert fake_anthropic.calls["messages"] == 1  # neither refused call reached the server


def test_decorator_form_on_the_async_client(fake_anthropic):
    client = anthropic.AsyncAnthropic(
        base_url=fake_anthropic.base_url, api_key=fake_anthropic.api_key, max_retries=0
    )
    guard = PreflightGuard("claude-haiku-5-5", max_cost_usd=0.001)

    @guard
    async def ask(**kwargs):
        return await client.messages.create(**kwargs)

    async def scenario():
        ok = await ask(model="claude-haiku-5-5", max_tokens=32, messages=MESSAGES)
        with pytest.raises(BudgetExceeded):  # 1000 output tokens at $5/Mtok alone is $0.005
            await ask(model="claude-haiku-5-5", max_tokens=1000, messages=MESSAGES)
        await client.close()
        return ok

    assert asyncio.run(scenario()).content[0].text
    assert fake_anthropic.calls["messages"] == 1


# --------------------------------------------------------------------------- import hygiene


def test_importable_without_click_or_jinja2(tmp_path):
    """Applications get the runtime library without the CLI's or the templating's dependencies."""
    script = textwrap.dedent(
        """
        import sys
        for name in ("click", "jinja2"):
            sys.modules[name] = None  # any import of them now raises ImportError
        from needle_action.runtime import PreflightGuard, edge_order
        assert edge_order([1, 2, 3]) == [1, 3, 2]
        est = PreflightGuard("gpt-4o", max_input_tokens=100).check(messages=[{"role": "user", "content": "hi"}])
        print(est.tokens)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) > 0
