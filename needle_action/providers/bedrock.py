"""Claude on Amazon Bedrock, through the Anthropic SDK's own client (``AsyncAnthropicBedrock``, the
``[clouds]`` extra: boto3 and botocore).

* Model: Bedrock's own id: a foundation model (``anthropic.claude-sonnet-5-5-v1:0``), an inference
  profile (``global.anthropic...``, ``us.anthropic...``) or its ARN. The SDK puts it, percent-encoded,
  in the path: ``POST /model/{id}/invoke``.
* Region: ``AWS_REGION`` (else ``AWS_DEFAULT_REGION``), what aws-actions/configure-aws-credentials
  exports. Endpoint: ``providers.bedrock.base_url`` of the base branch, else
  ``ANTHROPIC_BEDROCK_BASE_URL``, else ``https://bedrock-runtime.{region}.amazonaws.com``.
* Credentials: AWS's default chain through boto3 (the variables the OIDC login exports, a web
  identity token file, a profile, container credentials), every request signed with SigV4 by
  botocore; or a Bedrock API key in ``AWS_BEARER_TOKEN_BEDROCK``, which the SDK sends as a bearer
  token. Never from needle.toml. No credentials -> ProviderUnavailable before any call.
* Throttling: Bedrock answers 429 ``ThrottlingException`` (named in ``x-amzn-ErrorType``): retried
  after backoff, and the adaptive window halves, as for any 429.
* Counting (``tokenizer = "anthropic"``): Bedrock's CountTokens, ``POST /model/{id}/count-tokens``
  with the InvokeModel body the SDK would send, base64 in ``{"input": {"invokeModel": {"body"}}}``;
  CountTokens takes the foundation model's id, so an inference profile's geography prefix is
  dropped for it (:func:`counting_model_id`).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import anthropic

from needle_action.config import ProviderSettings
from needle_action.core import environment
from needle_action.core.dataformats import JSON
from needle_action.core.errors import ProviderUnavailable
from needle_action.providers import specs
from needle_action.providers.cloud_claude import (
    ClaudeCloudProvider,
    check_model_id,
    check_region,
    require_extra,
)
from needle_action.providers.retry import Retry

# a foundation model id, an inference profile id or an ARN of either: what Bedrock accepts as modelId
MODEL_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,2047}")
EXAMPLE_ID = "anthropic.claude-sonnet-5-5-v1:0 or global.anthropic.claude-sonnet-5-5-v1:0"
# the geography of a cross-region inference profile ("us.anthropic.claude-...")
PROFILE_PREFIX = re.compile(r"^(?:global|us|us-gov|eu|apac|jp|au|ca)\.(?=anthropic\.)")
REGION_VARIABLES = " or ".join(specs.AWS_REGION_ENVS)
CREDENTIALS_HINT = (
    "in a workflow, run aws-actions/configure-aws-credentials (OIDC) before needle; locally, "
    "`aws configure` or AWS_PROFILE; or export AWS_BEARER_TOKEN_BEDROCK (a Bedrock API key)"
)


def client_options(model: str, settings: ProviderSettings, env: Mapping[str, str]) -> dict[str, Any]:
    """The keyword arguments both Bedrock clients get: the region and the endpoint from the
    environment (or the base branch's base_url), the SDK's own retries off. Raises when the region,
    the model id or the credentials are missing or malformed."""
    check_model_id(model, provider="bedrock", pattern=MODEL_ID_RE, example=EXAMPLE_ID)
    region = check_region(specs.region("bedrock", env), provider="bedrock", variables=REGION_VARIABLES)
    check_credentials(region, env)
    return {
        "aws_region": region,
        "base_url": specs.base_url("bedrock", settings.base_url, env),
        "timeout": settings.timeout_s,
    }


def check_credentials(region: str, env: Mapping[str, str]) -> None:
    """Fail now, naming what to set, when AWS's chain finds no credentials (botocore resolves a web
    identity token or a role lazily: nothing is called here)."""
    if env.get("AWS_BEARER_TOKEN_BEDROCK"):
        return
    require_extra("boto3", provider="bedrock")  # the SDK signs with botocore: no key goes without it
    import boto3  # the [clouds] extra; imported only when Bedrock is used
    import botocore.exceptions

    try:
        found = boto3.Session(region_name=region).get_credentials()
    except botocore.exceptions.BotoCoreError as exc:  # a broken profile, an unreadable token file
        raise ProviderUnavailable(
            f"bedrock: AWS credentials could not be loaded ({type(exc).__name__})", hint=CREDENTIALS_HINT
        ) from None
    if found is None:
        raise ProviderUnavailable("bedrock: no AWS credentials found", hint=CREDENTIALS_HINT)


class BedrockProvider(ClaudeCloudProvider):
    name = "bedrock"
    credentials_hint = "check the AWS credentials (" + CREDENTIALS_HINT + ")"

    client_class = anthropic.AsyncAnthropicBedrock
    client_options = staticmethod(client_options)

    def _error_type(self, headers: Mapping[str, str], body: object) -> str | None:
        # "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"
        kind = headers.get("x-amzn-errortype") or headers.get("x-amzn-ErrorType")
        return kind.split(":", 1)[0] if kind else super()._error_type(headers, body)

    def _classify_other(self, exc: BaseException) -> Retry | BaseException:
        import botocore.exceptions

        if isinstance(exc, botocore.exceptions.BotoCoreError):  # e.g. STS refused a web identity token
            return ProviderUnavailable(f"bedrock: AWS credentials failed: {exc}", hint=CREDENTIALS_HINT)
        if isinstance(exc, RuntimeError) and "credentials" in str(exc):  # the SDK's signer found none
            return ProviderUnavailable("bedrock: no AWS credentials found", hint=CREDENTIALS_HINT)
        return exc


def counting_model_id(model: str) -> str:
    """The id CountTokens takes: an inference profile's foundation model (its geography dropped)."""
    return PROFILE_PREFIX.sub("", model)


