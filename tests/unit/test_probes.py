"""Probes as hard as the work: graded look-alikes, absent trials, and how their answers are judged
(hit, abstention, distractor answer)."""

from __future__ import annotations

import random
import statistics

import pytest

from needle_action.config import RecallSettings
from needle_action.core.names import NeedleStyle
from needle_action.recall.trials.needles import VALUE_RE, make_needle
from needle_action.recall.trials.probes.absent import ABSENT_ANSWER
from needle_action.recall.trials.probes.families import FAMILIES
from needle_action.recall.trials.probes.lexical import content_stems
from needle_action.recall.trials.probes.needle import Needle
from needle_action.recall.trials.scoring import judge

VALUE_STYLES = ("codeword", "sentence", "distractors", "absent")


def _needles(style: NeedleStyle, n: int = 300, **settings) -> list[Needle]:
    rs = RecallSettings(needle=style, **settings)
    return [make_needle(rs, random.Random(f"probe:{style}:{i}")) for i in range(n)]


def _similarity(a: str, b: str) -> float:
    """Jaccard overlap of content stems, values left out: how alike two facts read to a matcher."""
    sa, sb = content_stems(VALUE_RE.sub("", a)), content_stems(VALUE_RE.sub("", b))
    return len(sa & sb) / len(sa | sb) if sa | sb else 0.0


@pytest.mark.parametrize("style", [*VALUE_STYLES, "nonlexical"])
def test_similarity_grades_are_ordered_high_medium_low(style):
    mean = {}
    for grade in ("low", "medium", "high"):
        scores = []
        for n in _needles(style, distractors=3, similarity=grade):
            if n.absent:  # the near miss and the look-alikes mimic the fact the question asks for
                scores += [_similarity(n.question, d) for d in (n.facts[0], *n.distractors)]
            else:
                scores += [_similarity(n.facts[0].replace(n.answer, ""), d) for d in n.distractors]
        mean[grade] = statistics.mean(scores)
    print(f"\n{style}: mean overlap with what the question asks for {mean}")
    assert mean["high"] > mean["medium"] >= mean["low"], mean
    if style != "nonlexical":  # its grades are semantic: neither medium nor low shares words
        assert mean["medium"] > mean["low"], mean


@pytest.mark.parametrize("style", VALUE_STYLES)
@pytest.mark.parametrize("count", [1, 3, 8])
def test_look_alikes_differ_in_value_and_state_what_they_claim(style, count):
    for n in _needles(style, 100, distractors=count, similarity="high"):
        assert len(n.distractors) == count
        values = n.distractor_values[-count:]  # absent: its near miss comes first
        for text, value in zip(n.distractors, values, strict=True):
            assert VALUE_RE.search(text).group(0) == value
        assert n.answer not in n.distractor_values
        assert len(set(n.distractor_values)) == len(n.distractor_values)
        assert len({*n.distractors, *n.facts}) == count + len(n.facts)


def test_codeword_names_a_subject_only_when_it_has_look_alikes():
    plain = _needles("codeword", 50)
    assert all(
        not n.distractors and "for the" not in n.question and "issued to" not in n.question for n in plain
    )
    with_look_alikes = _needles("codeword", 50, distractors=2)
    subjects = {s for f in FAMILIES for s in f.subjects}
    for n in with_look_alikes:
        asked = [s for s in subjects if f" {s}" in n.question]
        assert asked
        assert not any(f" {asked[0]} " in d for d in n.distractors)


def test_absent_asks_about_a_subject_the_context_never_mentions():
    for n in _needles("absent", 300, distractors=2, similarity="high"):
        assert n.absent
        assert n.answer == ABSENT_ANSWER
        asked = next(s for f in FAMILIES for s in f.subjects if n.question == f.ask(s))
        assert not any(asked in t for t in (*n.facts, *n.distractors))
        assert len(n.distractor_values) == 3  # the near miss and two more
        assert VALUE_RE.search(n.facts[0]).group(0) == n.distractor_values[0]
        assert "Answer with only" not in n.question  # asked bare: abstaining is up to the prompt


