"""The one table of model providers: names, key variables, where the class lives, what each can do.

Everything that needs to know which providers exist reads it from here: the config type
(``PromptSettings.provider``), the CLI's ``--provider`` choice, the action's ``provider`` input and
its missing-key check, and :func:`needle_action.providers.registry.make_provider`. Callers ask a
spec what its provider can do (``batch``, ``count_client``, ``exact_tokenizer``), never test its name. Stdlib only.
The names themselves are :mod:`needle_action.core.names`, below config, which reads them there.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from needle_action.core.names import PROVIDER_NAMES, ProviderName

# The variables each cloud's own chain reads its credentials from, as the clouds' GitHub login
# actions leave them (any one is enough to try; the chain itself decides). Values are never read
# here, only whether they are set.
AWS_CREDENTIAL_ENVS = (
    "AWS_ACCESS_KEY_ID",  # aws-actions/configure-aws-credentials exports these (OIDC or keys)
    "AWS_BEARER_TOKEN_BEDROCK",  # a Bedrock API key, which the Anthropic SDK sends as a bearer token
    "AWS_WEB_IDENTITY_TOKEN_FILE",  # a web identity token for STS (with AWS_ROLE_ARN)
    "AWS_PROFILE",  # a named profile of ~/.aws/config (SSO, credential_process, instance metadata)
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",  # ECS / CodeBuild task credentials
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
)
GOOGLE_CREDENTIAL_ENVS = (
    "GOOGLE_APPLICATION_CREDENTIALS",  # google-github-actions/auth writes a credentials file here
    "GOOGLE_OAUTH_ACCESS_TOKEN",  # an access token minted by the workflow (token_format: access_token)
)
AWS_REGION_ENVS = ("AWS_REGION", "AWS_DEFAULT_REGION")
VERTEX_REGION_ENVS = ("CLOUD_ML_REGION",)
VERTEX_PROJECT_ENVS = ("ANTHROPIC_VERTEX_PROJECT_ID", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT")


@dataclass(frozen=True)
class ProviderSpec:
    """What needle knows about one provider before importing its SDK."""

    name: ProviderName
    factory: str  # "module:Class", imported only when the provider is built (the SDKs are heavy)
    key_envs: tuple[str, ...] = ()  # variables that may hold the key, in lookup order; () = no key
    # a self-hosted server of your own (vLLM, Ollama) may need no key when base_url points at it
    key_optional_with_base_url: bool = False
    base_url_env: str | None = None  # the SDK's own variable for another endpoint
    official_url: str | None = None  # where the SDK goes when nothing says otherwise ({region}: the cloud's)
    # the endpoint must be given (the base branch's base_url or base_url_env): there is no public one
    needs_endpoint: bool = False
    # variables naming where the calls go besides the URL, one of each group must be set: a cloud's
    # region, its project. Read by the cloud's SDK; a pull request's file cannot set them.
    place_envs: tuple[tuple[str, ...], ...] = ()
    # "aws" / "google": the credentials come from the cloud's default chain, not one key variable;
    # key_envs then lists the variables that chain reads (api_key_env does not apply)
    credential_chain: str | None = None
    # capabilities -------------------------------------------------------------------------------
    batch: bool = False  # a batch API (`--batch`, the data branch's pushes): ``complete_batch``
    # "module:function" building a client whose ``messages.count_tokens`` counts a Messages request
    # exactly through this provider (tokenizer = "anthropic"); None: Anthropic's own API counts
    count_client: str | None = None
    # the model a cloud's own id names (its price, window and tokenizer), as a regex whose group
    # "family" holds it: Bedrock's "global.anthropic.claude-sonnet-5-5-v1:0" -> "claude-sonnet-5-5"
    family_pattern: str | None = None
    # the cloud bills regional endpoints above its global one (Claude on Bedrock and Vertex AI), told
    # by the "model" id (Bedrock: a global. profile or not) or by the client's "region" (Vertex)
    regional_pricing: Literal["model", "region"] | None = None
    # "module:function" (env) -> (ok, what was found, the fix): `needle doctor`'s look at the cloud's
    # credentials, region and endpoint, by variable names (never a value)
    credentials_check: str | None = None
    # the tokenizer that counts this provider's requests exactly (None: tiktoken by the model's family)
    exact_tokenizer: str | None = None

    @property
    def needs_key(self) -> bool:
        return bool(self.key_envs)

    @property
    def cloud(self) -> bool:
        """Reached in a cloud account (a region, a project or the team's own endpoint), not one key."""
        return bool(self.place_envs) or self.needs_endpoint

    def variables(self) -> tuple[str, ...]:
        """Every variable this provider reads: where its calls go and its credentials."""
        places = tuple(n for group in self.place_envs for n in group)
        return (*places, *((self.base_url_env,) if self.base_url_env else ()), *self.key_envs)


def claude_cloud(name: ProviderName, provider_class: str, **fields: Any) -> ProviderSpec:
    """The spec of Claude on a cloud: its provider, count client and credentials check live in
    ``needle_action.providers.NAME`` under the names every cloud module uses."""
    module = f"needle_action.providers.{name}"
    return ProviderSpec(
        name,
        f"{module}:{provider_class}",
        count_client=f"{module}:count_client",
        credentials_check=f"{module}:credentials_check",
        **fields,
    )


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
    "bedrock": claude_cloud(
        "bedrock",
        "BedrockProvider",
        key_envs=AWS_CREDENTIAL_ENVS,
        base_url_env="ANTHROPIC_BEDROCK_BASE_URL",
        official_url="https://bedrock-runtime.{region}.amazonaws.com",
        place_envs=(AWS_REGION_ENVS,),
        credential_chain="aws",
        # a model id, an inference profile (its geography first) or the ARN of either
        family_pattern=r"(?:arn:aws[a-z-]*:bedrock:[a-z0-9-]*:\d*:[a-z-]+/)?(?:(?P<geo>[a-z-]+)\.)?"
        r"anthropic\.(?P<family>claude-[a-z0-9.-]+?)(?:-v\d+(?::\d+)?)?",
        regional_pricing="model",
    ),
    "vertex": claude_cloud(
        "vertex",
        "VertexProvider",
        key_envs=GOOGLE_CREDENTIAL_ENVS,
        base_url_env="ANTHROPIC_VERTEX_BASE_URL",
        official_url="https://{region}-aiplatform.googleapis.com/v1",
        # the project may also come from the credentials (a service account key): the provider says
        # when neither names one
        place_envs=(VERTEX_REGION_ENVS,),
        credential_chain="google",
        family_pattern=r"(?P<family>[^@]+)(?:@.+)?",  # "claude-sonnet-5-5@20261001"
        regional_pricing="region",
    ),
    "azure": ProviderSpec(
        "azure",
        "needle_action.providers.azure:AzureProvider",
        # the SDK prefers an Entra ID token when both are set
        key_envs=("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN"),
        base_url_env="AZURE_OPENAI_ENDPOINT",
        needs_endpoint=True,
        # a deployment named after its model, as Azure names it by default ("gpt-4o", "prod-gpt-4o-mini")
        family_pattern=r"(?:.*?[-_.])?(?P<family>(?:gpt|o[1-9]|chatgpt)(?:[-.][A-Za-z0-9.]+)*)",
        credentials_check="needle_action.providers.azure:credentials_check",
    ),
}
assert tuple(SPECS) == PROVIDER_NAMES, "SPECS and names.ProviderName must list the same providers"


