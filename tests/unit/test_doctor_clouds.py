"""`needle doctor`'s cloud lines: each cloud the threshold file uses, or whose variables are set, is
checked by name (where its calls go, how its credentials are found) and never shows a value."""

from __future__ import annotations

import json

import pytest

from needle_action.cli.doctor import check_clouds, check_keys

SECRETS = {
    "AWS_ACCESS_KEY_ID": "AKIADOCTORSECRET0001",
    "AWS_SECRET_ACCESS_KEY": "doctor/secret/value",
    "AWS_SESSION_TOKEN": "doctorSESSIONtoken",
    "GOOGLE_OAUTH_ACCESS_TOKEN": "ya29.doctor-secret",
    "AZURE_OPENAI_API_KEY": "doctor-azure-secret",
}


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    import os

    for name in list(os.environ):
        if name.startswith(
            (
                "AWS_",
                "GOOGLE_",
                "CLOUD_ML_",
                "GCLOUD_",
                "AZURE_",
                "ANTHROPIC_VERTEX",
                "ANTHROPIC_BEDROCK",
                "OPENAI_API_VERSION",
            )
        ):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return monkeypatch


def _lines(checks):
    return {c.name.split(" ", 1)[0]: c for c in checks}


def test_configured_clouds_are_checked_by_name_never_by_value(clean_env):
    env = {
        **SECRETS,
        "AWS_REGION": "us-east-1",
        "CLOUD_ML_REGION": "global",
        "GOOGLE_CLOUD_PROJECT": "team",
        "AZURE_OPENAI_ENDPOINT": "https://team.openai.azure.com",
    }
    for name, value in env.items():
        clean_env.setenv(name, value)
    lines = _lines(check_clouds())
    assert {n: c.status for n, c in lines.items()} == {"bedrock": "ok", "vertex": "ok", "azure": "ok"}
    assert "region from AWS_REGION" in lines["bedrock"].detail
    assert "AWS's chain (env" in lines["bedrock"].detail
    assert "GOOGLE_OAUTH_ACCESS_TOKEN" in lines["vertex"].detail
    assert "a key in AZURE_OPENAI_API_KEY" in lines["azure"].detail
    shown = json.dumps([vars(c) for c in lines.values()]) + check_keys().detail
    for value in SECRETS.values():
        assert value not in shown


def test_a_cloud_the_file_uses_fails_when_its_variables_are_missing(clean_env):
    lines = _lines(check_clouds(used={"bedrock", "vertex", "azure"}))
    assert {n: c.status for n, c in lines.items()} == {"bedrock": "fail", "vertex": "fail", "azure": "fail"}
    assert lines["bedrock"].fix == "export AWS_REGION=..."
    assert "CLOUD_ML_REGION" in lines["vertex"].detail
    assert "AZURE_OPENAI_ENDPOINT" in lines["azure"].fix


def test_a_cloud_only_half_set_in_the_environment_warns(clean_env, tmp_path):
    clean_env.setenv("AWS_REGION", "us-east-1")
    clean_env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    clean_env.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    (line,) = check_clouds()
    assert line.name == "bedrock (its variables are set)"
    assert line.status == "warn"
    assert "no AWS credentials found" in line.detail
    assert "configure-aws-credentials" in line.fix


def test_unused_and_unset_clouds_print_nothing_and_keys_leave_them_out(clean_env):
    assert check_clouds() == []
    assert "bedrock" not in check_keys().detail


def test_the_doctor_reads_which_providers_the_threshold_file_uses(tmp_path, capsys):
    from needle_action.cli.doctor import _providers_used

    (tmp_path / "p.j2").write_text("user:\nhi\n")
    cfg = tmp_path / "needle.toml"
    cfg.write_text(
        '[defaults]\nprovider = "vertex"\n[prompts.a]\ntemplate = "p.j2"\n[prompts.b]\ntemplate = "p.j2"\nprovider = "azure"\n'
    )
    assert _providers_used(cfg) == {"vertex", "azure"}
    cfg.write_text('[prompts.a]\ntemplate = "missing.j2"\n')
    assert _providers_used(cfg) == set()
    assert "its clouds are not checked" in capsys.readouterr().out
