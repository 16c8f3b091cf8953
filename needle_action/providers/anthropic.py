"""Anthropic Messages API through the official SDK (``AsyncAnthropic``).

* One shared async client per provider instance: safe for the recall engine's concurrent calls.
* Base URL: ``providers.anthropic.base_url`` in needle.toml, else ``ANTHROPIC_BASE_URL``, else the
  SDK default. Key: ``$<api_key_env>`` when configured, else ``ANTHROPIC_API_KEY`` (or
  ``ANTHROPIC_AUTH_TOKEN``). No key -> ProviderUnavailable before any call.
* No sampling parameters (``temperature``/``top_p``/``top_k``): the 2026-10-21 API refuses them for
  Claude 5.x, and for the others recall is measured at the model's defaults, like production.
* The SDK's own retries are off; :mod:`needle_action.providers.retry` does it, counted.
"""

from __future__ import annotations

import os

import anthropic

from needle_action.assemble import RenderedPrompt
from needle_action.config import ProviderSettings
from needle_action.errors import ConfigError, ProviderUnavailable
from needle_action.providers import specs
from needle_action.providers.base import Completion
from needle_action.providers.retry import (
    MalformedResponse,
    Retry,
    RetryingProvider,
    classify_status,
)
from needle_action.providers.specs import SPECS

DEFAULT_KEY_ENVS = SPECS["anthropic"].key_envs


class AnthropicProvider(RetryingProvider):
    name = "anthropic"

    def __init__(self, model: str, settings: ProviderSettings | None = None, **retry_kw) -> None:
        super().__init__(model, settings, **retry_kw)  # retry_kw: sleep=, rng= (tests inject them)
        self.key_env, key = find_key(self.settings.api_key_env)
        base_url = specs.base_url("anthropic", self.settings.base_url, os.environ)
        self._client = anthropic.AsyncAnthropic(
            **client_auth(self.key_env, key),
            base_url=base_url,
            max_retries=0,
            timeout=self.settings.timeout_s,
        )

    async def complete(self, prompt: RenderedPrompt, *, max_output_tokens: int) -> Completion:
        request = build_request(self.model, prompt, max_output_tokens)

        async def attempt():
            return parse_message(await self._client.messages.create(**request))

        return await self._complete_with_retries(attempt)

    def _classify(self, exc: BaseException) -> Retry | BaseException:
        if isinstance(exc, anthropic.APITimeoutError):
            return Retry("timeout")
        if isinstance(exc, anthropic.APIConnectionError):
            return Retry("connection error")
        if isinstance(exc, anthropic.APIStatusError):
            return classify_status(
                exc.status_code,
                provider=self.name,
                model=self.model,
                headers=exc.response.headers,
                error_type=exc.type,
                message=exc.api_message,
                key_env=self.key_env,
            )
        if isinstance(exc, MalformedResponse | anthropic.APIResponseValidationError | ValueError):
            # ValueError covers json.JSONDecodeError: a 200 whose body is not JSON
            return Retry("malformed response")
        return exc

    async def aclose(self) -> None:
        await self._client.close()


def find_key(api_key_env: str | None) -> tuple[str, str]:
    """(variable name, key): ``$api_key_env`` when configured, else the SDK's own variables."""
    names = (api_key_env,) if api_key_env else DEFAULT_KEY_ENVS
    for name in names:
        value = os.environ.get(name)
        if value:
            return name, value
    raise ProviderUnavailable(
        f"no Anthropic API key: ${names[0]} is not set",
        hint=f"export {names[0]}=... (in the action: pass it from a secret), "
        'or run recall on the embedded model with provider = "local"',
    )


def client_auth(key_env: str, key: str) -> dict:
    """SDK keyword for the key: ANTHROPIC_AUTH_TOKEN is a bearer token, the others API keys."""
    return {"auth_token": key} if key_env == "ANTHROPIC_AUTH_TOKEN" else {"api_key": key}


def build_request(model: str, prompt: RenderedPrompt, max_output_tokens: int) -> dict:
    """The exact keyword arguments for ``messages.create``: no sampling parameters, system apart."""
    messages = [{"role": m.role, "content": m.content} for m in prompt.messages if m.role != "system"]
    if not messages:
        raise ConfigError(
            "the prompt has no user message to send",
            file=prompt.source or None,
            hint="a prompt needs at least one user turn besides the system text",
        )
    request: dict = {"model": model, "max_tokens": max_output_tokens, "messages": messages}
    # system text: the prompt's own, plus any system-role turns (the Messages API has no such role)
    systems = [prompt.system] if prompt.system else []
    systems += [m.content for m in prompt.messages if m.role == "system"]
    if systems:
        request["system"] = "\n\n".join(systems)
    return request


def parse_message(message) -> tuple[str, int | None, int | None]:
    content = getattr(message, "content", None)
    if not isinstance(message, anthropic.types.Message) or not isinstance(content, list):
        raise MalformedResponse("response is not a Message with a content list")
    texts: list[str] = []
    for block in content:
        if getattr(block, "type", None) == "text":
            text = getattr(block, "text", None)
            if not isinstance(text, str):
                raise MalformedResponse("a text block has no text")
            texts.append(text)
    usage = getattr(message, "usage", None)
    return (
        "".join(texts),
        getattr(usage, "input_tokens", None),
        getattr(usage, "output_tokens", None),
    )
