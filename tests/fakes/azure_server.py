"""A loopback fake of Azure OpenAI's chat completions, as the OpenAI SDK's ``AzureOpenAI`` client
speaks it. Real HTTP; the chat rules, faults and responders are the OpenAI-compatible fake's own
(:class:`tests.fakes.openai_server.FakeOpenAI`), reached through Azure's route and credentials:

* ``POST /openai/deployments/{deployment}/chat/completions?api-version=VERSION``: the deployment
  is in the path; an unknown one is 404 ``DeploymentNotFound``; no ``api-version`` is 404 ``Resource
  not found`` (what Azure answers).
* auth: ``api-key: KEY`` (an Azure key) or ``Authorization: Bearer TOKEN`` (an Entra ID token);
  401 otherwise.
* errors: Azure's ``{"error": {"code", "message"}}``, a 429 with ``retry-after``.
* ``deployments`` maps each deployment's name to the model it serves (the answer's ``model``).
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlsplit

from tests.fakes.loopback import Loopback
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import _Handler as _ChatHandler

API_KEY = "azure-fake-key-0123456789abcdef"
AD_TOKEN = "eyFAKE.entra.token"
ROUTE = re.compile(r"/openai/deployments/(?P<deployment>[^/]+)/chat/completions")


class FakeAzure(FakeOpenAI):
    """``with FakeAzure(responder, deployments={"prod-gpt-4o": "gpt-4o"}) as fake: fake.env()``."""

    def __init__(
        self,
        responder=None,
        *,
        deployments: dict[str, str] | None = None,
        api_key: str = API_KEY,
        ad_token: str | None = AD_TOKEN,
        **kw,
    ) -> None:
        super().__init__(responder, api_key=api_key, **kw)
        self.deployments = deployments if deployments is not None else {"gpt-4o": "gpt-4o"}
        self.ad_token = ad_token
        self.versions: list[str] = []  # the api-version of every request

    def __enter__(self) -> FakeAzure:
        self._server = Loopback(type("H", (_AzureHandler,), {"fake": self}), name="fake-azure")
        return self

    @property
    def endpoint(self) -> str:
        """What AZURE_OPENAI_ENDPOINT holds: the resource, without /openai."""
        assert self._server is not None
        return self._server.url

    def env(self, *, token: bool = False) -> dict[str, str]:
        """The environment a workflow sets for Azure OpenAI, pointed here (TOKEN: an Entra ID token
        instead of the key)."""
        env = {"AZURE_OPENAI_ENDPOINT": self.endpoint, "OPENAI_API_VERSION": "2024-10-21"}
        env["AZURE_OPENAI_AD_TOKEN" if token else "AZURE_OPENAI_API_KEY"] = (
            str(self.ad_token) if token else str(self.api_key)
        )
        return env


class _AzureHandler(_ChatHandler):
    fake: FakeAzure

    def _error(self, status: int, message: str, kind: str, code: str | None = None, headers=None) -> None:
        with self.fake.lock:
            self.fake.calls[str(status)] += 1
        body = {"error": {"code": code or str(status), "message": message}}
        self._send(status, json.dumps(body).encode(), headers)

    def _route(self, headers: dict) -> tuple | None:
        fake = self.fake
        parts = urlsplit(self.path)
        route = ROUTE.fullmatch(parts.path)
        version = parse_qs(parts.query).get("api-version", [""])[0]
        if route is None or not version:
            return 404, "Resource not found", "invalid_request_error", "404"
        with fake.lock:
            fake.versions.append(version)
            fake.calls["chat"] += 1
        key, auth = headers.get("api-key"), headers.get("authorization", "")
        if not (
            (key is not None and key == fake.api_key)
            or (fake.ad_token is not None and auth == f"Bearer {fake.ad_token}")
        ):
            return (
                401,
                "Access denied due to invalid subscription key or wrong API endpoint.",
                "invalid_request_error",
                "401",
            )
        return None

    def _model(self, body: dict) -> str | None:
        route = ROUTE.fullmatch(urlsplit(self.path).path)
        assert route is not None  # _route refused every other path
        deployment = route["deployment"]
        model = self.fake.deployments.get(deployment)
        if model is None:
            self._error(
                404,
                f"The API deployment {deployment} does not exist.",
                "invalid_request_error",
                "DeploymentNotFound",
            )
        return model
