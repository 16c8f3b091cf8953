"""A pull request that changes the provider or an endpoint in its needle.toml sends no secret anywhere
new, whichever providers the base and the PR name (the clouds included): the provider, its
settings table (base_url, api_key_env) and the tokenizer come from the base branch, and where a
call goes is then the base's endpoint, the workflow's environment or the provider's official API.

Pure functions (config.trust.apply_trust, providers.specs), every pair of providers."""

from __future__ import annotations

from pathlib import Path

import pytest

from needle_action.config import load_config
from needle_action.config.trust import apply_trust
from needle_action.core.names import PROVIDER_NAMES
from needle_action.providers import specs
from needle_action.request.view import request_view

EVIL = "https://evil.example"
MODELS = {
    "anthropic": "claude-sonnet-5-5",
    "openai": "gpt-4o",
    "local": "gemma3-270m",
    "bedrock": "global.anthropic.claude-sonnet-5-5-v1:0",
    "vertex": "claude-sonnet-5-5@20261001",
    "azure": "prod-gpt-4o",
}
# what a workflow's environment sets for each provider (a secret in every credential variable)
WORKFLOW_ENV = {
    "ANTHROPIC_API_KEY": "sk-ant-SECRET",
    "OPENAI_API_KEY": "sk-SECRET",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "AKIASECRET",
    "AWS_SECRET_ACCESS_KEY": "SECRETaws",
    "CLOUD_ML_REGION": "global",
    "GOOGLE_CLOUD_PROJECT": "team-project",
    "GOOGLE_OAUTH_ACCESS_TOKEN": "ya29.SECRET",
    "AZURE_OPENAI_ENDPOINT": "https://team.openai.azure.com",
    "AZURE_OPENAI_API_KEY": "SECRETazure",
}


def _config(tmp_path: Path, name: str, provider: str, extra: str = ""):
    (tmp_path / "p.j2").write_text("user:\n{{ q }}\n")
    path = tmp_path / name
    path.write_text(
        f'[defaults]\nprovider = "{provider}"\nmodel = "{MODELS[provider]}"\n{extra}\n'
        '[prompts.qa]\ntemplate = "p.j2"\n'
    )
    return load_config(path)


def _hostile(provider: str) -> str:
    """A PR's redirection of PROVIDER: its endpoint to a host of the PR's choosing, with a key
    variable the PR picks, and the count through the API."""
    return (
        f'tokenizer = "anthropic"\n[defaults.providers.{provider}]\nbase_url = "{EVIL}"\n'
        'api_key_env = "AWS_SECRET_ACCESS_KEY"\n'
    )


@pytest.mark.parametrize("base", PROVIDER_NAMES)
@pytest.mark.parametrize("head", PROVIDER_NAMES)
def test_a_pr_switching_provider_and_endpoint_is_measured_the_base_way(tmp_path, base, head):
    trusted = _config(tmp_path, "base.toml", base)
    pr = _config(tmp_path, "head.toml", head, _hostile(head))
    effective, changes = apply_trust(pr, trusted)
    qa = effective.prompts["qa"]
    assert qa.provider == base
    assert qa.providers == {}
    assert qa.tokenizer == "tiktoken:o200k_base"
    assert qa.model == MODELS[head]  # the model is the change under review
    where = specs.endpoint(qa.provider, None, WORKFLOW_ENV)
    assert where is None or not where.startswith(EVIL)
    assert specs.missing_key(qa.provider, api_key_env=None, base_url=None, env=WORKFLOW_ENV) is None
    kinds = {c.key: c.kind for c in changes}
    assert kinds[f"providers.{head}.base_url"] == "endpoint"
    assert kinds[f"providers.{head}.api_key_env"] == "endpoint"
    if head != base:
        assert kinds["provider"] == "endpoint"


@pytest.mark.parametrize("provider", ["bedrock", "vertex", "azure"])
def test_without_a_base_file_a_cloud_is_reached_only_where_the_workflow_points(tmp_path, provider):
    pr = _config(tmp_path, "head.toml", provider, _hostile(provider))
    effective, changes = apply_trust(pr, None)
    qa = effective.prompts["qa"]
    assert qa.provider == provider  # the PR that adopts needle picks its provider...
    assert qa.providers == {}  # ...but none of its endpoints or key variables
    expected = {
        "bedrock": "https://bedrock-runtime.us-east-1.amazonaws.com",
        "vertex": "https://aiplatform.googleapis.com/v1/projects/team-project/locations/global",
        "azure": "https://team.openai.azure.com",
    }
    assert specs.endpoint(provider, None, WORKFLOW_ENV) == expected[provider]
    assert {c.kind for c in changes} == {"endpoint"}