def spec(name: str) -> ProviderSpec:
    """The spec of provider NAME (KeyError for an unknown name: callers validate names first)."""
    return SPECS[name]


def first_set(names: tuple[str, ...], env: Mapping[str, str]) -> str | None:
    """The value of the first of NAMES set (non-empty) in ENV."""
    return next((env[n] for n in names if env.get(n)), None)


def base_url(name: str, configured: str | None, env: Mapping[str, str]) -> str | None:
    """The endpoint provider NAME is called at, as given to its SDK: the configured ``base_url``, else
    the SDK's variable (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``, ...), else None (the SDK's default)."""
    s = SPECS[name]
    return configured or (env.get(s.base_url_env) if s.base_url_env else None) or None


def region(name: str, env: Mapping[str, str]) -> str | None:
    """The region a cloud provider's calls go to (its SDK's variable), None for the others."""
    s = SPECS[name]
    return first_set(s.place_envs[0], env) if s.place_envs and s.official_url else None


def official_endpoint(name: str, env: Mapping[str, str]) -> str | None:
    """The provider's public endpoint, as its SDK builds it (a cloud's for the region in ENV)."""
    s = SPECS[name]
    if s.official_url is None or "{region}" not in s.official_url:
        return s.official_url
    where = region(name, env)
    if not where:
        return None
    if name == "vertex" and where in ("global", "us", "eu"):  # the SDK's multi-region hosts
        host = "aiplatform.googleapis.com" if where == "global" else f"aiplatform.{where}.rep.googleapis.com"
        return f"https://{host}/v1"
    return s.official_url.format(region=where)


