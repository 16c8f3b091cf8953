"""Azure's search demo renders its answer prompt from two Jinja files with trim_blocks and
lstrip_blocks on (tests/data/real_shapes/azure-search-openai-demo, README there).

needle's request must be the one the app's ``PromptManager.build_conversation`` makes: jinja2
itself, set up as promptmanager.py sets it up, is the oracle.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import jinja2
import pytest

from needle_action.assemble.render import render_case
from needle_action.assemble.templates.fixtures import load_fixture
from needle_action.config import Config, PromptConfig

DATA = Path(__file__).resolve().parents[1] / "data" / "real_shapes" / "azure-search-openai-demo"
PROMPTS = "app/backend/approaches/prompts"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    shutil.copytree(DATA, tmp_path / "app")
    return tmp_path / "app"


def _render(root: Path, **settings: Any):
    prompt = PromptConfig(name="p", template="needle/chat_answer.j2", undefined="lenient", **settings)
    config = Config(path=root / "needle.toml", root=root, prompts={"p": prompt})
    return render_case(config, prompt, root / "typical.yaml")


def _the_apps_messages(root: Path) -> list[tuple[str, str]]:
    """What promptmanager.py's build_conversation returns for the fixture (as role, text)."""
    # the app's own setting (promptmanager.py): prompts, not HTML
    loader = jinja2.FileSystemLoader(root / PROMPTS)
    env = jinja2.Environment(loader=loader, autoescape=False, trim_blocks=True, lstrip_blocks=True)  # noqa: S701
    v = load_fixture(root / "typical.yaml")
    system = env.get_template("chat_answer.system.jinja2").render(**v).strip()
    user = env.get_template("chat_answer.user.jinja2").render(**v).strip()
    past = [(m["role"], m["content"]) for m in v["past_messages"]]
    return [("system", system), *past, ("user", user)]


def test_trim_and_lstrip_blocks_give_the_apps_own_text(root):
    out = _render(root, trim_blocks=True, lstrip_blocks=True)
    ours = [("system", out.system), *((m.role, m.content) for m in out.messages)]
    assert ours == _the_apps_messages(root)


def test_without_them_the_text_is_jinjas_default_and_differs(root):
    out = _render(root)
    theirs = _the_apps_messages(root)
    # the lines the {% if %} and {% for %} tags stood on stay behind as blank lines
    assert out.system != theirs[0][1]
    assert out.messages[-1].content.count("\n") > theirs[-1][1].count("\n")


@pytest.mark.parametrize(
    ("settings", "text"),
    [
        ({}, "  \nhi\n  \nbye"),  # needle trims the blank line at the message's start
        ({"trim_blocks": True}, "  hi\n  bye"),
        ({"trim_blocks": True, "lstrip_blocks": True}, "hi\nbye"),
    ],
)
def test_each_switch_does_what_jinjas_does(root, settings, text):
    source = "user:\n  {% if true %}\nhi\n  {% endif %}\nbye\n"
    (root / "needle/indented.j2").write_text(source)
    prompt = PromptConfig(name="p", template="needle/indented.j2", **settings)
    config = Config(path=root / "needle.toml", root=root, prompts={"p": prompt})
    jinja = jinja2.Environment(**settings)  # noqa: S701 - a prompt, not HTML
    assert jinja.from_string(source).render() == "user:\n" + text
    assert render_case(config, prompt, None).messages[0].content == text.removeprefix("  \n")


def test_a_builder_that_does_not_take_a_fixture_key_is_told_how():
    from needle_action.assemble.builder.client import BuilderSpec, builder_error

    spec = BuilderSpec.parse("app/backend/needle_builders.py:query_rewrite")
    # what the worker reports when the call itself fails: a TypeError and no frame of the builder's
    reported = {"kind": "raise", "type": "TypeError", "frames": []}
    reported["message"] = "query_rewrite() got an unexpected keyword argument 'citations'"
    err = builder_error(spec, reported)
    assert "cannot be called with the fixture's variables" in err.message
    assert "**_" in err.hint
    # the same TypeError raised inside the builder's own code keeps its traceback and hint
    inside = {**reported, "frames": [["app/backend/needle_builders.py", 7, "query_rewrite", "f(x=1)"]]}
    err = builder_error(spec, inside)
    assert "raised TypeError" in err.message
    assert err.location.line == 7
