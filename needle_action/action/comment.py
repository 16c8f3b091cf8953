"""The one sticky PR comment: ours alone, one at a time, never older than the PR.

Three rules, each against something a pull request (or a second run) can do:

* **Only our own comment is adopted.** A comment counts as ours when its body starts with the
  marker *and* its author is the token's own identity. Anyone can paste the marker into a comment;
  only the token can author as itself. The identity comes from GraphQL ``viewer`` (it answers for
  installation tokens, ``github-actions[bot]`` for the default ``GITHUB_TOKEN``, where REST
  ``GET /user`` is 403), then from ``GET /user`` (personal tokens); when both fail, nothing is
  adopted and the login GitHub records on the comment we post is used from then on.
* **One comment, even when runs race.** After posting, the comments are listed again and every one
  of ours but the oldest is deleted; if the oldest is not the one just posted, it gets this body.
  Two runs that post at the same moment both converge on the oldest.
* **A run never overwrites a newer head.** The head commit goes into a second hidden line
  (``<!-- needle-action:head SHA -->``), and before writing, the PR's current head is read from the
  API: a run for a commit the PR has moved past writes nothing (the newer run will).

Only comments that are ours are ever edited or deleted.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from needle_action.action.github import Comment, GitHubClient, GitHubError, GitHubNotFound
from needle_action.report.comment_body import head_in, with_head


@dataclass(frozen=True)
class Posted:
    """What happened to the sticky comment: ``created``, ``updated`` or ``stale`` (nothing written)."""

    comment: Comment | None
    action: str
    note: str | None = None


def head_of(comment: Comment) -> str | None:
    """The head commit a comment of ours was written for (None for comments before this rule)."""
    return head_in(comment.body)


def _norm(login: str) -> str:
    return login.lower().removesuffix("[bot]")


def same_author(login: str, comment: Comment) -> bool:
    """Whether COMMENT was written by LOGIN. GraphQL may name a bot with or without ``[bot]``; a
    bot's login then only matches a comment GitHub marks as written by a Bot."""
    if _norm(login) != _norm(comment.user_login):
        return False
    return not (login.endswith("[bot]") or comment.user_login.endswith("[bot]")) or comment.user_type == "Bot"


def identity(client: GitHubClient) -> str | None:
    """The token's login, or None when GitHub will not say (see the module docstring)."""
    for ask in (client.viewer_login, client.user_login):
        try:
            return ask()
        except GitHubError:
            continue
    return None


def ours(client: GitHubClient, issue: int, marker: str, login: str | None) -> list[Comment]:
    """Our sticky comments on ISSUE, oldest first (ids grow with time)."""
    if login is None:
        return []
    found = [
        c for c in client.list_issue_comments(issue) if c.body.startswith(marker) and same_author(login, c)
    ]
    return sorted(found, key=lambda c: c.id)


def _delete_all(client: GitHubClient, comments: list[Comment]) -> None:
    for c in comments:
        with contextlib.suppress(GitHubNotFound):  # the other run deleted it first
            client.delete_comment(c.id)


def publish_sticky(
    client: GitHubClient, issue: int, body: str, marker: str, *, head_sha: str | None
) -> Posted:
    """Create or update our one comment on ISSUE with BODY (which starts with MARKER).

    Raises GitHubError for API trouble; the caller turns it into a warning.
    """
    note = None
    if head_sha:
        try:
            current = client.pull_head_sha(issue)
        except GitHubError as exc:
            current, note = None, f"could not read the PR's current head ({exc.message}); updated anyway"
        if current is not None and current != head_sha:
            return Posted(None, "stale", f"the PR has moved on to {current[:12]}; its run posts the comment")
    body = with_head(body, head_sha)
    login = identity(client)
    mine = ours(client, issue, marker, login)
    if mine:
        keep, extra = mine[0], mine[1:]
        updated = client.update_comment(keep.id, body)
        _delete_all(client, extra)
        return Posted(updated, "updated", note)
    posted = client.create_comment(issue, body)
    # GitHub records who wrote it: the most reliable identity there is, also when `viewer` failed
    mine = ours(client, issue, marker, posted.user_login or login)
    keep = mine[0] if mine and mine[0].id < posted.id else posted
    others = {c.id: c for c in [*mine, posted] if c.id != keep.id}
    if keep.id == posted.id:
        _delete_all(client, list(others.values()))
        return Posted(posted, "created", note)
    # another run posted first: its comment (the oldest) carries the result from now on
    updated = client.update_comment(keep.id, body)
    _delete_all(client, list(others.values()))
    return Posted(updated, "updated", note)


__all__ = ["Posted", "head_of", "identity", "publish_sticky", "same_author", "with_head"]
