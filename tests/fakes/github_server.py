"""A loopback fake of the part of the GitHub REST API the action uses: issue comments.

Real HTTP on 127.0.0.1, same paths, status codes, headers and JSON shapes as api.github.com:

* ``GET  {prefix}/repos/{owner}/{repo}/issues/{n}/comments?per_page=&page=`` -> 200, a page of
  comments oldest first, with an RFC 5988 ``Link`` header (``rel="next"``, ``rel="last"``, ...);
  ``per_page`` defaults to 30 and is capped at 100, as on GitHub;
* ``POST {prefix}/repos/{owner}/{repo}/issues/{n}/comments`` -> 201 with the comment;
* ``PATCH {prefix}/repos/{owner}/{repo}/issues/comments/{id}`` -> 200 with the comment;
* 401 without a known token, 403 for a read-only token on writes (what a fork PR's token gets),
  422 when a body is longer than 65,536 characters, 404 for unknown comments.

``prefix`` lets tests mimic GitHub Enterprise Server (``https://HOST/api/v3``). Every request is
logged in :attr:`FakeGitHub.requests` so tests can assert on exactly what was sent.

Fixture ``fake_github`` (at the bottom): a started fake with one write token, ``test-token``.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

MAX_BODY = 65536


@dataclass
class LoggedRequest:
    method: str
    path: str
    query: dict
    authorization: str | None
    status: int
    body: dict | None = None


@dataclass
class FakeGitHub:
    """``with FakeGitHub(tokens={"t": "write"}) as gh: gh.api_url ...``"""

    tokens: dict[str, str] = field(default_factory=lambda: {"test-token": "write"})
    prefix: str = ""
    bot_login: str = "github-actions[bot]"
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

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # poll_interval: shutdown() waits for the serve loop's next poll (0.5 s by default, on every
        # `with FakeGitHub()` exit); 0.05 s keeps that wait out of every test that uses the fake
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def api_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.prefix}"

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

    def issue_comments(self, repo: str, issue: int) -> list[dict]:
        owner, name = repo.split("/")
        return list(self.comments.get((owner, name, issue), []))

    def count(self, method: str) -> int:
        return sum(1 for r in self.requests if r.method == method)

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
        url = urlsplit(h.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        body = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                return self._reply(
                    h, method, url.path, query, None, 400, {"message": "Problems parsing JSON"}
                )
        token = _bearer(h.headers.get("Authorization"))
        if token not in self.tokens:
            return self._reply(
                h,
                method,
                url.path,
                query,
                body,
                401,
                {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"},
            )
        path = url.path
        if self.prefix and path.startswith(self.prefix):
            path = path[len(self.prefix) :]
        parts = [p for p in path.split("/") if p]
        request = (h, method, url.path, query, body)
        # /repos/{o}/{r}/issues/{n}/comments
        if _matches(parts, "repos", None, None, "issues", int, "comments"):
            owner, repo, issue = parts[1], parts[2], int(parts[4])
            if method == "GET":
                return self._list(h, url.path, query, body, owner, repo, issue)
            if method == "POST":
                return self._create(request, token, owner, repo, issue)
        # /repos/{o}/{r}/pulls/{n}
        if _matches(parts, "repos", None, None, "pulls", int) and method == "GET":
            pull = self.pulls.get((parts[1], parts[2], int(parts[4])))
            if pull is None:
                return self._reply(*request, 404, {"message": "Not Found"})
            return self._reply(*request, 200, pull)
        # /repos/{o}/{r}/issues/comments/{id}
        if _matches(parts, "repos", None, None, "issues", "comments", int) and method == "PATCH":
            return self._update(request, token, parts[1], parts[2], int(parts[5]))
        return self._reply(*request, 404, {"message": "Not Found"})

    def _create(self, request: tuple, token: str, owner: str, repo: str, issue: int) -> None:
        if self.tokens[token] != "write":
            return self._forbidden(*request)
        text = (request[-1] or {}).get("body")
        if not isinstance(text, str):
            return self._reply(*request, 422, _unprocessable("body is missing"))
        if len(text) > MAX_BODY:
            return self._reply(
                *request, 422, _unprocessable(f"body is too long (maximum is {MAX_BODY} characters)")
            )
        comment = self._add(owner, repo, issue, text, self.bot_login, "Bot")
        return self._reply(*request, 201, comment)

    def _update(self, request: tuple, token: str, owner: str, repo: str, cid: int) -> None:
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
        data = json.dumps(payload).encode("utf-8")
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
