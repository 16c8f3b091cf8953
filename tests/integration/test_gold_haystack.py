"""Gold needles inside the real prompt shape (the bundled examples, tiktoken o200k_base): the
fixture's own gold item moves to each depth among its other items, its question stays, its title
and role stay; the CLI turns a bad gold fixture into file:line, never a traceback."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from needle_action.assemble.render import render_case
from needle_action.cli import main
from needle_action.config import load_config
from needle_action.recall.trials.haystack import HaystackBuilder
from needle_action.tokens import get_counter
from tests.builders import Project

TOKENIZER = "tiktoken:o200k_base"


@pytest.fixture
def project(tmp_path) -> Project:
    p = Project(tmp_path / "ex").examples()
    return p.edit("needle.toml", 'tokenizer = "local"', f'tokenizer = "{TOKENIZER}"')


def _builder(project: Project, name: str) -> HaystackBuilder:
    config = load_config(project.config_path)
    prompt = config.prompts[name]
    prompt = prompt.model_copy(update={"recall": prompt.recall.model_copy(update={"needle": "gold"})})
    return HaystackBuilder(config, prompt, get_counter(TOKENIZER, model="gpt-4o", settings=prompt), seed=1)


def test_the_rag_gold_document_moves_among_the_retrieved_ones(project):
    builder = _builder(project, "rag_answer")
    gold = builder.gold_needle
    assert gold is not None
    assert gold.style == "gold"
    assert gold.answer == "14 days | fourteen days"
    assert gold.question.startswith("How long are deleted objects kept")
    titles_at = {}
    for depth in (0.0, 0.5, 1.0):
        trial = builder.build(1500, depth, gold, trial=0)
        user = trial.rendered.messages[-1].content
        titles = re.findall(r'<document index="\d+" title="([^"]+)">', user)
        assert titles.count("Soft delete and the recycle window") == 1  # moved, not copied
        for other in ("Restoring a deleted object", "Object versioning", "Support plans", "Replication"):
            assert other in titles  # the documents it was retrieved with stay
        assert user.rstrip().endswith(gold.question)  # the fixture's own question
        titles_at[depth] = titles.index("Soft delete and the recycle window") / (len(titles) - 1)
    assert titles_at[0.0] == 0.0, titles_at
    assert titles_at[1.0] == 1.0, titles_at
    assert 0.2 < titles_at[0.5] < 0.8, titles_at


def test_a_gold_turn_keeps_its_role(project):
    project.edit(
        "fixtures/support_agent/typical.toml", "\n[customer]", '\nexpected = "4 mm hex key"\n\n[customer]'
    )
    builder = _builder(project, "support_agent")
    trial = builder.build(1500, 0.5, builder.gold_needle, trial=0)
    turns = [m for m in trial.rendered.messages if "4 mm hex key" in m.content]
    assert len(turns) == 1
    assert turns[0].role == "assistant"


def test_a_gold_passage_moves_through_a_string_slot(project):
    fixture = "fixtures/summarize_ticket/ops-4471.yaml"
    project.edit(
        fixture,
        "request: Summarize",
        "expected: server-side copy\ngold: 'Storage team says per-prefix limits cannot be raised per customer.'\nrequest: Summarize",
    )
    builder = _builder(project, "summarize_ticket")
    gold = builder.gold_needle
    assert gold.facts[0].startswith("Storage team says per-prefix limits")
    for depth, where in ((0.0, "start"), (1.0, "end")):
        text = builder.build(1800, depth, gold, trial=0).rendered.messages[-1].content
        assert text.count("Storage team says per-prefix limits") == 1
        thread = text.split("Ticket OPS-4471", 1)[1].strip()
        if where == "start":
            assert thread.startswith("Storage team says"), thread[:80]
        else:
            before_request = " ".join(thread.rsplit("Summarize this ticket", 1)[0].split())
            assert before_request.endswith("limits cannot be raised per customer."), thread[-200:]


@pytest.mark.parametrize(
    ("edit", "where", "words"),
    [
        (('expected: ["14 days", "fourteen days"]\n', ""), "typical.yaml:", "has no 'expected'"),
        (("gold: 0\n", "gold: 9\n"), "typical.yaml:7:", "gold = 9 is out of range"),
        (
            ('expected: ["14 days", "fourteen days"]', "expected: {regex: '14 (days'}"),
            "typical.yaml:6:",
            "regex does not compile",
        ),
    ],
)
def test_a_bad_gold_fixture_is_a_file_line_error(project, edit, where, words):
    project.edit("fixtures/rag_answer/typical.yaml", *edit)
    result = CliRunner().invoke(
        main, ["recall", "--config", str(project.config_path), "--prompt", "rag_answer", "--no-progress"]
    )
    assert result.exit_code == 2, result.output
    assert where in result.output, result.output
    assert words in result.output, result.output
    assert "hint:" in result.output
    assert "Traceback" not in result.output


# ---- independent trials: the fact and the question are the same every trial, the order is not

GOLD_TITLE = "Soft delete and the recycle window"
OTHERS = [
    "Restoring a deleted object",
    "Object versioning",
    "Support plans",
    "Legal hold and retention locks",
    "Replication",
]


def _titles(trial) -> list[str]:
    return re.findall(r'<document index="\d+" title="([^"]+)">', trial.rendered.messages[-1].content)


def _gold_at(titles: list[str]) -> float:
    return titles.index(GOLD_TITLE) / (len(titles) - 1)


@pytest.mark.parametrize("size", [576, 1500])  # the demo's size (the fixture alone fills it), and filler
def test_gold_trials_of_a_cell_are_distinct_prompts_in_reproducible_orders(project, size):
    builder = _builder(project, "rag_answer")
    gold = builder.gold_needle
    again = _builder(project, "rag_answer")  # a fresh run with the same seed, built in another order
    for depth in (0.0, 0.5, 1.0):
        trials = [builder.build(size, depth, gold, trial=t) for t in range(4)]
        hashes = [t.rendered.content_hash() for t in trials]
        assert len(set(hashes)) == 4, (size, depth)  # four prompts, not one asked four times
        others = [[x for x in _titles(t) if x != GOLD_TITLE][:5] for t in trials]  # generated filler after
        # trial 0 keeps the retriever's order; the others lead with a document no earlier trial led with
        assert others[0] == OTHERS[: len(others[0])], others[0]
        assert len({o[0] for o in others}) == 4, others
        for t in trials:
            assert _titles(t).count(GOLD_TITLE) == 1  # moved, not copied
            # a word more may open a document (its framing too): within 2%, not within a token
            assert abs(t.prompt_tokens - size) <= size // 50, (t.prompt_tokens, size)
        at = [_gold_at(_titles(t)) for t in trials]
        assert all(a == depth for a in at) if depth in (0.0, 1.0) else all(0.2 < a < 0.8 for a in at), at
        rebuilt = [again.build(size, depth, gold, trial=t).rendered.content_hash() for t in (3, 1, 2, 0)]
        assert rebuilt == [hashes[3], hashes[1], hashes[2], hashes[0]]
        for t in range(4):  # what a prompt built in code is sent ahead is the same trial
            variables = builder.trial_variables(size, depth, gold, t)
            ahead = render_case(builder.config, builder.prompt, builder.fixture_path, variables=variables)
            assert ahead.content_hash() == hashes[t]
    assert builder.warnings == []


def test_a_gold_trial_keeps_its_order_at_every_depth_and_the_seed_decides_it(project):
    builder = _builder(project, "rag_answer")
    gold = builder.gold_needle

    def order(b: HaystackBuilder, depth: float, trial: int) -> list[str]:
        return [x for x in _titles(b.build(1500, depth, gold, trial=trial)) if x != GOLD_TITLE][:5]

    for trial in range(3):
        orders = [order(builder, d, trial) for d in (0.0, 0.25, 0.5, 0.75, 1.0)]
        assert all(o == orders[0] for o in orders), orders  # the same hay: a shared prefix for KV reuse
        assert sorted(orders[0]) == sorted(OTHERS)
    config = load_config(project.config_path)
    prompt = config.prompts["rag_answer"]
    counter = get_counter(TOKENIZER, model="gpt-4o", settings=prompt)
    other_seed = HaystackBuilder(config, prompt, counter, seed=2)
    assert order(other_seed, 0.5, 0) == OTHERS  # trial 0 is the retriever's order whatever the seed
    assert [order(other_seed, 0.5, t) for t in (1, 2, 3)] != [order(builder, 0.5, t) for t in (1, 2, 3)]


def test_gold_trials_that_cannot_differ_say_so_once(project, capsys):
    fixture = project.path("fixtures/rag_answer/typical.yaml")
    text = fixture.read_text(encoding="utf-8")
    fixture.write_text(text.split("- title: Object versioning")[0], encoding="utf-8")  # gold + 1 other
    builder = _builder(project, "rag_answer")
    gold = builder.gold_needle
    config = load_config(project.config_path)
    as_is = render_case(config, config.prompts["rag_answer"], fixture)
    size = builder.counter.count_prompt(as_is) - 20  # the fixture's two documents fill it: no filler
    for depth in (0.0, 1.0):
        built = [builder.build(size, depth, gold, trial=t).rendered.content_hash() for t in range(3)]
        assert len(set(built)) == 1  # one other document: nothing to reorder, no filler to differ in
    err = capsys.readouterr().err
    assert err.count("warning:") == 1, err
    assert "gold trials 0 and 1 of prompt 'rag_answer'" in err
    assert "1 item(s) besides the gold one" in err
    assert "Add the other items retrieved with the gold one" in err
    assert len(builder.warnings) == 1
    assert "count more than once" in builder.warnings[0]
    # with room for generated filler the same fixture's trials differ again, and nothing is said
    quiet = _builder(project, "rag_answer")
    assert len({quiet.build(1500, 0.5, gold, trial=t).rendered.content_hash() for t in range(3)}) == 3
    assert quiet.warnings == []
