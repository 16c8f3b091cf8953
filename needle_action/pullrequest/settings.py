"""Everything the runner tells the action, read once and typed.

Inputs arrive as ``INPUT_<NAME>`` where NAME is the input's id upper-cased with spaces turned into
``_`` and hyphens KEPT (``github-token`` -> ``INPUT_GITHUB-TOKEN``). The runner sets every input
declared in action.yml, with its default when the workflow does not give one; we apply the same
defaults here so the package also works when run by hand.

Bad input values raise ``ConfigError`` (exit 2) naming the input and the accepted values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from needle_action.core.paths import relative
from needle_action.pipeline.measure import Measure
from needle_action.pipeline.policy import Policy
from needle_action.pullrequest.notices import Notices, TerminalNotices
from needle_action.recall.plan.prompt import RecallOverrides


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
    notices: Notices = field(default_factory=TerminalNotices, compare=False)  # the face decides

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


def workspace_relative(settings: Settings | None, file: str | None) -> str | None:
    """FILE relative to the workspace (annotations and outputs need repository paths)."""
    if not file or settings is None:
        return file
    return relative(settings.workspace, Path(file), resolved=True, default=file)
