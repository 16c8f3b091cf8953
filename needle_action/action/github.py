"""A thin GitHub REST client: just what the sticky PR comment needs.

Built on the standard library's ``urllib`` on purpose: three endpoints do not justify a
dependency in the container image, ``requests`` is not wanted, and the ``httpx2`` that the
``anthropic`` SDK pulls in is that SDK's private transport, not an API we should lean on.

Honours ``GITHUB_API_URL`` (GitHub Enterprise Server: ``https://HOST/api/v3``). The token is
sent only to that host: pagination links pointing anywhere else are refused.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from needle_action import __version__

API_VERSION = "2022-11-28"
_LINK = re.compile(r'<([^>]+)>\s*;\s*rel="([^"]+)"')


class GitHubError(Exception):
    """Any failed GitHub API call; ``status`` is the HTTP status (0 when unreachable)."""

    def __init__(self, status: int, message: str, url: str = "") -> None:
        super().__init__(f"GitHub API {status or 'unreachable'}: {message}")
        self.status = status
        self.message = message
        self.url = url


class GitHubForbidden(GitHubError):
    """403: a read-only token (fork pull requests, missing ``pull-requests: write``)."""


class GitHubUnauthorized(GitHubError):
    """401: no token or a bad one."""


class GitHubNotFound(GitHubError):
    """404: wrong repository or PR number, or the token cannot see the repository."""


class GitHubUnprocessable(GitHubError):
    """422: GitHub rejected the content (e.g. a comment body above 65,536 characters)."""


_BY_STATUS = {401: GitHubUnauthorized, 403: GitHubForbidden, 404: GitHubNotFound, 422: GitHubUnprocessable}


def parse_link_header(value: str | None) -> dict[str, str]:
    """RFC 5988 ``Link`` header -> {rel: url}."""
    return {rel: url for url, rel in _LINK.findall(value or "")}


@dataclass
class Comment:
    id: int
    body: str
    html_url: str
    user_login: str
    user_type: str

    @classmethod
    def from_api(cls, data: dict) -> Comment:
        user = data.get("user") or {}
        return cls(
            int(data["id"]),
            data.get("body") or "",
            data.get("html_url") or "",
            user.get("login") or "",
            user.get("type") or "",
        )


class GitHubClient:
    def __init__(
        self,
        token: str,
        *,
        api_url: str = "https://api.github.com",
        repository: str,
        timeout_s: float = 30.0,
        retries: int = 2,
    ) -> None:
        if not token:
            raise GitHubUnauthorized(401, "no token given")
        self.token = token
        self.api_url = api_url.rstrip("/")
        self.repository = repository
        self.timeout_s = timeout_s
        self.retries = retries
        self._origin = urlsplit(self.api_url)[:2]

    # ---------------------------------------------------------------- transport
    def _request(self, method: str, url: str, payload: dict | None = None) -> tuple[int, dict, Any]:
        if not url.startswith(("http://", "https://")):
            url = self.api_url + url
        if urlsplit(url)[:2] != self._origin:
            raise GitHubError(0, f"refusing to send the token to another host: {urlsplit(url).netloc}", url)
        data = json.dumps(payload).encode("utf-8") if payload is not None else None
        headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {self.token}",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": f"needle-action/{__version__}",
        }
        if data is not None:
            headers["Content-Type"] = "application/json"
        attempt = 0
        while True:
            req = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    body = resp.read()
                    return resp.status, dict(resp.headers.items()), json.loads(body) if body else None
            except urllib.error.HTTPError as exc:
                text = exc.read().decode("utf-8", "replace")
                try:
                    message = json.loads(text).get("message", text)
                except (ValueError, AttributeError):
                    message = text[:200]
                if exc.code >= 500 and attempt < self.retries:
                    attempt += 1
                    time.sleep(0.5 * 2**attempt)
                    continue
                raise _BY_STATUS.get(exc.code, GitHubError)(exc.code, str(message), url) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                if attempt < self.retries:
                    attempt += 1
                    time.sleep(0.5 * 2**attempt)
                    continue
                reason = getattr(exc, "reason", exc)
                raise GitHubError(0, f"cannot reach {self.api_url}: {reason}", url) from None

    # ---------------------------------------------------------------- issue comments
    def list_issue_comments(self, issue: int, *, per_page: int = 100) -> Iterator[Comment]:
        """Every comment on ISSUE (a PR number works), following ``Link: rel="next"``."""
        url: str | None = f"/repos/{self.repository}/issues/{issue}/comments?per_page={per_page}"
        while url:
            _, headers, data = self._request("GET", url)
            for item in data or []:
                yield Comment.from_api(item)
            url = parse_link_header(headers.get("Link") or headers.get("link")).get("next")

    def find_sticky_comment(self, issue: int, marker: str) -> Comment | None:
        """The comment whose body starts with MARKER; a bot's wins over a human's copy-paste."""
        found = [c for c in self.list_issue_comments(issue) if c.body.lstrip().startswith(marker)]
        if not found:
            return None
        bots = [c for c in found if c.user_type == "Bot"]
        return (bots or found)[0]

    def create_comment(self, issue: int, body: str) -> Comment:
        _, _, data = self._request(
            "POST", f"/repos/{self.repository}/issues/{issue}/comments", {"body": body}
        )
        return Comment.from_api(data)

    def update_comment(self, comment_id: int, body: str) -> Comment:
        _, _, data = self._request(
            "PATCH", f"/repos/{self.repository}/issues/comments/{comment_id}", {"body": body}
        )
        return Comment.from_api(data)

    def get_pull(self, number: int) -> dict:
        """The pull request (``head.sha``, ``base.sha``, ...)."""
        _, _, data = self._request("GET", f"/repos/{self.repository}/pulls/{int(number)}")
        return data or {}

    def upsert_sticky_comment(self, issue: int, body: str, marker: str) -> tuple[Comment, bool]:
        """PATCH the marked comment in place, else POST a new one. Returns (comment, created)."""
        existing = self.find_sticky_comment(issue, marker)
        if existing is not None:
            try:
                return self.update_comment(existing.id, body), False
            except GitHubNotFound:
                pass  # deleted between list and patch: post a fresh one
        return self.create_comment(issue, body), True
