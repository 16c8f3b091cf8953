"""Everything the runner tells the action, read once and typed.

Inputs arrive as ``INPUT_<NAME>`` where NAME is the input's id upper-cased with spaces turned into
``_`` and hyphens KEPT (``github-token`` -> ``INPUT_GITHUB-TOKEN``). The runner sets every input
declared in action.yml, with its default when the workflow does not give one; we apply the same
defaults here so the package also works when run by hand.

Bad input values raise ``ConfigError`` (exit 2) naming the input and the accepted values.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from needle_action.core.errors import ConfigError
from needle_action.core.names import PROVIDER_NAMES
from needle_action.core.paths import relative
from needle_action.pipeline.measure import Measure
from needle_action.pipeline.policy import Policy
from needle_action.recall.plan.prompt import RecallOverrides

TRUE = {"true", "yes", "on", "1"}
FALSE = {"false", "no", "off", "0"}


def input_env_name(name: str) -> str:
    return "INPUT_" + name.replace(" ", "_").upper()


@dataclass(frozen=True)
class PullRequest:
    # alike in form only to compare/models.py's Failure (`duplicates` pairs the field lists)
    number: int
    base_sha: str
    head_sha: str
    base_ref: str | None = None
    head_repo: str | None = None
    base_repo: str | None = None

    @property
    def from_fork(self) -> bool:
        return bool(self.head_repo and self.base_repo and self.head_repo != self.base_repo)


@dataclass(frozen=True)
class Settings:
    # inputs
    config: str = "needle.toml"
    github_token: str = ""
    base_ref: str | None = None
    comment: bool = True
    fail_on_budget: bool = True
    fail_on_recall_regression: bool = True
    fail_on_provider_outage: bool = False
    recall: bool = True
    seed: int | None = None
    trials: int | None = None
    provider: str | None = None
    cache_dir: Path | None = None  # None: outside the checkout (see action/trust.py)
    trust_pr_config: bool = False  # measure the PR with its own endpoints, keys and policy (risky)
    post_report: Path | None = None  # workflow_run pattern: only post the comment of this earlier report
    data_branch: str | None = None  # store main-branch results there; PR runs read the base from it
    requests: Path | None = None  # captured requests (`needle capture`): the head's builders do not run
    requirements: str | None = None  # builders' dependencies: a file read from the base commit
    # runner
    workspace: Path = field(default_factory=Path.cwd)
    repository: str | None = None
    event_name: str | None = None
    event: dict[str, Any] = field(default_factory=dict)
    pull_request: PullRequest | None = None
    sha: str | None = None
    ref: str | None = None
    api_url: str = "https://api.github.com"
    graphql_url: str | None = None  # GITHUB_GRAPHQL_URL; None: next to api_url
    server_url: str = "https://github.com"
    run_id: str | None = None
    output_path: str | None = None
    summary_path: str | None = None
    runner_temp: Path | None = None
    in_actions: bool = False
    local: bool = False  # `needle check --base-ref`: progress and warnings on stderr, not the log

    @property
    def policy(self) -> Policy:
        return Policy(
            fail_on_budget=self.fail_on_budget,
            fail_on_recall_regression=self.fail_on_recall_regression,
            fail_on_provider_outage=self.fail_on_provider_outage,
        )

    @property
    def measure(self) -> Measure:
        """How each side is measured: the `recall`, `seed`, `provider` and `trials` inputs."""
        overrides = RecallOverrides(seed=self.seed, provider=self.provider, trials=self.trials)
        return Measure(recall=self.recall, overrides=overrides)

    @property
    def summary_url(self) -> str | None:
        if self.repository and self.run_id:
            return f"{self.server_url.rstrip('/')}/{self.repository}/actions/runs/{self.run_id}"
        return None

    @property
    def config_path(self) -> Path:
        p = Path(self.config)
        return p if p.is_absolute() else self.workspace / p


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
    )


def workspace_relative(settings: Settings | None, file: str | None) -> str | None:
    """FILE relative to the workspace (annotations and outputs need repository paths)."""
    if not file or settings is None:
        return file
    return relative(settings.workspace, Path(file), resolved=True, default=file)
