"""Each builder's own time per call is shown after `needle budget` and `needle check`, and a builder
slower than 200 ms per call is a warning naming the likely cause (a client created or a service
called on every build: recall calls a builder hundreds of times)."""

from __future__ import annotations

import pytest

from needle_action.assemble.builder import client as builder
from tests.builders import Project
from tests.needle_cli import run_needle

BUILDERS = """
import time

def fast(question):
    return {"messages": [{"role": "user", "content": question}]}

def slow(question):
    time.sleep(0.3)  # what a client made per call, or a round trip, costs
    return {"messages": [{"role": "user", "content": question}]}
"""
CONFIG = """
[defaults]
tokenizer = "tiktoken:o200k_base"

[prompts.fast]
builder = "app/b.py:fast"
fixtures = ["fixtures/a.yaml", "fixtures/b.yaml"]

[prompts.slow]
builder = "app/b.py:slow"
fixtures = ["fixtures/a.yaml", "fixtures/b.yaml"]

[files]
builders = true
"""


@pytest.fixture
def repo(tmp_path):
    project = (
        Project(tmp_path / "repo")
        .file("app/b.py", BUILDERS)
        .fixture("fixtures/a.yaml", {"question": "When does the depot open?"})
        .fixture("fixtures/b.yaml", {"question": "Who signs the manifest?"})
        .config(CONFIG)
    )
    yield project.config_path
    builder.close_all()


@pytest.mark.parametrize("command", [["budget"], ["check", "--no-recall"]])
def test_each_builders_time_per_call_is_shown_and_a_slow_one_is_a_warning(repo, command):
    run = run_needle([*command, "--config", str(repo)], cwd=repo.parent, timeout=180)
    assert run.returncode == 0, run.stderr
    assert "builder app/b.py:fast: 2 calls, " in run.stdout
    slow = next(
        line for line in run.stdout.splitlines() if line.startswith("builder app/b.py:slow: 2 calls, ")
    )
    ms = float(slow.split(", ")[1].removesuffix(" ms per call").replace(",", ""))
    assert ms >= 300  # the sleep is a floor, whatever the machine's load
    assert "warning: the builder app/b.py:slow takes" in run.stderr
    assert "likely a client created or a service called on every build" in run.stderr
