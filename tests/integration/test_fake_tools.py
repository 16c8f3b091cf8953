"""The fake Anthropic API with tools: count_tokens counts them, orphan tool_results are refused,
and the simulated model reads a needle inside a tool_result (real SDK, real HTTP)."""

from __future__ import annotations

import asyncio
import json

import anthropic
import pytest

from needle_action.config import PromptSettings, ProviderSettings
from needle_action.providers.anthropic import AnthropicProvider
from needle_action.request.prompt import RenderedPrompt
from needle_action.tokens import count_prompts
from tests.fakes.anthropic_request import TOOLS_OVERHEAD
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.simulated_model import SimulatedModel, flat
from tests.samples import after_tool_call, tool

MODEL = "claude-sonnet-5-5"


def tools(n: int) -> tuple[dict, ...]:
    return tuple(
        tool(
            f"lookup_{i}",
            f"Look up record kind {i} by its id and return the stored fields.",
            {"id": {"type": "string", "description": "the record id"}},
            required=("id",),
        )
        for i in range(n)
    )


def agent_prompt(context: str, n_tools: int = 12) -> RenderedPrompt:
    return after_tool_call(
        "Find the vault code.",
        {"type": "tool_use", "id": "toolu_1", "name": "lookup_0", "input": {"id": "v"}},
        (
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": context},
            {"type": "text", "text": "What is the vault code? Answer with the code only."},
        ),
        system="You answer from the records the tools return.",
        tools=tools(n_tools),
    )


def client(fake: FakeAnthropic) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=fake.base_url, api_key=fake.api_key, max_retries=0, timeout=5.0)


def test_twelve_tool_schemas_count_exactly_what_count_tokens_returns(monkeypatch):
    prompt = agent_prompt("Record: the vault code is QZT-4821-KLM.")
    with FakeAnthropic() as fake:
        fake.point_env(monkeypatch)
        (count,) = count_prompts([prompt], PromptSettings(tokenizer="anthropic", model=MODEL))
        body = next(r["json"] for r in fake.requests if "tools" in r["json"])
        assert len(body["tools"]) == 12
        assert body["messages"][2]["content"][0]["type"] == "tool_result"
        # what count_tokens answers for exactly that body, by the fake's documented rule
        answer = client(fake).messages.count_tokens(**body).input_tokens
        texts = [json.dumps(t, sort_keys=True, separators=(",", ":")) for t in body["tools"]]
        texts += [body["system"], "Find the vault code.", 'lookup_0({"id":"v"})']
        texts += [
            "Record: the vault code is QZT-4821-KLM.\n\nWhat is the vault code? Answer with the code only."
        ]
        assert count.tokens == answer == fake.count_tokens("\n".join(texts)) + TOOLS_OVERHEAD
        # the tools section is what the tools add, exactly: the count without them, subtracted
        bare = {k: v for k, v in body.items() if k != "tools"}
        assert count.sections["tools"] == answer - client(fake).messages.count_tokens(**bare).input_tokens
        assert count.sections["tools"] > 12 * 20
        assert sum(count.sections.values()) == count.tokens


@pytest.mark.parametrize("endpoint", ["create", "count_tokens"])
def test_a_tool_result_without_its_tool_use_is_refused(endpoint):
    orphan = [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}]},
    ]
    with FakeAnthropic() as fake:
        call = getattr(client(fake).messages, endpoint)
        kwargs = {"max_tokens": 10} if endpoint == "create" else {}
        with pytest.raises(anthropic.BadRequestError) as err:
            call(model=MODEL, messages=orphan, **kwargs)
        assert "tool_use_id" in err.value.message
        assert "toolu_9" in err.value.message
        with pytest.raises(anthropic.BadRequestError, match="does not match any of the expected tags"):
            call(model=MODEL, messages=[{"role": "user", "content": [{"type": "video"}]}], **kwargs)