def endpoint(name: str, configured: str | None, env: Mapping[str, str]) -> str | None:
    """Where provider NAME's requests (and credentials) really go: :func:`base_url`, else the official
    API (a cloud's in its region, with its project); None for a provider that calls nothing
    (``local``). Results are cached per endpoint."""
    url = base_url(name, configured, env) or official_endpoint(name, env)
    project = first_set(VERTEX_PROJECT_ENVS, env) if name == "vertex" else None
    if url and project:  # one Vertex URL serves every project: the project is part of where
        return f"{url.rstrip('/')}/projects/{project}/locations/{region(name, env)}"
    return url


def model_family(name: str, model: str) -> str:
    """The model a provider's own id names, as the price table, the context windows and tiktoken
    know it (``global.anthropic.claude-sonnet-5-5-v1:0`` on Bedrock -> ``claude-sonnet-5-5``);
    MODEL itself when the provider's ids are the models' own or the id names no known family."""
    pattern = SPECS[name].family_pattern if name in SPECS else None
    found = re.fullmatch(pattern, model) if pattern else None
    return found.group("family") if found else model


def regional(name: str, model: str, env: Mapping[str, str]) -> bool:
    """Whether MODEL on provider NAME is served from a regional endpoint, which the cloud bills
    above its global one: a Bedrock id without the ``global.`` profile, a Vertex region other than
    ``global``. False for the providers with one price."""
    s = SPECS.get(name)
    if s is None or s.regional_pricing is None:
        return False
    if s.regional_pricing == "region":
        return region(name, env) != "global"
    found = re.fullmatch(s.family_pattern or "", model)
    return not (found and found.group("geo") == "global")


def _has_credential_files(chain: str, env: Mapping[str, str]) -> bool:
    """Whether the chain's files on this machine may hold credentials (a developer's own login:
    ``~/.aws/credentials``, gcloud's application default credentials)."""
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    if chain == "aws":
        files = [env.get("AWS_SHARED_CREDENTIALS_FILE") or home / ".aws" / "credentials"]
        files.append(env.get("AWS_CONFIG_FILE") or home / ".aws" / "config")
    else:
        config = Path(env.get("CLOUDSDK_CONFIG") or home / ".config" / "gcloud")
        files = [config / "application_default_credentials.json"]
    return any(Path(f).is_file() for f in files)


def missing_key(
    name: str, *, api_key_env: str | None, base_url: str | None, env: Mapping[str, str]
) -> str | None:
    """The variable that should hold PROVIDER's key (or its region, project or endpoint) but is empty
    in ENV, or None when a call may go ahead.

    ``api_key_env`` (from the provider settings) replaces the spec's default variables; the SDK's own
    alternatives (``ANTHROPIC_AUTH_TOKEN``) count only when no variable was named explicitly. A
    cloud's credentials count when any variable its chain reads is set, or its files exist.
    """
    s = SPECS[name]
    for group in s.place_envs:
        if first_set(group, env) is None:
            return group[0]
    if s.needs_endpoint and not (base_url or (s.base_url_env and env.get(s.base_url_env))):
        return s.base_url_env
    if not s.needs_key:
        return None
    if s.key_optional_with_base_url and base_url and not api_key_env:
        return None
    if s.credential_chain:
        found = first_set(s.key_envs, env) or _has_credential_files(s.credential_chain, env)
        return None if found else s.key_envs[0]
    names = (api_key_env,) if api_key_env else s.key_envs
    if any(env.get(n) for n in names):
        return None
    return names[0]
