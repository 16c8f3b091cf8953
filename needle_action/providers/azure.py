"""OpenAI's models on Azure OpenAI, through the OpenAI SDK's own client (``AsyncAzureOpenAI``).

* Model: the deployment's name. The SDK puts it in the path:
  ``POST {endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...``.
* Endpoint: the base branch's ``providers.azure.base_url``, else ``AZURE_OPENAI_ENDPOINT`` (the
  resource, ``https://NAME.openai.azure.com``); there is no public default.
* Credentials: ``$api_key_env`` of the base branch's settings, else an Entra ID token in
  ``AZURE_OPENAI_AD_TOKEN`` (sent as ``Authorization: Bearer``; the SDK's own preference), else
  ``AZURE_OPENAI_API_KEY`` (sent as ``api-key``). Never from needle.toml.
* API version: ``OPENAI_API_VERSION``, else :data:`DEFAULT_API_VERSION`.
* The request and its reading are the OpenAI provider's (:mod:`needle_action.providers.openai_compat`):
  the prompt's own chat body (tools as functions, ``tool_calls``, ``role: "tool"`` messages),
  ``max_completion_tokens``, no sampling parameters; Azure caches shared prefixes by itself.
* Counting: tiktoken, for the model family of the deployment (``tokenizer``), offline.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import openai

from needle_action.config import ProviderSettings
from needle_action.core import environment
from needle_action.core.errors import ConfigError, ProviderUnavailable
from needle_action.providers import specs
from needle_action.providers.cloud_claude import check_model_id
from needle_action.providers.openai_compat import OpenAICompatProvider
from needle_action.providers.retry import RetryingProvider

# the GA version this provider is tested against; OPENAI_API_VERSION picks another
DEFAULT_API_VERSION = "2024-10-21"
DEPLOYMENT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
TOKEN_ENV, KEY_ENV = "AZURE_OPENAI_AD_TOKEN", "AZURE_OPENAI_API_KEY"
CREDENTIALS_HINT = (
    "export AZURE_OPENAI_API_KEY (from a secret), or an Entra ID token in AZURE_OPENAI_AD_TOKEN "
    "(after azure/login: az account get-access-token --resource https://cognitiveservices.azure.com)"
)


def credentials(api_key_env: str | None, env: Mapping[str, str]) -> tuple[str, str, bool]:
    """(the variable used, its value, whether it is an Entra ID token rather than a key):
    ``$api_key_env`` as a key when the base branch names one, else the SDK's order, a token first."""
    names = (api_key_env,) if api_key_env else (TOKEN_ENV, KEY_ENV)
    for name in names:
        value = env.get(name)
        if value:
            return name, value, name == TOKEN_ENV and not api_key_env
    raise ProviderUnavailable(
        f"no Azure OpenAI credentials: ${names[-1]} is not set",
        hint=f"export {names[-1]}=..." if api_key_env else CREDENTIALS_HINT,
    )


class AzureProvider(OpenAICompatProvider):
    name = "azure"
    _client: openai.AsyncAzureOpenAI  # an AsyncOpenAI with Azure's routes and headers

    def __init__(self, model: str, settings: ProviderSettings | None = None, **retry_kw: Any) -> None:
        # not OpenAICompatProvider.__init__: its key and endpoint rules are OpenAI's, not Azure's
        RetryingProvider.__init__(self, model, settings, **retry_kw)  # retry_kw: sleep=, rng= (tests)
        check_model_id(model, provider="azure", pattern=DEPLOYMENT_RE, example="the deployment's name")
        env = environment.process()
        self.base_url = specs.base_url("azure", self.settings.base_url, env)
        if not self.base_url:
            raise ProviderUnavailable(
                "no Azure OpenAI endpoint: AZURE_OPENAI_ENDPOINT is not set",
                hint="export AZURE_OPENAI_ENDPOINT=https://NAME.openai.azure.com",
            )
        if not self.base_url.startswith(("https://", "http://")):
            raise ConfigError(
                "the Azure OpenAI endpoint is not a URL", hint="like https://NAME.openai.azure.com"
            )
        self.cloud = True  # max_completion_tokens, no sampling parameters: OpenAI's own models
        self.key_env, secret, is_token = credentials(self.settings.api_key_env, env)
        self._client = openai.AsyncAzureOpenAI(
            api_key=None if is_token else secret,
            azure_ad_token=secret if is_token else None,
            azure_endpoint=self.base_url,
            api_version=env.get("OPENAI_API_VERSION") or DEFAULT_API_VERSION,
            max_retries=0,
            timeout=self.settings.timeout_s,
        )


def credentials_check(env: Mapping[str, str]) -> tuple[bool, str, str | None]:
    """``needle doctor``: the endpoint's variable, which credential variable is set, the API
    version's source, never a value."""
    if not env.get("AZURE_OPENAI_ENDPOINT"):
        return (
            False,
            "no endpoint (AZURE_OPENAI_ENDPOINT unset)",
            "export AZURE_OPENAI_ENDPOINT=https://NAME.openai.azure.com",
        )
    version = "OPENAI_API_VERSION" if env.get("OPENAI_API_VERSION") else f"the default {DEFAULT_API_VERSION}"
    where = f"endpoint from AZURE_OPENAI_ENDPOINT, API version {version}"
    try:
        name, _, _ = credentials(None, env)
    except ProviderUnavailable:
        return False, f"{where}; no credentials", CREDENTIALS_HINT
    kind = "an Entra ID token" if name == TOKEN_ENV else "a key"
    return True, f"{where}; {kind} in {name}", None
