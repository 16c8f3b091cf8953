"""Dotprompt files through the real render worker (assemble/templates/isolate.py), as every render runs:
the example, a hostile template stopped by the metered render, and the worker still serving after."""

from __future__ import annotations

import time

import pytest

from needle_action.assemble.render import render_case
from needle_action.assemble.templates.handlebars import MAX_STEPS
from needle_action.config import Config, PromptConfig, load_config
from needle_action.core.errors import TemplateError
from tests.builders import EXAMPLES, Project


def test_the_example_renders_in_the_worker():
    config = load_config(EXAMPLES / "needle.toml")
    prompt = config.prompts["trip_planner"]
    cases = [render_case(config, prompt, fx) for fx in config.fixture_paths(prompt)]
    assert all(c.system and c.system.startswith("You are the trip planning assistant") for c in cases)
    assert [m.role for c in cases for m in c.messages] == ["user", "user"]


@pytest.mark.slow  # ~3 s: a million block bodies in the worker
def test_a_loop_bomb_stops_with_its_error_and_the_worker_serves_on(tmp_path):
    project = (
        Project(tmp_path)
        .file(
            "prompts/bomb.prompt",
            "---\nmodel: m\n---\n{{#each xs}}{{#each ../xs}}{{#each ../../xs}}x{{/each}}{{/each}}{{/each}}\n",
        )
        .file("prompts/ok.prompt", '{{role "system"}}\nS\n{{role "user"}}\n{{q}}\n')
        .fixture("fixtures/xs.json", {"xs": list(range(300)), "q": "why?"})
    )
    prompts = {n: PromptConfig(name=n, template=f"prompts/{n}.prompt") for n in ("bomb", "ok")}
    config = Config(path=project.config_path, root=project.root, prompts=prompts)
    fixture = project.path("fixtures/xs.json")
    start = time.monotonic()
    try:
        render_case(config, prompts["bomb"], fixture)
    except TemplateError as exc:
        message = exc.format()
    else:
        raise AssertionError("27 million block bodies rendered without an error")
    assert "prompts/bomb.prompt" in message
    # the step budget stops it first; on a slow machine the worker's timer may: both are errors
    assert f"more than {MAX_STEPS:,} block bodies" in message or "longer than" in message, message
    assert time.monotonic() - start < 30
    ok = render_case(config, prompts["ok"], fixture)
    assert ok.system == "S"
    assert [(m.role, m.content) for m in ok.messages] == [("user", "why?")]
