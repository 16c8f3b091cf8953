"""Needles: fresh unguessable values per trial, reproducible from the seed, every style well formed."""

from __future__ import annotations

import random

import pytest

from needle_action.config import NeedleSpec, RecallSettings
from needle_action.core.errors import ConfigError
from needle_action.core.names import NeedleStyle
from needle_action.recall.trials.needles import BRIDGE_RE, VALUE_RE, Needle, make_needle, make_value

STYLES = ("codeword", "sentence", "distractors", "multihop")


def _needles(style: NeedleStyle, seed: int, n: int) -> list[Needle]:
    settings = RecallSettings(needle=style)
    return [make_needle(settings, random.Random(f"{seed}:{i}")) for i in range(n)]


@pytest.mark.parametrize("style", STYLES)
def test_every_style_hides_its_answer_in_a_fact_and_asks_for_it_alone(style):
    for needle in _needles(style, 1, 200):
        assert needle.style == style
        assert VALUE_RE.fullmatch(needle.answer), needle.answer
        assert needle.answer in needle.facts[-1]  # the value is stated in the context...
        assert needle.answer not in needle.question  # ...never in the question
        assert not VALUE_RE.search(needle.question)
        assert "Answer with only the" in needle.question
        assert needle.question.count("?") == 1
        for d in needle.distractors:
            m = VALUE_RE.search(d)
            assert m
            assert m.group(0) != needle.answer


@pytest.mark.parametrize("style", STYLES)
def test_values_are_unique_across_trials_and_reproducible_by_seed(style):
    a = _needles(style, 7, 500)
    b = _needles(style, 7, 500)
    c = _needles(style, 8, 500)
    assert a == b  # same seed, same needles
    answers = [n.answer for n in a]
    assert len(set(answers)) == len(answers)  # fresh value per trial
    assert not set(answers) & {n.answer for n in c}  # another seed, other values


def test_values_use_consonants_only_so_they_never_spell_words():
    values = [make_value(random.Random(i)) for i in range(2000)]
    letters = "".join(v[:3] + v[-3:] for v in values)
    assert not set(letters) & set("AEIOUY")
    assert len(set(values)) == len(values)


def test_distractors_are_look_alikes_about_other_subjects():
    for needle in _needles("distractors", 3, 100):
        assert len(needle.distractors) == 3
        shared = set(needle.facts[0].split()) & set.intersection(
            *(set(d.split()) for d in needle.distractors)
        )
        assert len(shared) >= 3  # same template...
        assert len({needle.facts[0], *needle.distractors}) == 4  # ...different subjects and values
        # the question names the subject of the real fact, none of the distractors' subjects
        subject_words = set(needle.facts[0].split()) - shared
        assert any(w.rstrip(".") in needle.question for w in subject_words if not VALUE_RE.search(w))


def test_multihop_needs_both_facts():
    for needle in _needles("multihop", 5, 100):
        first, second = needle.facts
        key = BRIDGE_RE.search(first).group(0).lower()
        assert key in second.lower()  # fact B is about the key fact A names
        assert not VALUE_RE.search(first)  # fact A alone does not give the value
        assert BRIDGE_RE.search(needle.question) is None  # the question does not give the key
        # decoys state other keys' values: without fact A, B is ambiguous
        assert len(needle.distractors) == 2
        for decoy in needle.distractors:
            assert BRIDGE_RE.search(decoy).group(0).lower() != key
            assert VALUE_RE.search(decoy).group(0) != needle.answer


def test_custom_needles_substitute_a_fresh_value():
    settings = RecallSettings(
        needle="custom",
        needles=[
            NeedleSpec(fact="The staging password is {value}.", question="What is the staging password?")
        ],
    )
    a = make_needle(settings, random.Random(1))
    b = make_needle(settings, random.Random(2))
    assert a.style == "custom"
    assert a.facts == (f"The staging password is {a.answer}.",)
    assert a.question == "What is the staging password?"
    assert VALUE_RE.fullmatch(a.answer)
    assert a.answer != b.answer


def test_custom_answer_template_is_honoured():
    settings = RecallSettings(
        needle="custom",
        needles=[
            NeedleSpec(fact="Room {value} is free.", question="Which room is free?", answer="room {value}")
        ],
    )
    needle = make_needle(settings, random.Random(3))
    assert needle.answer.startswith("room ")
    assert VALUE_RE.search(needle.answer)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            NeedleSpec(fact="The password is secret.", question="What is the password?"),
            "must contain {value}",
        ),
        (NeedleSpec(fact="It is {value}.", question="Is it {value}?"), "give the answer away"),
    ],
)
def test_bad_custom_needles_are_config_errors(spec, message):
    with pytest.raises(ConfigError, match=message) as info:
        make_needle(RecallSettings(needle="custom", needles=[spec]), random.Random(0))
    assert info.value.hint