# --------------------------------------------------------------------------- judging

ABSENT = Needle(
    style="absent",
    facts=("The access code for the north warehouse is QZT-4821-KLM.",),
    question="What is the access code for the harbour warehouse?",
    answer=ABSENT_ANSWER,
    distractor_values=("QZT-4821-KLM",),
    absent=True,
)


# answers and how they score: a table like test_scoring's (`duplicates` pairs them), another rule
@pytest.mark.parametrize(
    ("answer", "hit", "distractor"),
    [
        ("I could not find that in the documentation.", True, False),
        ("The context does not mention the harbour warehouse.", True, False),
        ("That isn't mentioned anywhere.", True, False),
        ("Unknown.", True, False),
        ("QZT-4821-KLM", False, True),  # the near miss's value: a confusion
        ("I could not find it; maybe QZT-4821-KLM?", False, True),
        ("I could not find it, probably BCD-1234-FGH.", False, False),  # names a made-up value
        ("BCD-1234-FGH", False, False),
        ("The code is 4821.", False, False),
        ("", False, False),
    ],
)
def test_absent_hits_are_abstentions_that_name_no_value(answer, hit, distractor):
    verdict = judge(answer, ABSENT, RecallSettings())
    assert (verdict.hit, verdict.distractor) == (hit, distractor)


def test_abstention_phrases_and_regex_are_configurable():
    custom = RecallSettings(abstain_phrases=["keine angabe"], abstain_regex=r"(?i)^n/?a\b")
    assert judge("Keine Angabe.", ABSENT, custom).hit
    assert judge("N/A", ABSENT, custom).hit
    assert not judge("I could not find it.", ABSENT, custom).hit  # the default list was replaced
    only_regex = RecallSettings(abstain_phrases=[], abstain_regex=r"NOT_FOUND")
    assert judge("NOT_FOUND", ABSENT, only_regex).hit
    assert not judge("unknown", ABSENT, only_regex).hit


GOLD = Needle(
    style="gold",
    facts=("doc",),
    question="How long?",
    answer="14 days | two weeks",
    accepted=("14 days", "two weeks"),
)


@pytest.mark.parametrize(
    ("answer", "hit"),
    [
        ("Deleted objects are kept for 14 days by default.", True),
        ("About two weeks; support cannot restore them after that.", True),
        ("They are kept for 114 days.", False),  # word boundaries
        ("14 day", False),
        ("I could not find that.", False),
    ],
)
def test_gold_accepts_any_expected_string_in_a_sentence(answer, hit):
    assert judge(answer, GOLD, RecallSettings(scoring="strict")).hit is hit  # scoring does not apply


def test_gold_regex_is_searched_in_the_answer():
    needle = Needle(style="gold", facts=("doc",), question="q", answer="/x/", pattern=r"(?i)\b14\s*days?\b")
    assert judge("Kept 14days.", needle, RecallSettings()).hit
    assert not judge("Kept 41 days.", needle, RecallSettings()).hit


def test_a_miss_that_repeats_a_look_alike_is_a_distractor_answer():
    n = Needle(
        style="codeword",
        facts=("The access code for the north warehouse is QZT-4821-KLM.",),
        question="What is the access code for the north warehouse?",
        answer="QZT-4821-KLM",
        distractors=("The access code for the canal warehouse is BCD-1234-FGH.",),
        distractor_values=("BCD-1234-FGH",),
    )
    rs = RecallSettings()
    assert (judge("QZT-4821-KLM", n, rs).hit, judge("QZT-4821-KLM", n, rs).distractor) == (True, False)
    assert (judge("BCD-1234-FGH", n, rs).hit, judge("BCD-1234-FGH", n, rs).distractor) == (False, True)
    assert (judge("XYZ-0000-KLM", n, rs).hit, judge("XYZ-0000-KLM", n, rs).distractor) == (False, False)
