"""tests/builders.py's Project lays out exactly what it is told, and refuses edits that match nothing."""

from __future__ import annotations

import json

import pytest
import yaml

from needle_action.config import load_config
from tests.builders import Project, write


def test_project_writes_chain_and_the_config_loads(tmp_path):
    project = (
        Project(tmp_path / "repo")
        .template("prompts/qa.j2", "user:\n{{ notes }}\n{{ question }}\n")
        .fixture("fixtures/qa.yaml", {"notes": "The depot opens at nine.", "question": "When?"})
        .config(
            """
            [prompts.qa]
            template = "prompts/qa.j2"
            fixtures = ["fixtures/qa.yaml"]
            """
        )
    )
    assert project.config_path.read_text().startswith("[prompts.qa]\n")  # dedented
    assert yaml.safe_load(project.path("fixtures/qa.yaml").read_text())["question"] == "When?"
    assert list(load_config(project.config_path).prompts) == ["qa"]


def test_fixture_mappings_follow_the_suffix(tmp_path):
    project = Project(tmp_path).fixture("a.json", {"q": 1}).fixture("b.yml", {"q": [1, 2]})
    assert json.loads(project.path("a.json").read_text()) == {"q": 1}
    assert yaml.safe_load(project.path("b.yml").read_text()) == {"q": [1, 2]}
    with pytest.raises(ValueError, match="give text"):
        project.fixture("c.toml", {"q": 1})


def test_write_keeps_lone_surrogates_as_raw_bytes(tmp_path):
    path = write(tmp_path, "deep/er/bad.j2", "ok\n\udcff bad\n")
    assert path.read_bytes() == b"ok\n\xff bad\n"


def test_edit_refuses_an_old_text_that_is_not_there(tmp_path):
    project = Project(tmp_path).file("needle.toml", 'tokenizer = "local"\n')
    project.edit("needle.toml", '"local"', '"tiktoken:o200k_base"')
    assert project.config_path.read_text() == 'tokenizer = "tiktoken:o200k_base"\n'
    with pytest.raises(AssertionError, match="changed shape"):
        project.edit("needle.toml", '"local"', '"anthropic"')


def test_examples_copies_the_bundled_project(tmp_path):
    project = Project(tmp_path).examples("prompts", "fixtures")
    assert project.path("prompts/rag_answer.j2").is_file()
    assert not project.config_path.exists()
    assert Project(tmp_path / "all").examples().config_path.is_file()
