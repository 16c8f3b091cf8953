"""`request`, `builder` and their pointers in needle.toml: what loads, what is refused and where,
and the builder opt-in as a policy only the base branch may set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from needle_action.assemble.builder.client import BuilderSpec, builder_error, call_key
from needle_action.assemble.recorded import as_rendered
from needle_action.config import load_config
from needle_action.config.trust import apply_trust
from needle_action.core.errors import ConfigError
from tests.builders import Project

BODY = {
    "model": "m",
    "max_tokens": 10,
    "system": "sys",
    "messages": [
        {"role": "user", "content": "find it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "the docs"}]},
    ],
}


def project(root: Path, table: str, *, files_table: str = "") -> Path:
    return (
        Project(root)
        .file("requests/r.json", json.dumps(BODY))
        .file("app/p.py", "def build(question):\n    return [{'role': 'user', 'content': question}]\n")
        .fixture("fixtures/a.yaml", "question: hi\n")
        .config(f"[prompts.p]\n{table}\n{files_table}")
        .config_path
    )


def error_of(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return info.value


def test_a_recorded_request_with_resolving_pointers_loads(tmp_path):
    cfg = load_config(
        project(
            tmp_path,
            'request = "requests/r.json"\ncontext_path = "/messages/2/content/0/content"\n'
            'question_path = "/messages/0/content"',
        )
    )
    prompt = cfg.prompts["p"]
    assert prompt.source_file == "requests/r.json"
    assert prompt.slots() == (
        ("context_path", "/messages/2/content/0/content"),
        ("question_path", "/messages/0/content"),
    )


def test_a_pointer_that_does_not_resolve_is_an_error_at_its_line_with_the_nearest_path(tmp_path):
    err = error_of(
        project(tmp_path, 'request = "requests/r.json"\ncontext_path = "/messages/2/content/0/contents"')
    )
    assert err.location.line == 3
    assert "context_path '/messages/2/content/0/contents' does not resolve in requests/r.json" in err.message
    assert err.hint == "the nearest valid path is '/messages/2/content/0/content'"


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('template = "x.j2"\nbuilder = "app/p.py:build"', "exactly one of template, request or builder"),
        ("description = 'nothing'", "exactly one of template, request or builder"),
        ('builder = "app/p.py"', 'like "app/prompts.py:build_support"'),
        ('builder = "app/p.py:build"\ncontext_path = "/x"', "go with request"),
        ('request = "requests/r.json"\ncontext_path = "messages/0"', "starting with '/'"),
        ('builder = "app/missing.py:build"', "builder module file not found"),
        ('request = "../r.json"', "escapes the config root"),
    ],
)
def test_bad_prompt_sources_are_refused(tmp_path, table, words):
    assert words in error_of(project(tmp_path, table)).message


def test_a_pr_that_enables_builders_for_itself_is_measured_without_them(tmp_path):
    base = load_config(project(tmp_path / "base", 'request = "requests/r.json"'))
    head = load_config(
        project(
            tmp_path / "head",
            'builder = "app/p.py:build"\nfixtures = ["fixtures/a.yaml"]',
            files_table="[files]\nbuilders = true",
        )
    )
    effective, changes = apply_trust(head, base)
    assert "p" not in effective.prompts
    assert not effective.files.builders
    notes = [c.describe() for c in changes]
    assert any("[files] builders false → true" in n for n in notes)
    assert any("p is built in code (app/p.py:build) and was not measured" in n for n in notes)
    # a base that enables builders lets the PR's builder prompts run
    trusting = base.model_copy(update={"files": base.files.model_copy(update={"builders": True})})
    effective, _ = apply_trust(head, trusting)
    assert "p" in effective.prompts
    # and the PR that adopts needle cannot enable them either
    assert "p" not in apply_trust(head, None)[0].prompts


def test_a_pr_cannot_let_its_own_builders_run_where_their_network_cannot_be_taken_away(tmp_path):
    builder_table = 'builder = "app/p.py:build"\nfixtures = ["fixtures/a.yaml"]'
    base = load_config(project(tmp_path / "base", builder_table, files_table="[files]\nbuilders = true"))
    head = load_config(
        project(
            tmp_path / "head",
            builder_table,
            files_table="[files]\nbuilders = true\nbuilders_unguarded = true",
        )
    )
    assert head.files.builders_unguarded  # the developer's own file, read as it is
    effective, changes = apply_trust(head, base)
    assert effective.files.builders
    assert not effective.files.builders_unguarded
    assert "⚠️ this PR changes [files] builders_unguarded false → true: takes effect after merge" in [
        c.describe() for c in changes
    ]
    assert not apply_trust(head, None)[0].files.builders_unguarded  # nor the PR that adopts needle
    # a base that allows it allows it
    allowing = base.model_copy(update={"files": base.files.model_copy(update={"builders_unguarded": True})})
    assert apply_trust(head, allowing)[0].files.builders_unguarded


def test_a_builders_value_that_is_not_a_request_names_the_field():
    with pytest.raises(ConfigError) as err:
        as_rendered(
            {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}]},
            source="app/p.py:build",
            fixture=None,
            file="app/p.py",
            error_cls=ConfigError,
            what="the value the builder returned",
        )
    assert "messages[0].content[0]" in err.value.message
    assert (
        as_rendered([{"role": "user", "content": "hi"}], source="s", fixture=None, file="f").messages[0].text
        == "hi"
    )


def test_worker_errors_are_framed_at_the_users_innermost_line():
    err = builder_error(
        BuilderSpec.parse("app/p.py:build"),
        {
            "kind": "raised",
            "type": "KeyError",
            "message": "'x'",
            "frames": [["app/p.py", 3, "build", "return f(q)"], ["app/lib.py", 9, "f", "return q['x']"]],
        },
    )
    assert err.format().splitlines()[:3] == [
        "app/lib.py:9: the builder app/p.py:build raised KeyError: 'x'",
        "  app/p.py:3 in build: return f(q)",
        "  app/lib.py:9 in f: return q['x']",
    ]


def test_call_keys_name_the_prompt_and_its_inputs():
    assert call_key("p", {"a": 1, "b": [1]}) == call_key("p", {"b": [1], "a": 1})
    assert call_key("p", {"a": 1}) != call_key("q", {"a": 1})
