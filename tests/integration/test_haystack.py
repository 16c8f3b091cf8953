"""Recall trials inside the real prompt shape, measured with the real tokenizer (tiktoken o200k_base)."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

from needle_action.config import PromptConfig, load_config
from needle_action.core.errors import ConfigError, TemplateError
from needle_action.core.names import NeedleStyle
from needle_action.recall.trials.haystack import HaystackBuilder, SizeTooSmall, Trial
from needle_action.recall.trials.needles import BRIDGE_RE, VALUE_RE, Needle, make_needle
from needle_action.tokens import get_counter
from tests.builders import Project

TOKENIZER = "tiktoken:o200k_base"
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)


def _tiktoken(prompt: PromptConfig, **recall) -> PromptConfig:
    return prompt.model_copy(
        update={"tokenizer": TOKENIZER, "recall": prompt.recall.model_copy(update=recall)}
    )


def _builder(config, name: str, *, seed: int = 1, **recall) -> HaystackBuilder:
    prompt = _tiktoken(config.prompts[name], **recall)
    counter = get_counter(TOKENIZER, model="gpt-4o", settings=prompt)
    return HaystackBuilder(config, prompt, counter, seed=seed)


def _needle(style: NeedleStyle = "codeword", key: object = 0) -> Needle:
    from needle_action.config import RecallSettings

    return make_needle(RecallSettings(needle=style), random.Random(f"test:{style}:{key}"))


def _full_text(trial: Trial) -> str:
    return "\n".join(trial.rendered.texts())


@pytest.fixture(scope="module")
def examples():
    return load_config(Path(__file__).resolve().parents[2] / "examples" / "needle.toml")


# --------------------------------------------------------------------------- sizes


@pytest.mark.parametrize("name", ["rag_answer", "support_agent", "summarize_ticket", "trip_planner"])
@pytest.mark.parametrize("size", [800, 3000, 12000])
def test_example_prompts_measure_the_target_size(examples, name, size):
    builder = _builder(examples, name)
    counter = builder.counter
    for depth in (0.0, 0.5, 1.0):
        trial = builder.build(size, depth, _needle("codeword", (size, depth)), trial=0)
        assert trial.prompt_tokens == counter.count_prompt(trial.rendered)  # what we report is what it is
        assert abs(trial.prompt_tokens - size) <= 0.01 * size, (name, size, depth, trial.prompt_tokens)
        assert trial.size == size
        assert trial.depth == depth


def test_slot_shapes_follow_the_fixture(examples):
    rag = _builder(examples, "rag_answer")
    assert (rag._shape.kind, rag._shape.body_key, rag._shape.title_keys) == ("list_dict", "text", ("title",))
    agent = _builder(examples, "support_agent")
    assert (agent._shape.kind, agent._shape.body_key, agent._shape.role_key) == ("list_dict", "text", "role")
    ticket = _builder(examples, "summarize_ticket")
    assert ticket._shape.kind == "string"
    trip = _builder(examples, "trip_planner")  # a Dotprompt: the {{#each notes}} items
    assert (trip._shape.kind, trip._shape.body_key, trip._shape.title_keys) == (
        "list_dict",
        "body",
        ("title",),
    )


# --------------------------------------------------------------------------- depth and offsets


@pytest.mark.parametrize("name", ["rag_answer", "support_agent", "summarize_ticket", "trip_planner"])
def test_needle_position_follows_depth(examples, name):
    builder = _builder(examples, name)
    base = builder.base_tokens()
    size = 4000
    trials = [builder.build(size, d, _needle("codeword", d), trial=3) for d in DEPTHS]
    offsets = [t.token_offset for t in trials]
    assert offsets == sorted(offsets), offsets
    assert len(set(offsets)) == len(offsets), offsets
    # depth 0: the needle opens the slot, so everything before it is the template's own text
    assert offsets[0] < base
    # depth 1: at the end of the slot, only the question (and template tail) follows
    assert offsets[-1] > size - base - 60
    # in between, the offset tracks depth over the slot (within a filler unit's length)
    slot_start, slot_end = offsets[0], offsets[-1]
    for d, off in zip(DEPTHS[1:-1], offsets[1:-1], strict=True):
        expected = slot_start + d * (slot_end - slot_start)
        assert abs(off - expected) < 0.08 * size, (d, off, expected)
    for t in trials:
        text = _full_text(t)
        assert t.needle.facts[0] in text
        assert t.needle.question in t.rendered.messages[-1].content  # the question slot is last


def test_offset_counts_the_tokens_before_the_fact(examples):
    builder = _builder(examples, "rag_answer")
    trial = builder.build(3000, 0.5, _needle(), trial=0)
    enc = builder.counter._enc
    user = trial.rendered.messages[0].content
    before = user[: user.index(trial.needle.facts[0])]
    # system text + the user text before the fact, plus chat framing (a handful of tokens)
    raw = len(enc.encode_ordinary(trial.rendered.system)) + len(enc.encode_ordinary(before))
    assert raw <= trial.token_offset <= raw + 20


def test_list_slot_needle_is_an_item_shaped_like_the_fixture(examples):
    rag = _builder(examples, "rag_answer")
    trial = rag.build(2000, 0.5, _needle(), trial=0)
    user = trial.rendered.messages[0].content
    fact = trial.needle.facts[0]
    # the needle is a whole <document> with a title, like the retrieved ones
    block = user[user.rindex("<document", 0, user.index(fact)) : user.index("</document>", user.index(fact))]
    assert 'title="' in block
    assert block.rstrip().endswith(fact)

    agent = _builder(examples, "support_agent")
    trial = agent.build(2000, 0.5, _needle("codeword", "turn"), trial=0)
    turns = [m for m in trial.rendered.messages if m.content.strip() == trial.needle.facts[0]]
    assert len(turns) == 1
    assert turns[0].role == "user"


def test_string_slot_needle_sits_at_a_sentence_boundary(examples):
    builder = _builder(examples, "summarize_ticket")
    for depth in (0.3, 0.5, 0.8):
        trial = builder.build(3000, depth, _needle("sentence", depth), trial=1)
        text = trial.rendered.messages[-1].content
        i = text.index(trial.needle.facts[0])
        before = text[:i].rstrip(" ")
        assert before[-1] in ".!?\n\"')]", repr(text[i - 40 : i])
        after = text[i + len(trial.needle.facts[0]) :]
        assert after[:1] in (" ", "\n"), repr(after[:20])


def test_distractors_are_spread_at_other_depths(examples):
    builder = _builder(examples, "rag_answer")
    needle = _needle("distractors", 1)
    trial = builder.build(5000, 0.5, needle, trial=0)
    text = _full_text(trial)
    where = {f: text.index(f) for f in (*needle.facts, *needle.distractors)}
    positions = sorted(where.values())
    assert len(positions) == 4
    gaps = [b - a for a, b in itertools.pairwise(positions)]
    assert min(gaps) > 0.1 * len(text)  # well apart, not clumped next to the needle


def test_multihop_second_fact_goes_near_the_end(examples):
    builder = _builder(examples, "support_agent")
    needle = _needle("multihop", 2)
    size = 5000
    for depth in (0.0, 0.5, 1.0):
        trial = builder.build(size, depth, needle, trial=0)
        first, second = (
            trial.rendered.messages.index(next(m for m in trial.rendered.messages if m.content.strip() == f))
            for f in needle.facts
        )
        assert first <= second
        assert second >= len(trial.rendered.messages) - 6  # among the last turns, before the question
        assert BRIDGE_RE.search(needle.facts[0]).group(0).lower() in needle.facts[1].lower()


# --------------------------------------------------------------------------- filler and values


def test_only_the_needle_brings_values_into_the_prompt(examples):
    for name in ("rag_answer", "support_agent", "summarize_ticket"):
        builder = _builder(examples, name)
        for style in ("codeword", "distractors", "multihop"):
            needle = _needle(style, name)
            trial = builder.build(6000, 0.5, needle, trial=2)
            found = set(VALUE_RE.findall(_full_text(trial)))
            expected = {
                VALUE_RE.search(f).group(0)
                for f in (*needle.facts, *needle.distractors)
                if VALUE_RE.search(f)
            }
            assert found == expected
            bridges = {b.lower() for b in BRIDGE_RE.findall(_full_text(trial))}
            wanted = {b.lower() for f in (*needle.facts, *needle.distractors) for b in BRIDGE_RE.findall(f)}
            assert bridges == wanted


def test_fixture_context_comes_first_then_generated_filler(examples):
    builder = _builder(examples, "rag_answer")
    fixture_titles = [d["title"] for d in builder.variables["documents"]]
    trial = builder.build(6000, 1.0, _needle(), trial=0)
    user = trial.rendered.messages[0].content
    positions = [user.index(f'title="{t}"') for t in fixture_titles]
    assert positions == sorted(positions)
    # the fixture's first document opens the slot
    assert user.index("<document") == user.index(f'<document index="1" title="{fixture_titles[0]}"')
    assert user.count("<document ") > len(fixture_titles) + 10  # then generated documents


def test_reproducible_by_seed_and_shared_by_trials(examples):
    needle = _needle()
    a = _builder(examples, "summarize_ticket", seed=5).build(5000, 0.5, needle, trial=1)
    b = _builder(examples, "summarize_ticket", seed=5).build(5000, 0.5, needle, trial=1)
    c = _builder(examples, "summarize_ticket", seed=5).build(5000, 0.5, needle, trial=2)
    d = _builder(examples, "summarize_ticket", seed=6).build(5000, 0.5, needle, trial=1)
    assert a.rendered.content_hash() == b.rendered.content_hash()
    # every trial of a cell uses the same filler (what prompt caching reads): only the needle differs
    assert a.rendered.content_hash() == c.rendered.content_hash()
    assert a.rendered.content_hash() != d.rendered.content_hash()  # other seed, other filler


def test_trials_of_a_cell_differ_only_from_the_needle_on(examples):
    builder = _builder(examples, "summarize_ticket")
    first, other = _needle("codeword", "first"), _needle("codeword", "other")
    a = builder.build(3000, 0.6, first, trial=0, reference=first)
    b = builder.build(3000, 0.6, other, trial=3, reference=first)
    text_a, text_b = _full_text(a), _full_text(b)
    cut = text_a.index(first.facts[0])
    assert cut > 0
    assert text_b.index(other.facts[0]) == cut
    assert text_a[:cut] == text_b[:cut]
    assert abs(a.prompt_tokens - b.prompt_tokens) <= 8  # same filler: the size moves with the needle only


def test_same_trial_shares_filler_across_depths(examples):
    builder = _builder(examples, "summarize_ticket")
    a = builder.build(4000, 0.2, _needle(), trial=4)
    b = builder.build(4000, 0.8, _needle(), trial=4)
    strip = lambda t: _full_text(t).replace(t.needle.facts[0], "")  # noqa: E731
    common = sum(1 for x, y in zip(strip(a).split(), strip(b).split(), strict=False) if x == y)
    assert common > 0.2 * len(strip(a).split())  # same hay, needle moved (prefix identical up to the needle)


# --------------------------------------------------------------------------- small configs


def _write(tmp_path: Path, template: str, fixture: str, extra: str = "") -> object:
    project = (
        Project(tmp_path).template("t.j2", template, dedent=True).fixture("f.yaml", fixture, dedent=True)
    )
    project.config(f"""
        [prompts.p]
        template = "t.j2"
        fixtures = ["f.yaml"]
        context_var = "ctx"
        question_var = "q"
        {extra}
    """)
    return load_config(project.config_path)


def test_list_of_strings_slot(tmp_path):
    config = _write(
        tmp_path,
        """\
        system:
        Answer from the notes.
        user:
        {% for n in ctx %}- {{ n }}
        {% endfor %}
        {{ q }}
        """,
        "q: What?\nctx:\n  - first note about the weather today\n  - second note about lunch\n",
    )
    builder = _builder(config, "p")
    assert builder._shape.kind == "list_str"
    trial = builder.build(1500, 0.5, _needle(), trial=0)
    assert abs(trial.prompt_tokens - 1500) <= 15
    assert f"- {trial.needle.facts[0]}\n" in trial.rendered.messages[0].content


def test_filler_globs_extend_the_fixture_before_generated_prose(tmp_path):
    Project(tmp_path).file(
        "docs/guide.md",
        "The first paragraph of our own guide explains the setup of the lab bench.\n\n"
        "The second paragraph of our guide explains cleaning the lab bench afterwards.",
    )
    config = _write(
        tmp_path,
        "user:\n{{ ctx }}\n\n{{ q }}\n",
        "q: What?\nctx: Our own ticket text opens the slot.\n",
        extra='[prompts.p.recall]\nfiller_globs = ["docs/*.md"]',
    )
    trial = _builder(config, "p").build(1200, 1.0, _needle(), trial=0)
    text = trial.rendered.messages[0].content
    own, first, second = (
        text.index(s) for s in ("Our own ticket", "The first paragraph", "The second paragraph")
    )
    assert own < first < second
    assert len(text) > text.index("cleaning the lab bench") + 1000  # then generated filler


def test_size_below_the_prompt_itself_is_a_clear_error(examples):
    builder = _builder(examples, "rag_answer")
    with pytest.raises(SizeTooSmall) as info:
        builder.build(100, 0.5, _needle(), trial=0)
    assert "smaller than prompt 'rag_answer' itself" in info.value.message
    assert info.value.hint
    assert isinstance(info.value, ConfigError)


def test_base_tokens_is_the_prompt_with_an_empty_slot(examples):
    builder = _builder(examples, "rag_answer")
    base = builder.base_tokens()
    empty = builder._render([], builder.variables["question"])
    assert base == builder.counter.count_prompt(empty)
    assert "<document" not in empty.messages[0].content
    assert 100 < base < 400


def test_missing_slots_and_unusable_fixtures_are_config_errors(tmp_path):
    config = _write(tmp_path, "user:\n{{ ctx }} {{ q }}\n", "q: What?\nctx: []\n")
    with pytest.raises(ConfigError, match="list is empty") as info:
        _builder(config, "p")
    assert info.value.hint
    prompt = config.prompts["p"].model_copy(update={"context_var": None})
    with pytest.raises(ConfigError, match="no context_var"):
        HaystackBuilder(config, prompt, get_counter(TOKENIZER, model="gpt-4o", settings=prompt), seed=0)
    config = _write(tmp_path, "user:\n{{ ctx }} {{ q }}\n", "q: What?\nctx: 42\n")
    with pytest.raises(ConfigError, match="not text or a list"):
        _builder(config, "p")


def test_template_that_hides_the_context_is_a_template_error(tmp_path):
    config = _write(
        tmp_path,
        "user:\n{{ ctx | length }} characters of context. {{ q }}\n",
        "q: What?\nctx: Some text here.\n",
    )
    with pytest.raises(TemplateError, match="does not appear in the rendered prompt"):
        _builder(config, "p").build(300, 0.5, _needle(), trial=0)


def test_anthropic_counter_sizes_with_few_count_tokens_calls(examples, monkeypatch):
    """tokenizer = "anthropic": units are pre-counted locally; only whole prompts go to count_tokens."""
    from needle_action.config import ProviderSettings
    from needle_action.tokens import AnthropicCounter
    from tests.fakes.anthropic_server import FakeAnthropic

    with FakeAnthropic() as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", fake.api_key)
        counter = AnthropicCounter(
            model="claude-sonnet-5-5",
            provider_settings=ProviderSettings(base_url=fake.base_url, max_retries=0),
        )
        prompt = examples.prompts["rag_answer"].model_copy(update={"tokenizer": "anthropic"})
        builder = HaystackBuilder(examples, prompt, counter, seed=0)
        before = fake.calls["count_tokens"]
        for depth in (0.0, 0.5, 1.0):
            trial = builder.build(6000, depth, _needle("codeword", depth), trial=0)
            assert abs(trial.prompt_tokens - 6000) <= 60
            assert trial.prompt_tokens == fake.prompt_tokens(
                trial.rendered.to_json()
            )  # the server's own count
        per_trial = (fake.calls["count_tokens"] - before) / 3
        assert per_trial <= 8  # a handful of whole-prompt counts, not one call per filler unit
