"""A template with front matter is read and parsed once per file version: a multi-case budget run
reads a ``.prompty``, its ``${file:...}`` sample, value and parameter files once each and parses
its front matter once (a ``.prompt``'s too); an edited file is read again; and no caller can
change what the next one gets."""

from __future__ import annotations

import json

import pytest

from needle_action.assemble.render import render_case
from needle_action.assemble.templates import dotprompt, prompty
from needle_action.assemble.templates.defaults import template_defaults
from needle_action.assemble.templates.dotprompt import parse
from needle_action.assemble.templates.prompty import split_prompty
from needle_action.config import load_config
from needle_action.core import filecache
from needle_action.pipeline.measure import run_budget
from tests.builders import Project
from tests.reads import POLICY, PROMPTY, PROMPTY_FILES, SAMPLE, count_calls, count_reads

CONFIG = """
[defaults]
model = "gpt-4o"
provider = "openai"
tokenizer = "tiktoken:o200k_base"

[prompts.answer]
template = "prompts/answer.{kind}"
fixtures = ["data/cases.jsonl"]
"""
DOTPROMPT = """---
input:
  default:
    sources: [The first ferry leaves at 06:40.]
    question: When does the first ferry leave?
---
{{role "system"}}
{{#each sources}}- {{this}}
{{/each}}
{{role "user"}}
{{question}}
"""
CASES = "".join(json.dumps({"question": f"Question {i}?"}) + "\n" for i in range(4))


@pytest.fixture
def settled(monkeypatch):
    """The project's files as old as a checkout: outside the file caches' racy window."""
    monkeypatch.setattr(filecache, "RACY_NS", 0)


def _project(tmp_path, kind: str = "prompty") -> Project:
    project = Project(tmp_path).config(CONFIG.format(kind=kind)).file("data/cases.jsonl", CASES)
    if kind == "prompt":
        return project.template("prompts/answer.prompt", DOTPROMPT)
    return project.files(PROMPTY_FILES)


def test_a_multi_case_budget_run_reads_a_prompty_and_its_files_once(tmp_path, monkeypatch, settled):
    project = _project(tmp_path)
    reads = count_reads(monkeypatch, project, *PROMPTY_FILES)
    front_parses = count_calls(monkeypatch, prompty, "parse_yaml")
    results = run_budget(load_config(project.config_path))
    (prompt,) = results.prompts
    assert len(prompt.cases) == 4
    assert dict(reads) == dict.fromkeys(PROMPTY_FILES, 1)
    assert len(front_parses) == 1


def test_a_multi_case_budget_run_parses_a_dotprompt_once(tmp_path, monkeypatch, settled):
    project = _project(tmp_path, kind="prompt")
    reads = count_reads(monkeypatch, project, "prompts/answer.prompt")
    parses = count_calls(monkeypatch, dotprompt, "parse_document")
    (prompt,) = run_budget(load_config(project.config_path)).prompts
    assert len(prompt.cases) == 4
    assert dict(reads) == {"prompts/answer.prompt": 1}
    assert len(parses) == 1


def test_an_edited_template_or_sample_file_is_read_again(tmp_path, monkeypatch, settled):
    project = _project(tmp_path)
    config = load_config(project.config_path)
    prompt = config.prompts["answer"]
    reads = count_reads(monkeypatch, project, *PROMPTY_FILES)

    def render() -> str:
        return json.dumps(render_case(config, prompt, None).to_json())

    first = render()
    assert render() == first
    assert reads["prompts/answer.prompty"] == reads["prompts/sample.json"] == 1
    free = [{"title": "Today", "text": "Ferries are free today."}]
    project.file("prompts/sample.json", json.dumps({**SAMPLE, "sources": free}))
    assert "Ferries are free today." in render()
    assert reads["prompts/sample.json"] == 2
    project.file("prompts/answer.prompty", PROMPTY.replace("Harbour helpdesk", "Harbour desk"))
    rendered = render_case(config, prompt, None)
    assert rendered.meta["front_matter"]["name"] == "Harbour desk"
    assert reads["prompts/answer.prompty"] == 2


def test_no_caller_changes_what_the_next_one_gets(tmp_path, settled):
    project = _project(tmp_path)
    config = load_config(project.config_path)
    prompt = config.prompts["answer"]
    first = template_defaults(config, prompt)
    first["sources"].append("A needle a caller put in.")
    first["policy"] = "changed"
    assert template_defaults(config, prompt) == {**SAMPLE, "policy": POLICY}

    text = project.path("prompts/answer.prompty").read_text()
    split_prompty(text, "answer.prompty").front["model"]["parameters"]["max_tokens"] = 1
    assert split_prompty(text, "answer.prompty").front["model"]["parameters"]["max_tokens"] == 200

    rendered = render_case(config, prompt, None)
    rendered.meta["front_matter"]["model"]["api"] = "changed"
    assert render_case(config, prompt, None).meta["front_matter"]["model"]["api"] == "chat"

    doc = parse(DOTPROMPT, "answer.prompt")
    doc.defaults["sources"].append("changed")
    assert parse(DOTPROMPT, "answer.prompt").defaults["sources"] == ["The first ferry leaves at 06:40."]


def test_trial_variables_over_the_sample_render_as_before(tmp_path, settled):
    # recall's trials pass the whole case with the context and question changed: the defaults they
    # replace are not copied, the ones they keep are, and the keys keep the sample's order
    project = _project(tmp_path)
    config = load_config(project.config_path)
    prompt = config.prompts["answer"]
    case = template_defaults(config, prompt)
    trial = {**case, "sources": [{"title": "Only", "text": "Only this."}], "question": "Which?"}
    rendered = render_case(config, prompt, None, variables=trial)
    text = json.dumps(rendered.to_json())
    assert "Only this." in text
    assert "Answer briefly." in text  # the default the trial keeps
    assert "06:40" not in text  # the sample's context, which the trial replaces
    assert trial["sources"] == [{"title": "Only", "text": "Only this."}]  # not changed
    assert trial["policy"] == case["policy"] == POLICY
