"""The runtime library: edge_order and the pre-flight guard's estimates and limits, with real tiktoken.

The guard against the real SDK and the fake API, and the import check in a fresh process, are in
tests/integration/test_runtime_sdk.py."""

from __future__ import annotations

import itertools
import math

import pytest
import tiktoken

import needle_action.tokens as tokens
from examples.agent.tools import TOOLS as AGENT_TOOLS
from needle_action.config import PromptSettings
from needle_action.providers.pricing import price_of
from needle_action.request.prompt import Message, RenderedPrompt
from needle_action.runtime import BudgetExceeded, Estimate, PreflightGuard, edge_order
from tests.samples import MESSAGES, SYSTEM

# --------------------------------------------------------------------------- edge_order


def test_edge_order_documented_alternation():
    assert edge_order([1, 2, 3, 4, 5, 6, 7]) == [1, 3, 5, 7, 6, 4, 2]
    assert edge_order([1, 2, 3, 4, 5, 6]) == [1, 3, 5, 6, 4, 2]


@pytest.mark.parametrize("items", [[], ["a"], ["a", "b"], ["a", "b", "c"]])
def test_edge_order_small_inputs(items):
    out = edge_order(items)
    assert sorted(out) == sorted(items)
    if items:
        assert out[0] == items[0]
    if len(items) >= 2:
        assert out[-1] == items[1]


@pytest.mark.parametrize("n", range(0, 25))
def test_edge_order_relevance_falls_from_both_edges(n):
    """For every length: a permutation; a better rank is never further from an edge."""
    ranked = list(range(n))  # 0 = most relevant
    out = edge_order(ranked)
    assert sorted(out) == ranked
    edge_distance = {item: min(i, n - 1 - i) for i, item in enumerate(out)}
    for better, worse in itertools.pairwise(ranked):
        assert edge_distance[better] <= edge_distance[worse]
    if n >= 3:  # the least relevant chunk sits in the middle
        assert edge_distance[ranked[-1]] == (n - 1) // 2


def test_edge_order_with_scores_ranks_by_score_and_keeps_ties_stable():
    chunks = ["low", "top", "tieA", "mid", "tieB", "second"]
    scores = [0.1, 0.99, 0.5, 0.6, 0.5, 0.9]
    # ranking: top, second, mid, tieA, tieB (input order kept), low
    assert edge_order(chunks, scores) == ["top", "mid", "tieB", "low", "tieA", "second"]


def test_edge_order_accepts_iterables_and_does_not_mutate():
    src = ["a", "b", "c", "d"]
    copy = list(src)
    assert edge_order(iter(src)) == ["a", "c", "d", "b"]
    assert edge_order(src, scores=(1, 2, 3, 4)) == ["d", "b", "a", "c"]
    assert src == copy


@pytest.mark.parametrize(
    ("scores", "match"),
    [
        ([1.0, 2.0], "3 chunks but 2 scores"),
        ([1.0, float("nan"), 2.0], "number"),
        ([1, "x", 2], "number"),
        ([True, 1, 2], "number"),
    ],
)
def test_edge_order_rejects_bad_scores(scores, match):
    with pytest.raises(ValueError, match=match):
        edge_order(["a", "b", "c"], scores)


# --------------------------------------------------------------------------- PreflightGuard


def _rendered() -> RenderedPrompt:
    return RenderedPrompt(
        system=SYSTEM,
        messages=(
            Message("user", MESSAGES[0]["content"]),
            Message("assistant", "Six."),
            Message("user", "And which river is it?"),
        ),
    )


def test_estimate_matches_the_checker_count_and_raw_tiktoken():
    """The guard counts exactly what `needle budget` counts for the same request."""
    model = "gpt-4o"
    est = PreflightGuard(model).estimate(system=SYSTEM, messages=MESSAGES)
    settings = PromptSettings(model=model, tokenizer="tiktoken:o200k_base")
    assert est.tokens == tokens.count_prompts([_rendered()], settings)[0].tokens
    enc = tiktoken.get_encoding("o200k_base")
    text_tokens = sum(len(enc.encode_ordinary(t)) for t in _rendered().texts())
    assert text_tokens < est.tokens <= text_tokens + 4 * 8  # texts + per-message framing
    assert est.exact is True
    assert est.tokenizer == "tiktoken:o200k_base"


def test_claude_gets_the_safety_factor_and_is_not_exact():
    gpt = PreflightGuard("gpt-4o").estimate(system=SYSTEM, messages=MESSAGES)
    claude = PreflightGuard("claude-sonnet-5-5", safety_factor=1.5).estimate(system=SYSTEM, messages=MESSAGES)
    assert claude.tokens == math.ceil(gpt.tokens * 1.5)
    assert claude.exact is False


def test_openai_style_system_message_counts_like_the_system_parameter():
    guard = PreflightGuard("gpt-4o")
    a = guard.estimate(system=SYSTEM, messages=MESSAGES)
    b = guard.estimate(messages=[{"role": "system", "content": SYSTEM}, *MESSAGES])
    assert a.tokens == b.tokens


