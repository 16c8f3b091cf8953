"""Exact counts from Anthropic's ``messages.count_tokens`` (the whole request, system included)."""

from __future__ import annotations

from needle_action.assemble.prompt import RenderedPrompt
from needle_action.config.model import ProviderSettings
from needle_action.errors import ConfigError, ProviderUnavailable


class AnthropicCounter:
    """Exact counts from the Messages API's ``count_tokens`` endpoint (official SDK)."""

    name = "anthropic"
    exact = True

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
        messages = [{"role": m.role, "content": m.wire_content()} for m in prompt.messages]
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
