"""Token counting behind one interface, each count labelled exact or approximate.

Counters (the ``tokenizer`` key of a prompt):

``tiktoken:o200k_base`` / ``tiktoken:cl100k_base``
    OpenAI's BPE encodings, offline. Exact only for an OpenAI model that uses that encoding
    (``gpt-4o`` -> o200k_base, ``gpt-4`` -> cl100k_base, ...). A chat request is counted the way
    OpenAI documents it: every message costs its content, its role, and 3 framing tokens, and the
    reply is primed with 3 more (see docs/tokens.md). Counting a Claude model this way is an
    approximation, so ``count_prompts`` multiplies by ``tokenizer_safety_factor``.
``anthropic``
    Exact: ``messages.count_tokens`` on the whole request, system included (one HTTP call each).
``local``
    The embedded model's own tokenizer (llama-cpp-python, vocabulary only), on exactly the text the
    local provider feeds the model: the chat laid out by the gguf's chat template, or, for a base
    model without one (the bundled Gemma 3 270M), the provider's plain transcript plus BOS.

``count_prompts`` is the fast path the pipeline uses: it keeps a process-wide cache keyed by
(counter, content hash), so the base and head of an unchanged prompt, or recall trials that repeat
a prompt, are never encoded twice, and it sends every uncached text of a batch to the encoder in
one ``encode_ordinary_batch`` call.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache, lru_cache
from pathlib import Path
from typing import Protocol

from needle_action.assemble import RenderedPrompt
from needle_action.config import PromptSettings, ProviderSettings
from needle_action.errors import ConfigError, ProviderUnavailable, TokenizerError
from needle_action.results import TokenCount

# OpenAI's documented chat overhead (cookbook "How to count tokens with tiktoken"): each message is
# framed as <|start|>{role}\n{content}<|end|>\n: 3 framing tokens + the role's own tokens; every
# reply is primed with <|start|>assistant<|message|>: 3 tokens.
TOKENS_PER_MESSAGE = 3
TOKENS_REPLY_PRIMING = 3

TIKTOKEN_ENCODINGS = ("o200k_base", "cl100k_base")


class TokenCounter(Protocol):
    name: str  # e.g. "tiktoken:o200k_base", "anthropic", "local:gemma3-270m"
    exact: bool  # True when this is the model's own tokenizer / API
    cache_id: str  # what the count cache is keyed by (name + anything else the count depends on)

    def count_texts(self, texts: list[str]) -> list[int]: ...

    def count_prompt(self, prompt: RenderedPrompt) -> int: ...


def is_claude(model: str) -> bool:
    return "claude" in model.lower()


# --------------------------------------------------------------------------------------------
# tiktoken


def _tiktoken_fix_hint() -> str:
    return (
        "the encodings ship in the `bpe-openai` package: `pip install bpe-openai` then "
        '`python -m needle_action.tokens.tiktoken_cache "$TIKTOKEN_CACHE_DIR"`, '
        "or set TIKTOKEN_CACHE_DIR to a folder that already holds tiktoken's cached files"
    )


@cache
def _load_encoding(encoding: str):
    """Load a tiktoken encoding without ever touching the network.

    tiktoken downloads a missing encoding and only fails after a network timeout on an offline
    machine, so we check its cache file first (seeding it from bpe-openai when installed).
    """
    import tiktoken

    from needle_action.tokens import tiktoken_cache

    if encoding not in TIKTOKEN_ENCODINGS:
        raise TokenizerError(
            f"unsupported tiktoken encoding {encoding!r}",
            hint=f"use one of: {', '.join('tiktoken:' + e for e in TIKTOKEN_ENCODINGS)}",
        )
    if not tiktoken_cache.ensure(encoding):
        where = os.environ.get("TIKTOKEN_CACHE_DIR")
        where = (
            "(caching disabled: TIKTOKEN_CACHE_DIR is empty)"
            if where == ""
            else str(tiktoken_cache.cache_path(tiktoken_cache.default_cache_dir(), encoding))
        )
        raise TokenizerError(
            f"tiktoken encoding {encoding} is not available offline: no cached file at {where}",
            hint=_tiktoken_fix_hint(),
        )
    try:
        return tiktoken.get_encoding(encoding)
    except Exception as exc:  # corrupt cache file that tiktoken then tried to re-download, ...
        raise TokenizerError(
            f"tiktoken could not load {encoding}: {type(exc).__name__}: {exc}", hint=_tiktoken_fix_hint()
        ) from None


def _openai_encoding_for(model: str) -> str | None:
    from tiktoken.model import encoding_name_for_model

    try:
        return encoding_name_for_model(model)
    except KeyError:
        return None


class TiktokenCounter:
    def __init__(self, encoding: str, *, model: str) -> None:
        self.encoding = encoding
        self._enc = _load_encoding(encoding)
        self.name = f"tiktoken:{encoding}"
        self.cache_id = self.name
        self.exact = _openai_encoding_for(model) == encoding
        self._role_tokens = {r: len(self._enc.encode_ordinary(r)) for r in ("system", "user", "assistant")}

    def count_texts(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        if len(texts) == 1:  # skip the thread pool for a single text
            return [len(self._enc.encode_ordinary(texts[0]))]
        return [len(ids) for ids in self._enc.encode_ordinary_batch(texts)]

    def overhead(self, prompt: RenderedPrompt) -> int:
        """Framing tokens of a chat request on top of its message texts."""
        roles = (["system"] if prompt.system else []) + [m.role for m in prompt.messages]
        return sum(TOKENS_PER_MESSAGE + self._role_tokens.get(r, 1) for r in roles) + TOKENS_REPLY_PRIMING

    def count_prompt(self, prompt: RenderedPrompt) -> int:
        return sum(self.count_texts(prompt.texts())) + self.overhead(prompt)

    def count_many(self, prompts: Sequence[RenderedPrompt]) -> list[int]:
        """All texts of all PROMPTS in one batch call (the fast path of ``count_prompts``)."""
        texts: list[str] = []
        spans: list[tuple[int, int]] = []
        for p in prompts:
            t = p.texts()
            spans.append((len(texts), len(texts) + len(t)))
            texts.extend(t)
        counts = self.count_texts(texts)
        return [sum(counts[a:b]) + self.overhead(p) for p, (a, b) in zip(prompts, spans, strict=True)]


# --------------------------------------------------------------------------------------------
# anthropic


class AnthropicCounter:
    """Exact counts from the Messages API's ``count_tokens`` endpoint (official SDK)."""

    name = "anthropic"
    exact = True

    def __init__(self, *, model: str, provider_settings: ProviderSettings) -> None:
        import anthropic  # slow to import: only when this counter is asked for

        # the provider's own key lookup, so a key that works for recall works for counting too
        from needle_action.providers.anthropic import client_auth, find_key

        try:
            key_env, key = find_key(provider_settings.api_key_env)
        except ProviderUnavailable:
            key_env = provider_settings.api_key_env or "ANTHROPIC_API_KEY"
            raise ProviderUnavailable(
                f'tokenizer "anthropic" needs an API key: ${key_env} is not set',
                hint=f'export {key_env}=..., or count offline with tokenizer = "tiktoken:o200k_base" '
                "(approximate; the safety factor is applied)",
            ) from None

        self.model = model
        self.cache_id = f"anthropic:{model}"
        # base_url None lets the SDK honour ANTHROPIC_BASE_URL itself
        self._client = anthropic.Anthropic(
            **client_auth(key_env, key),
            base_url=provider_settings.base_url or None,
            timeout=provider_settings.timeout_s,
            max_retries=provider_settings.max_retries,
        )
        self._anthropic = anthropic

    def _count(self, system: str | None, messages: list[dict]) -> int:
        a = self._anthropic
        kwargs: dict = {"model": self.model, "messages": messages}
        if system:
            kwargs["system"] = system
        try:
            return int(self._client.messages.count_tokens(**kwargs).input_tokens)
        except (a.AuthenticationError, a.PermissionDeniedError) as exc:
            raise ProviderUnavailable(
                f"Anthropic refused the token-count request ({exc.status_code})",
                hint="check the API key (it is never printed) and its permissions",
            ) from None
        except a.NotFoundError:
            raise ConfigError(
                f"Anthropic does not know the model {self.model!r}",
                hint="check `model` in the threshold file",
            ) from None
        except a.BadRequestError as exc:
            raise ConfigError(f"Anthropic rejected the request to count: {_api_message(exc)}") from None
        except (a.APIConnectionError, a.APITimeoutError, a.InternalServerError, a.RateLimitError) as exc:
            raise ProviderUnavailable(
                f"cannot reach Anthropic to count tokens: {type(exc).__name__}",
                hint="check the network / ANTHROPIC_BASE_URL, or count offline with a tiktoken tokenizer",
            ) from None
        except a.APIStatusError as exc:
            raise ProviderUnavailable(f"Anthropic token count failed with HTTP {exc.status_code}") from None

    def count_prompt(self, prompt: RenderedPrompt) -> int:
        messages = [{"role": m.role, "content": m.content} for m in prompt.messages]
        if not messages:  # the API needs one message; a system-only template sends an empty user turn
            messages = [{"role": "user", "content": ""}]
        return self._count(prompt.system, messages)

    def count_texts(self, texts: list[str]) -> list[int]:
        """Each text as a lone user message (the API has no raw-text endpoint): includes its framing."""
        return [self._count(None, [{"role": "user", "content": t}]) for t in texts]


