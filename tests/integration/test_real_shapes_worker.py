"""The block-whitespace switches cross the render worker (assemble/isolate.py) like ``undefined``."""

from __future__ import annotations

import shutil
from pathlib import Path

import jinja2

from needle_action.assemble import isolate, load_fixture, render_case
from needle_action.config import Config, PromptConfig

DATA = Path(__file__).resolve().parents[1] / "data" / "real_shapes" / "azure-search-openai-demo"


def test_trim_and_lstrip_blocks_reach_the_worker(tmp_path):
    assert isolate.available()
    root = tmp_path / "app"
    shutil.copytree(DATA, root)
    prompts = root / "app/backend/approaches/prompts"
    # the app's own Environment (promptmanager.py): prompts, not HTML
    env = jinja2.Environment(  # noqa: S701
        loader=jinja2.FileSystemLoader(prompts), trim_blocks=True, lstrip_blocks=True
    )
    user = env.get_template("chat_answer.user.jinja2").render(**load_fixture(root / "typical.yaml")).strip()
    for blocks, same in ((True, True), (False, False)):
        prompt = PromptConfig(
            name="p",
            template="needle/chat_answer.j2",
            undefined="lenient",
            trim_blocks=blocks,
            lstrip_blocks=blocks,
        )
        config = Config(path=root / "needle.toml", root=root, prompts={"p": prompt})
        out = render_case(config, prompt, root / "typical.yaml")
        assert (out.messages[-1].content == user) is same
