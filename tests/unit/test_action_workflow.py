"""Workflow commands, outputs and settings exactly as the runner parses them."""

from __future__ import annotations

import io
import json

import pytest

from needle_action.action import workflow
from needle_action.action.settings import input_env_name, load_settings
from needle_action.core.errors import ConfigError


def test_annotation_escaping_blocks_command_injection():
    out = io.StringIO()
    line = workflow.error(
        "50% done\r\n::set-output name=x::pwned",
        file="prompts/a,b:c.j2\n::warning::x",
        line=3,
        title="t: 1, 2",
        out=out,
    )
    assert line == (
        "::error file=prompts/a%2Cb%3Ac.j2%0A%3A%3Awarning%3A%3Ax,line=3,title=t%3A 1%2C 2::"
        "50%25 done%0D%0A::set-output name=x::pwned"
    )
    assert out.getvalue().count("\n") == 1  # one command, one line


def test_outputs_are_multiline_safe(tmp_path):
    path = tmp_path / "out"
    evil = "a\nb\nghadelimiter_x\nstatus=pwned"
    workflow.set_output("token-deltas", evil, path)
    workflow.set_output("status", "pass", path)
    assert workflow.read_outputs(path) == {"token-deltas": evil, "status": "pass"}


def test_masks_keys_found_in_env():
    out = io.StringIO()
    names = workflow.mask_secrets_in_env(
        {
            "ANTHROPIC_API_KEY": "sk-1\nsk-2",
            "INPUT_GITHUB-TOKEN": "ghs_x",
            "OPENAI_API_KEY": "",
            "HOME": "/root",
            "MY_SERVICE_TOKEN": "abcd",
        },
        out,
    )
    assert names == ["ANTHROPIC_API_KEY", "INPUT_GITHUB-TOKEN", "MY_SERVICE_TOKEN"]
    assert out.getvalue().splitlines() == [
        "::add-mask::sk-1",
        "::add-mask::sk-2",
        "::add-mask::ghs_x",
        "::add-mask::abcd",
    ]


def test_masks_the_clouds_credentials_and_not_their_names_or_places():
    env = {
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE0001",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
        "AWS_SESSION_TOKEN": "aws-session-value",
        "AWS_BEARER_TOKEN_BEDROCK": "bedrock-api-key",
        "AWS_REGION": "us-east-1",
        "GOOGLE_OAUTH_ACCESS_TOKEN": "ya29.value",
        "GOOGLE_APPLICATION_CREDENTIALS": "/home/runner/work/x/x/gha-creds-1.json",
        "AZURE_OPENAI_API_KEY": "azure-key-value",
        "AZURE_OPENAI_AD_TOKEN": "entra-token-value",
        "AZURE_OPENAI_ENDPOINT": "https://team.openai.azure.com",
    }
    names = workflow.mask_secrets_in_env(env, io.StringIO())
    assert names == [
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AZURE_OPENAI_AD_TOKEN",
        "AZURE_OPENAI_API_KEY",
        "GOOGLE_OAUTH_ACCESS_TOKEN",
    ]


def test_stop_commands_wraps_untrusted_text():
    out = io.StringIO()
    with workflow.stop_commands(out):
        out.write("::error::fake\n")
    lines = out.getvalue().splitlines()
    token = lines[0].removeprefix("::stop-commands::")
    assert len(token) == 32
    assert lines[-1] == f"::{token}::"


def test_input_names_keep_hyphens():
    assert input_env_name("github-token") == "INPUT_GITHUB-TOKEN"
    assert input_env_name("fail on budget") == "INPUT_FAIL_ON_BUDGET"


def _env(tmp_path, **extra):
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps(
            {
                "pull_request": {
                    "number": 5,
                    "base": {"sha": "b" * 40, "repo": {"full_name": "o/r"}},
                    "head": {"sha": "h" * 40, "repo": {"full_name": "fork/r"}},
                }
            }
        )
    )
    return {
        "GITHUB_WORKSPACE": str(tmp_path),
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_RUN_ID": "7",
        **extra,
    }


def test_settings_from_a_runner_environment(tmp_path):
    s = load_settings(
        _env(
            tmp_path,
            **{
                "INPUT_GITHUB-TOKEN": "t",
                "INPUT_FAIL-ON-BUDGET": "False",
                "INPUT_SEED": "12",
                "GITHUB_API_URL": "https://ghe.example/api/v3/",
            },
        )
    )
    assert s.github_token == "t"
    assert s.fail_on_budget is False
    assert s.fail_on_recall_regression is True
    assert s.seed == 12
    assert s.api_url == "https://ghe.example/api/v3"
    assert s.pull_request.number == 5
    assert s.pull_request.from_fork
    assert s.summary_url == "https://github.com/o/r/actions/runs/7"
    assert s.cache_dir is None
    assert s.trust_pr_config is False


def test_builder_inputs_name_a_folder_in_the_workspace_and_a_file(tmp_path):
    s = load_settings(
        _env(tmp_path, **{"INPUT_REQUESTS": "captured", "INPUT_REQUIREMENTS": "requirements.txt"})
    )
    assert s.requests == tmp_path / "captured"
    assert s.requirements == "requirements.txt"
    unset = load_settings(_env(tmp_path, **{"INPUT_REQUESTS": "", "INPUT_REQUIREMENTS": " "}))
    assert unset.requests is None
    assert unset.requirements is None


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("INPUT_COMMENT", "perhaps", "true or false"),
        ("INPUT_SEED", "x", "whole number"),
        ("INPUT_TRIALS", "0", "at least 1"),
        ("INPUT_PROVIDER", "bard", "anthropic, openai, local, bedrock, vertex or azure"),
        ("INPUT_REQUESTS", "captured\x00", "NUL"),
    ],
)
def test_bad_inputs_are_config_errors(tmp_path, name, value, words):
    with pytest.raises(ConfigError, match=words):
        load_settings(_env(tmp_path, **{name: value}))


def test_bad_event_payload(tmp_path):
    (tmp_path / "event.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not JSON"):
        load_settings({"GITHUB_WORKSPACE": str(tmp_path), "GITHUB_EVENT_PATH": str(tmp_path / "event.json")})
