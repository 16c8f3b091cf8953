"""Exact counts from Anthropic's ``messages.count_tokens``: the whole request body as the provider
sends it (system blocks, tools and tool_choice, content blocks with documents and images,
``thinking`` / ``output_config``), so the count covers every input token the request is billed for.
"""

from __future__ import annotations

import inspect

from needle_action.config.model import ProviderSettings
from needle_action.core.dataformats import JSON
from needle_action.core.errors import ConfigError, NeedleError, ProviderUnavailable
from needle_action.request.prompt import RenderedPrompt
from needle_action.request.wire import anthropic_body

# What a failed count_tokens call means, first match wins: (the SDK's error classes, our error, the
# message (``{status}``, ``{model}``, ``{api}``: the API's own message, ``{kind}``), the hint)
_FAILURES: tuple[tuple[tuple[str, ...], type[NeedleError], str, str | None], ...] = (
    (
        ("AuthenticationError", "PermissionDeniedError"),
        ProviderUnavailable,
        "Anthropic refused the token-count request ({status})",
        "check the API key (it is never printed) and its permissions",
    ),
    (
        ("NotFoundError",),
        ConfigError,
        "Anthropic does not know the model {model!r}",
        "check `model` in the threshold file",
    ),
    (("BadRequestError",), ConfigError, "Anthropic rejected the request to count: {api}", None),
    (
        ("APIConnectionError", "APITimeoutError", "InternalServerError", "RateLimitError"),
        ProviderUnavailable,
        "cannot reach Anthropic to count tokens: {kind}",
        "check the network / ANTHROPIC_BASE_URL, or count offline with a tiktoken tokenizer",
    ),
    (("APIStatusError",), ProviderUnavailable, "Anthropic token count failed with HTTP {status}", None),
)


class AnthropicCounter:
    """Exact counts from the Messages API's ``count_tokens`` endpoint (official SDK)."""

    name = "anthropic"
    exact = True
    calls_api = True

    def __init__(self, *, model: str, provider_settings: ProviderSettings) -> None:
        # the SDK (and our provider module that wraps it) is slow to import: only when asked for
        import anthropic

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
        self._fields: frozenset[str] | None = None

    def _count_body(self, body: JSON) -> int:
        try:
            return int(self._client.messages.count_tokens(**body).input_tokens)
        except self._anthropic.APIError as exc:
            for names, error, message, hint in _FAILURES:
                if isinstance(exc, tuple(getattr(self._anthropic, name) for name in names)):
                    status, kind = getattr(exc, "status_code", "?"), type(exc).__name__
                    text = message.format(status=status, model=self.model, api=_api_message(exc), kind=kind)
                    raise error(text, hint=hint) from None
            raise

    def count_body(self, prompt: RenderedPrompt) -> JSON:
        """What is sent to count_tokens: the request body (``to_anthropic_body``: system blocks,
        tools, tool_choice, content blocks with documents and images, parameters) without what the
        endpoint does not take (``max_tokens``, ``metadata``, sampling, ...: none of it is input)."""
        body = anthropic_body(prompt, self.model, 1)
        accepted = self._accepted()
        body = {k: v for k, v in body.items() if k in accepted}
        if not body.get("messages"):  # the API needs one message; a system-only template sends an empty turn
            body["messages"] = [{"role": "user", "content": ""}]
        return body

    def _accepted(self) -> frozenset[str]:
        if self._fields is None:
            params = inspect.signature(self._client.messages.count_tokens).parameters
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
_SDK_ONLY = frozenset({"extra_headers", "extra_query", "extra_body", "timeout", "betas"})


def _api_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            message: str = err["message"][:300]
            return message
    return f"HTTP {getattr(exc, 'status_code', '?')}"
