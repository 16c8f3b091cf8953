"""Scoring a model's answer against the needle.

- ``strict`` (default): the whole answer equals the expected value after normalisation: surrounding
  whitespace trimmed, case folded, punctuation turned into spaces and runs of spaces collapsed. So
  ``"**qzt-4821-klm**."`` counts for ``QZT-4821-KLM``, but ``"The code is QZT-4821-KLM."`` does not:
  the question asked for the value alone, and following that instruction is part of recall.
- ``contains``: the normalised value appears anywhere in the normalised answer, on word boundaries.
- ``regex``: ``answer_regex`` from the config. ``{value}`` in it is replaced by the escaped expected
  value and a hit is any match; else a named group ``(?P<value>...)`` is extracted and compared
  strictly; else the whole match is compared strictly.

Raw answers are kept by the engine; this module only decides hit or miss.
"""

from __future__ import annotations

import re
import unicodedata

from needle_action.config import RecallSettings
from needle_action.recall.needles import Needle

_PUNCT_OR_SPACE = re.compile(r"[\W_]+", re.UNICODE)
# Keep the answer bounded before regex work: answers are short by construction (max_output_tokens),
# but a misbehaving server could send anything.
_MAX_ANSWER_CHARS = 4000


def normalise(text: str) -> str:
    """Casefolded words separated by single spaces; punctuation and markup are separators."""
    text = unicodedata.normalize("NFKC", text or "")
    return _PUNCT_OR_SPACE.sub(" ", text.casefold()).strip()


def _strict(answer_text: str, expected: str) -> bool:
    return normalise(answer_text) == normalise(expected) != ""


def _contains(answer_text: str, expected: str) -> bool:
    want = normalise(expected)
    return bool(want) and f" {want} " in f" {normalise(answer_text)} "


def _regex(answer_text: str, expected: str, pattern: str) -> bool:
    if "{value}" in pattern:
        return re.search(pattern.replace("{value}", re.escape(expected)), answer_text) is not None
    match = re.search(pattern, answer_text)
    if match is None:
        return False
    if "value" in match.re.groupindex:
        return _strict(match.group("value") or "", expected)
    return _strict(match.group(0), expected)


def score(answer_text: str, needle: Needle, settings: RecallSettings) -> bool:
    """True when ANSWER_TEXT counts as recalling NEEDLE under ``settings.scoring``."""
    answer_text = (answer_text or "")[:_MAX_ANSWER_CHARS]
    mode = settings.scoring
    if mode == "strict":
        return _strict(answer_text, needle.answer)
    if mode == "contains":
        return _contains(answer_text, needle.answer)
    if mode == "regex":
        # validated at config load (present and compiles); keep a guard for programmatic settings
        if not settings.answer_regex:
            raise ValueError("scoring = 'regex' needs answer_regex")
        return _regex(answer_text, needle.answer, settings.answer_regex)
    raise ValueError(f"unknown scoring mode {mode!r}")