def _api_message(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"][:300]
    return f"HTTP {getattr(exc, 'status_code', '?')}"


# --------------------------------------------------------------------------------------------
# local (llama-cpp-python)


@lru_cache(maxsize=4)
def _load_vocab(path: str):
    """The gguf's vocabulary only: no weights, so loading is quick."""
    from llama_cpp import Llama

    try:  # llama.cpp logs from C even with verbose=False; keep `needle budget`'s output clean
        from llama_cpp._utils import suppress_stdout_stderr
    except ImportError:  # private helper: fine to lose
        return Llama(model_path=path, vocab_only=True, verbose=False)
    with suppress_stdout_stderr(disable=False):
        return Llama(model_path=path, vocab_only=True, verbose=False)


class LocalCounter:
    """The embedded model's own tokenizer."""

    def __init__(self, *, model: str, settings: PromptSettings) -> None:
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            raise TokenizerError(
                'tokenizer "local" needs llama-cpp-python',
                hint="pip install 'needle-action[local]' (compiles llama.cpp, a few minutes), "
                'or use tokenizer = "tiktoken:o200k_base"',
            ) from None
        ps = settings.providers.get("local") or ProviderSettings()
        if ps.model_path:
            path = Path(ps.model_path)
        else:
            from needle_action.errors import ProviderUnavailable
            from needle_action.providers.local_model import model_path

            try:
                path = model_path()
            except ProviderUnavailable as exc:  # counting needs no provider: a setup error (exit 2)
                raise TokenizerError(exc.message, hint=exc.hint) from None
        if not Path(path).is_file():
            raise TokenizerError(
                f"local model file not found: {path}", hint="set [providers.local] model_path"
            )
        self.path = Path(path)
        self.name = f"local:{model}"
        self.cache_id = f"local:{self.path.resolve()}"
        self.exact = settings.provider == "local"
        self._llama = _load_vocab(str(self.path))
        self._lock = threading.Lock()  # llama.cpp's tokenizer context is not documented as thread-safe
        self._chat = _chat_formatter(self._llama)

    def _tokenize(self, data: bytes, *, special: bool) -> int:
        with self._lock:
            return len(self._llama.tokenize(data, add_bos=False, special=special))

    def count_texts(self, texts: list[str]) -> list[int]:
        return [self._tokenize(t.encode("utf-8"), special=False) for t in texts]

    def request_text(self, prompt: RenderedPrompt) -> tuple[str, bool]:
        """The text the local provider feeds the model, and whether it already holds the BOS."""
        messages = ([{"role": "system", "content": prompt.system}] if prompt.system else []) + [
            {"role": m.role, "content": m.content} for m in prompt.messages
        ]
        if self._chat is not None:  # the gguf's chat template writes its own <bos> and turn markers
            return self._chat(messages=messages).prompt, True
        # a base model (the bundled Gemma): the provider's plain transcript, llama.cpp prepends BOS
        from needle_action.providers.local import transcript

        return transcript(messages), False

    def count_prompt(self, prompt: RenderedPrompt) -> int:
        text, has_bos = self.request_text(prompt)
        # special=True like llama.cpp's completion call: marker text counts as the special token it is
        return self._tokenize(text.encode("utf-8"), special=True) + (0 if has_bos else 1)


def _chat_formatter(llama):
    template = (llama.metadata or {}).get("tokenizer.chat_template")
    if not template:
        return None
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    def piece(token_id: int) -> str:
        return llama.detokenize([token_id], special=True).decode("utf-8", errors="ignore")

    return Jinja2ChatFormatter(
        template=template,
        eos_token=piece(llama.token_eos()),
        bos_token=piece(llama.token_bos()),
        add_generation_prompt=True,
    )


# --------------------------------------------------------------------------------------------
# the one entry point and the cached batch path

_counters: dict[tuple, TokenCounter] = {}
_counters_lock = threading.Lock()


def get_counter(spec: str, *, model: str, settings: PromptSettings) -> TokenCounter:
    """The counter for tokenizer SPEC (``tiktoken:ENC``, ``anthropic``, ``local``), built once."""
    provider_key = spec if spec in ("anthropic", "local") else None
    ps = settings.providers.get(provider_key) if provider_key else None
    key = (spec, model, settings.provider, ps.model_dump_json() if ps else None)
    with _counters_lock:
        if key in _counters:
            return _counters[key]
    if spec == "anthropic":
        # not kept: the key and ANTHROPIC_BASE_URL are read from the environment each time
        return AnthropicCounter(model=model, provider_settings=ps or ProviderSettings())
    if spec.startswith("tiktoken:"):
        counter: TokenCounter = TiktokenCounter(spec.split(":", 1)[1], model=model)
    elif spec == "local":
        counter = LocalCounter(model=model, settings=settings)
    else:
        raise ConfigError(
            f"unknown tokenizer {spec!r}",
            hint='use "tiktoken:o200k_base", "tiktoken:cl100k_base", "anthropic" or "local"',
        )
    with _counters_lock:
        return _counters.setdefault(key, counter)


_cache: dict[tuple[str, str], int] = {}
_cache_lock = threading.Lock()
_cache_enabled = True


def set_cache_enabled(enabled: bool) -> None:
    """Switch the count cache on or off (the benchmark measures both)."""
    global _cache_enabled
    _cache_enabled = enabled


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


def safety_factor_for(counter: TokenCounter, settings: PromptSettings) -> float:
    """tiktoken's count of a Claude prompt is an estimate: pad it by the configured factor."""
    if isinstance(counter, TiktokenCounter) and is_claude(settings.model):
        return settings.tokenizer_safety_factor
    return 1.0


def _apply_factor(raw: int, factor: float) -> int:
    # round first so that 1000 * 1.15 (= 1150.0000000000002 in floating point) is 1150, not 1151
    return math.ceil(round(raw * factor, 6)) if factor != 1.0 else raw


def count_prompts(prompts: Sequence[RenderedPrompt], prompt_settings: PromptSettings) -> list[TokenCount]:
    """Count every prompt with PROMPT_SETTINGS' tokenizer; cached by (counter, content hash)."""
    counter = get_counter(prompt_settings.tokenizer, model=prompt_settings.model, settings=prompt_settings)
    keys = [(counter.cache_id, p.content_hash()) for p in prompts]
    raw: dict[tuple[str, str], int] = {}
    if _cache_enabled:
        with _cache_lock:
            raw = {k: _cache[k] for k in keys if k in _cache}
    todo: dict[tuple[str, str], RenderedPrompt] = {}
    for k, p in zip(keys, prompts, strict=True):
        if k not in raw and k not in todo:
            todo[k] = p
    if todo:
        pending = list(todo.values())
        if isinstance(counter, TiktokenCounter):
            counted = counter.count_many(pending)
        elif isinstance(counter, AnthropicCounter) and len(pending) > 1:
            with ThreadPoolExecutor(max_workers=min(8, len(pending))) as pool:  # one HTTP call each
                counted = list(pool.map(counter.count_prompt, pending))
        else:
            counted = [counter.count_prompt(p) for p in pending]
        fresh = dict(zip(todo, counted, strict=True))
        raw.update(fresh)
        if _cache_enabled:
            with _cache_lock:
                _cache.update(fresh)
    factor = safety_factor_for(counter, prompt_settings)
    return [
        TokenCount(
            tokens=_apply_factor(raw[k], factor),
            raw_tokens=raw[k],
            counter=counter.name,
            exact=counter.exact,
            safety_factor=factor,
        )
        for k in keys
    ]
