"""Hostile pull requests against a team that reaches its model through a cloud, as a runner runs the
action: the workflow's environment holds the cloud's credentials (what configure-aws-credentials,
google-github-actions/auth or an Azure secret leave) and points at a loopback fake of the cloud;
the pull request's needle.toml tries to send the calls, and so the credentials, elsewhere.

The "attacker" must receive nothing and no secret may appear in anything published; the head is
still measured, on the base's cloud.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes.attacker_server import Attacker
from tests.fakes.azure_server import FakeAzure
from tests.fakes.bedrock_server import FakeBedrock
from tests.fakes.github_server import FakeGitHub
from tests.fakes.simulated_model import SimulatedModel, flat
from tests.fakes.vertex_server import FakeVertex
from tests.integration.action_runner import (
    CONFIG,
    PR,
    REPO,
    everything_published,
    make_project,
    run_action,
    runner_env,
)

pytestmark = pytest.mark.slow  # each case is a whole action run (~5-10 s)

BEDROCK_ID = "global.anthropic.claude-sonnet-5-5-v1:0"
VERTEX_ID = "claude-sonnet-5-5@20261001"
GITHUB_TOKEN = "ghs_SECRETgithubTOKEN0123456789abcdef"


def _base_on(provider: str, model: str) -> str:
    """The test repository's needle.toml with its prompts on PROVIDER."""
    return CONFIG.format(growth="10%").replace(
        'model = "claude-sonnet-5-5"\nprovider = "anthropic"', f'model = "{model}"\nprovider = "{provider}"'
    )


def _pr_sets(text: str):
    def change(repo: Path):
        cfg = repo / "needle.toml"
        cfg.write_text(cfg.read_text() + "\n" + text)

    return change


def _switch_to(provider: str, model: str, url: str, key_env: str = "GITHUB_TOKEN"):
    def change(repo: Path):
        cfg = repo / "needle.toml"
        text = re.sub(r'^model = ".*"$', f'model = "{model}"', cfg.read_text(), count=1, flags=re.M)
        text = re.sub(r'^provider = ".*"$', f'provider = "{provider}"', text, count=1, flags=re.M)
        cfg.write_text(
            text + f'\n[defaults.providers.{provider}]\nbase_url = "{url}"\napi_key_env = "{key_env}"\n'
        )

    return change


def _secrets(env: dict) -> list[str]:
    names = (
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "GOOGLE_OAUTH_ACCESS_TOKEN",
        "AZURE_OPENAI_API_KEY",
    )
    return [env[n] for n in names if env.get(n)] + [GITHUB_TOKEN]


def _run(
    tmp_path,
    base_config: str,
    change: Callable[[str], Callable[[Path], object]],
    cloud_env: dict,
    calls,
    *,
    code: int = 0,
) -> None:
    """One action run: the base on its cloud, the PR's CHANGE (given the attacker's URL); CALLS()
    counts the cloud's model calls. CODE 2: the PR's model is no id of the base's cloud, a config
    error (then nothing is measured, and still nothing leaks)."""
    with Attacker() as evil, FakeGitHub(tokens={"test-token": "write", GITHUB_TOKEN: "write"}) as gh:
        p = make_project(tmp_path, change(evil.url), base_config=base_config)
        env = runner_env(p, gh, None)
        env.update(cloud_env, GITHUB_TOKEN=GITHUB_TOKEN)
        r = run_action(p, env)
        assert "Traceback" not in r.stderr, r.stderr
        assert r.code == code, r.stdout + r.stderr
        assert evil.requests == [], [x.path for x in evil.requests]
        published = everything_published(r, gh)
        for secret in _secrets(env):
            assert secret not in published
        if code == 2:
            assert "is not a model id" in r.stdout
            return
        assert calls() > 0, "the head and the base were measured on the base's cloud"
        body = gh.issue_comments(REPO, PR)[0]["body"].replace("\\", "")
        assert "endpoints and keys always come from the base branch" in body


ROUTES = {
    "redirect": lambda url: _pr_sets(f'[defaults.providers.bedrock]\nbase_url = "{url}"\n'),
    "to_azure": lambda url: _switch_to("azure", "gpt-4o", url, "AWS_SECRET_ACCESS_KEY"),
    "to_vertex": lambda url: _switch_to("vertex", VERTEX_ID, url + "/v1"),
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_pr_cannot_send_a_bedrock_teams_credentials_elsewhere(tmp_path, route):
    with FakeBedrock(SimulatedModel(flat(1.0), seed=1)) as fake:
        _run(
            tmp_path, _base_on("bedrock", BEDROCK_ID), ROUTES[route], fake.env(), lambda: fake.calls["invoke"]
        )
        assert all(s["region"] == fake.region for s in fake.signed)  # every call signed for the fake


def test_a_pr_cannot_send_a_vertex_teams_token_elsewhere(tmp_path):
    with FakeVertex(SimulatedModel(flat(1.0), seed=1)) as fake:
        change = lambda url: _pr_sets(f'[defaults.providers.vertex]\nbase_url = "{url}/v1"\n')  # noqa: E731
        _run(tmp_path, _base_on("vertex", VERTEX_ID), change, fake.env(), lambda: fake.calls["raw_predict"])


@pytest.mark.parametrize(("model", "code"), [("gpt-4o", 0), (BEDROCK_ID, 2)])
def test_a_pr_cannot_send_an_azure_teams_key_elsewhere(tmp_path, model, code):
    with FakeAzure(SimulatedModel(flat(1.0), seed=1), deployments={"gpt-4o": "gpt-4o"}) as fake:
        change = lambda url: _switch_to("bedrock", model, url, "AZURE_OPENAI_API_KEY")  # noqa: E731
        _run(tmp_path, _base_on("azure", "gpt-4o"), change, fake.env(), lambda: fake.calls["chat"], code=code)
