"""The fake Anthropic server spoken to by the real anthropic SDK (sync and async clients).

These prove the fake is faithful enough that the provider tests mean something: the SDK parses
its answers into ``Message`` objects and maps its errors onto the SDK's own exception classes. The
last test puts the simulated model behind it and sends it the haystacks the engine really builds.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket

import anthropic
import pytest

from needle_action.config import RecallSettings, load_config
from needle_action.recall.trials.haystack import HaystackBuilder
from needle_action.recall.trials.needles import make_needle
from needle_action.recall.trials.scoring import score
from needle_action.tokens import get_counter
from tests.fakes.anthropic_server import FakeAnthropic, Faults
from tests.fakes.simulated_model import SimulatedModel, flat

MODEL = "claude-sonnet-5-5"


def client(fake: FakeAnthropic, **kw) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=fake.base_url,
        api_key=kw.pop("api_key", fake.api_key),
        max_retries=0,
        timeout=kw.pop("timeout", 5.0),
        **kw,
    )


def test_message_round_trip_and_request_log():
    seen = []

    def responder(req):
        seen.append(req)
        return "The codeword is PLUM-7."

    with FakeAnthropic(responder) as fake:
        msg = client(fake).messages.create(
            model=MODEL,
            max_tokens=50,
            system="Be brief.",
            messages=[{"role": "user", "content": "What is the codeword?"}],
        )
        assert isinstance(msg, anthropic.types.Message)
        assert msg.type == "message"
        assert msg.role == "assistant"
        assert msg.model == MODEL
        assert msg.content[0].type == "text"
        assert msg.content[0].text == "The codeword is PLUM-7."
        assert msg.stop_reason == "end_turn"
        assert msg.id.startswith("msg_")
        assert msg.usage.input_tokens == fake.count_tokens("Be brief.\nWhat is the codeword?")
        assert msg.usage.output_tokens == fake.count_tokens("The codeword is PLUM-7.")
        req = fake.requests[-1]
        assert req["path"] == "/v1/messages"
        assert req["headers"]["authorization"] == f"Bearer {fake.api_key}"
        assert req["headers"]["anthropic-version"]
        assert req["json"]["system"] == "Be brief."
        assert seen[0]["messages"][0]["content"] == "What is the codeword?"
        assert fake.calls["ok"] == 1
        assert fake.calls["messages"] == 1


def test_count_tokens_endpoint_counts_system_and_messages():
    with FakeAnthropic() as fake:
        system = "You answer questions about the documents."
        text = "Document 1: the vault code is 4417.\nWhat is the vault code?"
        res = client(fake).messages.count_tokens(
            model=MODEL, system=system, messages=[{"role": "user", "content": text}]
        )
        assert res.input_tokens == fake.count_tokens(system + "\n" + text)
        assert fake.calls["count_tokens"] == 1


def test_max_tokens_cuts_the_answer():
    with FakeAnthropic(lambda r: "word " * 100) as fake:
        msg = client(fake).messages.create(
            model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "talk"}]
        )
        assert msg.stop_reason == "max_tokens"
        assert msg.usage.output_tokens == 5
        assert len(msg.content[0].text.split()) <= 5


def test_claude5_rejects_temperature_like_the_real_api():
    with FakeAnthropic() as fake:
        with pytest.raises(anthropic.BadRequestError) as info:
            client(fake).messages.create(
                model=MODEL,
                max_tokens=5,
                messages=[{"role": "user", "content": "hi"}],
                extra_body={"temperature": 0.0},
            )
        assert info.value.type == "invalid_request_error"
        assert "temperature" in info.value.api_message
        # an older model still accepts it
        msg = client(fake).messages.create(
            model="claude-opus-4-6",
            max_tokens=5,
            messages=[{"role": "user", "content": "hi"}],
            extra_body={"temperature": 0.0},
        )
        assert msg.content[0].text


def test_request_errors_map_to_sdk_exceptions():
    with FakeAnthropic() as fake:
        with pytest.raises(anthropic.AuthenticationError) as info:
            client(fake, api_key="sk-wrong").messages.create(
                model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}]
            )
        assert info.value.type == "authentication_error"
        assert info.value.request_id
        with pytest.raises(anthropic.NotFoundError) as info:
            client(fake).messages.create(
                model="claude-nonexistent-9", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
            )
        assert info.value.type == "not_found_error"
        with pytest.raises(anthropic.BadRequestError, match="system"):
            client(fake).messages.create(
                model=MODEL,
                max_tokens=5,
                messages=[{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}],
            )
        with pytest.raises(anthropic.BadRequestError, match="Extra inputs"):
            client(fake).messages.create(
                model=MODEL,
                max_tokens=5,
                messages=[{"role": "user", "content": "hi"}],
                extra_body={"frobnicate": True},
            )
        assert fake.calls["401"] == 1
        assert fake.calls["404"] == 1
        assert fake.calls["400"] == 2


def test_x_api_key_header_is_accepted():
    with FakeAnthropic() as fake:
        c = anthropic.Anthropic(
            base_url=fake.base_url,
            auth_token=None,
            api_key=None,
            default_headers={"x-api-key": fake.api_key},
            max_retries=0,
        )
        msg = c.messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        assert msg.content[0].text


def test_prompt_beyond_the_context_window_is_refused():
    with (
        FakeAnthropic(context_window=50) as fake,
        pytest.raises(anthropic.BadRequestError, match="prompt is too long"),
    ):
        client(fake).messages.create(
            model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "lorem ipsum " * 40}]
        )


@pytest.mark.parametrize(
    ("kind", "exc"),
    [
        ("429", anthropic.RateLimitError),
        ("529", anthropic.OverloadedError),
        ("500", anthropic.InternalServerError),
        ("disconnect", anthropic.APIConnectionError),
        ("timeout", anthropic.APITimeoutError),
    ],
)
def test_each_fault_kind_surfaces_as_the_sdk_error(kind, exc):
    faults = Faults(rate=1.0, kinds=(kind,), hold_s=1.0, retry_after_s=2)
    with FakeAnthropic(faults=faults) as fake:
        with pytest.raises(exc) as info:
            client(fake, timeout=0.3).messages.create(
                model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}]
            )
        if kind == "429":
            assert info.value.response.headers["retry-after"] == "2"
            assert info.value.type == "rate_limit_error"
        if kind == "529":
            assert info.value.status_code == 529
            assert info.value.type == "overloaded_error"
        assert fake.calls[kind] == 1
        assert fake.calls["faults"] == 1


def test_malformed_body_fails_to_parse():
    with FakeAnthropic(faults=Faults(rate=1.0, kinds=("malformed",))) as fake:
        # json.JSONDecodeError from the SDK's response.json()
        with pytest.raises(json.JSONDecodeError):
            client(fake).messages.create(
                model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}]
            )
        assert fake.calls["malformed"] == 1


def _fault_pattern(seed: int, n: int = 40) -> list[str]:
    with FakeAnthropic(faults=Faults(rate=0.3, kinds=("429", "500", "529")), seed=seed) as fake:
        c = client(fake)
        out = []
        for i in range(n):
            try:
                c.messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": f"q{i}"}])
                out.append("ok")
            except anthropic.APIStatusError as err:
                out.append(str(err.status_code))
        return out


def test_faults_are_deterministic_per_seed_and_near_the_rate():
    a, b, c = _fault_pattern(1), _fault_pattern(1), _fault_pattern(2)
    assert a == b
    assert a != c
    rate = sum(x != "ok" for x in a + c) / len(a + c)
    assert 0.1 < rate < 0.5, rate


def test_faults_are_bounded_per_request_so_retrying_succeeds():
    faults = Faults(rate=1.0, kinds=("500",), max_consecutive=2)
    with FakeAnthropic(faults=faults) as fake:
        c = client(fake)
        errors = 0
        while True:
            try:
                c.messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}])
                break
            except anthropic.InternalServerError:
                errors += 1
        assert errors == 2
        assert fake.calls["ok"] == 1


def test_concurrent_async_clients_are_all_served_with_latency():
    async def main(fake):
        c = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key=fake.api_key, max_retries=0)
        try:
            msgs = await asyncio.gather(
                *[
                    c.messages.create(
                        model=MODEL, max_tokens=5, messages=[{"role": "user", "content": f"n{i}"}]
                    )
                    for i in range(32)
                ]
            )
        finally:
            await c.close()
        return msgs

    with FakeAnthropic(lambda r: r["messages"][0]["content"].upper(), latency_s=0.05) as fake:
        msgs = asyncio.run(main(fake))
        assert sorted(m.content[0].text for m in msgs) == sorted(f"N{i}" for i in range(32))
        assert fake.calls["ok"] == 32
        assert len(fake.requests) == 32


def test_server_stops_and_frees_its_port():
    fake = FakeAnthropic().start()
    host, port = fake.base_url.rsplit(":", 1)[0][7:], int(fake.base_url.rsplit(":", 1)[1])
    fake.stop()
    with pytest.raises(OSError):  # noqa: PT011 - refused or timed out: either shows the port is closed
        socket.create_connection((host, port), timeout=0.5)


# --------------------------------------------------------------------------- the simulated model behind it


def test_real_trials_through_the_fake_server_and_sdk(examples_dir):
    """Haystacks the engine really builds, sent through the SDK: the simulated model finds every needle."""
    config = load_config(examples_dir / "needle.toml")
    settings = RecallSettings(needle="distractors")
    with FakeAnthropic(responder=SimulatedModel(flat(1.0))) as fake:
        client = anthropic.Anthropic(base_url=fake.base_url, api_key=fake.api_key, max_retries=0)
        for name in ("rag_answer", "support_agent", "summarize_ticket"):
            prompt = config.prompts[name].model_copy(update={"tokenizer": "tiktoken:o200k_base"})
            counter = get_counter(prompt.tokenizer, model="gpt-4o", settings=prompt)
            builder = HaystackBuilder(config, prompt, counter, seed=0)
            for depth in (0.0, 0.5, 1.0):
                needle = make_needle(settings, random.Random(f"{name}:{depth}"))
                trial = builder.build(3000, depth, needle, trial=0)
                body = trial.rendered.to_json()
                msg = client.messages.create(
                    model="claude-sonnet-5-5", max_tokens=32, system=body["system"], messages=body["messages"]
                )
                assert score(msg.content[0].text, needle, settings), (name, depth, msg.content[0].text)
    assert not fake.responder_errors
