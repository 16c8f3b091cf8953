"""Scoring a model's answer against the needle: a hit or a miss, and whether a miss repeated a
look-alike's value (precision).

- ``strict`` (default): the whole answer equals the expected value after normalisation: surrounding
  whitespace trimmed, case folded, punctuation turned into spaces and runs of spaces collapsed. So
  ``"**qzt-4821-klm**."`` counts for ``QZT-4821-KLM``, but ``"The code is QZT-4821-KLM."`` does not:
  the question asked for the value alone, and following that instruction is part of recall.
- ``contains``: the normalised value appears anywhere in the normalised answer, on word boundaries.
- ``regex``: ``answer_regex`` from the config. ``{value}`` in it is replaced by the escaped expected
  value and a hit is any match; else a named group ``(?P<value>...)`` is extracted and compared
  strictly; else the whole match is compared strictly.

Two styles bring their own target, whatever ``scoring`` says:

- ``gold``: the fixture's ``expected``: any accepted string on word boundaries (``contains``: real
  questions are answered in sentences), or any match of its regex;
- ``absent``: a hit is an abstention (:func:`~needle_action.recall.trials.probes.absent.abstained`).

A miss that contains a look-alike's value (a distractor's, or an absent trial's near miss) is
counted as a **distractor answer**: the model found something, just not the right thing.

A reply that is a **tool call** instead of text (the prompt sends its tools, and an agent model may
call one rather than answer) is a miss, counted apart ("answered with a tool call in 3/20"): not
an empty answer, not an abstention, whatever text came with the call.

**Structured output.** A request that forces a JSON schema (``output_config.format``, OpenAI's
``response_format``, a Dotprompt's ``output.schema``) is sent as the application sends it, so the
model answers in JSON; the answer judged is then the text inside that JSON (:func:`answer_in_json`:
its string and number values, one a line), so ``{"answer": "QZT-4821-KLM"}`` is a hit under
``strict`` scoring too. A request that forces a tool (``tool_choice`` any or tool) is answered by a
call: its input, read the same way, is the answer, not a tool-call miss.

Raw answers are kept by the engine; this module only judges them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from needle_action.config import RecallSettings
from needle_action.core.dataformats import DataError, parse_json
from needle_action.core.names import GOLD_STYLE
from needle_action.recall.trials.probes.absent import DEFAULT_ABSTAIN_PHRASES, abstained
from needle_action.recall.trials.probes.lexical import contains, normalise
from needle_action.recall.trials.probes.needle import Needle

# Keep the answer bounded before regex work: answers are short by construction (max_output_tokens),
# but a misbehaving server could send anything.
_MAX_ANSWER_CHARS = 4000

__all__ = ["Judgement", "answer_in_json", "judge", "normalise", "score"]


@dataclass(frozen=True)
class Judgement:
    """How an answer was judged: a hit (for ``absent``: an abstention), and whether it repeated a
    look-alike's value."""

    hit: bool
    distractor: bool = False  # a miss that repeats a look-alike's value
    tool_call: bool = False  # a miss: the model called a tool instead of answering


def _strict(answer_text: str, expected: str) -> bool:
    return normalise(answer_text) == normalise(expected) != ""


def _regex(answer_text: str, expected: str, pattern: str) -> bool:
    if "{value}" in pattern:
        return re.search(pattern.replace("{value}", re.escape(expected)), answer_text) is not None
    match = re.search(pattern, answer_text)
    if match is None:
        return False
    if "value" in match.re.groupindex:
        return _strict(match.group("value") or "", expected)
    return _strict(match.group(0), expected)


def _value_hit(answer_text: str, needle: Needle, settings: RecallSettings) -> bool:
    mode = settings.scoring
    if mode == "strict":
        return _strict(answer_text, needle.answer)
    if mode == "contains":
        return contains(answer_text, needle.answer)
    if mode == "regex":
        # validated at config load (present and compiles); keep a guard for programmatic settings
        if not settings.answer_regex:
            raise ValueError("scoring = 'regex' needs answer_regex")
        return _regex(answer_text, needle.answer, settings.answer_regex)
    raise ValueError(f"unknown scoring mode {mode!r}")


def _gold_hit(answer_text: str, needle: Needle) -> bool:
    if needle.pattern is not None:
        return re.search(needle.pattern, answer_text) is not None
    return any(contains(answer_text, s) for s in needle.accepted or (needle.answer,))


_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*)\n```$", re.S)


def _leaves(value: Any, out: list[str]) -> None:
    if isinstance(value, dict):
        for v in value.values():
            _leaves(v, out)
    elif isinstance(value, list):
        for v in value:
            _leaves(v, out)
    elif isinstance(value, str | int | float) and not isinstance(value, bool):
        out.append(str(value))


def answer_in_json(text: str) -> str:
    """The text inside a JSON answer (an object or array, fenced or not): its string and number
    values, one a line; TEXT itself when it is not JSON."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body.startswith(("{", "[")):
        return text
    try:
        value = parse_json(body)  # nesting bounded: a model's "[[[[..." is text, not a crash
    except DataError:
        return text
    leaves: list[str] = []
    _leaves(value, leaves)
    return "\n".join(leaves)


def judge(
    answer_text: str, needle: Needle, settings: RecallSettings, *, tool_call: str | None = None
) -> Judgement:
    """Whether ANSWER_TEXT recalls NEEDLE (for ``absent``: abstains), and whether a miss repeated a
    look-alike's value. A reply that is a call of the tool TOOL_CALL is a miss (not an abstention,
    not a look-alike), whatever text came with it."""
    if tool_call is not None:
        return Judgement(False, tool_call=True)
    raw = (answer_text or "")[:_MAX_ANSWER_CHARS]
    answer_text = answer_in_json(raw)
    if answer_text is raw:  # not JSON: judged as it is
        return _judge_text(raw, needle, settings)
    return _judge_text(answer_text, needle, settings, values=True)


def _judge_text(
    answer_text: str, needle: Needle, settings: RecallSettings, *, values: bool = False
) -> Judgement:
    """ANSWER_TEXT judged; VALUES: it holds a JSON answer's values, one a line, each an answer too."""
    confused = any(contains(answer_text, v) for v in needle.distractor_values)
    if needle.absent:
        phrases = settings.abstain_phrases
        hit = not confused and abstained(
            answer_text,
            phrases=DEFAULT_ABSTAIN_PHRASES if phrases is None else phrases,
            pattern=settings.abstain_regex,
        )
        return Judgement(hit, confused)
    if needle.style == GOLD_STYLE:
        hit = _gold_hit(answer_text, needle)
    else:  # a JSON answer's values are each an answer too (strict scoring of {"answer": ..., ...})
        texts = [answer_text, *answer_text.splitlines()] if values else [answer_text]
        hit = any(_value_hit(t, needle, settings) for t in dict.fromkeys(texts))
    return Judgement(hit, confused and not hit)


def score(answer_text: str, needle: Needle, settings: RecallSettings) -> bool:
    """True when ANSWER_TEXT counts as recalling NEEDLE under ``settings.scoring``."""
    return judge(answer_text, needle, settings).hit
