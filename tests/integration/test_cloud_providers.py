"""The cloud providers with the real SDKs against loopback fakes of each cloud's own routes: Claude on
Amazon Bedrock (SigV4 verified by botocore) and on Vertex AI (a bearer token, or Workload Identity
Federation through a fake STS), OpenAI's models on Azure OpenAI (``api-key`` or an Entra token).

Each test says what the cloud received (route, auth, body) and what needle made of the answer:
the request is the application's own (tools, tool_result and document blocks, prompt-cache
markers), throttling is retried and halves the window, refused credentials stop the run with the
variable to check and never a value, and a model id that would bend the URL is refused before any
call.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from needle_action.config import ProviderSettings
from needle_action.core.errors import ConfigError, ProviderUnavailable
from needle_action.providers.base import Breakpoint
from needle_action.providers.retry import RequestRejected
from needle_action.request.prompt import RenderedPrompt
from tests.fakes.anthropic_server import Faults
from tests.fakes.azure_server import FakeAzure
from tests.samples import after_tool_call

BEDROCK_ID = "global.anthropic.claude-sonnet-5-5-v1:0"
VERTEX_ID = "claude-sonnet-5-5@20261001"
CONTEXT = "Shipping notes. " * 400 + "The locker code is QZT-4821. " + "More notes. " * 400
TOOLS = (
    {"name": "search_docs", "description": "Search the docs.", "input_schema": {"type": "object"}},
    {"name": "lookup_order", "description": "Find an order.", "input_schema": {"type": "object"}},
)


class Sleeps:
    def __init__(self):
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


@pytest.fixture(autouse=True)
def fresh_aws_sessions():
    """The SDK keeps one boto3 session per argument set for the process: tests change credentials."""
    from anthropic.lib.aws import _auth

    _auth._get_session.cache_clear()
    yield
    _auth._get_session.cache_clear()


def agent_prompt(question: str = "What is the locker code?") -> RenderedPrompt:
    """The agent shape: tools, a tool call, its result holding the context, a document, a question."""
    policy = {"type": "text", "media_type": "text/plain", "data": "Policy: be brief."}
    return after_tool_call(
        "Find the locker code.",
        {"type": "tool_use", "id": "t1", "name": "search_docs", "input": {"q": "locker"}},
        (
            {"type": "tool_result", "tool_use_id": "t1", "content": CONTEXT},
            {"type": "document", "source": policy},
            {"type": "text", "text": question},
        ),
        system="Answer from the tool results only.",
        tools=TOOLS,
    )


def complete(provider, prompt, breakpoints=(), max_output_tokens=32):
    async def go():
        try:
            return await provider.complete(
                prompt, max_output_tokens=max_output_tokens, breakpoints=breakpoints
            )
        finally:
            await provider.aclose()

    return asyncio.run(go())


def _last_user_text(body: dict) -> str:
    return body["messages"][-1]["content"][-1]["text"]


# ---- Bedrock -----------------------------------------------------------------------------------


def test_bedrock_sends_the_agent_request_signed_on_its_own_route(fake_bedrock):
    from needle_action.providers.bedrock import BedrockProvider

    fake_bedrock.responder = lambda body: "QZT-4821 " + _last_user_text(body)
    at = len(CONTEXT) // 2
    result = complete(BedrockProvider(BEDROCK_ID), agent_prompt(), (Breakpoint(2, at, cache=True),))
    assert result.text == "QZT-4821 What is the locker code?"
    (request,) = fake_bedrock.requests
    assert request["path"] == f"/model/{BEDROCK_ID}/invoke"
    body = request["json"]
    assert "model" not in body
    assert body["anthropic_version"]
    assert [t["name"] for t in body["tools"]] == ["search_docs", "lookup_order"]
    blocks = body["messages"][2]["content"]
    assert [b["type"] for b in blocks] == ["tool_result", "document", "text"]
    # needle's cache breakpoint splits the tool_result where the shared prefix ends
    assert blocks[0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert "".join(b["text"] for b in blocks[0]["content"]) == CONTEXT
    # SigV4, recomputed by the fake from what it received, with the session token
    (signed,) = fake_bedrock.signed
    assert (signed["region"], signed["service"], signed["key"]) == (
        "us-east-1",
        "bedrock",
        fake_bedrock.access_key,
    )
    assert {"host", "x-amz-date", "x-amz-security-token"} <= set(signed["signed"].split(";"))
    assert request["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 Credential=")
    assert result.cache_write_tokens > 0  # the fake cached the prefix the breakpoint marked


def test_bedrock_prompt_cache_is_read_back_on_the_second_call(fake_bedrock):
    from needle_action.providers.bedrock import BedrockProvider

    at = len(CONTEXT) // 2
    bp = (Breakpoint(2, at, cache=True),)
    first = complete(BedrockProvider(BEDROCK_ID), agent_prompt(), bp)
    second = complete(BedrockProvider(BEDROCK_ID), agent_prompt("Which locker?"), bp)
    assert first.cache_write_tokens > 0
    assert second.cache_read_tokens == first.cache_write_tokens


def test_bedrock_throttling_is_retried_and_halves_the_window(fake_bedrock):
    from needle_action.providers.bedrock import BedrockProvider

    fake_bedrock.faults = Faults(rate=1.0, kinds=("429",), max_consecutive=2)
    sleeps = Sleeps()
    provider = BedrockProvider(BEDROCK_ID, sleep=sleeps)
    result = complete(provider, agent_prompt())
    assert result.attempts == 3
    assert provider.limiter.cuts >= 1
    assert fake_bedrock.calls["429"] == 2
    # Bedrock's throttle has no retry-after: the backoff decides the waits
    assert len(sleeps.delays) == 2
    assert all(d <= 1.0 for d in sleeps.delays)


def test_bedrock_a_wrong_secret_stops_with_the_variables_to_check_never_a_value(fake_bedrock, monkeypatch):
    from needle_action.providers.bedrock import BedrockProvider

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value-123")
    with pytest.raises(ProviderUnavailable) as info:
        complete(BedrockProvider(BEDROCK_ID, sleep=Sleeps()), agent_prompt())
    text = info.value.format()
    assert "InvalidSignatureException" in text
    assert "aws-actions/configure-aws-credentials" in text
    assert "wrong-secret-value-123" not in text
    assert fake_bedrock.secret_key not in text
    assert fake_bedrock.calls["403"] == 1  # refused once, not retried


def test_bedrock_api_key_goes_as_a_bearer_token(fake_bedrock, monkeypatch):
    from needle_action.providers.bedrock import BedrockProvider

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    fake_bedrock.bearer_token = "bedrock-api-key-fake-0001"
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", fake_bedrock.bearer_token)
    assert complete(BedrockProvider(BEDROCK_ID), agent_prompt()).text
    assert fake_bedrock.signed == [{"bearer": True}]


def test_bedrock_without_credentials_or_region_stops_before_any_call(fake_bedrock, monkeypatch, tmp_path):
    from needle_action.providers.bedrock import BedrockProvider

    monkeypatch.delenv("AWS_REGION")
    with pytest.raises(ProviderUnavailable, match="AWS_REGION"):
        BedrockProvider(BEDROCK_ID)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(ProviderUnavailable, match="no AWS credentials") as info:
        BedrockProvider(BEDROCK_ID)
    assert "configure-aws-credentials" in (info.value.hint or "")
    assert fake_bedrock.requests == []


@pytest.mark.parametrize("model", ["../../v1/messages", "anthropic.claude?x=1", "a b", "..", "x/../../y"])
def test_bedrock_a_model_id_that_would_bend_the_url_is_refused(fake_bedrock, model):
    from needle_action.providers.bedrock import BedrockProvider

    with pytest.raises(ConfigError, match="is not a model id"):
        BedrockProvider(model)
    assert fake_bedrock.requests == []


def test_bedrock_region_must_be_a_region_name(fake_bedrock, monkeypatch):
    from needle_action.providers.bedrock import BedrockProvider

    monkeypatch.setenv("ANTHROPIC_BEDROCK_BASE_URL", "")  # the region then makes the host
    monkeypatch.setenv("AWS_REGION", "evil.example#")
    with pytest.raises(ConfigError, match="is not a region name"):
        BedrockProvider(BEDROCK_ID)


def test_bedrock_counts_through_count_tokens_with_the_foundation_model(fake_bedrock):
    from needle_action.tokens.anthropic_counter import AnthropicCounter

    counter = AnthropicCounter(model=BEDROCK_ID, provider_settings=ProviderSettings(), via="bedrock")
    prompt = agent_prompt()
    n = counter.count_prompt(prompt)
    request = fake_bedrock.requests[-1]
    # CountTokens takes the foundation model: the global. profile is dropped for it
    assert request["path"] == "/model/anthropic.claude-sonnet-5-5-v1:0/count-tokens"
    body = counter.count_body(prompt)
    assert n == fake_bedrock.prompt_tokens(body) > 1000
    assert counter.exact
    assert counter.where == "Amazon Bedrock"


def test_bedrock_count_refusals_name_bedrock(fake_bedrock):
    from needle_action.tokens.anthropic_counter import AnthropicCounter

    counter = AnthropicCounter(
        model="anthropic.claude-nope-1-v1:0", provider_settings=ProviderSettings(max_retries=0), via="bedrock"
    )
    with pytest.raises(ConfigError, match="Amazon Bedrock rejected the request to count: The provided model"):
        counter.count_prompt(agent_prompt())


# ---- Vertex ------------------------------------------------------------------------------------


def test_vertex_sends_the_agent_request_to_raw_predict_with_the_token(fake_vertex):
    from needle_action.providers.vertex import VertexProvider

    fake_vertex.responder = lambda body: "QZT-4821"
    at = len(CONTEXT) // 2
    result = complete(VertexProvider(VERTEX_ID), agent_prompt(), (Breakpoint(2, at, cache=True),))
    assert result.text == "QZT-4821"
    (request,) = fake_vertex.requests
    assert request["path"] == (
        f"/v1/projects/{fake_vertex.project}/locations/{fake_vertex.region}/publishers/anthropic/models/"
        f"{VERTEX_ID}:rawPredict"
    )
    assert request["headers"]["authorization"] == f"Bearer {fake_vertex.access_token}"
    body = request["json"]
    assert "model" not in body
    assert body["anthropic_version"]
    assert [b["type"] for b in body["messages"][2]["content"]] == ["tool_result", "document", "text"]
    assert body["messages"][2]["content"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert [t["name"] for t in body["tools"]] == ["search_docs", "lookup_order"]


def test_vertex_workload_identity_federation_exchanges_the_oidc_token(fake_vertex, monkeypatch, tmp_path):
    """What google-github-actions/auth leaves: a credentials file that reads the workflow's OIDC
    token and exchanges it at STS; google-auth does the exchange, the SDK sends the token."""
    from needle_action.providers.vertex import VertexProvider

    token_file = tmp_path / "oidc-token"
    token_file.write_text(fake_vertex.oidc_token)
    creds = tmp_path / "gha-creds.json"
    creds.write_text(json.dumps(fake_vertex.wif_credentials(str(token_file))))
    monkeypatch.delenv("GOOGLE_OAUTH_ACCESS_TOKEN")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(creds))
    assert complete(VertexProvider(VERTEX_ID), agent_prompt()).text
    exchange, answer = fake_vertex.requests
    assert exchange["path"] == "/v1/token"
    (form,) = fake_vertex.exchanges
    assert form["subject_token"] == fake_vertex.oidc_token
    assert answer["path"].endswith(":rawPredict")
    assert answer["headers"]["authorization"].startswith("Bearer ya29.fake-exchanged-")


def test_vertex_a_refused_token_stops_without_printing_it(fake_vertex, monkeypatch):
    from needle_action.providers.vertex import VertexProvider

    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.not-a-valid-token-987")
    with pytest.raises(ProviderUnavailable, match="UNAUTHENTICATED") as info:
        complete(VertexProvider(VERTEX_ID, sleep=Sleeps()), agent_prompt())
    assert "not-a-valid-token" not in info.value.format()
    assert "google-github-actions/auth" in (info.value.hint or "")


def test_vertex_resource_exhausted_is_retried(fake_vertex):
    from needle_action.providers.vertex import VertexProvider

    fake_vertex.faults = Faults(rate=1.0, kinds=("429", "529"), max_consecutive=2)
    provider = VertexProvider(VERTEX_ID, sleep=Sleeps())
    assert complete(provider, agent_prompt()).attempts == 3
    assert fake_vertex.calls["429"] + fake_vertex.calls["503"] == 2


def test_vertex_counts_through_count_tokens_raw_predict(fake_vertex):
    from needle_action.tokens.anthropic_counter import AnthropicCounter

    counter = AnthropicCounter(model=VERTEX_ID, provider_settings=ProviderSettings(), via="vertex")
    prompt = agent_prompt()
    n = counter.count_prompt(prompt)
    request = fake_vertex.requests[-1]
    assert request["path"].endswith("/publishers/anthropic/models/count-tokens:rawPredict")
    assert n == fake_vertex.prompt_tokens({**counter.count_body(prompt), "model": "claude-sonnet-5-5"})


def test_vertex_needs_a_region_and_a_project(fake_vertex, monkeypatch):
    from needle_action.providers.vertex import VertexProvider

    monkeypatch.delenv("CLOUD_ML_REGION")
    with pytest.raises(ProviderUnavailable, match="CLOUD_ML_REGION"):
        VertexProvider(VERTEX_ID)
    monkeypatch.setenv("CLOUD_ML_REGION", fake_vertex.region)
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    with pytest.raises(ProviderUnavailable, match="ANTHROPIC_VERTEX_PROJECT_ID"):
        VertexProvider(VERTEX_ID)


# ---- Azure -------------------------------------------------------------------------------------


def openai_agent_prompt() -> RenderedPrompt:
    return agent_prompt()


@pytest.mark.parametrize("token", [False, True], ids=["api-key", "entra-token"])
def test_azure_sends_the_chat_body_to_the_deployment_with_its_credential(monkeypatch, token):
    from needle_action.providers.azure import AzureProvider

    with FakeAzure(lambda body: "QZT-4821", deployments={"prod-gpt-4o": "gpt-4o"}) as fake:
        for name, value in fake.env(token=token).items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("AZURE_OPENAI_API_KEY" if token else "AZURE_OPENAI_AD_TOKEN", raising=False)
        result = complete(AzureProvider("prod-gpt-4o"), agent_prompt())
    assert result.text == "QZT-4821"
    (request,) = fake.requests
    assert request["path"] == "/openai/deployments/prod-gpt-4o/chat/completions?api-version=2024-10-21"
    headers = request["headers"]
    if token:
        assert headers["authorization"] == f"Bearer {fake.ad_token}"
        assert "api-key" not in headers
    else:
        assert headers["api-key"] == fake.api_key
        assert "authorization" not in headers
    body = request["json"]
    assert [t["function"]["name"] for t in body["tools"]] == ["search_docs", "lookup_order"]
    roles = [m["role"] for m in body["messages"]]
    assert roles[:3] == ["system", "user", "assistant"]
    assert "tool" in roles
    assert body["max_completion_tokens"] == 32
    assert not {"temperature", "max_tokens"} & set(body)


def test_azure_throttling_honours_retry_after_and_an_unknown_deployment_is_rejected(monkeypatch):
    from needle_action.providers.azure import AzureProvider

    with FakeAzure(fail_first={429: 1}, retry_after_s=2) as fake:
        for name, value in fake.env().items():
            monkeypatch.setenv(name, value)
        sleeps = Sleeps()
        provider = AzureProvider("gpt-4o", sleep=sleeps)
        assert complete(provider, agent_prompt()).attempts == 2
        assert sleeps.delays == [2.0]
        assert provider.limiter.cuts == 1
        with pytest.raises(RequestRejected, match="404"):
            complete(AzureProvider("gpt-5-nope", sleep=Sleeps()), agent_prompt())


def test_azure_a_wrong_key_stops_with_its_variable(monkeypatch):
    from needle_action.providers.azure import AzureProvider

    with FakeAzure() as fake:
        for name, value in fake.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("AZURE_OPENAI_AD_TOKEN", raising=False)
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", "wrong-azure-key-555")
        with pytest.raises(ProviderUnavailable) as info:
            complete(AzureProvider("gpt-4o", sleep=Sleeps()), agent_prompt())
    assert "$AZURE_OPENAI_API_KEY" in (info.value.hint or "")
    assert "wrong-azure-key-555" not in info.value.format()


def test_azure_needs_an_endpoint_and_a_credential(monkeypatch):
    from needle_action.providers.azure import AzureProvider

    for name in ("AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ProviderUnavailable, match="AZURE_OPENAI_ENDPOINT"):
        AzureProvider("gpt-4o")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://example-resource.openai.azure.com")
    with pytest.raises(ProviderUnavailable, match="AZURE_OPENAI_API_KEY"):
        AzureProvider("gpt-4o")
    with pytest.raises(ConfigError, match="is not a model id"):
        AzureProvider("../deployments/other")


def test_vertex_finds_the_auth_actions_file_in_the_containers_workspace(fake_vertex, monkeypatch, tmp_path):
    """The Docker action sees the workspace at $GITHUB_WORKSPACE, not at the runner's path that
    google-github-actions/auth exported: the file it wrote there is found by its name."""
    from needle_action.providers.vertex import VertexProvider

    workspace = tmp_path / "github-workspace"
    workspace.mkdir()
    token_file = tmp_path / "oidc-token"
    token_file.write_text(fake_vertex.oidc_token)
    name = "gha-creds-0123456789abcdef.json"
    (workspace / name).write_text(json.dumps(fake_vertex.wif_credentials(str(token_file))))
    monkeypatch.delenv("GOOGLE_OAUTH_ACCESS_TOKEN")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", f"/home/runner/work/widgets/widgets/{name}")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(workspace))
    assert complete(VertexProvider(VERTEX_ID), agent_prompt()).text
    assert fake_vertex.requests[0]["path"] == "/v1/token"
    # a file name the auth action does not write is not looked up in the checkout
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/home/runner/work/widgets/widgets/creds.json")
    (workspace / "creds.json").write_text(json.dumps(fake_vertex.wif_credentials(str(token_file))))
    with pytest.raises(ProviderUnavailable, match="no Google credentials"):
        VertexProvider(VERTEX_ID)


def test_vertex_refuses_a_credentials_file_that_would_run_a_program(fake_vertex, monkeypatch, tmp_path):
    from needle_action.providers.vertex import VertexProvider

    creds = tmp_path / "creds.json"
    info = fake_vertex.wif_credentials(str(tmp_path / "token"))
    info["credential_source"] = {"executable": {"command": "/bin/sh -c 'env > /tmp/leak'"}}
    creds.write_text(json.dumps(info))
    monkeypatch.delenv("GOOGLE_OAUTH_ACCESS_TOKEN")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(creds))
    with pytest.raises(ProviderUnavailable, match="no Google credentials"):
        VertexProvider(VERTEX_ID)
    assert fake_vertex.requests == []


def test_without_the_clouds_extra_the_install_command_is_named(fake_bedrock, monkeypatch):
    import importlib.util

    from needle_action.providers.bedrock import BedrockProvider

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "boto3" else real(name, *a)
    )
    with pytest.raises(ProviderUnavailable, match="boto3 is not installed") as info:
        BedrockProvider(BEDROCK_ID)
    assert "needle-action[clouds]" in (info.value.hint or "")
