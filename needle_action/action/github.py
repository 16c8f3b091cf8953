"""A thin GitHub REST client: just what the sticky PR comment needs (issue comments, the pull
request, and who the token is).

Built on the standard library's ``urllib`` on purpose: three endpoints do not justify a
dependency in the container image, ``requests`` is not wanted, and the ``httpx2`` that the
``anthropic`` SDK pulls in is that SDK's private transport, not an API we should lean on.

Honours ``GITHUB_API_URL`` (GitHub Enterprise Server: ``https://HOST/api/v3``) and
``GITHUB_GRAPHQL_URL`` (``https://HOST/api/graphql``). The token is sent only to that host:
pagination links pointing anywhere else are refused.

Every answer is checked for its shape: a 200 whose body is not JSON, is cut short, or is JSON of
the wrong shape raises :class:`GitHubMalformed` (a :class:`GitHubError`), so callers that turn API
trouble into a warning handle it like any other failure.
"""

from __future__ import annotations

import http.client
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
from needle_action.core.dataformats import JSON

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


class GitHubMalformed(GitHubError):
    """A success status with a body that is not what the API documents (garbage, cut short, wrong shape)."""


_BY_STATUS = {401: GitHubUnauthorized, 403: GitHubForbidden, 404: GitHubNotFound, 422: GitHubUnprocessable}
MAX_ANSWER_BYTES = 50 * 1024 * 1024


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
    def from_api(cls, data: Any) -> Comment:
        """A comment from the API's JSON; GitHubMalformed when it does not have a comment's shape."""
        try:
            user = data.get("user") or {}
            comment = cls(
                int(data["id"]),
                str(data.get("body") or ""),
                str(data.get("html_url") or ""),
                str(user.get("login") or ""),
                str(user.get("type") or ""),
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            raise GitHubMalformed(200, "an issue comment without the fields GitHub documents") from None
        return comment


class GitHubClient:
    def __init__(
        self,
        token: str,
        *,
        api_url: str = "https://api.github.com",
        graphql_url: str | None = None,
        repository: str,
        timeout_s: float = 30.0,
        retries: int = 2,
    ) -> None:
        if not token:
            raise GitHubUnauthorized(401, "no token given")
        self.token = token
        self.api_url = api_url.rstrip("/")
        self.graphql_url = graphql_url or graphql_url_for(self.api_url)
        self.repository = repository
        self.timeout_s = timeout_s
        self.retries = retries
        self._origin = urlsplit(self.api_url)[:2]

    # ---------------------------------------------------------------- transport
    def _request(self, method: str, url: str, payload: JSON | None = None) -> tuple[int, JSON, Any]:
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
            # the API URL is the runner's (GITHUB_API_URL, https), never the pull request's
            req = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310 - as above
                    body = resp.read(MAX_ANSWER_BYTES)
                    return resp.status, dict(resp.headers.items()), _json(body, url)
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
            except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as exc:
                # HTTPException: IncompleteRead (a body cut short), BadStatusLine, ...
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
            if data is not None and not isinstance(data, list):
                raise GitHubMalformed(200, "the list of comments is not a JSON array", url)
            for item in data or []:
                yield Comment.from_api(item)
            url = parse_link_header(headers.get("Link") or headers.get("link")).get("next")

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

    def delete_comment(self, comment_id: int) -> None:
        """DELETE one issue comment (callers only ever pass comments of their own)."""
        self._request("DELETE", f"/repos/{self.repository}/issues/comments/{comment_id}")

    def get_pull(self, number: int) -> JSON:
        """The pull request (``head.sha``, ``base.sha``, ...)."""
        _, _, data = self._request("GET", f"/repos/{self.repository}/pulls/{int(number)}")
        if not isinstance(data, dict):
            raise GitHubMalformed(200, "the pull request is not a JSON object")
        return data

    def pull_head_sha(self, number: int) -> str:
        """The commit the pull request's head points at now."""
        head = self.get_pull(number).get("head")
        sha = head.get("sha") if isinstance(head, dict) else None
        if not isinstance(sha, str) or not sha:
            raise GitHubMalformed(200, "the pull request has no head.sha")
        return sha

    # ---------------------------------------------------------------- who we are
    def viewer_login(self) -> str:
        """The login the token acts as: GraphQL ``viewer`` (works for installation tokens such as the
        default ``GITHUB_TOKEN``, answering ``github-actions[bot]``, where ``GET /user`` is 403)."""
        _, _, data = self._request("POST", self.graphql_url, {"query": "query { viewer { login } }"})
        login = _dig(data, "data", "viewer", "login")
        if not isinstance(login, str) or not login:
            raise GitHubMalformed(200, "GraphQL viewer has no login", self.graphql_url)
        return login

    def user_login(self) -> str:
        """``GET /user``: the login of a personal or OAuth token (403 for installation tokens)."""
        _, _, data = self._request("GET", "/user")
        login = data.get("login") if isinstance(data, dict) else None
        if not isinstance(login, str) or not login:
            raise GitHubMalformed(200, "/user has no login")
        return login


def graphql_url_for(api_url: str) -> str:
    """GitHub's GraphQL endpoint next to a REST base: ``https://api.github.com/graphql``, or on
    GitHub Enterprise Server ``https://HOST/api/graphql`` for ``https://HOST/api/v3``."""
    base = api_url.rstrip("/")
    if base.endswith("/api/v3"):
        return base[: -len("/v3")] + "/graphql"
    return base + "/graphql"


def _dig(data: Any, *keys: str) -> Any:
    """DATA[k1][k2]... through JSON objects only; None as soon as something is not one."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _json(body: bytes, url: str) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:  # not JSON, cut short, or not UTF-8
        raise GitHubMalformed(200, "the answer is not valid JSON", url) from None
    except RecursionError:
        raise GitHubMalformed(200, "the answer is nested too deeply", url) from None
