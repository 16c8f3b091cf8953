"""A loopback fake of Amazon Bedrock's runtime for Claude, as the Anthropic SDK's Bedrock client and
AWS's CountTokens speak it. Real HTTP; the Messages API's rules, answers, faults, prompt cache and
responders are the fake Anthropic API's own (:class:`tests.fakes.anthropic_server.FakeAnthropic`),
reached through Bedrock's routes and errors:

* ``POST /model/{modelId}/invoke``: the Messages request body without ``model`` (it is in the path,
  percent-encoded) and with ``anthropic_version`` (400 ``ValidationException`` otherwise, as
  Bedrock's "Malformed input request" does); the answer is the Messages response.
* ``POST /model/{modelId}/count-tokens``: ``{"input": {"invokeModel": {"body": <base64 of an
  InvokeModel body>}}}`` -> ``{"inputTokens": n}``, n by the fake Anthropic API's count rule.
  CountTokens takes a foundation model's id: an inference profile's (``us.anthropic...``) is
  refused with ``ValidationException``.
* auth: AWS Signature Version 4. The ``Authorization`` header must have SigV4's shape
  (``AWS4-HMAC-SHA256 Credential=KEY/DATE/REGION/bedrock/aws4_request, SignedHeaders=...,
  Signature=<64 hex>``), name this fake's access key, region and service, carry the session token
  when there is one, and the signature is recomputed with botocore from the request as received
  (method, path, signed headers, body) and the secret key: a request changed after signing, or
  signed with another secret, gets 403 ``InvalidSignatureException``. Or a Bedrock API key as
  ``Authorization: Bearer`` (``AWS_BEARER_TOKEN_BEDROCK``).
* errors: the status, ``x-amzn-ErrorType: NameException:...`` and a body ``{"message"}``; a 429
  is ``ThrottlingException`` without ``retry-after``, a 529 becomes 503
  ``ServiceUnavailableException``; no ``anthropic-ratelimit-*`` headers on any answer.
* model ids: ``models`` maps Bedrock ids to the Claude ids the fake Anthropic API serves; by
  default every Claude id of the SDK as ``anthropic.{id}-v1:0`` and its ``global.``/``us.``/``eu.``
  inference profiles. Another id: 400 ``ValidationException`` ("The provided model identifier is
  invalid.").
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import re
from urllib.parse import unquote

import pytest

from tests.fakes.anthropic_server import ApiError, FakeClaudeCloud, _Handler, known_models

REGION = "us-east-1"
ACCESS_KEY = "AKIAFAKEBEDROCK00001"
SECRET_KEY = "fake/secret/key/for/the/loopback/bedrock00"
SESSION_TOKEN = "FwoFAKEsessionTOKENfortheloopbackbedrock"
PROFILES = ("global", "us", "eu")
SIGV4 = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[A-Z0-9]+)/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/"
    r"(?P<service>[a-z0-9-]+)/aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), "
    r"Signature=(?P<signature>[0-9a-f]{64})"
)
AWS_ERRORS = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}


def bedrock_ids(claude_ids) -> dict[str, str]:
    """Bedrock's ids of each Claude id: the foundation model and its inference profiles."""
    out = {}
    for claude in claude_ids:
        out[f"anthropic.{claude}-v1:0"] = claude
        for geo in PROFILES:
            out[f"{geo}.anthropic.{claude}-v1:0"] = claude
    return out


class FakeBedrock(FakeClaudeCloud):
    """``with FakeBedrock(responder) as fake: fake.env()`` -> the variables that point the Anthropic
    SDK's Bedrock client here with this fake's credentials (what configure-aws-credentials exports)."""

    name = "bedrock"
    foreign_envs = ("AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_BEARER_TOKEN_BEDROCK", "AWS_SESSION_TOKEN")

    def __init__(
        self,
        responder=None,
        *,
        region: str = REGION,
        access_key: str = ACCESS_KEY,
        secret_key: str = SECRET_KEY,
        session_token: str | None = SESSION_TOKEN,
        bearer_token: str | None = None,
        models: dict[str, str] | None = None,
        **kw,
    ) -> None:
        super().__init__(responder, **kw)
        self.region, self.access_key, self.secret_key = region, access_key, secret_key
        self.session_token, self.bearer_token = session_token, bearer_token
        self.ids = models if models is not None else bedrock_ids(known_models())
        self.signed: list[dict] = []  # what each request's SigV4 header named, once verified

    def env(self) -> dict[str, str]:
        """The environment the workflow's AWS login leaves, pointed at this fake."""
        env = {
            "AWS_REGION": self.region,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "ANTHROPIC_BEDROCK_BASE_URL": self.base_url,
        }
        if self.session_token:
            env["AWS_SESSION_TOKEN"] = self.session_token
        return env


