"""Everything the runner tells the action, read once and typed: the only place ``INPUT_*`` and
``GITHUB_*`` are read.

Inputs arrive as ``INPUT_<NAME>`` where NAME is the input's id upper-cased with spaces turned into
``_`` and hyphens KEPT (``github-token`` -> ``INPUT_GITHUB-TOKEN``). The runner sets every input
declared in action.yml, with its default when the workflow does not give one; we apply the same
defaults here so the package also works when run by hand.

Bad input values raise ``ConfigError`` (exit 2) naming the input and the accepted values.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from needle_action.action.workflow import WorkflowNotices
from needle_action.core.errors import ConfigError
from needle_action.core.names import PROVIDER_NAMES
from needle_action.pullrequest.settings import PullRequest, Settings

TRUE = {"true", "yes", "on", "1"}


FALSE = {"false", "no", "off", "0"}


def input_env_name(name: str) -> str:
    return "INPUT_" + name.replace(" ", "_").upper()


def _get(env: dict[str, str], name: str, default: str = "") -> str:
    value = env.get(input_env_name(name))
    return default if value is None else value.strip()


def _bool(env: dict[str, str], name: str, default: bool) -> bool:
    raw = _get(env, name)
    if raw == "":
        return default
    if raw.lower() in TRUE:
        return True
    if raw.lower() in FALSE:
        return False
    raise ConfigError(
        f"input `{name}` must be true or false, got {raw!r}",
        file="action inputs",
        hint=f"set `{name}: true` or `{name}: false` under `with:` in the workflow",
    )


def _int(env: dict[str, str], name: str, *, minimum: int = 0) -> int | None:
    raw = _get(env, name)
    if raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(
            f"input `{name}` must be a whole number, got {raw!r}", file="action inputs"
        ) from None
    if value < minimum:
        raise ConfigError(f"input `{name}` must be at least {minimum}, got {value}", file="action inputs")
    return value


def _pull_request(event: dict[str, Any]) -> PullRequest | None:
    pr = event.get("pull_request")
    if not isinstance(pr, dict):
        return None
    try:
        return PullRequest(
            number=int(pr.get("number") or event.get("number")),  # type: ignore[arg-type]  # None -> TypeError, caught
            base_sha=str(pr["base"]["sha"]),
            head_sha=str(pr["head"]["sha"]),
            base_ref=pr["base"].get("ref"),
            head_repo=((pr["head"].get("repo") or {}).get("full_name")),
            base_repo=((pr["base"].get("repo") or {}).get("full_name")),
        )
    except (KeyError, TypeError, ValueError):
        raise ConfigError(
            "the event payload has a pull_request without number/base.sha/head.sha",
            file=os.environ.get("GITHUB_EVENT_PATH"),
        ) from None


def _workspace(env: dict[str, str]) -> Path:
    workspace = Path(env.get("GITHUB_WORKSPACE") or os.getcwd())
    if not workspace.is_dir():
        raise ConfigError(
            f"GITHUB_WORKSPACE is not a folder: {workspace}",
            hint="check out the repository first (actions/checkout) before this step",
        )
    return workspace


def _event(env: dict[str, str]) -> dict[str, Any]:
    """The event payload GITHUB_EVENT_PATH names ({} without one)."""
    event_path = env.get("GITHUB_EVENT_PATH")
    if not event_path:
        return {}
    try:
        event = json.loads(Path(event_path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("GITHUB_EVENT_PATH points to a missing file", file=event_path) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"event payload is not JSON: {exc.msg}", file=event_path, line=exc.lineno) from None
    if not isinstance(event, dict):
        raise ConfigError("event payload is not a JSON object", file=event_path)
    return event


def _provider(env: dict[str, str]) -> str | None:
    provider = _get(env, "provider") or None
    if provider is not None and provider not in PROVIDER_NAMES:
        raise ConfigError(
            f"input `provider` must be {', '.join(PROVIDER_NAMES[:-1])} or {PROVIDER_NAMES[-1]}, got {provider!r}",
            file="action inputs",
        )
    return provider


def _path_input(env: dict[str, str], name: str) -> str:
    """Input NAME, a path: no NUL character (the OS would cut the path there)."""
    value = _get(env, name)
    if "\x00" in value:
        raise ConfigError(f"input `{name}` contains a NUL character", file="action inputs")
    return value


def load_settings(env: dict[str, str] | None = None) -> Settings:
    """The run's settings from ENV (default: the process environment): inputs and runner values."""
    env = dict(os.environ if env is None else env)
    workspace = _workspace(env)
    event = _event(env)
    provider = _provider(env)
    cache_dir = _path_input(env, "cache-dir")
    post_report = _path_input(env, "post-report")
    config = _path_input(env, "config")
    requests = _path_input(env, "requests")
    requirements = _path_input(env, "requirements")
    temp = env.get("RUNNER_TEMP")
    return Settings(
        config=config or "needle.toml",
        github_token=_get(env, "github-token"),
        base_ref=_get(env, "base-ref") or None,
        comment=_bool(env, "comment", True),
        fail_on_budget=_bool(env, "fail-on-budget", True),
        fail_on_recall_regression=_bool(env, "fail-on-recall-regression", True),
        fail_on_provider_outage=_bool(env, "fail-on-provider-outage", False),
        recall=_bool(env, "recall", True),
        seed=_int(env, "seed"),
        trials=_int(env, "trials", minimum=1),
        provider=provider,
        cache_dir=Path(cache_dir) if cache_dir else None,
        trust_pr_config=_bool(env, "trust-pr-config", False),
        data_branch=_get(env, "data-branch") or None,
        requests=workspace / requests if requests else None,
        requirements=requirements or None,
        post_report=(Path(post_report) if Path(post_report).is_absolute() else workspace / post_report)
        if post_report
        else None,
        workspace=workspace,
        repository=env.get("GITHUB_REPOSITORY") or None,
        event_name=env.get("GITHUB_EVENT_NAME") or None,
        event=event,
        pull_request=_pull_request(event),
        sha=env.get("GITHUB_SHA") or None,
        ref=env.get("GITHUB_REF") or None,
        api_url=(env.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/"),
        graphql_url=env.get("GITHUB_GRAPHQL_URL") or None,
        server_url=(env.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/"),
        run_id=env.get("GITHUB_RUN_ID") or None,
        output_path=env.get("GITHUB_OUTPUT") or None,
        summary_path=env.get("GITHUB_STEP_SUMMARY") or None,
        runner_temp=Path(temp) if temp else None,
        in_actions=(env.get("GITHUB_ACTIONS") or "").lower() == "true",
        notices=WorkflowNotices(),
    )
