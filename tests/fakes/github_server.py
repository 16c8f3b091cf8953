"""A loopback fake of the part of the GitHub API the action uses: issue comments, pulls, identity.

Real HTTP on 127.0.0.1, same paths, status codes, headers and JSON shapes as api.github.com:

* ``GET  {prefix}/repos/{owner}/{repo}/issues/{n}/comments?per_page=&page=`` -> 200, a page of
  comments oldest first, with an RFC 5988 ``Link`` header (``rel="next"``, ``rel="last"``, ...);
  ``per_page`` defaults to 30 and is capped at 100, as on GitHub;
* ``POST {prefix}/repos/{owner}/{repo}/issues/{n}/comments`` -> 201 with the comment, authored by
  the token's identity;
* ``PATCH {prefix}/repos/{owner}/{repo}/issues/comments/{id}`` -> 200 with the comment;
* ``DELETE {prefix}/repos/{owner}/{repo}/issues/comments/{id}`` -> 204, no body;
* ``GET {prefix}/repos/{owner}/{repo}/pulls/{n}`` -> 200 with ``head.sha`` / ``base.sha``;
* ``GET {prefix}/user`` -> 200 ``{"login", "type": "User"}`` for a personal token, and for an
  installation token (the default ``GITHUB_TOKEN``, ``github-actions[bot]``) 403 "Resource not
  accessible by integration", as GitHub answers;
* ``POST .../graphql`` (``/graphql`` on github.com, ``/api/graphql`` on GHES) with the query
  ``viewer { login }`` -> ``{"data": {"viewer": {"login": "github-actions[bot]"}}}``, which GitHub
  answers for installation and personal tokens alike;
* 401 without a known token, 403 for a read-only token on writes (what a fork PR's token gets),
  422 when a body is longer than 65,536 characters, 404 for unknown comments.

``identities`` maps a token to the (login, type) it acts as: by default every token is the Actions
bot. ``faults`` makes matching requests answer a 200 that is broken: ``garbage`` (not JSON),
``truncated`` (a Content-Length longer than the body, then the connection closes) or
``wrong-shape`` (valid JSON of another shape).

``prefix`` lets tests mimic GitHub Enterprise Server (``https://HOST/api/v3``). Every request is
logged in :attr:`FakeGitHub.requests` so tests can assert on exactly what was sent.

Fixture ``fake_github`` (at the bottom): a started fake with one write token, ``test-token``.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from tests.fakes.loopback import Loopback, Served

MAX_BODY = 65536
_Request = tuple[Any, str, str, Any, Any]  # (handler, method, path, query, body): _reply's first five


@dataclass
class LoggedRequest:
    method: str
    path: str
    query: dict
    authorization: str | None
    status: int
    body: dict | None = None


@dataclass
class FakeGitHub(Served):
    """``with FakeGitHub(tokens={"t": "write"}) as gh: gh.api_url ...``"""

    tokens: dict[str, str] = field(default_factory=lambda: {"test-token": "write"})
    prefix: str = ""
    bot_login: str = "github-actions[bot]"
    identities: dict[str, tuple[str, str]] = field(default_factory=dict)
    faults: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path regex, kind)
    # called with (method, path) before a request is handled: lets a test land another client's
    # request at an exact moment (a race, deterministically)
    before: list = field(default_factory=list)
    requests: list[LoggedRequest] = field(default_factory=list)
    comments: dict[tuple[str, str, int], list[dict]] = field(default_factory=dict)
    pulls: dict[tuple[str, str, int], dict] = field(default_factory=dict)
    _next_id: int = 1000
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> FakeGitHub:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                fake._handle(self, "GET")

            def do_POST(self):
                fake._handle(self, "POST")

            def do_PATCH(self):
                fake._handle(self, "PATCH")

            def do_DELETE(self):
                fake._handle(self, "DELETE")

        self._server = Loopback(Handler)
        return self

    @property
    def api_url(self) -> str:
        assert self._server is not None, "use the fake in a with block"
        return self._server.url + self.prefix

    # ------------------------------------------------------------------ helpers for tests
    def seed_comment(
        self, repo: str, issue: int, body: str, *, login: str = "someone", kind: str = "User"
    ) -> dict:
        owner, name = repo.split("/")
        return self._add(owner, name, issue, body, login, kind)

    def add_pull(
        self, repo: str, number: int, *, head_sha: str, base_sha: str, head_repo: str | None = None
    ) -> None:
        owner, name = repo.split("/")
        self.pulls[(owner, name, number)] = {
            "number": number,
            "state": "open",
            "head": {"sha": head_sha, "repo": {"full_name": head_repo or repo}},
            "base": {"sha": base_sha, "repo": {"full_name": repo}},
        }

    def identity(self, token: str) -> tuple[str, str]:
        """(login, type) the token acts as: the Actions bot unless ``identities`` says otherwise."""
        return self.identities.get(token, (self.bot_login, "Bot"))

    def issue_comments(self, repo: str, issue: int) -> list[dict]:
        owner, name = repo.split("/")
        return list(self.comments.get((owner, name, issue), []))

    def count(self, method: str, path_part: str = "/comments") -> int:
        """Requests with METHOD whose path contains PATH_PART (by default: the comment endpoints)."""
        return sum(1 for r in self.requests if r.method == method and path_part in r.path)

    # ------------------------------------------------------------------ server side
    def _add(self, owner: str, repo: str, issue: int, body: str, login: str, kind: str) -> dict:
        with self._lock:
            self._next_id += 1
            cid = self._next_id
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            comment = {
                "id": cid,
                "node_id": f"IC_{cid}",
                "url": f"{self.api_url}/repos/{owner}/{repo}/issues/comments/{cid}",
                "html_url": f"https://github.com/{owner}/{repo}/pull/{issue}#issuecomment-{cid}",
                "issue_url": f"{self.api_url}/repos/{owner}/{repo}/issues/{issue}",
                "body": body,
                "user": {"login": login, "id": hash(login) & 0xFFFF, "type": kind},
                "created_at": now,
                "updated_at": now,
                "author_association": "NONE" if kind == "Bot" else "CONTRIBUTOR",
            }
            self.comments.setdefault((owner, repo, issue), []).append(comment)
            return comment

    def _find(self, owner: str, repo: str, cid: int) -> dict | None:
        for (o, r, _), items in self.comments.items():
            if (o, r) == (owner, repo):
                for c in items:
                    if c["id"] == cid:
                        return c
        return None

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        parsed = self._parse(h, method)
        if parsed is None:  # answered already (bad JSON, bad credentials)
            return None
        path, query, body, token = parsed
        for hook in list(self.before):
            hook(method, path)
        for method_, pattern, kind in self.faults:
            if method_ == method and re.search(pattern, path):
                return self._broken(h, method, path, query, body, kind)
        if method == "POST" and path.endswith("/graphql"):
            return self._graphql(h, path, query, body, token)
        return self._route((h, method, path, query, body), token)

    def _parse(self, h: BaseHTTPRequestHandler, method: str) -> tuple[str, dict, object, str] | None:
        """(path, query, JSON body, token) of a request, or None after answering a bad one."""
        url = urlsplit(h.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        body = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                self._reply(h, method, url.path, query, None, 400, {"message": "Problems parsing JSON"})
                return None
        token = _bearer(h.headers.get("Authorization"))
        if token not in self.tokens:
            bad = {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}
            self._reply(h, method, url.path, query, body, 401, bad)
            return None
        return url.path, query, body, token

    def _route(self, request: _Request, token: str) -> None:
        h, method, path, query, body = request
        if self.prefix and path.startswith(self.prefix):
            path = path[len(self.prefix) :]
        parts = [p for p in path.split("/") if p]
        if parts == ["user"] and method == "GET":
            return self._user(request, token)
        # /repos/{o}/{r}/issues/{n}/comments
        if _matches(parts, "repos", None, None, "issues", int, "comments"):
            owner, repo, issue = parts[1], parts[2], int(parts[4])
            if method == "GET":
                return self._list(h, request[2], query, body, owner, repo, issue)
            if method == "POST":
                return self._create(request, token, owner, repo, issue)
        # /repos/{o}/{r}/pulls/{n}
        if _matches(parts, "repos", None, None, "pulls", int) and method == "GET":
            pull = self.pulls.get((parts[1], parts[2], int(parts[4])))
            if pull is None:
                return self._reply(*request, 404, {"message": "Not Found"})
            return self._reply(*request, 200, pull)
        # /repos/{o}/{r}/issues/comments/{id}: DELETE, PATCH
        if _matches(parts, "repos", None, None, "issues", "comments", int):
            if method == "DELETE":
                return self._delete(request, token, int(parts[5]))
            if method == "PATCH":
                return self._update(request, token, parts[1], parts[2], int(parts[5]))
        return self._reply(*request, 404, {"message": "Not Found"})

    def _user(self, request: _Request, token: str) -> None:
        login, kind = self.identity(token)
        if kind == "Bot":  # installation tokens have no user: GitHub says exactly this
            return self._reply(
                *request,
                403,
                {
                    "message": "Resource not accessible by integration",
                    "documentation_url": "https://docs.github.com/rest/users/users#get-the-authenticated-user",
                    "status": "403",
                },
            )
        return self._reply(*request, 200, {"login": login, "id": 7, "type": "User"})

    def _delete(self, request: _Request, token: str, cid: int) -> None:
        if self.tokens[token] != "write":
            return self._forbidden(*request)
        with self._lock:
            for items in self.comments.values():
                for c in list(items):
                    if c["id"] == cid:
                        items.remove(c)
                        return self._reply(*request, 204, None)
        return self._reply(*request, 404, {"message": "Not Found"})

    def _create(self, request: _Request, token: str, owner: str, repo: str, issue: int) -> None:
        if self.tokens[token] != "write":
            return self._forbidden(*request)
        text = (request[-1] or {}).get("body")
        if not isinstance(text, str):
            return self._reply(*request, 422, _unprocessable("body is missing"))
        if len(text) > MAX_BODY:
            return self._reply(
                *request, 422, _unprocessable(f"body is too long (maximum is {MAX_BODY} characters)")
            )
        comment = self._add(owner, repo, issue, text, *self.identity(token))
        return self._reply(*request, 201, comment)

    def _update(self, request: _Request, token: str, owner: str, repo: str, cid: int) -> None:
        if self.tokens[token] != "write":
            return self._forbidden(*request)
        comment = self._find(owner, repo, cid)
        if comment is None:
            return self._reply(*request, 404, {"message": "Not Found"})
        text = (request[-1] or {}).get("body")
        if not isinstance(text, str) or len(text) > MAX_BODY:
            return self._reply(
                *request, 422, _unprocessable(f"body is too long (maximum is {MAX_BODY} characters)")
            )
        with self._lock:
            comment["body"] = text
            comment["updated_at"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return self._reply(*request, 200, comment)

    def _list(self, h, path, query, body, owner, repo, issue) -> None:
        try:
            per_page = min(100, max(1, int(query.get("per_page", 30))))
            page = max(1, int(query.get("page", 1)))
        except ValueError:
            return self._reply(h, "GET", path, query, body, 422, _unprocessable("invalid pagination"))
        items = self.comments.get((owner, repo, issue), [])
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []

        def link(p: int, rel: str) -> str:
            q = urlencode({**query, "per_page": per_page, "page": p})
            return f'<{self.api_url}{path[len(self.prefix) :] if self.prefix else path}?{q}>; rel="{rel}"'

        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        if page > 1:
            links += [link(1, "first"), link(page - 1, "prev")]
        headers = {"Link": ", ".join(links)} if links else {}
        return self._reply(h, "GET", path, query, body, 200, chunk, headers)

    def _graphql(self, h, path, query, body, token) -> None:
        text = (body or {}).get("query") if isinstance(body, dict) else None
        if not isinstance(text, str) or "viewer" not in text:
            return self._reply(
                h, "POST", path, query, body, 200, {"errors": [{"message": "this fake knows only viewer"}]}
            )
        login, _ = self.identity(token)
        return self._reply(h, "POST", path, query, body, 200, {"data": {"viewer": {"login": login}}})

    def _broken(self, h, method, path, query, body, kind) -> None:
        """A 200 that is not what GitHub documents (see the module docstring)."""
        self.requests.append(LoggedRequest(method, path, query, h.headers.get("Authorization"), 200, body))
        data = {
            "garbage": b"<html><body>Unicorn! \xff\xfe</body></html>",
            "truncated": b'[{"id": 1, "body": "<!-- needle-act',
            "wrong-shape": b'{"message": "ok", "items": "none", "data": [1, 2, 3], "head": "x"}',
        }[kind]
        h.send_response(200)
        h.send_header("Content-Type", "application/json; charset=utf-8")
        h.send_header("Content-Length", str(len(data) + (100 if kind == "truncated" else 0)))
        if kind == "truncated":
            h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(data)
        if kind == "truncated":
            h.close_connection = True

    def _forbidden(self, h, method, path, query, body) -> None:
        return self._reply(
            h,
            method,
            path,
            query,
            body,
            403,
            {
                "message": "Resource not accessible by integration",
                "documentation_url": "https://docs.github.com/rest/issues/comments#create-an-issue-comment",
                "status": "403",
            },
        )

    def _reply(self, h, method, path, query, body, status, payload, headers=None) -> None:
        self.requests.append(LoggedRequest(method, path, query, h.headers.get("Authorization"), status, body))
        data = b"" if status == 204 else json.dumps(payload).encode("utf-8")
        h.send_response(status)
        h.send_header("Content-Type", "application/json; charset=utf-8")
        h.send_header("Content-Length", str(len(data)))
        h.send_header("X-GitHub-Api-Version-Selected", "2022-11-28")
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)


def _bearer(auth: str | None) -> str | None:
    """The token of ``Authorization: Bearer T`` or ``token T`` (both accepted by GitHub)."""
    if auth and auth.split(" ", 1)[0].lower() in ("bearer", "token") and " " in auth:
        return auth.split(" ", 1)[1]
    return None


def _matches(parts: list[str], *pattern: str | type | None) -> bool:
    """PARTS has PATTERN's length; a str must be equal, ``int`` must be digits, None is anything."""
    if len(parts) != len(pattern):
        return False
    for part, want in zip(parts, pattern, strict=True):
        if want is int and not part.isdigit():
            return False
        if isinstance(want, str) and part != want:
            return False
    return True


def _unprocessable(message: str) -> dict:
    return {
        "message": "Validation Failed",
        "errors": [{"resource": "IssueComment", "code": "custom", "field": "body", "message": message}],
        "documentation_url": "https://docs.github.com/rest/issues/comments#create-an-issue-comment",
        "status": "422",
    }


# ---- pytest fixtures ---------------------------------------------------------------------------


@pytest.fixture
def fake_github():
    """A started fake GitHub API; the token ``test-token`` may read and write."""
    with FakeGitHub() as gh:
        yield gh