class _CountingMessages:
    """``messages.count_tokens(**body)`` over Bedrock's CountTokens (the SDK refuses to count on
    Bedrock): the body the SDK would send to InvokeModel, at the route it would send it to."""

    def __init__(self, client: anthropic.AnthropicBedrock) -> None:
        self._client = client

    def count_tokens(self, **body: Any) -> SimpleNamespace:
        from anthropic._models import FinalRequestOptions  # the SDK's own request rewriting
        from anthropic.lib.bedrock._client import _prepare_options

        body = {**body, "model": counting_model_id(str(body["model"])), "max_tokens": 1}
        options = _prepare_options(
            FinalRequestOptions.construct(method="post", url="/v1/messages", json_data=body), {}
        )
        invoke: JSON = options.json_data  # type: ignore[assignment] # the SDK built a dict
        path = options.url.removesuffix("/invoke") + "/count-tokens"
        encoded = base64.b64encode(json.dumps(invoke).encode("utf-8")).decode("ascii")
        answer = self._client.post(
            path,
            cast_to=object,
            content=json.dumps({"input": {"invokeModel": {"body": encoded}}}).encode("utf-8"),
            options={"headers": {"content-type": "application/json"}},
        )
        tokens = answer.get("inputTokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, int):
            raise ProviderUnavailable("Amazon Bedrock's CountTokens answered without inputTokens")
        return SimpleNamespace(input_tokens=tokens)


def count_client(model: str, settings: ProviderSettings) -> Any:
    """A client whose ``messages.count_tokens`` counts through Bedrock's CountTokens (the spec's
    ``count_client``: tokenizer = "anthropic" with provider = "bedrock")."""
    client = anthropic.AnthropicBedrock(
        **client_options(model, settings, environment.process()), max_retries=settings.max_retries
    )
    return SimpleNamespace(messages=_CountingMessages(client), where="Amazon Bedrock")


def credentials_check(env: Mapping[str, str]) -> tuple[bool, str, str | None]:
    """``needle doctor``: the region's variable, the endpoint's, and how AWS's chain finds the
    credentials (botocore's method name: env, assume-role-with-web-identity, sso...), never a value."""
    region_var = next((n for n in specs.AWS_REGION_ENVS if env.get(n)), None)
    if region_var is None:
        return False, f"no region ({REGION_VARIABLES} unset)", "export AWS_REGION=..."
    where = f"region from {region_var}"
    if env.get("ANTHROPIC_BEDROCK_BASE_URL"):
        where += ", endpoint from ANTHROPIC_BEDROCK_BASE_URL"
    if env.get("AWS_BEARER_TOKEN_BEDROCK"):
        return True, f"{where}; a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK", None
    try:
        require_extra("boto3", provider="bedrock")
    except ProviderUnavailable as exc:
        return False, f"{where}; boto3 is not installed", exc.hint
    import boto3

    try:
        found = boto3.Session(region_name=env[region_var]).get_credentials()
    except Exception as exc:  # noqa: BLE001 - the doctor reports what the chain says, whatever it is
        return False, f"{where}; AWS credentials do not load ({type(exc).__name__})", CREDENTIALS_HINT
    if found is None:
        return False, f"{where}; no AWS credentials found", CREDENTIALS_HINT
    named = [
        n for n in ("AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN", "AWS_ROLE_ARN", "AWS_PROFILE") if env.get(n)
    ]
    return (
        True,
        f"{where}; credentials by AWS's chain ({found.method}{': ' + ', '.join(named) if named else ''})",
        None,
    )