def test_the_simulated_model_finds_the_needle_inside_a_tool_result(monkeypatch):
    model = SimulatedModel(flat(1.0))
    context = (
        "Filler about the weather. " * 40 + "The vault code is QZT-4821-KLM. " + "More filler text. " * 40
    )
    with FakeAnthropic(model) as fake:
        fake.point_env(monkeypatch)
        provider = AnthropicProvider(MODEL, ProviderSettings())
        reply = asyncio.run(_complete(provider, agent_prompt(context)))
    assert reply.text == "QZT-4821-KLM"
    assert reply.tool_call is None
    (obs,) = model.observations
    assert obs.value == "QZT-4821-KLM"
    assert 0.4 < obs.depths[0] < 0.9


def test_a_tool_call_reply_comes_back_as_one(monkeypatch):
    model = SimulatedModel(flat(1.0), tool_call_rate=1.0)
    with FakeAnthropic(model) as fake:
        fake.point_env(monkeypatch)
        provider = AnthropicProvider(MODEL, ProviderSettings())
        reply = asyncio.run(_complete(provider, agent_prompt("The vault code is QZT-4821-KLM.")))
    assert reply.tool_call == "lookup_0"
    assert reply.text == ""
    assert model.tool_calls == 1


async def _complete(provider, prompt):
    try:
        return await provider.complete(prompt, max_output_tokens=32)
    finally:
        await provider.aclose()


def test_a_breakpoint_inside_a_tool_result_is_written_then_read(monkeypatch):
    from needle_action.providers.base import Breakpoint

    shared = "Filler about the depot and its ramps. " * 30
    with FakeAnthropic(cache_min_tokens=50) as fake:
        fake.point_env(monkeypatch)
        provider = AnthropicProvider(MODEL, ProviderSettings())

        async def both():
            out = []
            for code in ("QZT-4821-KLM", "BRX-1234-PLQ"):
                prompt = agent_prompt(shared + f"The vault code is {code}.")
                mark = (Breakpoint(2, len(shared), cache=True),)
                out.append(await provider.complete(prompt, max_output_tokens=16, breakpoints=mark))
            await provider.aclose()
            return out

        first, second = asyncio.run(both())
        body = fake.requests[-1]["json"]
    assert first.cache_write_tokens > 0
    assert first.cache_read_tokens == 0
    assert second.cache_read_tokens == first.cache_write_tokens
    result = body["messages"][2]["content"][0]
    assert result["content"][0] == {"type": "text", "text": shared, "cache_control": {"type": "ephemeral"}}


def test_a_config_with_twelve_tools_budgets_what_count_tokens_returns(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from needle_action.cli import main
    from tests.builders import Project

    project = Project(tmp_path).template(
        "prompts/agent.j2", "system:\nUse the tools.\nuser:\n{{ question }}\n"
    )
    project.fixture("fixtures/a.yaml", 'question: "Where is record 7?"\n')
    project.file("tools.json", json.dumps(list(tools(12))))
    config = project.config(
        f"""
        [prompts.agent]
        template = "prompts/agent.j2"
        fixtures = ["fixtures/a.yaml"]
        model = "{MODEL}"
        tokenizer = "anthropic"
        tools = "tools.json"
        """
    ).config_path
    with FakeAnthropic() as fake:
        fake.point_env(monkeypatch)
        out = tmp_path / "r.json"
        result = CliRunner().invoke(main, ["budget", "--config", str(config), "--json", str(out)])
        assert result.exit_code == 0, result.output
        (case,) = json.loads(out.read_text())["prompts"][0]["cases"]
        full = next(r["json"] for r in fake.requests if len(r["json"].get("tools", [])) == 12)
        answer = client(fake).messages.count_tokens(**full).input_tokens
    assert case["count"]["tokens"] == answer
    assert case["count"]["exact"] is True
    assert case["sections"]["tools"] > 12 * 20
    assert sum(case["sections"].values()) == answer
