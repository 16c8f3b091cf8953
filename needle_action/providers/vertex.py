"""Claude on Google Vertex AI, through the Anthropic SDK's own client (``AsyncAnthropicVertex``, the
``[clouds]`` extra: google-auth).

* Model: Vertex's own id (``claude-sonnet-5-5@20261001``). The SDK puts it in the path:
  ``POST /v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict``.
* Region: ``CLOUD_ML_REGION`` (``global``, ``us-east5``, ``europe-west1``...); project:
  ``ANTHROPIC_VERTEX_PROJECT_ID``, else ``GOOGLE_CLOUD_PROJECT`` / ``GCLOUD_PROJECT`` (what
  google-github-actions/auth exports), else the credentials' own project. Endpoint: the base
  branch's ``providers.vertex.base_url``, else ``ANTHROPIC_VERTEX_BASE_URL``, else the SDK's host
  for the region.
* Credentials: an access token in ``GOOGLE_OAUTH_ACCESS_TOKEN``, else Google's Application Default
  Credentials (``GOOGLE_APPLICATION_CREDENTIALS``: the file google-github-actions/auth writes for
  Workload Identity Federation or a key; gcloud's own login; a VM's metadata server), sent as
  ``Authorization: Bearer``. Never from needle.toml.
* Counting (``tokenizer = "anthropic"``): Vertex's ``count-tokens:rawPredict``, through the SDK.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import anthropic

from needle_action.config import ProviderSettings
from needle_action.core import environment
from needle_action.core.errors import ProviderUnavailable
from needle_action.providers import specs
from needle_action.providers.cloud_claude import (
    ClaudeCloudProvider,
    check_model_id,
    check_region,
    require_extra,
)
from needle_action.providers.retry import Retry

MODEL_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,255}")
EXAMPLE_ID = "claude-sonnet-5-5@20261001"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
TOKEN_ENV = "GOOGLE_OAUTH_ACCESS_TOKEN"  # noqa: S105 - the name of a variable, not a token
CREDENTIALS_HINT = (
    "in a workflow, run google-github-actions/auth before needle; locally, "
    "`gcloud auth application-default login`; or export GOOGLE_OAUTH_ACCESS_TOKEN"
)


def client_options(model: str, settings: ProviderSettings, env: Mapping[str, str]) -> dict[str, Any]:
    """The keyword arguments both Vertex clients get: region, project, endpoint and credentials
    from the environment (the endpoint may also be the base branch's base_url)."""
    check_model_id(model, provider="vertex", pattern=MODEL_ID_RE, example=EXAMPLE_ID)
    region = check_region(specs.region("vertex", env), provider="vertex", variables="CLOUD_ML_REGION")
    project = specs.first_set(specs.VERTEX_PROJECT_ENVS, env)
    auth: dict[str, Any]
    if env.get(TOKEN_ENV):
        auth = {"access_token": env[TOKEN_ENV]}
    else:
        credentials, own_project = default_credentials(env)
        auth = {"credentials": credentials}
        project = project or own_project
    if not project:
        raise ProviderUnavailable(
            "vertex: no Google Cloud project: ANTHROPIC_VERTEX_PROJECT_ID is not set",
            hint="export ANTHROPIC_VERTEX_PROJECT_ID=... (or GOOGLE_CLOUD_PROJECT)",
        )
    return {
        "region": region,
        "project_id": project,
        "base_url": specs.base_url("vertex", settings.base_url, env),
        "timeout": settings.timeout_s,
        **auth,
    }


def credentials_file(env: Mapping[str, str]) -> str | None:
    """The credentials file ``GOOGLE_APPLICATION_CREDENTIALS`` names, as this process sees it.

    google-github-actions/auth writes it into the workspace and exports its path on the runner
    (``/home/runner/work/REPO/REPO/gha-creds-<random>.json``); the action's container sees the
    workspace at ``$GITHUB_WORKSPACE`` (``/github/workspace``), so a path that does not exist here is
    looked up there by its file name, the one the auth step just wrote."""
    path = env.get("GOOGLE_APPLICATION_CREDENTIALS")
    if not path or os.path.exists(path):
        return path or None
    workspace = env.get("GITHUB_WORKSPACE")
    name = os.path.basename(path)
    moved = os.path.join(workspace, name) if workspace and name.startswith("gha-creds-") else None
    return moved if moved and os.path.isfile(moved) else path


def default_credentials(env: Mapping[str, str] | None = None) -> tuple[Any, str | None]:
    """Google's Application Default Credentials and their project, loaded without a network call
    (the token is fetched, and refreshed, by the SDK when a request needs it)."""
    require_extra("google.auth", provider="vertex")
    import google.auth  # the [clouds] extra; imported only when Vertex is used
    import google.auth.exceptions

    path = credentials_file(environment.process() if env is None else env)
    try:
        return _from_file(path) if path else google.auth.default(scopes=[SCOPE])
    except (google.auth.exceptions.GoogleAuthError, OSError, ValueError) as exc:
        raise ProviderUnavailable(
            f"vertex: no Google credentials ({type(exc).__name__})", hint=CREDENTIALS_HINT
        ) from None


def _from_file(path: str) -> tuple[Any, str | None]:
    """The credentials of the file at PATH, by its type: a service account key, a user's login, or
    Workload Identity Federation reading a token from a file or a URL (what the auth action
    writes). Nothing else: a configuration that runs a program (``executable``) is refused, as is
    any type this list does not name (google-auth's generic loader accepts them all)."""
    from google.auth import identity_pool
    from google.oauth2 import credentials as user_credentials
    from google.oauth2 import service_account

    with open(path, encoding="utf-8") as handle:
        info = json.load(handle)
    kind = info.get("type") if isinstance(info, dict) else None
    if kind == "service_account":
        key = service_account.Credentials.from_service_account_info(info, scopes=[SCOPE])  # type: ignore[no-untyped-call]
        return key, info.get("project_id")
    if kind == "authorized_user":
        return user_credentials.Credentials.from_authorized_user_info(info, scopes=[SCOPE]), None  # type: ignore[no-untyped-call]
    source = info.get("credential_source") if kind == "external_account" else None
    if isinstance(source, dict) and ("file" in source or "url" in source) and "executable" not in source:
        return identity_pool.Credentials.from_info(info, scopes=[SCOPE]), None  # type: ignore[no-untyped-call]
    raise ValueError(f"credentials of type {kind!r} are not used")


class VertexProvider(ClaudeCloudProvider):
    name = "vertex"
    credentials_hint = "check the Google credentials (" + CREDENTIALS_HINT + ")"

    client_class = anthropic.AsyncAnthropicVertex
    client_options = staticmethod(client_options)

    def _error_type(self, headers: Mapping[str, str], body: object) -> str | None:
        # Google's errors: {"error": {"code": 429, "message", "status": "RESOURCE_EXHAUSTED"}}, at times
        # inside a list; Claude's own errors keep the Anthropic shape
        if isinstance(body, list) and body:
            body = body[0]
        err = body.get("error") if isinstance(body, dict) else None
        status = err.get("status") if isinstance(err, dict) else None
        return status if isinstance(status, str) else super()._error_type(headers, body)

    def _classify_other(self, exc: BaseException) -> Retry | BaseException:
        import google.auth.exceptions

        if isinstance(exc, google.auth.exceptions.TransportError):  # the token endpoint did not answer
            return Retry("connection error (Google token)")
        if isinstance(exc, google.auth.exceptions.GoogleAuthError):  # refused: retrying will not help
            return ProviderUnavailable(
                f"vertex: Google credentials failed ({type(exc).__name__}): {str(exc)[:200]}",
                hint=CREDENTIALS_HINT,
            )
        return exc


def count_client(model: str, settings: ProviderSettings) -> Any:
    """A client whose ``messages.count_tokens`` counts through Vertex's ``count-tokens:rawPredict``
    (the spec's ``count_client``: tokenizer = "anthropic" with provider = "vertex")."""
    client = anthropic.AnthropicVertex(
        **client_options(model, settings, environment.process()), max_retries=settings.max_retries
    )
    return SimpleNamespace(messages=client.messages, where="Vertex AI")


def credentials_check(env: Mapping[str, str]) -> tuple[bool, str, str | None]:
    """``needle doctor``: the region's and the project's variables, the endpoint's, and which kind of
    Google credentials were found (a token variable, or the kind of Application Default
    Credentials: workload identity federation, a service account, a user, a VM), never a value."""
    if not env.get("CLOUD_ML_REGION"):
        return (
            False,
            "no region (CLOUD_ML_REGION unset)",
            "export CLOUD_ML_REGION=global (or the model's region)",
        )
    project_var = next((n for n in specs.VERTEX_PROJECT_ENVS if env.get(n)), None)
    where = "region from CLOUD_ML_REGION" + (f", project from {project_var}" if project_var else "")
    if env.get("ANTHROPIC_VERTEX_BASE_URL"):
        where += ", endpoint from ANTHROPIC_VERTEX_BASE_URL"
    if env.get(TOKEN_ENV):
        found = f"an access token in {TOKEN_ENV}"
    else:
        try:
            credentials, own_project = default_credentials(env)
        except ProviderUnavailable as exc:  # no credentials, or no google-auth (the hint says which)
            return False, f"{where}; {exc.message.removeprefix('vertex: ')}", exc.hint or CREDENTIALS_HINT
        source = "GOOGLE_APPLICATION_CREDENTIALS" if env.get("GOOGLE_APPLICATION_CREDENTIALS") else "ADC"
        found = f"Application Default Credentials ({type(credentials).__module__}, from {source})"
        project_var = project_var or ("the credentials" if own_project else None)
    if project_var is None:
        return False, f"{where}; {found}; no project", "export ANTHROPIC_VERTEX_PROJECT_ID=..."
    return True, f"{where}; {found}", None
