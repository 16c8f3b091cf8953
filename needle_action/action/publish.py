"""The action's outputs: the sticky PR comment, the job summary, the report folder, step outputs
and annotations; and the privileged half of the fork pattern (``post-report``).
"""

from __future__ import annotations

import json
from pathlib import Path

from needle_action.action import workflow
from needle_action.action.comment import publish_sticky, with_head
from needle_action.action.github import (
    GitHubClient,
    GitHubError,
    GitHubForbidden,
    GitHubUnprocessable,
)
from needle_action.compare import Comparison
from needle_action.core.errors import EXIT_CHECKS_FAILED, EXIT_OK, NeedleError
from needle_action.pipeline.policy import comparison_exit_code, comparison_failed
from needle_action.pullrequest.settings import Settings, workspace_relative
from needle_action.pullrequest.trust import write_report
from needle_action.report.html import render_html
from needle_action.report.junit import junit_xml
from needle_action.report.render import MARKER, render_comment, render_summary
from needle_action.results import Results

SUMMARY_LIMIT = 1_000_000


def log(message: str) -> None:
    print(message, flush=True)


def client_for(settings: Settings) -> GitHubClient:
    """The REST client for this repository (``github-token``, ``GITHUB_API_URL``)."""
    return GitHubClient(
        settings.github_token,
        api_url=settings.api_url,
        graphql_url=settings.graphql_url,
        repository=settings.repository or "",
    )


def post_comment(settings: Settings, body: str, head_sha: str | None) -> tuple[str | None, str | None]:
    """Create or update our sticky comment. Returns (url, problem); never raises for API trouble."""
    pr = settings.pull_request
    if not settings.comment:
        return None, None
    if pr is None:
        return None, "not a pull_request event: no PR comment (the job summary has the report)"
    if not settings.github_token or not settings.repository:
        return None, "no github-token or GITHUB_REPOSITORY: no PR comment"
    try:
        posted = publish_sticky(client_for(settings), pr.number, body, MARKER, head_sha=head_sha)
        if posted.comment is None:
            log(f"not commenting: {posted.note}")
            return None, None
        log(f"{posted.action} the PR comment: {posted.comment.html_url}")
        if posted.note:
            workflow.warning(f"needle: {posted.note}")
        return posted.comment.html_url, None
    except GitHubForbidden:
        why = "this pull request comes from a fork" if pr.from_fork else "the token is read-only"
        return None, (
            f"could not comment on the pull request: {why} (GitHub answered 403). Give the job "
            "`permissions: pull-requests: write`, or for forks use the workflow_run pattern in "
            "docs/action.md. The job summary stands in."
        )
    except GitHubUnprocessable as exc:
        return None, f"GitHub rejected the comment (422: {exc.message}); the job summary stands in."
    except GitHubError as exc:
        return None, f"could not comment on the pull request ({exc}); the job summary stands in."


def token_delta_lines(comparison: Comparison) -> str:
    lines = []
    for p in comparison.prompts:
        for t in p.tokens:
            where = f"{p.name}[{t.fixture}]" if t.fixture else p.name
            delta = (
                "new"
                if t.delta is None and t.base_tokens is None
                else ("deleted" if t.head_tokens is None else f"{t.delta:+d}")
            )
            lines.append(
                f"{where}: {t.base_tokens if t.base_tokens is not None else '-'} -> "
                f"{t.head_tokens if t.head_tokens is not None else '-'} ({delta})"
            )
    return "\n".join(lines)


def recall_verdict(comparison: Comparison) -> str:
    statuses = [p.recall.status for p in comparison.prompts if p.recall is not None]
    for s in ("fail", "underpowered", "inconclusive", "pass"):
        if s in statuses:
            return "regressed" if s == "fail" else s
    return "skipped"


