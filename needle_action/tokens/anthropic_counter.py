"""Exact counts from Anthropic's ``messages.count_tokens``: the whole request body as the provider
sends it (system blocks, tools and tool_choice, content blocks with documents and images,
``thinking`` / ``output_config``), so the count covers every input token the request is billed for.

The count goes through the prompt's own provider when its spec has a ``count_client`` (Claude on
Amazon Bedrock: CountTokens; on Vertex AI: ``count-tokens:rawPredict``), with that provider's
credentials and endpoint, so a Bedrock or Vertex team needs no Anthropic key to count exactly.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from needle_action.config.model import ProviderSettings
from needle_action.core.dataformats import JSON
from needle_action.core.errors import ConfigError, NeedleError, ProviderUnavailable
from needle_action.providers.specs import SPECS
from needle_action.request import rules
from needle_action.request.prompt import RenderedPrompt
from needle_action.request.wire import anthropic_body

# What a failed count_tokens call means, first match wins: (the SDK's error classes, our error, the
# message (``{status}``, ``{model}``, ``{api}``: the API's own message, ``{kind}``), the hint)
_FAILURES: tuple[tuple[tuple[str, ...], type[NeedleError], str, str | None], ...] = (
    (
        ("AuthenticationError", "PermissionDeniedError"),
        ProviderUnavailable,
        "{where} refused the token-count request ({status})",
        "check the credentials (they are never printed) and their permissions",
    ),
    (
        ("NotFoundError",),
        ConfigError,
        "{where} does not know the model {model!r}",
        "check `model` in the threshold file",
    ),
    (("BadRequestError",), ConfigError, "{where} rejected the request to count: {api}", None),
    (
        ("APIConnectionError", "APITimeoutError", "InternalServerError", "RateLimitError"),
        ProviderUnavailable,
        "cannot reach {where} to count tokens: {kind}",
        "check the network and the endpoint, or count offline with a tiktoken tokenizer",
    ),
    (("APIStatusError",), ProviderUnavailable, "{where} token count failed with HTTP {status}", None),
)


class AnthropicCounter:
    """Exact counts from the Messages API's ``count_tokens`` endpoint (official SDK)."""

    name = "anthropic"
    exact = True
    calls_api = True

    def __init__(self, *, model: str, provider_settings: ProviderSettings, via: str | None = None) -> None:
        # the SDK (and our provider module that wraps it) is slow to import: only when asked for
        import anthropic

        self.model = model
        self._anthropic = anthropic
        self._fields: frozenset[str] | None = None
        self.via = via  # the provider whose count endpoint answers (None: Anthropic's API)
        if via is not None:
            self.cache_id = f"anthropic:{via}:{model}"
            self._client, self.where = _through(via, model, provider_settings)
            return
        # the provider's own key lookup, so a key that works for recall works for counting too
        from needle_action.providers.anthropic import DEFAULT_KEY_ENVS, client_auth, find_key

        try:
            key_env, key = find_key(provider_settings.api_key_env)
        except ProviderUnavailable:
            key_env = provider_settings.api_key_env or DEFAULT_KEY_ENVS[0]
            raise ProviderUnavailable(
                f'tokenizer "anthropic" needs an API key: ${key_env} is not set',
                hint=f'export {key_env}=..., or count offline with tokenizer = "tiktoken:o200k_base" '
                "(approximate; the safety factor is applied)",
            ) from None

        self.cache_id = f"anthropic:{model}"
        self.where = "Anthropic"
        # base_url None lets the SDK honour ANTHROPIC_BASE_URL itself
        self._client = anthropic.Anthropic(
            **client_auth(key_env, key),
            base_url=provider_settings.base_url or None,
            timeout=provider_settings.timeout_s,
            max_retries=provider_settings.max_retries,
        )

    def _count_body(self, body: JSON) -> int:
        try:
            return int(self._client.messages.count_tokens(**body).input_tokens)
        except self._anthropic.APIError as exc:
            for names, error, message, hint in _FAILURES:
                if isinstance(exc, tuple(getattr(self._anthropic, name) for name in names)):
                    status, kind = getattr(exc, "status_code", "?"), type(exc).__name__
                    text = message.format(
                        status=status, model=self.model, api=_api_message(exc), kind=kind, where=self.where
                    )
                    raise error(text, hint=hint) from None
            raise

    def count_body(self, prompt: RenderedPrompt) -> JSON:
        """What is sent to count_tokens: the request body (``to_anthropic_body``: system blocks,
        tools, tool_choice, content blocks with documents and images, parameters) without what the
        endpoint does not take (``max_tokens``, ``metadata``, sampling, ...: none of it is input)."""
        body = anthropic_body(prompt, self.model, 1)
        accepted = self._accepted()
        body = {k: v for k, v in body.items() if k in accepted}
        if not body.get("messages"):  # counted as sent: never a turn the request does not hold
            rule = rules.rule("no-messages")
            raise ConfigError(
                f"the request to count has no messages (the Messages API rule `{rule.code}`)",
                file=prompt.source or None,
                hint=rule.hint,
            )
        return body

    def _accepted(self) -> frozenset[str]:
        if self._fields is None:  # the SDK's own count_tokens, whichever client counts
            params = inspect.signature(self._anthropic.resources.messages.Messages.count_tokens).parameters
            self._fields = frozenset(p for p in params if p not in _SDK_ONLY)
        return self._fields

    def count_prompt(self, prompt: RenderedPrompt) -> int:
        return self._count_body(self.count_body(prompt))

    def count_texts(self, texts: list[str]) -> list[int]:
        """Each text as a lone user message (the API has no raw-text endpoint): includes its framing."""
        return [
            self._count_body({"model": self.model, "messages": [{"role": "user", "content": t}]})
            for t in texts
        ]


# keyword arguments of the SDK's count_tokens that are not request fields
_SDK_ONLY = frozenset({"self", "extra_headers", "extra_query", "extra_body", "timeout", "betas"})


def _through(provider: str, model: str, settings: ProviderSettings) -> tuple[Any, str]:
    """(a client whose ``messages.count_tokens`` counts through PROVIDER, the name of its service):
    the spec's ``count_client``, built with that provider's credentials and endpoint."""
    module, _, attr = str(SPECS[provider].count_client).partition(":")
    client = getattr(importlib.import_module(module), attr)(model, settings)
    return client, str(getattr(client, "where", provider))


def _api_message(exc: Exception) -> str:
    """The provider's own message, with the Messages API rule it names (request/rules.py)."""
    text = _raw_message(exc)
    rule = rules.rule_of(text)
    return f"it breaks the rule `{rule.code}` ({text})" if rule is not None else text


def _raw_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            message: str = err["message"][:300]
            return message
        if isinstance(body.get("message"), str):  # Bedrock's errors: {"message": ...}
            return str(body["message"])[:300]
    return f"HTTP {getattr(exc, 'status_code', '?')}"
