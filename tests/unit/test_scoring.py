"""Scoring: strict (exact after normalisation), contains, regex."""

from __future__ import annotations

from typing import Literal

import pytest

from needle_action.config import RecallSettings
from needle_action.recall.trials.needles import Needle
from needle_action.recall.trials.scoring import normalise, score

NEEDLE = Needle(
    style="codeword",
    facts=("The code is QZT-4821-KLM.",),
    question="What is the code?",
    answer="QZT-4821-KLM",
)


def _s(mode: Literal["strict", "contains", "regex"], regex: str | None = None) -> RecallSettings:
    return RecallSettings(scoring=mode, answer_regex=regex)


# answers and how they score: a table like test_probes' (`duplicates` pairs them), another rule
@pytest.mark.parametrize(
    ("answer", "strict", "contains"),
    [
        ("QZT-4821-KLM", True, True),
        ("  qzt-4821-klm\n", True, True),
        ("QZT-4821-KLM.", True, True),
        ("**QZT-4821-KLM**", True, True),
        ("`QZT-4821-KLM`", True, True),
        ('"QZT 4821 KLM"', True, True),
        ("The code is QZT-4821-KLM.", False, True),
        ("Answer: QZT-4821-KLM", False, True),
        ("QZT-4821-KLX", False, False),
        ("QZT-4821", False, False),
        ("XQZT-4821-KLM", False, False),  # contains only counts whole words
        ("QZT-4821-KLMN", False, False),
        ("", False, False),
        ("I could not find it.", False, False),
    ],
)
def test_strict_and_contains(answer, strict, contains):
    assert score(answer, NEEDLE, _s("strict")) is strict
    assert score(answer, NEEDLE, _s("contains")) is contains


def test_regex_with_value_placeholder_escapes_the_value():
    s = _s("regex", r"(?i)code\W+{value}\b")
    assert score("Code: QZT-4821-KLM", NEEDLE, s)
    assert not score("Code: QZT-4821-KLX", NEEDLE, s)
    assert not score("QZT-4821-KLM", NEEDLE, s)  # the pattern demands the word "code"


def test_regex_with_named_group_compares_the_group_strictly():
    s = _s("regex", r"(?i)answer:\s*(?P<value>\S+)")
    assert score("Answer: qzt-4821-klm", NEEDLE, s)
    assert not score("Answer: QZT-4821-KLX", NEEDLE, s)
    assert not score("no answer here", NEEDLE, s)


def test_regex_without_group_compares_the_whole_match():
    s = _s("regex", r"[A-Z]{3}-\d{4}-[A-Z]{3}")
    assert score("I think it is QZT-4821-KLM, yes", NEEDLE, s)
    assert not score("I think it is ABC-1234-DEF", NEEDLE, s)


def test_normalise():
    assert normalise("  Hello,   WORLD!! ") == "hello world"
    assert normalise("ＱＺＴ－４８２１") == "qzt 4821"  # full-width forms fold to ASCII
    assert normalise(None) == ""


def test_oversized_answers_are_bounded():
    assert not score("x" * 100_000 + "QZT-4821-KLM", NEEDLE, _s("contains"))


def test_a_tool_call_is_a_miss_of_its_own_kind():
    from needle_action.recall.trials.scoring import judge as judge_answer

    plain = judge_answer(NEEDLE.answer, NEEDLE, RecallSettings())
    called = judge_answer(NEEDLE.answer, NEEDLE, RecallSettings(), tool_call="search")
    assert plain.hit
    assert not plain.tool_call
    assert not called.hit
    assert called.tool_call
    assert not called.distractor


@pytest.mark.parametrize(
    ("answer", "hit"),
    [
        ('{"reply": "QZT-4821-KLM"}', True),
        ('{"reply": "QZT-4821-KLM", "sure": true, "notes": ["from the notes"]}', True),
        ('```json\n{"reply": "qzt-4821-klm"}\n```', True),
        ('[{"value": "QZT-4821-KLM"}]', True),
        ('{"reply": "I could not find it"}', False),
        ('{"reply": "QZT-4821-KLM"', False),  # not JSON: judged as the text it is
    ],
)
def test_a_json_answer_is_read_inside_under_strict_scoring(answer, hit):
    assert score(answer, NEEDLE, _s("strict")) is hit


def test_answer_in_json_keeps_text_that_is_not_json():
    from needle_action.recall.trials.scoring import answer_in_json

    assert answer_in_json("QZT-4821-KLM.") == "QZT-4821-KLM."
    assert answer_in_json('{"a": {"b": "x", "n": 7}, "ok": false}') == "x\n7"


def test_a_deeply_nested_json_answer_is_judged_as_text_not_a_crash():
    # a misbehaving model's "[[[[..." (well inside the answer cap) once raised RecursionError
    from needle_action.recall.trials.scoring import answer_in_json

    deep = "[" * 3000 + "]" * 3000
    assert answer_in_json(deep) is deep
    assert answer_in_json('[["QZT-4821-KLM"]]') == "QZT-4821-KLM"
