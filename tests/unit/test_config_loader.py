"""load_config: merging, line numbers, and every error as ConfigError with the right file:line."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from needle_action.config import load_config
from needle_action.config.toml_lines import scan_lines
from needle_action.core.errors import ConfigError
from tests.builders import Project


def make_repo(root: Path, toml: str, files: dict[str, str] | None = None) -> Path:
    """A project with prompts/a.j2 and fixtures/a.yaml (unless FILES replace them) and TOML."""
    files = {"prompts/a.j2": "Hello {{ question }}\n", "fixtures/a.yaml": "question: hi\n", **(files or {})}
    return Project(root).files(files).config(toml).config_path


def error_of(cfg: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(cfg)
    err = info.value
    assert err.location.file == str(cfg)
    return err


GOOD = """
    [defaults]
    model = "claude-haiku-5-5"
    max_input_tokens = 4000
    max_growth = "10%"

    [defaults.recall]
    sizes = [2000, 8000]
    trials = 7

    [defaults.providers.anthropic]
    timeout_s = 30
    max_retries = 2

    [prompts.rag]
    template = "prompts/a.j2"
    fixtures = ["fixtures/*.yaml"]
    context_var = "documents"
    question_var = "question"
    max_input_tokens = 6000

    [prompts.rag.recall]
    trials = 3

    [prompts.rag.providers.anthropic]
    timeout_s = 5

    [prompts.plain]
    template = "prompts/a.j2"
