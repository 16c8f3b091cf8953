"""OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp server) via the ``openai`` SDK.

* Base URL: ``providers.openai.base_url``, else ``OPENAI_BASE_URL``, else OpenAI's own API.
* Key: ``$<api_key_env>``, else ``OPENAI_API_KEY``. Required for OpenAI's API; optional for a
  self-hosted server (a placeholder is sent, as those servers ignore it).
* Sampling: nothing is sent to OpenAI's API (its reasoning models refuse ``temperature``); to a
  self-hosted server we send ``temperature=0`` so the open model decodes greedily and runs repeat.
* The request is the prompt's own chat body (``request.wire.openai_body``): its tools as
  functions, assistant ``tool_calls``, ``role: "tool"`` messages and its parameters. A reply that
  calls a tool comes back as ``Completion.tool_call`` (recall scores it as a miss of its own kind).
* ``max_completion_tokens`` for OpenAI (``max_tokens`` is deprecated there and refused by o-series
  models), ``max_tokens`` for self-hosted servers (what vLLM, Ollama and llama.cpp all accept).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

import openai

from needle_action.config import ProviderSettings
from needle_action.core import environment
from needle_action.core.dataformats import JSON
from needle_action.core.errors import ConfigError, ProviderUnavailable
from needle_action.providers import specs
from needle_action.providers.base import Breakpoint, Completion
from needle_action.providers.retry import (
    MalformedResponse,
    Reply,
    Retry,
    RetryingProvider,
    classify_status,
)
from needle_action.providers.specs import SPECS
from needle_action.request.prompt import RenderedPrompt
from needle_action.request.wire import openai_body

OPENAI_HOSTS = ("api.openai.com",)
PLACEHOLDER_KEY = "sk-no-key-needed"


def _without_credentials(url: str | None) -> str:
    """The URL for messages, with any ``user:password@`` removed (it may hold a key)."""
    if not url:
        return "OpenAI API"
    parts = urlparse(url)
    if parts.username or parts.password:
        parts = parts._replace(netloc=(parts.hostname or "") + (f":{parts.port}" if parts.port else ""))
    return parts.geturl()


def is_openai_cloud(base_url: str | None) -> bool:
    if not base_url:
        return True
    host = urlparse(base_url).hostname or ""
    return host in OPENAI_HOSTS or host.endswith(".openai.azure.com")


class OpenAICompatProvider(RetryingProvider):
    name = "openai"
    _client: openai.AsyncOpenAI
    # these servers cache shared prefixes by themselves (OpenAI, vLLM, llama.cpp's server): the
    # breakpoints are ignored (no markers to send), but the scheduler orders the requests as for
    # explicit caching -- each prefix's first request alone, the ones that share it after it
    prompt_cache = True

    def __init__(self, model: str, settings: ProviderSettings | None = None, **retry_kw: Any) -> None:
        super().__init__(model, settings, **retry_kw)  # retry_kw: sleep=, rng= (tests inject them)
        settings = self.settings
        self.base_url = specs.base_url("openai", settings.base_url, environment.process())
        self.cloud = is_openai_cloud(self.base_url)
        self.key_env = settings.api_key_env or SPECS["openai"].key_envs[0]
        key = environment.value(self.key_env)
        if not key and self.cloud:
            raise ProviderUnavailable(
                f"no OpenAI API key: ${self.key_env} is not set",
                hint=f"export {self.key_env}=..., or set providers.openai.base_url to a self-hosted "
                'server (vLLM, Ollama, llama.cpp), or use provider = "local"',
            )
        self._client = openai.AsyncOpenAI(
            api_key=key or PLACEHOLDER_KEY, base_url=self.base_url, max_retries=0, timeout=settings.timeout_s
        )

    def build_request(self, prompt: RenderedPrompt, max_output_tokens: int) -> JSON:
        """The chat body (``request.wire.openai_body``: tools as functions, assistant
        ``tool_calls``, ``role: "tool"`` messages, the prompt's parameters), with the token limit
        under the name this server takes and, for a self-hosted server, greedy decoding."""
        if not any(m.role == "user" for m in prompt.messages):
            raise ConfigError(
                "the prompt has no user message to send",
                file=prompt.source or None,
                hint="a prompt needs at least one user turn besides the system text",
            )
        request = openai_body(prompt, self.model, max_output_tokens)
        request.pop("max_tokens", None)
        request.pop("max_completion_tokens", None)
        if self.cloud:
            request["max_completion_tokens"] = max_output_tokens
        else:
            request["max_tokens"] = max_output_tokens
            request.setdefault("temperature", 0)
        return request

    async def complete(
        self, prompt: RenderedPrompt, *, max_output_tokens: int, breakpoints: tuple[Breakpoint, ...] = ()
    ) -> Completion:
        request = self.build_request(prompt, max_output_tokens)

        async def attempt() -> Reply:
            raw = await self._client.chat.completions.with_raw_response.create(**request)
            return parse_completion(raw.parse(), raw.headers)  # openai: parse() is not awaitable

        return await self._complete_with_retries(attempt)

    def _classify(self, exc: BaseException) -> Retry | BaseException:
        if isinstance(exc, openai.APITimeoutError):
            return Retry("timeout")
        if isinstance(exc, openai.APIConnectionError):
            if self.cloud:
                return Retry("connection error")
            # a local server that is not running will not start by itself; but it may be starting
            return Retry(f"connection error ({_without_credentials(self.base_url)})")
        if isinstance(exc, openai.APIStatusError):
            body = exc.body if isinstance(exc.body, dict) else {}
            err = body.get("error", body) if isinstance(body, dict) else {}
            message = err.get("message") if isinstance(err, dict) else None
            return classify_status(
                exc.status_code,
                provider=self.name,
                model=self.model,
                headers=exc.response.headers,
                error_type=exc.type or (err.get("type") if isinstance(err, dict) else None),
                message=message,
                key_env=self.key_env,
            )
        if isinstance(exc, MalformedResponse | openai.APIResponseValidationError | ValueError):
            return Retry("malformed response")
        return exc


def parse_completion(resp: object, headers: Mapping[str, str] | None = None) -> Reply:
    choices = getattr(resp, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise MalformedResponse("response has no choices")
    message = getattr(choices[0], "message", None)
    text = getattr(message, "content", None)
    if text is None:
        text = ""  # e.g. a refusal or a tool call: an empty answer, scored as a miss
    if not isinstance(text, str):
        raise MalformedResponse("message content is not text")
    calls = getattr(message, "tool_calls", None) or []
    first = getattr(calls[0], "function", None) if calls else None
    tool_call = str(getattr(first, "name", "") or "tool") if calls else None
    usage = getattr(resp, "usage", None)
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    prompt_tokens = getattr(usage, "prompt_tokens", None)
    answer = Completion(
        text=text,
        tool_call=tool_call,
        tool_input=str(getattr(first, "arguments", "") or "{}") if calls else None,
        # OpenAI counts cached tokens inside prompt_tokens; keep the uncached part apart
        input_tokens=prompt_tokens - cached if isinstance(prompt_tokens, int) else None,
        output_tokens=getattr(usage, "completion_tokens", None),
        cache_read_tokens=cached,
    )
    return Reply(answer, dict(headers) if headers is not None else None)
