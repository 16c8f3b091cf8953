"""A loopback fake of Claude on Google Vertex AI, as the Anthropic SDK's Vertex client speaks it, and
of Google's token exchange (STS) that Workload Identity Federation credentials call. Real HTTP; the
Messages API's rules, answers, faults, prompt cache and responders are the fake Anthropic API's
own (:class:`tests.fakes.anthropic_server.FakeAnthropic`), reached through Vertex's routes:

* ``POST /v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict``:
  the Messages request body without ``model`` (it is in the path) and with ``anthropic_version``;
  the answer is the Messages response. The project and the region must be this fake's (404).
* ``POST /v1/projects/{project}/locations/{region}/publishers/anthropic/models/count-tokens:rawPredict``:
  the count_tokens body (``model`` included) -> ``{"input_tokens": n}``, the fake Anthropic API's rule.
* auth: ``Authorization: Bearer TOKEN`` where TOKEN is one this fake issued (``access_token``, or
  one minted by its STS route); 401 ``UNAUTHENTICATED`` otherwise.
* ``POST /v1/token`` (STS): an RFC 8693 token exchange of the subject token (the workflow's OIDC
  token) for an access token, as ``sts.googleapis.com`` answers it; the subject token must be this
  fake's ``oidc_token``.
* errors: Google's shape ``{"error": {"code", "message", "status"}}`` (``RESOURCE_EXHAUSTED`` for
  429, ``UNAVAILABLE`` for 503 and 529); the model's own 400s keep the Anthropic shape, as Vertex
  passes them through. No ``anthropic-ratelimit-*`` headers.
* model ids: Vertex's ``claude-...@YYYYMMDD`` (or without the version) of the Claude ids the fake
  Anthropic API serves.
"""

from __future__ import annotations

import hmac
import json
import re
from urllib.parse import parse_qs, unquote

import pytest

from tests.fakes.anthropic_server import ApiError, FakeClaudeCloud, _Handler

PROJECT, REGION = "needle-fake-project", "us-east5"
ACCESS_TOKEN = "ya29.FAKEvertexACCESStoken0123456789"
OIDC_TOKEN = "eyFAKE.oidc.tokenFromTheWorkflow"
ROUTE = re.compile(
    r"/v1/projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/publishers/anthropic/models/"
    r"(?P<model>[^/:]+):rawPredict"
)
GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


class FakeVertex(FakeClaudeCloud):
    """``with FakeVertex(responder) as fake: fake.env()`` -> the variables that point the Anthropic
    SDK's Vertex client here (region, project, endpoint) with an access token it accepts."""

    name = "vertex"
    foreign_envs = ("ANTHROPIC_VERTEX_PROJECT_ID", "GCLOUD_PROJECT", "GOOGLE_OAUTH_ACCESS_TOKEN")

    def __init__(
        self,
        responder=None,
        *,
        project: str = PROJECT,
        region: str = REGION,
        access_token: str = ACCESS_TOKEN,
        oidc_token: str = OIDC_TOKEN,
        **kw,
    ) -> None:
        super().__init__(responder, **kw)
        self.project, self.region, self.oidc_token = project, region, oidc_token
        self.tokens = {access_token}  # the bearer tokens this fake accepts
        self.access_token = access_token
        self.exchanges: list[dict] = []  # STS requests, their form fields

    def env(self, *, token: bool = True) -> dict[str, str]:
        """The environment google-github-actions/auth leaves (plus CLOUD_ML_REGION), pointed here;
        TOKEN: an access token in GOOGLE_OAUTH_ACCESS_TOKEN (else the credentials come from ADC)."""
        env = {
            "CLOUD_ML_REGION": self.region,
            "GOOGLE_CLOUD_PROJECT": self.project,
            "ANTHROPIC_VERTEX_BASE_URL": self.base_url + "/v1",
        }
        if token:
            env["GOOGLE_OAUTH_ACCESS_TOKEN"] = self.access_token
        return env

    def wif_credentials(self, token_file: str) -> dict:
        """An ``external_account`` credentials file of the shape Workload Identity Federation
        writes: the workflow's OIDC token read from TOKEN_FILE, exchanged at this fake's STS."""
        return {
            "type": "external_account",
            "audience": "//iam.googleapis.com/projects/123456/locations/global/workloadIdentityPools/gh/providers/gh",
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "token_url": self.base_url + "/v1/token",
            "credential_source": {"file": token_file},
        }