"""


def test_defaults_merge_key_by_key_into_every_prompt(tmp_path):
    config = load_config(make_repo(tmp_path, GOOD))
    rag, plain = config.prompts["rag"], config.prompts["plain"]
    assert rag.name == "rag"
    assert plain.name == "plain"
    assert rag.model == "claude-haiku-5-5"
    assert rag.max_input_tokens == 6000
    assert plain.max_input_tokens == 4000
    assert str(rag.max_growth) == "10%"
    # recall merged key by key: trials from the prompt, sizes from defaults
    assert rag.recall.trials == 3
    assert rag.recall.sizes == [2000, 8000]
    assert plain.recall.trials == 7
    # providers.NAME merged key by key too
    assert rag.providers["anthropic"].timeout_s == 5
    assert rag.providers["anthropic"].max_retries == 2
    assert plain.providers["anthropic"].timeout_s == 30
    assert config.root == tmp_path.absolute()
    assert [p.name for p in config.fixture_paths(rag)] == ["a.yaml"]


def test_line_numbers_are_recorded(tmp_path):
    config = load_config(make_repo(tmp_path, GOOD))
    text_lines = (tmp_path / "needle.toml").read_text().splitlines()
    for key, expected_start in [
        ("defaults", "[defaults]"),
        ("defaults.recall.sizes", "sizes"),
        ("defaults.providers.anthropic.max_retries", "max_retries"),
        ("prompts.rag", "[prompts.rag]"),
        ("prompts.rag.max_input_tokens", "max_input_tokens = 6000"),
        ("prompts.rag.recall.trials", "trials = 3"),
        ("prompts.plain.template", 'template = "prompts/a.j2"'),
    ]:
        line = config.line_of(key)
        assert line is not None, key
        assert text_lines[line - 1].startswith(expected_start), (key, line)
    assert config.line_of("prompts.plain") == text_lines.index("[prompts.plain]") + 1


def test_scanner_handles_arrays_of_tables_multiline_values_and_inline_tables():
    text = textwrap.dedent(
        '''
        [defaults.recall]
        sizes = [
          2000,
          "[not.a.header]",
        ]
        note = """
        [prompts.fake]
        key = 1
        """

        [[defaults.recall.needles]]
        fact = "a"
        question = "b"

        [[defaults.recall.needles]]
        fact = "c"

        [prompts.x]
        recall = { trials = 2, seed = 3 }
        "quoted key" = 1
        dotted.key = 2
        '''
    ).lstrip("\n")
    lines = scan_lines(text)
    assert lines["defaults.recall.sizes"] == 2
    assert lines["defaults.recall.note"] == 6
    assert "prompts.fake" not in lines
    assert "prompts.fake.key" not in lines
    assert lines["defaults.recall.needles"] == 11
    assert lines["defaults.recall.needles.0.question"] == 13
    assert lines["defaults.recall.needles.1"] == 15
    assert lines["defaults.recall.needles.1.fact"] == 16
    assert lines["prompts.x.recall.seed"] == 19
    assert lines["prompts.x.quoted key"] == 20
    assert lines["prompts.x.dotted.key"] == 21


def test_missing_file_suggests_init(tmp_path):
    err = error_of(tmp_path / "needle.toml")
    assert "not found" in err.message
    assert "needle init" in err.hint


def test_toml_syntax_error_line_and_column(tmp_path):
    cfg = make_repo(tmp_path, '[prompts.a]\ntemplate = "prompts/a.j2"\nmodel = \n')
    err = error_of(cfg)
    assert err.location.line == 3
    assert err.location.column
    assert "(at line" not in err.message
    assert "TOML" in err.message


def test_unknown_key_with_did_you_mean(tmp_path):
    cfg = make_repo(tmp_path, '[prompts.rag]\ntemplate = "prompts/a.j2"\nmax_input_tokns = 5\n')
    err = error_of(cfg)
    assert err.message.startswith("unknown key 'max_input_tokns' in [prompts.rag]")
    assert err.location.line == 3
    assert "max_input_tokens" in err.hint


def test_model_level_validator_points_at_table(tmp_path):
    cfg = make_repo(
        tmp_path, '[prompts.rag]\ntemplate = "prompts/a.j2"\n\n[prompts.rag.recall]\nscoring = "regex"\n'
    )
    err = error_of(cfg)
    assert "answer_regex" in err.message
    assert err.location.line == 4


def test_array_of_tables_entry_error_line(tmp_path):
    cfg = make_repo(
        tmp_path,
        '[[defaults.recall.needles]]\nfact = "x"\n\n[[defaults.recall.needles]]\nfact = "y"\n\n'
        '[prompts.rag]\ntemplate = "prompts/a.j2"\n',
    )
    err = error_of(cfg)
    assert "question" in err.message
    assert err.location.line == 1


RAG = '[prompts.rag]\ntemplate = "prompts/a.j2"\n'


@pytest.mark.parametrize(
    ("toml", "files", "words", "line", "hint"),
    [
        pytest.param(
            "[defaults.recall]\ntrails = 3\n\n" + RAG,
            {},
            "unknown key 'trails' in [defaults.recall]",
            2,
            "'trials'",
            id="nested-key",
        ),
        pytest.param(
            "[defaults.recall]\ndepths = [0.0, 1.5]\n\n" + RAG, {}, "between 0", 2, None, id="inherited-value"
        ),
        pytest.param(
            "[defaults]\nreserve_output_tokens = 10\n\n" + RAG + 'reserve_output_tokens = "x"\n',
            {},
            "'x'",
            6,
            "",
            id="prompt-wins",
        ),
        pytest.param(RAG + 'max_growth = "ten percent"\n', {}, "max_growth", 3, "10%", id="wrong-growth"),
        pytest.param(
            "[defaults.providers.antropic]\ntimeout_s = 3\n\n" + RAG,
            {},
            "antropic",
            1,
            "anthropic",
            id="provider-table",
        ),
        pytest.param(
            '[prompt.rag]\ntemplate = "prompts/a.j2"\n', {}, "[prompt]", 1, "prompts", id="top-level-table"
        ),
        pytest.param(
            '[defaults]\ntemplate = "x.j2"\n\n' + RAG, {}, "", 2, "[prompts.NAME]", id="template-in-defaults"
        ),
        pytest.param('[defaults]\nmodel = "x"\n', {}, "no prompts", 1, None, id="no-prompts"),
        pytest.param('[prompts.rag]\nmodel = "m"\n', {}, "template", 1, None, id="missing-template-key"),
        pytest.param(
            RAG + 'fixtures = [\n  "fixtures/a.yaml",\n  "fixtures/missing.yaml",\n]\n',
            {},
            "fixtures/missing.yaml",
            5,
            None,
            id="the-entry-in-a-multiline-list",
        ),
        pytest.param(
            RAG + 'fixtures = ["fixtures/*.json"]\n',
            {},
            "matches no files",
            3,
            None,
            id="glob-matching-nothing",
        ),
        pytest.param(
            RAG + 'fixtures = ["fixtures/a.yaml", "fixtures/*.yaml"]\n', {}, "twice", 3, None, id="duplicates"
        ),
        pytest.param(
            RAG + 'fixtures = ["fixtures/a.txt"]\n',
            {"fixtures/a.txt": "x"},
            "extension",
            3,
            None,
            id="unsupported-extension",
        ),
        pytest.param(
            '[defaults.recall]\nfiller_globs = ["docs/*.md"]\n\n' + RAG,
            {},
            "matches no files",
            2,
            None,
            id="filler-globs",
        ),
    ],
)
def test_a_path_or_table_error_names_the_problem_at_its_line(tmp_path, toml, files, words, line, hint):
    err = error_of(make_repo(tmp_path, toml, files))
    assert words in err.message
    assert err.location.line == line
    if hint is not None:  # "": a hint of any words
        assert err.hint
        assert hint in err.hint


@pytest.mark.parametrize(
    ("template", "words"),
    [
        ("prompts/b.j2", "not found"),
        ("/etc/passwd", "absolute"),
        ("../outside.j2", "'..'"),
        ("prompts/../../outside.j2", "'..'"),
    ],
)
def test_bad_template_paths(tmp_path, template, words):
    (tmp_path / "outside.j2").write_text("x")
    root = tmp_path / "repo"
    cfg = make_repo(root, f'[prompts.rag]\n\ntemplate = "{template}"\n')
    err = error_of(cfg)
    assert words in err.message
    assert err.location.line == 3


def test_template_missing_suggests_near_name(tmp_path):
    err = error_of(make_repo(tmp_path, '[prompts.rag]\ntemplate = "prompts/A.j2"\n'))
    assert "prompts/a.j2" in err.hint


@pytest.mark.parametrize(
    ("toml", "link", "line"),
    [
        ('[prompts.rag]\ntemplate = "prompts/link.j2"\n', "prompts/link.j2", 2),  # the template
        (RAG + 'fixtures = ["fixtures/*.yaml"]\n', "fixtures/z.yaml", 3),  # a file a fixture glob finds
    ],
)
def test_a_symlink_out_of_the_root_is_refused(tmp_path, toml, link, line):
    outside = tmp_path / "outside.yaml"
    outside.write_text("question: leaked\n")
    root = tmp_path / "repo"
    cfg = make_repo(root, toml)
    os.symlink(outside, root / link)
    err = error_of(cfg)
    assert "symlink" in err.message
    assert err.location.line == line


def test_prompt_name_and_name_key(tmp_path):
    err = error_of(make_repo(tmp_path, '[prompts."has space"]\ntemplate = "prompts/a.j2"\n'))
    assert "not usable" in err.message
    assert err.location.line == 1
    err = error_of(make_repo(tmp_path, '[prompts.rag]\ntemplate = "prompts/a.j2"\nname = "other"\n'))
    assert err.location.line == 3
    assert "table name" in err.hint


def test_error_format_is_file_line_message_and_hint(tmp_path):
    cfg = make_repo(tmp_path, '[prompts.rag]\ntemplate = "prompts/a.j2"\ntrials = 3\n')
    text = error_of(cfg).format()
    assert text.startswith(f"{cfg}:3: unknown key 'trials' in [prompts.rag]")
    assert "\n  hint: " in text


def test_list_entries_and_union_types_read_naturally(tmp_path):
    err = error_of(
        make_repo(
            tmp_path,
            '[prompts.rag]\ntemplate = "prompts/a.j2"\n\n[prompts.rag.recall]\ndepths = [0.1, "x"]\n',
        )
    )
    assert err.message.startswith("entry 2 of 'depths' in [prompts.rag.recall]")
    assert err.location.line == 5
    err = error_of(
        make_repo(
            tmp_path, '[prompts.rag]\ntemplate = "prompts/a.j2"\n\n[prompts.rag.recall]\nsizes = "big"\n'
        )
    )
    assert err.message.startswith("'sizes' in [prompts.rag.recall]")
    assert "list[int]" not in err.message
    assert "more problem" not in err.message
    assert "auto" in err.hint


def test_a_key_pasted_into_api_key_env_is_refused_without_echoing_it(tmp_path):
    secret = "sk-ant-api03-PASTED-BY-MISTAKE"
    cfg = make_repo(
        tmp_path,
        f'[prompts.rag]\ntemplate = "prompts/a.j2"\n\n'
        f'[prompts.rag.providers.anthropic]\napi_key_env = "{secret}"\n',
    )
    err = error_of(cfg)
    assert err.location.line == 5
    assert "api_key_env must name an environment variable" in err.message
    assert secret not in err.format()
    # a plain variable name is still accepted
    make_repo(
        tmp_path,
        '[prompts.rag]\ntemplate = "prompts/a.j2"\n\n'
        '[prompts.rag.providers.anthropic]\napi_key_env = "TEAM_CLAUDE_KEY"\n',
    )
    assert load_config(cfg).prompts["rag"].providers["anthropic"].api_key_env == "TEAM_CLAUDE_KEY"
