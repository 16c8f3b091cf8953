"""The one table of model providers: names, key variables, where the class lives.

Everything that needs to know which providers exist reads it from here: the config type
(``PromptSettings.provider``), the CLI's ``--provider`` choice, the action's ``provider`` input and
its missing-key check, and :func:`needle_action.providers.registry.make_provider`. Callers ask a
spec what its provider can do (``batch``, ``exact_tokenizer``), never test its name. Stdlib only.
The names themselves are :mod:`needle_action.core.names`, below config, which reads them there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from needle_action.core.names import PROVIDER_NAMES, ProviderName


@dataclass(frozen=True)
class ProviderSpec:
    """What needle knows about one provider before importing its SDK."""

    name: ProviderName
    factory: str  # "module:Class", imported only when the provider is built (the SDKs are heavy)
    key_envs: tuple[str, ...] = ()  # variables that may hold the key, in lookup order; () = no key
    # a self-hosted server of your own (vLLM, Ollama) may need no key when base_url points at it
    key_optional_with_base_url: bool = False
    base_url_env: str | None = None  # the SDK's own variable for another endpoint
    official_url: str | None = None  # where the SDK goes when nothing says otherwise
    # capabilities: callers ask the spec what its provider can do, never test its name
    batch: bool = False  # a batch API (`--batch`, the data branch's pushes): ``complete_batch``
    # the tokenizer that counts this provider's requests exactly (None: tiktoken by the model's family)
    exact_tokenizer: str | None = None

    @property
    def needs_key(self) -> bool:
        return bool(self.key_envs)


SPECS: dict[str, ProviderSpec] = {
    "anthropic": ProviderSpec(
        "anthropic",
        "needle_action.providers.anthropic:AnthropicProvider",
        key_envs=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
        base_url_env="ANTHROPIC_BASE_URL",
        official_url="https://api.anthropic.com",
        batch=True,
        exact_tokenizer="anthropic",
    ),
    "openai": ProviderSpec(
        "openai",
        "needle_action.providers.openai_compat:OpenAICompatProvider",
        key_envs=("OPENAI_API_KEY",),
        key_optional_with_base_url=True,
        base_url_env="OPENAI_BASE_URL",
        official_url="https://api.openai.com/v1",
    ),
    "local": ProviderSpec(
        "local", "needle_action.providers.local.provider:LocalProvider", exact_tokenizer="local"
    ),
}
assert tuple(SPECS) == PROVIDER_NAMES, "SPECS and names.ProviderName must list the same providers"


def spec(name: str) -> ProviderSpec:
    """The spec of provider NAME (KeyError for an unknown name: callers validate names first)."""
    return SPECS[name]


def base_url(name: str, configured: str | None, env: Mapping[str, str]) -> str | None:
    """The endpoint provider NAME is called at, as given to its SDK: the configured ``base_url``, else
    the SDK's variable (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``), else None (the SDK's default)."""
    s = SPECS[name]
    return configured or (env.get(s.base_url_env) if s.base_url_env else None) or None


def endpoint(name: str, configured: str | None, env: Mapping[str, str]) -> str | None:
    """Where provider NAME's requests (and key) really go: :func:`base_url`, else the official API;
    None for a provider that calls nothing (``local``). Results are cached per endpoint."""
    return base_url(name, configured, env) or SPECS[name].official_url


def missing_key(
    name: str, *, api_key_env: str | None, base_url: str | None, env: Mapping[str, str]
) -> str | None:
    """The variable that should hold PROVIDER's key but is empty in ENV, or None when a call may go ahead.

    ``api_key_env`` (from the provider settings) replaces the spec's default variables; the SDK's own
    alternatives (``ANTHROPIC_AUTH_TOKEN``) count only when no variable was named explicitly.
    """
    s = SPECS[name]
    if not s.needs_key:
        return None
    if s.key_optional_with_base_url and base_url and not api_key_env:
        return None
    names = (api_key_env,) if api_key_env else s.key_envs
    if any(env.get(n) for n in names):
        return None
    return names[0]