class _BedrockHandler(_Handler):
    fake: FakeBedrock
    rate_limit_headers = False

    def _service_headers(self) -> dict[str, str]:
        return {"x-amzn-RequestId": self.fake._next_id("")[:32]}

    def _send_error(self, err: ApiError, *, injected: bool = False) -> None:
        status = 503 if err.status == 529 else err.status
        kind = (
            err.kind if err.kind.endswith("Exception") else AWS_ERRORS.get(status, "InternalServerException")
        )
        if not injected:
            self.fake._count(str(status))
        headers = {"x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"}
        self._send(status, json.dumps({"message": err.message}).encode(), headers)

    def _post(self, path: str, headers: dict, raw: bytes, body: object) -> None:
        fake = self.fake
        route = re.fullmatch(r"/model/([^/]+)/(invoke|count-tokens)", path)
        if route is None:
            return self._send_error(ApiError(404, "UnknownOperationException", f"Not found: {path}"))
        model_id, operation = unquote(route.group(1)), route.group(2)
        fake._count("invoke" if operation == "invoke" else "count_tokens")
        try:
            self._check_auth(headers, raw)
            messages = self._messages_body(model_id, operation, body)
        except ApiError as err:
            return self._send_error(err)
        counting = operation == "count-tokens"
        route_key = path if counting else "/v1/messages"
        return self._serve(
            messages,
            counting=counting,
            validate_as_count=False,
            route=route_key,
            raw=raw,
            count_field="inputTokens",
        )

    def _messages_body(self, model_id: str, operation: str, body) -> dict:
        """The Messages request inside BODY (an InvokeModel body, or CountTokens' base64 of one),
        with the Claude id of MODEL_ID as its ``model``."""
        claude = self.fake.ids.get(model_id)
        if claude is None:
            raise ApiError(400, "ValidationException", "The provided model identifier is invalid.")
        if operation == "count-tokens":
            if model_id.split(".", 1)[0] in PROFILES:
                raise ApiError(
                    400, "ValidationException", "The provided model doesn't support counting tokens."
                )
            body = _invoke_body_of(body)
        if not isinstance(body, dict):
            raise ApiError(400, "ValidationException", "Malformed input request, please reformat your input.")
        if "anthropic_version" not in body:
            raise ApiError(
                400,
                "ValidationException",
                "Malformed input request: #: required key [anthropic_version] not found",
            )
        if "model" in body:
            raise ApiError(
                400,
                "ValidationException",
                "Malformed input request: #: extraneous key [model] is not permitted",
            )
        return {**{k: v for k, v in body.items() if k != "anthropic_version"}, "model": claude}

    def _check_auth(self, headers: dict, raw: bytes = b"") -> None:
        fake = self.fake
        auth = headers.get("authorization", "")
        if auth.startswith("Bearer "):
            if fake.bearer_token is None or not hmac.compare_digest(auth[7:], fake.bearer_token):
                raise ApiError(403, "AccessDeniedException", "Authentication failed: invalid API key")
            fake.signed.append({"bearer": True})
            return
        found = SIGV4.fullmatch(auth)
        if found is None:
            raise ApiError(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
        if found["key"] != fake.access_key:
            raise ApiError(
                403, "UnrecognizedClientException", "The security token included in the request is invalid."
            )
        if (found["region"], found["service"]) != (fake.region, "bedrock"):
            raise ApiError(
                403, "InvalidSignatureException", "Credential should be scoped to a valid region and service."
            )
        if fake.session_token and headers.get("x-amz-security-token") != fake.session_token:
            raise ApiError(
                403, "UnrecognizedClientException", "The security token included in the request is invalid."
            )
        if not hmac.compare_digest(found["signature"], self._signature(found, raw)):
            raise ApiError(
                403,
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided.",
            )
        fake.signed.append({k: found[k] for k in ("key", "region", "service", "signed")})

    def _signature(self, found: re.Match, raw: bytes) -> str:
        """SigV4's signature of this request as received, with the fake's secret (botocore's signer)."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        fake = self.fake
        signed = {h: self.headers.get(h, "") for h in found["signed"].split(";")}
        request = AWSRequest(
            method="POST", url=f"http://{signed.get('host', '')}{self.path}", headers=signed, data=raw
        )
        stamp = self.headers.get("x-amz-date", "")
        if not stamp.startswith(found["date"]):
            return ""
        request.context["timestamp"] = stamp
        signer = SigV4Auth(
            Credentials(fake.access_key, fake.secret_key, fake.session_token), "bedrock", fake.region
        )
        return signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)


def _invoke_body_of(body) -> object:
    try:
        encoded = body["input"]["invokeModel"]["body"]
        return json.loads(base64.b64decode(encoded, validate=True))
    except (TypeError, KeyError, ValueError, binascii.Error):
        raise ApiError(
            400, "ValidationException", "input.invokeModel.body: a base64 JSON request body is required"
        ) from None


FakeBedrock.handler = _BedrockHandler


@pytest.fixture(name="fake_bedrock")
def fake_bedrock_fixture(monkeypatch):
    """A started fault-free Bedrock fake, the environment pointing the SDK at it."""
    with FakeBedrock() as fake:
        yield fake.point_env(monkeypatch)
