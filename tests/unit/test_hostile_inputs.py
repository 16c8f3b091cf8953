"""Path rules, safe writes, hardened parsers and the trust merge, one rule at a time."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from needle_action.config import load_config
from needle_action.config.trust import apply_trust
from needle_action.core.dataformats import DataError, parse_json, parse_toml, parse_yaml
from needle_action.core.errors import ConfigError, TemplateError
from needle_action.core.paths import (
    PathEscape,
    UnsafePath,
    check_relative,
    ensure_folder,
    refuse_links,
    write_file,
)
from needle_action.core.workspace import Workspace

# --------------------------------------------------------------------------- hidden paths


@pytest.mark.parametrize("rel", [".git/config", ".github/workflows/x.yml", ".env", "a/.secret/b.txt"])
def test_hidden_paths_are_refused(tmp_path, rel):
    with pytest.raises(PathEscape) as info:
        Workspace(tmp_path).check(tmp_path / rel)
    assert info.value.kind == "hidden"


def test_allow_list_opens_a_hidden_folder_but_never_git(tmp_path):
    ws = Workspace(tmp_path, (".prompts", ".git"))
    ws.check(tmp_path / ".prompts/a.j2")
    with pytest.raises(PathEscape):
        ws.check(tmp_path / ".prompts2/a.j2")
    with pytest.raises(PathEscape):
        ws.check(tmp_path / ".git/config")


def test_a_symlink_into_a_hidden_folder_is_refused(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("token")
    (tmp_path / "prompts").mkdir()
    os.symlink(tmp_path / ".git" / "config", tmp_path / "prompts" / "innocent.j2")
    with pytest.raises(PathEscape):
        Workspace(tmp_path).check(tmp_path / "prompts" / "innocent.j2")


def test_nul_in_a_path_is_a_path_problem_not_a_crash():
    with pytest.raises(PathEscape) as info:
        check_relative("a\x00b.yaml")
    assert info.value.kind == "invalid"


def test_templates_cannot_include_git_config_and_say_so(tmp_path):
    from needle_action.assemble.render import render_case

    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[http]\n\textraheader = AUTHORIZATION: basic c2VjcmV0\n")
    (tmp_path / "p.j2").write_text("line one\n{% include '.git/config' %}\n")
    (tmp_path / "needle.toml").write_text('[prompts.p]\ntemplate = "p.j2"\n')
    config = load_config(tmp_path / "needle.toml")
    with pytest.raises(TemplateError) as info:
        render_case(config, config.prompts["p"], None)
    assert info.value.location.line == 2
    assert "'.git/config' is refused" in info.value.message
    assert "c2VjcmV0" not in info.value.format()


def test_hidden_fixtures_and_globs_are_refused_at_load(tmp_path):
    (tmp_path / "p.j2").write_text("x")
    (tmp_path / ".env.yaml").write_text("k: v\n")
    (tmp_path / "fx").mkdir()
    (tmp_path / "fx" / ".hidden.yaml").write_text("k: v\n")
    (tmp_path / "fx" / "ok.yaml").write_text("k: v\n")
    cfg = tmp_path / "needle.toml"
    cfg.write_text('[prompts.p]\ntemplate = "p.j2"\nfixtures = [".env.yaml"]\n')
    with pytest.raises(ConfigError, match="hidden") as info:
        load_config(cfg)
    assert info.value.location.line == 3
    cfg.write_text('[prompts.p]\ntemplate = "p.j2"\nfixtures = ["fx/*.yaml"]\n')
    config = load_config(cfg)
    assert [p.name for p in config.fixture_paths(config.prompts["p"])] == ["ok.yaml"]
    cfg.write_text(
        '[files]\nallow_hidden = [".env.yaml"]\n[prompts.p]\ntemplate = "p.j2"\nfixtures = [".env.yaml"]\n'
    )
    assert load_config(cfg).files.allow_hidden == [".env.yaml"]
    cfg.write_text('[files]\nallow_hidden = [".git"]\n[prompts.p]\ntemplate = "p.j2"\n')
    with pytest.raises(ConfigError, match="never"):
        load_config(cfg)


# --------------------------------------------------------------------------- writes


def test_write_file_refuses_a_symlinked_file_folder_fifo_and_hard_link(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    victim = outside / "victim"
    victim.write_text("precious")
    (ws / "rep").mkdir()
    os.symlink(victim, ws / "rep" / "comment.md")
    os.symlink(outside, ws / "cache")
    os.mkfifo(ws / "rep" / "pipe")
    os.link(victim, ws / "rep" / "hard")
    for rel in ("rep/comment.md", "cache/recall.sqlite", "rep/pipe", "rep/hard"):
        with pytest.raises(UnsafePath):
            write_file(ws, rel, "pwned")
    with pytest.raises(UnsafePath):
        ensure_folder(ws, "cache/sub")
    with pytest.raises(UnsafePath):
        write_file(ws, "../escape.txt", "x")
    assert victim.read_text() == "precious"
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    assert write_file(ws, "rep/new/summary.md", "ok").read_text() == "ok"
    with pytest.raises(UnsafePath):
        refuse_links(ws / "rep", ["comment.md"])


def test_the_cache_refuses_a_symlinked_database(tmp_path):
    from needle_action.results.cache import ResultCache

    os.symlink(tmp_path / "elsewhere.sqlite", tmp_path / "recall.sqlite")
    with pytest.raises(ConfigError, match="not safe"):
        ResultCache(tmp_path / "recall.sqlite")


# --------------------------------------------------------------------------- parsers

CASES = [
    (parse_yaml, "a: 1\nb: " + "9" * 5000, 2, "4,300 digits"),
    (parse_yaml, "a: 1\nb: !!float abc", 2, "not a valid float"),
    (parse_yaml, "a: !!timestamp nope", 1, "not a valid timestamp"),
    (parse_yaml, "a: 1\nb: !!int", 2, "not a valid int"),  # an empty int: IndexError inside PyYAML
    (parse_yaml, "- !!float", 1, "not a valid float"),
    (parse_yaml, "a: 1\nb: 2020-13-45", 2, "timestamp"),
    (parse_yaml, "a: 1\nb: c\x01", 2, "unacceptable character U+0001"),
    (parse_yaml, "a: " + "[" * 300 + "]" * 300, 1, "nested more than"),
    (parse_yaml, "a: &a [*a]", 1, "alias"),
    (parse_json, '{"a":\n' + "9" * 5000 + "}", 2, "4,300 digits"),
    (parse_json, "[" * 100000 + "]" * 100000, 1, "nested more than"),
    (parse_json, '{"a": 1,}', 1, "Expecting property name"),
    (parse_toml, "a = 1\nb = " + "9" * 5000, 2, "4,300 digits"),
    (parse_toml, "a = " + "[" * 5000 + "]" * 5000, 1, "nested more than"),
]


@pytest.mark.parametrize(
    ("parse", "text", "line", "words"), CASES, ids=lambda x: getattr(x, "__name__", None)
)
def test_hostile_data_is_a_data_error_with_a_line(parse, text, line, words):
    with pytest.raises(DataError) as info:
        parse(text)
    assert info.value.line == line
    assert words in info.value.message


def test_shared_values_are_scrubbed_once_and_stay_shared():
    import time

    from needle_action.assemble.templates.sandbox import scrub

    value: list = ["lol"] * 9
    for _ in range(9):  # 9**10 strings if every reference were walked anew
        value = [value] * 9
    started = time.perf_counter()
    out = scrub({"lol": value})["lol"]
    assert time.perf_counter() - started < 1.0
    assert out[0] is out[8]
    assert out[0][0] is out[8][0]


# --------------------------------------------------------------------------- the trust merge


def _cfg(tmp_path: Path, name: str, text: str):
    (tmp_path / "p.j2").write_text("x")
    path = tmp_path / name
    path.write_text(text)
    return load_config(path)


BASE = """
[defaults]
max_input_tokens = 4000
[defaults.recall]
max_calls = 20
[prompts.rag_answer]
template = "p.j2"
max_input_tokens = 4000
max_growth = "10%"
"""

HEAD = """
[defaults]
max_input_tokens = 4000
provider = "openai"
[defaults.providers.openai]
base_url = "https://evil.example/v1"
api_key_env = "ANTHROPIC_API_KEY"
[defaults.recall]
max_calls = 5000
threshold = 0.1
scoring = "regex"
answer_regex = ".*"
[prompts.rag_answer]
template = "p.j2"
max_input_tokens = 8000
max_growth = "300%"
model = "claude-opus-9"
[prompts.brand_new]
template = "p.j2"
max_input_tokens = 99999
"""


def test_apply_trust_takes_endpoints_and_policy_from_the_base(tmp_path):
    base, head = _cfg(tmp_path, "base.toml", BASE), _cfg(tmp_path, "head.toml", HEAD)
    effective, changes = apply_trust(head, base)
    rag, new = effective.prompts["rag_answer"], effective.prompts["brand_new"]
    assert rag.provider == "anthropic"
    assert rag.providers == {}
    assert rag.model == "claude-opus-9"
    assert rag.max_input_tokens == 4000
    assert str(rag.max_growth) == "10%"
    assert rag.recall.max_calls == 20
    assert rag.recall.threshold == 0.8
    assert rag.recall.scoring == "strict"
    assert rag.recall.answer_regex is None
    assert new.max_input_tokens == 4000
    assert new.recall.max_calls == 20
    assert new.providers == {}
    lines = [c.describe() for c in changes]
    assert "⚠️ this PR raises max_input_tokens of rag_answer 4,000 → 8,000: takes effect after merge" in lines
    assert any("providers.openai.base_url of rag_answer unset → https://evil.example/v1" in x for x in lines)
    assert any(x.startswith("⚠️ the new prompt brand_new sets max_input_tokens to 99,999") for x in lines)
    assert any("recall.threshold of rag_answer 0.8 → 0.1" in x for x in lines)


def test_without_a_base_file_only_endpoints_are_reset(tmp_path):
    head = _cfg(tmp_path, "head.toml", HEAD)
    effective, changes = apply_trust(head, None)
    rag = effective.prompts["rag_answer"]
    assert rag.providers == {}
    assert rag.provider == "openai"
    assert rag.max_input_tokens == 8000
    assert {c.kind for c in changes} == {"endpoint"}


def test_the_base_file_loads_from_text_without_its_files(tmp_path):
    config = load_config(tmp_path / "needle.toml", text=BASE.replace("p.j2", "gone.j2"), check_paths=False)
    assert config.prompts["rag_answer"].max_input_tokens == 4000
