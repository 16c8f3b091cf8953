"""Batched counting (tokens/counting.py, TiktokenCounter.count_many) gives exactly the counts and
sections of counting each request on its own, on the example prompts (templates, a builder's
request with tools and tool results, a recorded request) and on requests with tools, tool calls,
images and a response schema; for tiktoken and for the embedded model's tokenizer."""

from __future__ import annotations

import base64
import struct
from pathlib import Path

import pytest

import needle_action.tokens as tokens
from needle_action.assemble.render import render_case
from needle_action.config import PromptSettings, load_config
from needle_action.request.prompt import ContextSlot, Message, RenderedPrompt
from needle_action.tokens import TiktokenCounter, count_prompts, get_counter, sections
from needle_action.tokens.base import TokenCounter
from needle_action.tokens.counting import safety_factor_for
from tests.samples import weather_agent

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "input_schema": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
    },
}
SCHEMA = {"type": "json_schema", "schema": {"type": "object", "properties": {"queue": {"type": "string"}}}}


pytestmark = pytest.mark.usefixtures("fresh_token_cache")


def _png(width: int, height: int) -> str:
    head = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", width, height)
    return base64.b64encode(head + b"\0" * 64).decode()


def _agent(question: str) -> RenderedPrompt:
    """Tools, a tool call and its result (the context slot), an image, a schema, a thinking budget."""
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _png(800, 600)}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "12 C, rain over the Seine. " * 20}
    return weather_agent(
        (result, image, {"type": "text", "text": question}),
        (WEATHER,),
        system="You are terse. Answer from the tool results.",
        params={"output_config": {"format": SCHEMA}, "thinking": {"type": "enabled", "budget_tokens": 2048}},
        context_slot=ContextSlot(2, 0),
    )


def _fixtures_or_none(paths: list[Path]) -> list[Path | None]:
    """A recorded request has no fixture: it is rendered once, with None."""
    return [*paths] if paths else [None]


@pytest.fixture(scope="module")
def requests() -> list[RenderedPrompt]:
    """Every example prompt x fixture (builder and recorded request too), hand-made agent requests,
    and repeats: the same request twice, and texts shared between requests."""
    config = load_config(EXAMPLES / "needle.toml")
    out = [
        render_case(config, p, fx)
        for p in config.prompts.values()
        for fx in _fixtures_or_none(config.fixture_paths(p))
    ]
    assert len(out) == 10, "8 template cases, a builder's request, a recorded request"
    assert any(r.tools for r in out), "the builder's request carries tools"
    out += [_agent("Umbrella?"), _agent("Coat?"), RenderedPrompt(system="", messages=(Message("user", ""),))]
    return [*out, out[0]]


def _one_by_one(counter: TokenCounter, prompt: RenderedPrompt) -> tuple[int, dict[str, int]]:
    """The reference: the request, then each section variant, counted on its own."""
    raw = counter.count_prompt(prompt)
    return raw, sections.by_difference(prompt, raw, lambda vs: [counter.count_prompt(v) for v in vs])


def _check_against_one_by_one(requests: list[RenderedPrompt], settings: PromptSettings) -> None:
    counter = get_counter(settings.tokenizer, model=settings.model, settings=settings)
    factor = safety_factor_for(counter, settings)
    for cache in (False, True, True):  # off, cold, warm
        tokens.set_cache_enabled(cache)
        counts = count_prompts(requests, settings)
        for prompt, c in zip(requests, counts, strict=True):
            raw, parts = _one_by_one(counter, prompt)
            assert c.raw_tokens == raw, (cache, prompt.fixture)
            assert c.sections == sections.scaled(parts, raw, c.tokens), (cache, prompt.fixture)
            assert c.safety_factor == factor


@pytest.mark.parametrize(
    ("encoding", "model"),
    [
        ("o200k_base", "gpt-4o"),
        ("cl100k_base", "gpt-4"),  # other tool overheads
        ("o200k_base", "claude-sonnet-5-5"),  # images by Anthropic's rule, the safety factor
        ("o200k_base", "llama-3.1-8b"),
    ],
)
def test_batched_tiktoken_counts_equal_one_by_one(requests, encoding, model):
    _check_against_one_by_one(requests, PromptSettings(tokenizer=f"tiktoken:{encoding}", model=model))


def test_one_batch_encodes_every_distinct_text_once(requests, monkeypatch):
    settings = PromptSettings(tokenizer="tiktoken:o200k_base", model="gpt-4o")
    calls: list[list[str]] = []
    real = TiktokenCounter.count_texts

    def spy(self, texts):
        calls.append(list(texts))
        return real(self, texts)

    monkeypatch.setattr(TiktokenCounter, "count_texts", spy)
    tokens.set_cache_enabled(False)
    count_prompts(requests, settings)
    assert len(calls) == 1  # the requests and all their section variants: one encoder batch
    (texts,) = calls
    assert len(texts) == len(set(texts))
    system = requests[0].system
    assert system is not None
    assert system in texts  # the same system text, in many requests and variants: encoded once
    assert "get_weather:Weather for a city" in texts  # a tool, as the cookbook counts it


@pytest.mark.model
@pytest.mark.slow
def test_batched_local_counts_equal_one_by_one(requests):
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        pytest.skip("llama-cpp-python is not installed (the [local] extra)")
    plain = [r for r in requests if not r.tools]  # the local provider sends plain text turns
    _check_against_one_by_one(plain, PromptSettings(tokenizer="local", provider="local", model="gemma3-270m"))


# ------------------------------------------------------------------ Anthropic: an HTTP call each


def _claude() -> PromptSettings:
    return PromptSettings(tokenizer="anthropic", model="claude-sonnet-5-5")


@pytest.mark.slow
def test_anthropic_counts_run_concurrently(requests, monkeypatch):
    from tests.fakes.anthropic_server import FakeAnthropic

    templates = [r for r in requests if not r.tools][:8]
    with FakeAnthropic(latency_s=0.25) as fake:
        fake.point_env(monkeypatch)
        tokens.set_cache_enabled(False)
        counts = count_prompts(templates, _claude())
        calls, peak = fake.calls["count_tokens"], fake.peak_in_flight
    assert calls > len(templates)  # each request and its section variants: one call each
    assert peak > 1  # one by one, the server would never hold two at once
    assert [c.raw_tokens for c in counts] == [fake.count_tokens("\n".join(r.texts())) for r in templates]


def test_a_wrong_key_fails_on_the_first_call_not_on_every_request(requests, monkeypatch):
    from needle_action.core.errors import ProviderUnavailable
    from tests.fakes.anthropic_server import FakeAnthropic

    with FakeAnthropic() as fake:
        fake.point_env(monkeypatch)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-wrong")
        with pytest.raises(ProviderUnavailable):
            count_prompts(requests, _claude())
        assert fake.calls["401"] == 1
