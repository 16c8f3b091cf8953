"""The block-whitespace switches cross the render worker (assemble/templates/isolate.py) like ``undefined``."""

from __future__ import annotations

import shutil
from pathlib import Path

import jinja2
import pytest

from needle_action.assemble.render import render_case
from needle_action.assemble.templates import isolate
from needle_action.assemble.templates.fixtures import load_fixture
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


PROMPTFLOW = Path(__file__).resolve().parents[1] / "data" / "real_shapes" / "promptflow"


@pytest.mark.parametrize("depth", [0.0, 0.5, 1.0])
def test_promptflows_nested_history_takes_the_needle_at_its_depth(tmp_path, depth):
    import random

    from needle_action.config import RecallSettings, load_config
    from needle_action.recall.trials.haystack import HaystackBuilder
    from needle_action.recall.trials.needles import make_needle
    from needle_action.tokens import get_counter

    root = tmp_path / "flow"
    shutil.copytree(PROMPTFLOW, root)
    (root / "needle.toml").write_text(
        '[prompts.chat]\ntemplate = "chat_markdown.jinja2"\nfixtures = ["chat.yaml"]\n'
        'context_var = "chat_history"\nquestion_var = "question"\ntokenizer = "tiktoken:o200k_base"\n'
    )
    config = load_config(root / "needle.toml")
    prompt = config.prompts["chat"]
    builder = HaystackBuilder(
        config, prompt, get_counter(prompt.tokenizer, model="gpt-4o", settings=prompt), seed=1
    )
    needle = make_needle(RecallSettings(), random.Random(f"pf:{depth}"))
    trial = builder.build(1200, depth, needle, trial=0)
    turns = [m for m in trial.rendered.messages if m.role == "assistant"]
    holding = [i for i, m in enumerate(turns) if needle.facts[0] in m.content]
    assert len(holding) == 1  # the fact is one history answer, outputs.answer, as the shape says
    assert abs(holding[0] - depth * (len(turns) - 1)) <= 1  # at its depth, on an item boundary
    assert trial.rendered.messages[-1].content == needle.question