def test_a_base_on_bedrock_keeps_its_own_endpoint_against_a_pr_redirect(tmp_path):
    base_url = "https://bedrock-runtime.eu-west-1.amazonaws.com"
    trusted = _config(
        tmp_path, "base.toml", "bedrock", f'[defaults.providers.bedrock]\nbase_url = "{base_url}"\n'
    )
    pr = _config(tmp_path, "head.toml", "bedrock", _hostile("bedrock"))
    effective, changes = apply_trust(pr, trusted)
    qa = effective.prompts["qa"]
    assert qa.providers["bedrock"].base_url == base_url
    assert qa.providers["bedrock"].api_key_env is None
    assert specs.endpoint("bedrock", qa.providers["bedrock"].base_url, WORKFLOW_ENV) == base_url
    (line,) = [c.describe() for c in changes if c.key == "providers.bedrock.base_url"]
    assert f"{base_url} → {EVIL}" in line
    assert "endpoints and keys always come from the base branch" in line


# ---- where each cloud's calls go, from the environment alone -------------------------------------


def test_cloud_endpoints_follow_the_sdks_rules():
    env = {"AWS_REGION": "eu-west-3", "CLOUD_ML_REGION": "us-east5", "GOOGLE_CLOUD_PROJECT": "p1"}
    assert specs.endpoint("bedrock", None, env) == "https://bedrock-runtime.eu-west-3.amazonaws.com"
    assert specs.endpoint("vertex", None, env) == (
        "https://us-east5-aiplatform.googleapis.com/v1/projects/p1/locations/us-east5"
    )
    assert specs.endpoint("vertex", None, {**env, "CLOUD_ML_REGION": "global"}).startswith(
        "https://aiplatform.googleapis.com/v1/"
    )
    assert specs.endpoint("azure", None, env) is None  # no public default: the workflow names it
    with_override = {**env, "ANTHROPIC_BEDROCK_BASE_URL": "http://127.0.0.1:9"}
    assert specs.endpoint("bedrock", None, with_override) == "http://127.0.0.1:9"


@pytest.mark.parametrize(
    ("provider", "env", "missing"),
    [
        ("bedrock", {}, "AWS_REGION"),
        ("bedrock", {"AWS_REGION": "us-east-1"}, "AWS_ACCESS_KEY_ID"),
        ("bedrock", {"AWS_DEFAULT_REGION": "us-east-1", "AWS_BEARER_TOKEN_BEDROCK": "x"}, None),
        ("bedrock", {"AWS_REGION": "us-east-1", "AWS_WEB_IDENTITY_TOKEN_FILE": "/t"}, None),
        ("vertex", {"GOOGLE_CLOUD_PROJECT": "p"}, "CLOUD_ML_REGION"),
        ("vertex", {"CLOUD_ML_REGION": "global"}, "GOOGLE_APPLICATION_CREDENTIALS"),
        ("vertex", {"CLOUD_ML_REGION": "global", "GCLOUD_PROJECT": "p"}, "GOOGLE_APPLICATION_CREDENTIALS"),
        (
            "vertex",
            {"CLOUD_ML_REGION": "global", "GCLOUD_PROJECT": "p", "GOOGLE_APPLICATION_CREDENTIALS": "/c"},
            None,
        ),
        ("azure", {"AZURE_OPENAI_API_KEY": "k"}, "AZURE_OPENAI_ENDPOINT"),
        ("azure", {"AZURE_OPENAI_ENDPOINT": "https://x.openai.azure.com"}, "AZURE_OPENAI_API_KEY"),
        ("azure", {"AZURE_OPENAI_ENDPOINT": "https://x", "AZURE_OPENAI_AD_TOKEN": "t"}, None),
    ],
)
def test_a_cloud_without_its_variables_is_skipped_naming_the_first_missing(tmp_path, provider, env, missing):
    env = {"HOME": str(tmp_path), **env}  # no developer login of this machine counts
    assert specs.missing_key(provider, api_key_env=None, base_url=None, env=env) == missing