def publish(
    settings: Settings,
    comparison: Comparison,
    sides: tuple[Results, Results | None],
    base_sha: str | None,
    notes: list[str],
) -> int:
    """Comment, then the summary (which says whether the comment made it), the report folder,
    the step outputs and the annotations. Returns the exit code by the action's policy."""
    head, base = sides
    comment_body = with_head(
        render_comment(comparison, summary_url=settings.summary_url, notes=notes), head.commit
    )
    url, problem = post_comment(settings, comment_body, head.commit)
    summary_notes = list(notes)
    if problem:
        workflow.warning(f"needle: {problem}")
        summary_notes.append(problem.rstrip(".") + ".")
    summary = render_summary(comparison, notes=summary_notes)
    if len(summary) > SUMMARY_LIMIT:  # GitHub drops a step summary above 1 MiB altogether
        summary = render_comment(comparison, notes=summary_notes, max_chars=SUMMARY_LIMIT)
    workflow.append_summary(summary, settings.summary_path)

    pr = settings.pull_request
    pr_info = {
        "number": pr.number if pr else None,
        "head_sha": head.commit,
        "base_sha": base_sha,
        "notes": notes,
    }
    files = {
        "head.json": head.model_dump_json(indent=2),
        "comparison.json": comparison.model_dump_json(indent=2),
        "comment.md": comment_body,
        "summary.md": summary,
        "pr.json": json.dumps(pr_info, indent=2),
        "report.html": render_html(comparison),  # self-contained: heatmaps, tokens, diagnosis
        "junit.xml": junit_xml(comparison, head),  # for CI systems that read JUnit
    }
    if base is not None:
        files["base.json"] = base.model_dump_json(indent=2)
    report = write_report(settings, files)
    _set_outputs(settings, comparison, report, url)
    for f in comparison.failures:
        workflow.error(f.message, file=f.file, line=f.line, title=f.title)
    code = comparison_exit_code(comparison, settings.policy)
    log(f"needle: {comparison.headline} (exit {code})")
    return code


def _set_outputs(settings: Settings, comparison: Comparison, report: Path, url: str | None) -> None:
    outputs = {
        "status": comparison.verdict,
        "failed": str(comparison_failed(comparison, settings.policy)).lower(),
        "token-deltas": token_delta_lines(comparison),
        "recall-verdict": recall_verdict(comparison),
        # relative: valid on the host too
        "report-path": workspace_relative(settings, str(report)) or str(report),
        "comment-url": url or "",
    }
    for name, value in outputs.items():
        workflow.set_output(name, value, settings.output_path)


MAX_REPORT_BYTES = 20 * 1024 * 1024


def post_from_report(settings: Settings, folder: Path) -> int:
    """The privileged half of the fork pattern (``on: workflow_run``): post the comment of a report
    that an unprivileged ``pull_request`` run uploaded as an artifact.

    The artifact is attacker-controlled (a fork can change the workflow that made it), so nothing in
    it is posted as is: ``comparison.json`` must validate against the Comparison model and is
    rendered again through our sanitising templates, and the PR number it names must belong to the
    commit this workflow_run was triggered by (checked with the API).
    """
    run = settings.event.get("workflow_run") or {}
    head_sha = run.get("head_sha")
    try:
        with open(folder / "comparison.json", "rb") as f:  # at most the cap, whatever the artifact holds
            raw = f.read(MAX_REPORT_BYTES + 1)
        with open(folder / "pr.json", "rb") as f:
            info = json.loads(f.read(1_000_000))
    except (OSError, ValueError, RecursionError) as exc:
        raise NeedleError(
            f"post-report: cannot read the report: {exc}",
            file=str(folder),
            hint="download the artifact the pull_request workflow uploaded first",
        ) from None
    if len(raw) > MAX_REPORT_BYTES:
        raise NeedleError("post-report: comparison.json is implausibly large", file=str(folder))
    try:
        comparison = Comparison.model_validate_json(raw)
        number = int(info["number"])
        notes = [str(n) for n in info.get("notes") or []][:20]
    except Exception as exc:  # pydantic, KeyError, TypeError, ValueError: all mean "not our report"
        raise NeedleError(f"post-report: not a needle report: {str(exc)[:300]}", file=str(folder)) from None
    listed = [p.get("number") for p in run.get("pull_requests") or [] if isinstance(p, dict)]
    if listed and number not in listed:
        raise NeedleError(f"post-report: the report names PR #{number}, the workflow run is for {listed}")
    if not settings.github_token or not settings.repository:
        raise NeedleError("post-report needs github-token and GITHUB_REPOSITORY")
    client = client_for(settings)
    try:
        current = client.pull_head_sha(number)
        if not head_sha or current != head_sha:
            raise NeedleError(
                f"post-report: PR #{number} is not at the commit this workflow run tested "
                f"({str(head_sha)[:12]}); not posting",
                hint="the PR may have moved on: a newer run will post",
            )
        body = with_head(render_comment(comparison, summary_url=settings.summary_url, notes=notes), head_sha)
        posted = publish_sticky(client, number, body, MARKER, head_sha=head_sha)
    except GitHubError as exc:
        workflow.warning(f"needle: could not post the comment: {exc}")
        return EXIT_CHECKS_FAILED
    if posted.comment is None:
        log(f"not commenting: {posted.note}")
        return EXIT_OK
    comment = posted.comment
    log(f"{posted.action} the PR comment: {comment.html_url}")
    workflow.append_summary(render_summary(comparison, notes=notes), settings.summary_path)
    workflow.set_output("status", comparison.verdict, settings.output_path)
    workflow.set_output("comment-url", comment.html_url, settings.output_path)
    return EXIT_OK
