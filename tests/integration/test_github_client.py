"""GitHubClient against the loopback fake GitHub API: pagination, sticky upsert, errors, GHES."""

from __future__ import annotations

import pytest

from needle_action.action.comment import ours, publish_sticky
from needle_action.action.github import (
    GitHubClient,
    GitHubError,
    GitHubForbidden,
    GitHubUnauthorized,
    GitHubUnprocessable,
    parse_link_header,
)
from tests.fakes.github_server import FakeGitHub

REPO = "octo/widgets"
MARKER = "<!-- needle-action:comment -->"


def client(gh: FakeGitHub, token: str = "test-token") -> GitHubClient:
    return GitHubClient(token, api_url=gh.api_url, repository=REPO)


def test_parse_link_header():
    links = parse_link_header('<https://a/x?page=2>; rel="next", <https://a/x?page=5>; rel="last"')
    assert links == {"next": "https://a/x?page=2", "last": "https://a/x?page=5"}
    assert parse_link_header(None) == {}


def test_pagination_finds_marker_on_a_late_page(fake_github):
    gh = fake_github
    for i in range(250):
        gh.seed_comment(REPO, 7, f"chatter {i}")
    sticky = gh.seed_comment(REPO, 7, MARKER + "\nold report", login="github-actions[bot]", kind="Bot")
    c = client(gh)
    assert len(list(c.list_issue_comments(7))) == 251
    gets = [r for r in gh.requests if r.method == "GET"]
    assert [r.query.get("page", "1") for r in gets] == ["1", "2", "3"]
    assert all(r.query["per_page"] == "100" for r in gets)
    assert [x.id for x in ours(c, 7, MARKER, "github-actions[bot]")] == [sticky["id"]]


def test_sticky_comment_is_created_once_then_updated_in_place(fake_github):
    gh = fake_github
    c = client(gh)
    first = publish_sticky(c, 3, MARKER + "\nv1", MARKER, head_sha=None)
    second = publish_sticky(c, 3, MARKER + "\nv2", MARKER, head_sha=None)
    assert first.action == "created"
    assert second.action == "updated"
    assert first.comment.id == second.comment.id
    bodies = [x["body"] for x in gh.issue_comments(REPO, 3)]
    assert bodies == [MARKER + "\nv2"]
    assert gh.count("POST") == 1
    assert gh.count("PATCH") == 1
    assert all(r.authorization == "Bearer test-token" for r in gh.requests)


def test_marker_in_the_middle_of_someone_elses_comment_is_not_ours(fake_github):
    gh = fake_github
    gh.seed_comment(REPO, 4, f"quoting the bot: {MARKER}")
    assert ours(client(gh), 4, MARKER, "github-actions[bot]") == []


def test_a_human_copy_of_the_marker_is_never_ours(fake_github):
    gh = fake_github
    gh.seed_comment(REPO, 5, MARKER + " fake", login="mallory")
    bot = gh.seed_comment(REPO, 5, MARKER + " real", login="github-actions[bot]", kind="Bot")
    assert [x.id for x in ours(client(gh), 5, MARKER, "github-actions[bot]")] == [bot["id"]]
    # a user called like the bot without [bot] is still not the bot
    gh.seed_comment(REPO, 6, MARKER + " fake", login="github-actions", kind="User")
    assert ours(client(gh), 6, MARKER, "github-actions[bot]") == []


def test_read_only_token_is_forbidden_but_can_read():
    with FakeGitHub(tokens={"ro": "read"}) as gh:
        c = client(gh, "ro")
        assert list(c.list_issue_comments(1)) == []
        with pytest.raises(GitHubForbidden) as info:
            c.create_comment(1, "hello")
        assert info.value.status == 403
        assert "not accessible" in info.value.message


def test_too_long_body_is_422(fake_github):
    gh = fake_github
    with pytest.raises(GitHubUnprocessable):
        client(gh).create_comment(1, "x" * 65537)
    client(gh).create_comment(1, "x" * 65536)  # exactly the limit is fine


def test_bad_token_and_unreachable_host():
    with FakeGitHub() as gh:
        with pytest.raises(GitHubUnauthorized):
            list(client(gh, "nope").list_issue_comments(1))
        url = gh.api_url
    dead = GitHubClient("t", api_url=url, repository=REPO, retries=0, timeout_s=2)
    with pytest.raises(GitHubError) as info:
        list(dead.list_issue_comments(1))
    assert info.value.status == 0


def test_enterprise_server_prefix_and_token_stays_on_host():
    with FakeGitHub(prefix="/api/v3") as gh:
        for i in range(3):
            gh.seed_comment(REPO, 9, f"c{i}")
        c = GitHubClient("test-token", api_url=gh.api_url, repository=REPO)
        assert len(list(c.list_issue_comments(9, per_page=1))) == 3
        assert all(r.path.startswith("/api/v3/repos/") for r in gh.requests)
        with pytest.raises(GitHubError, match="another host"):
            c._request("GET", "http://198.51.100.7/steal")


def test_get_pull_and_missing_pull(fake_github):
    from needle_action.action.github import GitHubNotFound

    gh = fake_github
    gh.add_pull(REPO, 8, head_sha="h" * 40, base_sha="b" * 40)
    assert client(gh).get_pull(8)["head"]["sha"] == "h" * 40
    with pytest.raises(GitHubNotFound):
        client(gh).get_pull(9)
