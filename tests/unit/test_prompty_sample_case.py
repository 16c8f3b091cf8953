"""A .prompty whose own sample is the recall case: the haystack reads its defaults once, and an
error about that data still points at the .prompty (not at needle.toml)."""

from __future__ import annotations

import pytest

from needle_action.assemble.templates import defaults
from needle_action.config import load_config
from needle_action.core.errors import ConfigError
from needle_action.recall.trials.haystack import HaystackBuilder
from needle_action.tokens import get_counter
from tests.builders import Project

TOKENIZER = "tiktoken:o200k_base"
CONFIG = f"""
[defaults]
model = "gpt-4o"
provider = "openai"
tokenizer = "{TOKENIZER}"

[defaults.recall]
sizes = [600]

[prompts.sum]
template = "sum.prompty"
context_var = "documents"
question_var = "question"
"""
PROMPTY = """---
name: sum
sample:
  documents: {documents}
  question: What is alpha?
---
system:
Answer from the documents.
user:
{{% for d in documents %}}{{{{ d }}}}
{{% endfor %}}{{{{ question }}}}
"""


def _builder(tmp_path, documents: str) -> HaystackBuilder:
    project = Project(tmp_path).config(CONFIG).file("sum.prompty", PROMPTY.format(documents=documents))
    config = load_config(project.config_path)
    prompt = config.prompts["sum"]
    assert config.recall_fixture(prompt) is None  # the case is the template's own sample
    return HaystackBuilder(config, prompt, get_counter(TOKENIZER, model="gpt-4o", settings=prompt), seed=1)


def test_the_sample_case_reads_the_prompty_defaults_once(tmp_path, monkeypatch):
    reads: list[str] = []
    real = defaults.read_template

    def counted(path, file):
        reads.append(file)
        return real(path, file)

    monkeypatch.setattr(defaults, "read_template", counted)
    builder = _builder(tmp_path, '["Alpha text.", "Beta text."]')
    assert builder.variables["documents"] == ["Alpha text.", "Beta text."]
    assert len(reads) == 1, reads  # the case's variables; where its data is written reuses them


def test_bad_sample_data_is_reported_at_the_prompty(tmp_path):
    with pytest.raises(ConfigError, match="list is empty") as info:
        _builder(tmp_path, "[]")
    assert info.value.location.file is not None
    assert info.value.location.file.endswith("sum.prompty")
