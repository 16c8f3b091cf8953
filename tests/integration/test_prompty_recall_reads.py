"""`needle check` with recall on a ``.prompty`` whose sample is a ``${file:...}``: every trial
renders the template, yet this process reads the template and its sample, value and parameter
files once each and parses the front matter once (the render worker, another process, compiles the
template once and keeps it)."""

from __future__ import annotations

import json

from bench.workload import CLAUDE_DEFAULTS
from needle_action.assemble.templates import prompty
from needle_action.core import filecache
from tests.builders import Project
from tests.fakes.simulated_model import SimulatedModel, flat
from tests.needle_cli import invoke_in
from tests.reads import PROMPTY_FILES, count_calls, count_reads

CONFIG = """
[prompts.answer]
template = "prompts/answer.prompty"
context_var = "sources"
question_var = "question"
recall = { sizes = [700, 1400], depths = [0.0, 0.5, 1.0], trials = 3, max_output_tokens = 32 }
"""


def test_a_recall_run_reads_a_prompty_and_its_sample_once(tmp_path, anthropic_env, monkeypatch):
    anthropic_env.responder = SimulatedModel(flat(0.97), seed=1)
    project = (
        Project(tmp_path / "repo")
        .files(PROMPTY_FILES)
        .config(CLAUDE_DEFAULTS.format(model="claude-sonnet-5-5") + CONFIG, dedent=False)
    )
    monkeypatch.setattr(filecache, "RACY_NS", 0)  # the files as old as a checkout
    reads = count_reads(monkeypatch, project, *PROMPTY_FILES)
    front_parses = count_calls(monkeypatch, prompty, "parse_yaml")

    done = invoke_in(
        project.root, "check", "--no-cache", "--no-progress", "--json", str(tmp_path / "out.json")
    )
    assert done.exit_code in (0, 1), done.output
    cells = json.loads((tmp_path / "out.json").read_text())["prompts"][0]["recall"]["cells"]
    assert sum(c["trials"] for c in cells) == 18  # 18 trial renders, and more to fit the sizes
    assert dict(reads) == dict.fromkeys(PROMPTY_FILES, 1)
    assert len(front_parses) == 1
