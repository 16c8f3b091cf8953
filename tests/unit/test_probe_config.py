"""Needle styles in needle.toml: lists of styles, look-alikes and abstention settings load, mistakes
are ConfigErrors at their line; `needle init` suggests gold when a fixture names its answer."""

from __future__ import annotations

import pytest

from needle_action.config import RecallSettings, load_config
from needle_action.core.errors import ConfigError
from needle_action.scaffold.starter import write_starter
from tests.builders import Project, write

CONFIG = """
[defaults.recall]
{recall}

[prompts.qa]
template = "qa.j2"
fixtures = ["qa.yaml"]
context_var = "notes"
question_var = "question"
"""


def _project(tmp_path, recall: str) -> Project:
    return (
        Project(tmp_path)
        .template("qa.j2", "user:\n{{ notes }}\n{{ question }}\n")
        .fixture("qa.yaml", {"notes": "The depot opens at nine.", "question": "When?"})
        .config(CONFIG.format(recall=recall))
    )


def test_a_list_of_styles_with_look_alikes_loads(tmp_path):
    config = load_config(
        _project(
            tmp_path,
            'needle = ["codeword", "nonlexical", "absent"]\ndistractors = 2\nsimilarity = "medium"\n'
            'abstain_phrases = ["keine angabe"]\nabstain_regex = "(?i)n/a"',
        ).config_path
    )
    rs = config.prompts["qa"].recall
    assert rs.styles == ["codeword", "nonlexical", "absent"]
    assert [rs.distractor_count(s) for s in rs.styles] == [2, 2, 2]
    assert (rs.similarity, rs.abstain_phrases, rs.abstain_regex) == ("medium", ["keine angabe"], "(?i)n/a")


def test_look_alike_counts_default_per_style():
    assert RecallSettings().styles == ["codeword"]
    assert RecallSettings().distractor_count("codeword") == 0
    assert RecallSettings(needle="distractors").distractor_count("distractors") == 3  # as it always was
    rs = RecallSettings(needle=["gold", "multihop", "sentence"], distractors=4)
    assert [rs.distractor_count(s) for s in rs.styles] == [0, 0, 4]  # gold and multihop take none


@pytest.mark.parametrize(
    ("recall", "line", "words"),
    [
        (
            'needle = ["codeword", "nonlexicl"]',
            2,
            "unknown needle style 'nonlexicl' (did you mean 'nonlexical'?)",
        ),
        ("needle = []", 2, "list at least one"),
        ('needle = ["absent", "absent"]', 2, "lists a style twice"),
        ('needle = "gold"\ndistractors = 2', 3, "distractors apply to the codeword"),
        ("distractors = 9", 2, "less than or equal to 8"),
        ('similarity = "extreme"', 2, "'low', 'medium' or 'high'"),
        ('abstain_regex = "(("', 2, "abstain_regex does not compile"),
        ('needle = "absent"\nabstain_phrases = ["", "unknown"]', 3, "must not contain an empty phrase"),
    ],
)
def test_bad_probe_settings_point_at_their_line(tmp_path, recall, line, words):
    with pytest.raises(ConfigError) as info:
        load_config(_project(tmp_path, recall).config_path)
    assert words in info.value.message, info.value.message
    assert f"needle.toml:{line}: " in info.value.format(), info.value.format()


def test_init_suggests_gold_when_a_fixture_names_its_answer(tmp_path):
    root = tmp_path / "repo"
    write(root, "prompts/rag.j2", "user:\n{% for d in documents %}{{ d }}\n{% endfor %}{{ question }}\n")
    write(root, "fixtures/rag/a.yaml", "documents: [x, y]\nquestion: q\n")
    write(root, "fixtures/rag/b.yaml", "documents: [x, 14 days]\nquestion: q\nexpected: 14 days\n")
    write(root, "prompts/plain.j2", "user:\n{% for d in documents %}{{ d }}\n{% endfor %}{{ question }}\n")
    write(root, "fixtures/plain/a.yaml", "documents: [x]\nquestion: q\n")
    config = load_config(write_starter(root, root / "needle.toml"))
    rag = config.prompts["rag"].recall
    assert rag.styles == ["gold"]
    assert rag.fixture == "fixtures/rag/b.yaml"
    assert config.prompts["plain"].recall.styles == ["codeword"]
    text = (root / "needle.toml").read_text()
    assert 'needle = "gold"' in text
    assert "Lost in the Middle" in text