def test_a_developers_own_cloud_login_files_count_as_credentials(tmp_path):
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text("[default]\n")
    env = {"HOME": str(tmp_path), "AWS_REGION": "us-east-1"}
    assert specs.missing_key("bedrock", api_key_env=None, base_url=None, env=env) is None
    gcloud = tmp_path / ".config" / "gcloud"
    gcloud.mkdir(parents=True)
    env = {"HOME": str(tmp_path), "CLOUD_ML_REGION": "global", "GOOGLE_CLOUD_PROJECT": "p"}
    assert (
        specs.missing_key("vertex", api_key_env=None, base_url=None, env=env)
        == "GOOGLE_APPLICATION_CREDENTIALS"
    )
    (gcloud / "application_default_credentials.json").write_text("{}")
    assert specs.missing_key("vertex", api_key_env=None, base_url=None, env=env) is None


@pytest.mark.parametrize(
    ("provider", "model", "family"),
    [
        ("bedrock", "global.anthropic.claude-sonnet-5-5-v1:0", "claude-sonnet-5-5"),
        ("bedrock", "us.anthropic.claude-haiku-5-5-20261001-v1:0", "claude-haiku-5-5-20261001"),
        (
            "bedrock",
            "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-opus-5-5-v1:0",
            "claude-opus-5-5",
        ),
        (
            "bedrock",
            "arn:aws:bedrock:us-east-1:1:application-inference-profile/abc",
            "arn:aws:bedrock:us-east-1:1:application-inference-profile/abc",
        ),
        ("vertex", "claude-sonnet-5-5@20261001", "claude-sonnet-5-5"),
        ("azure", "prod-gpt-4o-mini", "gpt-4o-mini"),
        ("azure", "gpt-4.1", "gpt-4.1"),
        ("azure", "chat", "chat"),
        ("anthropic", "claude-sonnet-5-5", "claude-sonnet-5-5"),
    ],
)
def test_a_cloud_id_names_its_model(provider, model, family):
    assert specs.model_family(provider, model) == family


# ---- the credentials file a cloud login writes into the workspace ---------------------------------

CREDS = '{"type": "external_account", "credential_source": {"headers": {"Authorization": "Bearer SECRET"}}}'


def test_the_auth_actions_credentials_file_is_never_prompt_material(tmp_path):
    """google-github-actions/auth writes gha-creds-<random>.json into the workspace, which is the
    PR's checkout: no glob, fixture, template or allow-list of a PR's file may read it."""
    from needle_action.assemble.render import render_case
    from needle_action.core.errors import ConfigError, TemplateError

    (tmp_path / "gha-creds-3f9a0c1d2e4b5a67.json").write_text(CREDS)
    (tmp_path / "ticket.json").write_text('{"q": "hello"}')
    (tmp_path / "p.j2").write_text("user:\n{{ q }}\n")
    (tmp_path / "steal.j2").write_text("user:\n{% include 'gha-creds-3f9a0c1d2e4b5a67.json' %}\n")
    path = tmp_path / "needle.toml"
    path.write_text(
        '[files]\nallow_hidden = ["gha-creds-3f9a0c1d2e4b5a67.json"]\n'
        '[prompts.qa]\ntemplate = "p.j2"\nfixtures = ["*.json"]\n'
        '[prompts.steal]\ntemplate = "steal.j2"\nfixtures = ["ticket.json"]\n'
    )
    config = load_config(path)
    assert [p.name for p in config.fixture_paths(config.prompts["qa"])] == ["ticket.json"]
    rendered = render_case(config, config.prompts["qa"], config.fixture_paths(config.prompts["qa"])[0])
    assert "SECRET" not in request_view(rendered)
    with pytest.raises((TemplateError, ConfigError), match="gha-creds"):
        render_case(config, config.prompts["steal"], tmp_path / "ticket.json")
    path.write_text('[prompts.qa]\ntemplate = "p.j2"\nfixtures = ["gha-creds-3f9a0c1d2e4b5a67.json"]\n')
    with pytest.raises(ConfigError, match="gha-creds"):
        load_config(path)