def test_token_limit_boundary_and_output_reserve():
    n = PreflightGuard("gpt-4o").estimate(system=SYSTEM, messages=MESSAGES).tokens
    assert PreflightGuard("gpt-4o", max_input_tokens=n).check(SYSTEM, MESSAGES).tokens == n
    with pytest.raises(BudgetExceeded) as exc:
        PreflightGuard("gpt-4o", max_input_tokens=n - 1).check(SYSTEM, MESSAGES)
    assert exc.value.kind == "tokens"
    assert exc.value.limit == n - 1
    assert exc.value.estimate.tokens == n
    assert f"{n} input tokens" in exc.value.format()
    assert "hint:" in exc.value.format()
    with pytest.raises(BudgetExceeded, match="reserved for output"):
        PreflightGuard("gpt-4o", max_input_tokens=n + 99, reserve_output_tokens=100).check(SYSTEM, MESSAGES)


def test_cost_uses_the_price_table_and_the_output_allowance():
    model = "claude-sonnet-5-5"
    est = PreflightGuard(model, reserve_output_tokens=200).estimate(system=SYSTEM, messages=MESSAGES)
    price = price_of(model)
    assert est.output_tokens == 200
    assert est.cost_usd == pytest.approx(
        (est.tokens * price.input_per_mtok + 200 * price.output_per_mtok) / 1e6
    )
    with_max = PreflightGuard(model).estimate(system=SYSTEM, messages=MESSAGES, max_tokens=4000)
    assert with_max.output_tokens == 4000
    assert with_max.cost_usd > est.cost_usd

    limit = with_max.cost_usd
    assert (
        PreflightGuard(model, max_cost_usd=limit).check(SYSTEM, MESSAGES, max_tokens=4000).cost_usd == limit
    )
    with pytest.raises(BudgetExceeded) as exc:
        PreflightGuard(model, max_cost_usd=limit * 0.99).check(SYSTEM, MESSAGES, max_tokens=4000)
    assert exc.value.kind == "cost"
    assert "$" in str(exc.value)


def test_unpriced_model_fails_closed_only_when_a_dollar_cap_is_set():
    assert PreflightGuard("my-finetune-7b").estimate(messages=MESSAGES).cost_usd is None
    with pytest.raises(ValueError, match="no price"):
        PreflightGuard("my-finetune-7b", max_cost_usd=0.01)


@pytest.mark.parametrize(
    "kwargs", [{"max_input_tokens": 0}, {"max_cost_usd": 0}, {"reserve_output_tokens": -1}]
)
def test_guard_rejects_nonsense_limits(kwargs):
    with pytest.raises(ValueError, match=r"must be a positive|must not be negative"):
        PreflightGuard("gpt-4o", **kwargs)


def test_estimate_is_a_plain_value():
    est = PreflightGuard("gpt-4o").check(messages=[{"role": "user", "content": "hi"}])
    assert isinstance(est, Estimate)
    assert est.tokens > 0


def _png_base64(width: int, height: int, padding: int = 750_000) -> str:
    import base64
    import struct

    head = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", width, height)
    return base64.b64encode(head + b"\0" * padding).decode()


def test_openai_tool_calls_and_tool_messages_are_kept_and_counted():
    from needle_action.tokens import load_encoding

    enc = load_encoding("o200k_base")
    call = {
        "id": "call_7",
        "type": "function",
        "function": {"name": "lookup", "arguments": '{"sku": "A-17"}'},
    }
    base = [{"role": "user", "content": "Where is A-17?"}]
    turns = [
        *base,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_7", "content": "Aisle 4, shelf 2."},
    ]
    guard = PreflightGuard("gpt-4o")
    grown = guard.estimate(messages=turns).tokens - guard.estimate(messages=base).tokens
    n = lambda t: len(enc.encode_ordinary(t))  # noqa: E731
    # the tool call (framing, name, arguments) and the tool message (framing, role, content, id):
    # nothing dropped, the tool message not turned into a user turn
    assert grown == (3 + n("assistant") + 3 + n("lookup") + n('{"sku": "A-17"}')) + (
        3 + n("tool") + n("Aisle 4, shelf 2.") + n("call_7")
    )


def test_tools_passed_to_create_are_counted():
    tools = AGENT_TOOLS[:1]  # the example agent's search tool
    guard = PreflightGuard("gpt-4o")
    bare = guard.estimate(messages=MESSAGES).tokens
    assert guard.estimate(messages=MESSAGES, tools=tools).tokens > bare + 10
    seen = []
    create = guard.wrap(lambda **kw: seen.append(kw) or "ok")
    assert create(model="gpt-4o", max_tokens=10, messages=MESSAGES, tools=tools) == "ok"
    assert seen


def test_a_base64_image_costs_its_pixels_not_its_length():
    data = _png_base64(1024, 1024)  # 1M base64 characters: ~250k tokens if read as text
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    messages = [{"role": "user", "content": [image, {"type": "text", "text": "Describe it."}]}]
    text_only = [{"role": "user", "content": "Describe it."}]
    claude = PreflightGuard("claude-sonnet-5-5", safety_factor=1.0)
    assert claude.estimate(messages=messages).tokens - claude.estimate(messages=text_only).tokens == 1399
    gpt = PreflightGuard("gpt-4o")
    url = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
    openai_msgs = [{"role": "user", "content": [url, {"type": "text", "text": "Describe it."}]}]
    assert gpt.estimate(messages=openai_msgs).tokens - gpt.estimate(messages=text_only).tokens == 765
