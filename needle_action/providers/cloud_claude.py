"""What Claude on Amazon Bedrock and on Google Vertex AI share: the Anthropic SDK's own cloud
clients, the Messages request unchanged, the cloud's errors read the cloud's way.

Both clouds take the Messages API's request body (system blocks, tools, tool_choice, content blocks
with tool_use, tool_result and document, ``cache_control``) with the model in the URL instead of
the body and ``anthropic_version`` in the body; the SDK's clients (``AsyncAnthropicBedrock``,
``AsyncAnthropicVertex``) move both, sign or authorise the request and raise the SDK's own error
classes. So the request is built exactly as for the Anthropic API
(:func:`needle_action.providers.anthropic.build_request`: prompt-cache breakpoints included, which
both clouds honour for Claude) and the answer parsed the same way; what differs is the error
bodies (Bedrock: ``x-amzn-ErrorType`` and ``{"message"}``; Vertex: Google's ``{"error": {"code",
"message", "status"}}`` or the Anthropic shape), the credentials and where the model id goes.

The model id is part of the URL path there, and a pull request writes it: :func:`check_model_id`
refuses anything that is not an id before the SDK sees it (the SDK would percent-encode it and
refuse dot segments; refusing it here says why, once, instead of a retried ``ValueError``).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import anthropic

from needle_action.config import ProviderSettings
from needle_action.core import environment
from needle_action.core.errors import ConfigError, ProviderUnavailable
from needle_action.providers.anthropic import ClaudeMessagesProvider
from needle_action.providers.retry import (
    Retry,
    classify_status,
)

# a cloud's region or location: letters, digits and hyphens (us-east-1, europe-west4, global)
REGION_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_DOT_SEGMENT = re.compile(r"(?:^|/)\.{1,2}(?:/|$)")


def check_region(region: str | None, *, provider: str, variables: str) -> str:
    """REGION as a host name part may hold it, or a ConfigError naming the variables it came from
    (a region is part of the endpoint's host: ``bedrock-runtime.{region}.amazonaws.com``)."""
    if not region:
        raise ProviderUnavailable(
            f"{provider}: no region: {variables} is not set",
            hint=f"export {variables.split(' or ')[0]}=... (the region the model is enabled in)",
        )
    if not REGION_RE.fullmatch(region):
        raise ConfigError(
            f"{provider}: {region!r} is not a region name ({variables})",
            hint="a region is lower-case letters, digits and hyphens, like us-east-1 or europe-west4",
        )
    return region


def require_extra(module: str, *, provider: str) -> None:
    """ProviderUnavailable, with the install command, when MODULE (of the ``[clouds]`` extra) is
    missing: the SDK would raise its own error in the middle of the first request instead."""
    top = module.partition(".")[0]
    if importlib.util.find_spec(top) is None or importlib.util.find_spec(module) is None:
        raise ProviderUnavailable(
            f"{provider}: {module} is not installed",
            hint="pip install 'needle-action[clouds]' (the action's image has it)",
        )


def check_model_id(model: str, *, provider: str, pattern: re.Pattern[str], example: str) -> str:
    """MODEL when it is an id of the cloud's shape; a ConfigError otherwise (it goes into the URL)."""
    if not pattern.fullmatch(model) or _DOT_SEGMENT.search(model):
        raise ConfigError(
            f"{provider}: {model!r} is not a model id",
            hint=f"use the cloud's own id, like {example}",
        )
    return model


class ClaudeCloudProvider(ClaudeMessagesProvider):
    """Claude through a cloud's client of the Anthropic SDK. Subclasses name the client class and
    its options, and say how the cloud names its errors (:meth:`_error_type`)."""

    client_class: ClassVar[Callable[..., Any]]  # AsyncAnthropicBedrock or AsyncAnthropicVertex
    credentials_hint = "check the cloud credentials"

    @staticmethod
    def client_options(model: str, settings: ProviderSettings, env: Mapping[str, str]) -> dict[str, Any]:
        """The client's keyword arguments (region, endpoint, credentials) for MODEL."""
        raise NotImplementedError

    def __init__(self, model: str, settings: ProviderSettings | None = None, **retry_kw: Any) -> None:
        super().__init__(model, settings, **retry_kw)  # retry_kw: sleep=, rng= (tests inject them)
        options = self.client_options(model, self.settings, environment.process())
        self._client = self.client_class(**options, max_retries=0)

    def _error_type(self, headers: Mapping[str, str], body: object) -> str | None:
        """The cloud's name for an error (``ThrottlingException``, ``RESOURCE_EXHAUSTED``)."""
        return _anthropic_error_type(body)

    def _classify_status(self, exc: anthropic.APIStatusError) -> Retry | BaseException:
        kind = self._error_type(exc.response.headers, exc.body)
        message = _error_message(exc.body)
        if exc.status_code in (401, 403):
            label = f"{exc.status_code} {kind}" if kind else str(exc.status_code)
            return ProviderUnavailable(
                f"{self.name} refused our credentials ({label})" + (f": {message}" if message else ""),
                hint=f"{self.credentials_hint}, and that they may call {self.model!r} (values are never printed)",
            )
        return classify_status(
            exc.status_code,
            provider=self.name,
            model=self.model,
            headers=exc.response.headers,
            error_type=kind,
            message=message,
        )


def _anthropic_error_type(body: object) -> str | None:
    err = body.get("error") if isinstance(body, dict) else None
    kind = err.get("type") if isinstance(err, dict) else None
    return kind if isinstance(kind, str) else None


def _error_message(body: object) -> str | None:
    """The error's message, from the Anthropic shape, Google's, or Bedrock's ``{"message"}``."""
    if not isinstance(body, dict):
        return None
    err = body.get("error")
    message = err.get("message") if isinstance(err, dict) else body.get("message")
    return message[:300] if isinstance(message, str) else None
