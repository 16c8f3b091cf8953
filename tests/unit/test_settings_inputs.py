"""The action's inputs and runner values, read once (action/settings.py): each bad value is a
ConfigError naming the input or file, and empty inputs take action.yml's defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from needle_action.action.settings import input_env_name, load_settings
from needle_action.core.errors import ConfigError


def _env(tmp_path: Path, **inputs: str) -> dict[str, str]:
    env = {"GITHUB_WORKSPACE": str(tmp_path)}
    env.update({input_env_name(k.replace("_", "-")): v for k, v in inputs.items()})
    return env


def test_empty_inputs_take_the_defaults(tmp_path: Path) -> None:
    s = load_settings(_env(tmp_path, config="  ", cache_dir="", post_report=""))
    assert s.config == "needle.toml"
    assert s.config_path == tmp_path / "needle.toml"
    assert s.cache_dir is None
    assert s.post_report is None
    assert s.provider is None
    assert s.event == {}
    assert s.pull_request is None
    assert s.workspace == tmp_path


def test_a_relative_post_report_is_inside_the_workspace(tmp_path: Path) -> None:
    s = load_settings(_env(tmp_path, post_report="out/report.json", cache_dir=str(tmp_path / "c")))
    assert s.post_report == tmp_path / "out" / "report.json"
    assert s.cache_dir == tmp_path / "c"


@pytest.mark.parametrize("name", ["cache-dir", "post-report", "config"])
def test_a_nul_in_a_path_input_is_refused(tmp_path: Path, name: str) -> None:
    env = _env(tmp_path)
    env[input_env_name(name)] = "a\x00b"
    with pytest.raises(ConfigError, match=f"input `{name}` contains a NUL character") as err:
        load_settings(env)
    assert err.value.location.file == "action inputs"


def test_an_unknown_provider_names_the_accepted_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"input `provider` must be .*anthropic.*, got 'nope'"):
        load_settings(_env(tmp_path, provider="nope"))


def test_the_workspace_must_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="GITHUB_WORKSPACE is not a folder") as err:
        load_settings({"GITHUB_WORKSPACE": str(tmp_path / "missing")})
    assert "actions/checkout" in (err.value.hint or "")


@pytest.mark.parametrize(
    ("payload", "message", "line"),
    [
        ('{"a": 1,\n  oops}', "event payload is not JSON", 2),
        ("[1, 2]", "event payload is not a JSON object", None),
    ],
)
def test_a_bad_event_payload_is_located(tmp_path: Path, payload: str, message: str, line: int | None) -> None:
    event = tmp_path / "event.json"
    event.write_text(payload, encoding="utf-8")
    with pytest.raises(ConfigError, match=message) as err:
        load_settings({**_env(tmp_path), "GITHUB_EVENT_PATH": str(event)})
    assert err.value.location.file == str(event)
    assert err.value.location.line == line


def test_a_missing_event_file_is_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "gone.json")
    with pytest.raises(ConfigError, match="points to a missing file") as err:
        load_settings({**_env(tmp_path), "GITHUB_EVENT_PATH": missing})
    assert err.value.location.file == missing


def test_the_pull_request_is_read_from_the_event(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    pr = {"number": 7, "base": {"sha": "b" * 40, "ref": "main"}, "head": {"sha": "h" * 40}}
    event.write_text(json.dumps({"pull_request": pr}), encoding="utf-8")
    s = load_settings({**_env(tmp_path), "GITHUB_EVENT_PATH": str(event)})
    assert s.pull_request is not None
    assert (s.pull_request.number, s.pull_request.base_sha, s.pull_request.base_ref) == (7, "b" * 40, "main")