class _VertexHandler(_Handler):
    fake: FakeVertex
    rate_limit_headers = False

    content_type = "application/json; charset=UTF-8"

    def _service_headers(self) -> dict[str, str]:
        return {}

    def _send_error(self, err: ApiError, *, injected: bool = False) -> None:
        status = 503 if err.status == 529 else err.status
        if not injected:
            self.fake._count(str(status))
        if status == 400 and not err.kind.isupper():  # the model's own refusal, passed through
            body = {"type": "error", "error": {"type": err.kind, "message": err.message}}
        else:
            kind = err.kind if err.kind.isupper() else GOOGLE_STATUS.get(status, "INTERNAL")
            body = {"error": {"code": status, "message": err.message, "status": kind}}
        self._send(status, json.dumps(body).encode())

    def _post(self, path: str, headers: dict, raw: bytes, body: object) -> None:
        fake = self.fake
        if path == "/v1/token":
            return self._exchange(raw)
        route = ROUTE.fullmatch(path)
        if route is None:
            return self._send_error(ApiError(404, "NOT_FOUND", f"The requested URL {path} was not found."))
        counting = route["model"] == "count-tokens"
        fake._count("count_tokens" if counting else "raw_predict")
        try:
            self._check_auth(headers)
            if (unquote(route["project"]), route["region"]) != (fake.project, fake.region):
                raise ApiError(
                    404, "NOT_FOUND", f"Project or location not found: {route['project']}/{route['region']}"
                )
            messages = self._messages_body(unquote(route["model"]), counting, body)
        except ApiError as err:
            return self._send_error(err)
        route_key = path if counting else "/v1/messages"
        return self._serve(messages, counting=counting, validate_as_count=counting, route=route_key, raw=raw)

    def _messages_body(self, model: str, counting: bool, body) -> dict:
        if not isinstance(body, dict):
            raise ApiError(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
        if counting:  # count-tokens names the model in the body, like the Messages API
            model = str(body.get("model", ""))
        elif "model" in body:
            raise ApiError(400, "invalid_request_error", "model: Extra inputs are not permitted")
        elif "anthropic_version" not in body:
            raise ApiError(400, "invalid_request_error", "anthropic_version: Field required")
        claude, _, version = model.partition("@")
        if version and not re.fullmatch(r"\d{8}", version):
            raise ApiError(404, "NOT_FOUND", f"Publisher model {model} was not found.")
        return {**{k: v for k, v in body.items() if k != "anthropic_version"}, "model": claude}

    def _check_auth(self, headers: dict) -> None:
        auth = headers.get("authorization", "")
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else ""
        if not any(hmac.compare_digest(token, t) for t in self.fake.tokens):
            raise ApiError(
                401,
                "UNAUTHENTICATED",
                "Request had invalid authentication credentials. Expected OAuth 2 access token.",
            )

    def _exchange(self, raw: bytes) -> None:
        """Google STS's token exchange: the workflow's OIDC token for an access token."""
        fake = self.fake
        form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
        with fake._state.lock:
            fake.exchanges.append(form)
        fake._count("sts")
        if form.get(
            "grant_type"
        ) != "urn:ietf:params:oauth:grant-type:token-exchange" or not hmac.compare_digest(
            form.get("subject_token", ""), fake.oidc_token
        ):
            return self._send(
                400, json.dumps({"error": "invalid_grant", "error_description": "bad subject token"}).encode()
            )
        token = "ya29.fake-exchanged-" + fake._next_id("")[:16]
        with fake._state.lock:
            fake.tokens.add(token)
        answer = {
            "access_token": token,
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
            "token_type": "Bearer",
            "expires_in": 3600,
        }
        return self._send(200, json.dumps(answer).encode())


FakeVertex.handler = _VertexHandler


@pytest.fixture(name="fake_vertex")
def fake_vertex_fixture(monkeypatch):
    """A started fault-free Vertex fake, the environment pointing the SDK at it with a token."""
    with FakeVertex() as fake:
        yield fake.point_env(monkeypatch)
