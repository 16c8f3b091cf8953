"""``needle = "gold"``: the user's own fact, moved. Liu et al. ("Lost in the Middle", 2023) measured
the positional effect by moving the *gold document* among the real retrieved ones; this runs that
experiment on the recall fixture and the real prompt.

The fixture names its answer next to its variables::

    question: How long are deleted objects kept before they are purged?
    expected: "14 days"          # or a list of accepted strings, or {regex: "..."}
    gold: 0                      # optional: the gold item of the context list, counted from 0
    documents: [...]

The question stays the fixture's own; the gold item (or, for a string slot, the gold passage) is
taken out of the context and put back at each depth among the fixture's other items plus filler
shaped like them; the answer is scored against ``expected`` (a string or any string of a list:
normalised and on word boundaries, like ``contains`` scoring, because real questions are answered
in sentences; a regex: any match). Without ``gold`` the gold item is the one item, or the one
paragraph of a string slot, that contains the expected answer. For a string slot ``gold`` is the
passage itself, quoted from the text (whitespace may differ).

A gold trial's variation is the order of the fixture's other items (:class:`TrialOrders`): the fact
and the question are the same in every trial, so trial 0 keeps the retriever's order and every
later trial a seeded permutation, or a cell's trials would be one prompt asked again.

Fixtures come from pull requests: everything here is data. A regex is only compiled and matched,
bounded in length, and every mistake is a ``ConfigError`` at the fixture's line.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from needle_action.assemble.templates.fixtures import key_line
from needle_action.core.errors import ConfigError
from needle_action.core.names import GOLD_STYLE
from needle_action.core.paths import display_path, read_text
from needle_action.recall.trials.probes.lexical import contains
from needle_action.recall.trials.probes.needle import Needle

EXPECTED_KEY = "expected"
GOLD_KEY = "gold"  # the fixture key naming the gold item
MAX_PATTERN_CHARS = 500
_EXPECTED_HINT = (
    """e.g. expected: "14 days", expected: ["14 days", "two weeks"] or expected: {regex: '14\\s*days'}"""
)


@dataclass(frozen=True)
class Expected:
    """What counts as the right answer: any of ``strings``, or a match of ``pattern``."""

    strings: tuple[str, ...] = ()
    pattern: str | None = None

    @property
    def label(self) -> str:
        """How the results show it: ``14 days``, ``14 days | two weeks`` or ``/14\\s*days/``."""
        return f"/{self.pattern}/" if self.pattern is not None else " | ".join(self.strings)

    def found_in(self, text: str) -> bool:
        """True when TEXT holds the answer (normalised word-bounded match, or a regex match)."""
        if self.pattern is not None:
            return re.search(self.pattern, text) is not None
        return any(contains(text, s) for s in self.strings)


@dataclass(frozen=True)
class Gold:
    """The gold fact of a fixture: what to move, what to ask, what to accept."""

    expected: Expected
    question: str
    index: int | None  # list slot: the gold item's index in the fixture's list
    passage: str | None  # string slot: the gold passage as written in the fixture
    rest: Any  # the context without the gold: the other items, or the text minus the passage

    def needle(self, item: Any, text: str) -> Needle:
        """The trial needle: ITEM (a list slot's gold item as the template will show it, else None)
        and TEXT (its text, which locates it in the rendered prompt)."""
        return Needle(
            style=GOLD_STYLE,
            facts=(text,),
            question=self.question,
            answer=self.expected.label,
            accepted=self.expected.strings,
            pattern=self.expected.pattern,
            item=item,
        )


class _Where:
    """Error locations inside one fixture file."""

    def __init__(self, fixture: Path) -> None:
        self.file = display_path(fixture)
        try:
            self.text = read_text(fixture, what="fixture", file=self.file)
        except (OSError, ConfigError):
            self.text = ""

    def error(self, message: str, key: str | None, hint: str) -> ConfigError:
        """A ConfigError at the line of KEY in the fixture (line 1 when the key is not written)."""
        line = key_line(self.text, key) if key else None
        return ConfigError(message, file=self.file, line=line or (1 if key else None), hint=hint)


def _pattern(raw: dict[str, Any], where: _Where) -> Expected:
    if set(raw) != {"regex"} or not isinstance(raw["regex"], str) or not raw["regex"]:
        raise where.error(
            f"{EXPECTED_KEY} as a table must have exactly one key, regex, holding a non-empty string",
            EXPECTED_KEY,
            _EXPECTED_HINT,
        )
    pattern = raw["regex"]
    if len(pattern) > MAX_PATTERN_CHARS:
        raise where.error(
            f"the {EXPECTED_KEY} regex is {len(pattern)} characters long; the limit is {MAX_PATTERN_CHARS}",
            EXPECTED_KEY,
            "match the answer itself, not the whole reply",
        )
    try:
        re.compile(pattern)
    except re.error as exc:
        raise where.error(
            f"the {EXPECTED_KEY} regex does not compile: {exc}",
            EXPECTED_KEY,
            "Python re syntax; in YAML quote it with single quotes so backslashes stay as written",
        ) from None
    return Expected(pattern=pattern)


# Replies that answer nothing: an `expected` they satisfy cannot tell a hit from a miss (a mistake,
# or a pull request making its own gold probe pass: `expected: {regex: "."}`).
NON_ANSWERS = (
    "",
    "I could not find it.",
    "I don't know.",
    "The documents do not say.",
    "Yes.",
    "No.",
    "None.",
)


def _not_vacuous(expected: Expected, where: _Where) -> Expected:
    satisfied = [a for a in NON_ANSWERS if expected.found_in(a)]
    if satisfied:
        raise where.error(
            f"{EXPECTED_KEY} is satisfied by a reply that answers nothing ({satisfied[0]!r}), so it cannot tell a "
            "right answer from a wrong one",
            EXPECTED_KEY,
            'name the fact itself (e.g. "14 days"), not a yes/no or a pattern that matches anything',
        )
    return expected


def parse_expected(raw: object, where: _Where) -> Expected:
    """The fixture's ``expected`` value as an :class:`Expected`, or a ConfigError at its line."""
    return _not_vacuous(_parse_expected(raw, where), where)


def _parse_expected(raw: object, where: _Where) -> Expected:
    if isinstance(raw, dict):
        return _pattern(raw, where)
    strings = [raw] if isinstance(raw, str) else raw
    if (
        not isinstance(strings, list)
        or not strings
        or not all(isinstance(s, str) and s.strip() for s in strings)
    ):
        raise where.error(
            f"{EXPECTED_KEY} must be a non-empty string, a list of non-empty strings, or {{regex = ...}}",
            EXPECTED_KEY,
            _EXPECTED_HINT,
        )
    return Expected(strings=tuple(s.strip() for s in strings))


def _item_text(item: Any) -> str:
    if isinstance(item, dict):
        return "\n".join(str(v) for v in item.values() if isinstance(v, str | int | float))
    return str(item)


def _gold_index(items: list[Any], raw: object, expected: Expected, where: _Where, var: str) -> int:
    if raw is not None:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise where.error(
                f"{GOLD_KEY} must be the index of the gold item in {var!r} (a whole number from 0)",
                GOLD_KEY,
                f"{var!r} is a list: gold = 0 marks its first item",
            )
        if not 0 <= raw < len(items):
            raise where.error(
                f"{GOLD_KEY} = {raw} is out of range: {var!r} has {len(items)} items (0 to {len(items) - 1})",
                GOLD_KEY,
                "gold counts from 0, like the list in the fixture",
            )
        return raw
    holding = [i for i, item in enumerate(items) if expected.found_in(_item_text(item))]
    return _only_one(holding, where, ("item", "items", var), f"{GOLD_KEY} = N (counted from 0)")


def _only_one(found: list[int], where: _Where, what: tuple[str, str, str], mark: str) -> int:
    """The one index in FOUND; WHAT: (singular, plural, variable) for the error."""
    one, many, var = what
    if len(found) == 1:
        return found[0]
    if not found:
        raise where.error(
            f"no {one} of {var!r} contains the expected answer, so the gold one cannot be found",
            EXPECTED_KEY,
            f"mark it with {mark}, or check that {EXPECTED_KEY} is written as in the text",
        )
    listed = ", ".join(str(i) for i in found[:6])
    raise where.error(
        f"{len(found)} {many} of {var!r} contain the expected answer ({listed}): which one is gold is ambiguous",
        EXPECTED_KEY,
        f"mark the gold one with {mark}",
    )


def _passage_span(text: str, raw: object, expected: Expected, where: _Where, var: str) -> tuple[int, int]:
    if raw is not None:
        if not isinstance(raw, str) or not raw.split():
            raise where.error(
                f"{GOLD_KEY} must quote the gold passage of {var!r}, which is a text, not a list",
                GOLD_KEY,
                "copy the passage from the text (line breaks and spacing may differ)",
            )
        flexible = r"\s+".join(re.escape(w) for w in raw.split())
        spans = [(m.start(), m.end()) for m in re.finditer(flexible, text)]
        if len(spans) != 1:
            why = "does not appear in" if not spans else f"appears {len(spans)} times in"
            raise where.error(
                f"the {GOLD_KEY} passage {why} {var!r}",
                GOLD_KEY,
                "quote a passage that occurs exactly once (line breaks and spacing may differ)",
            )
        return spans[0]
    paragraphs = [(m.start(), m.end()) for m in re.finditer(r"\S(?:.|\n(?![ \t]*\n))*", text)]
    holding = [i for i, (a, b) in enumerate(paragraphs) if expected.found_in(text[a:b])]
    found = _only_one(holding, where, ("paragraph", "paragraphs", var), f'{GOLD_KEY} = "the passage"')
    return paragraphs[found]


def _question(variables: dict[str, Any], question_var: str, where: _Where) -> str:
    question = variables.get(question_var)
    if not isinstance(question, str) or not question.strip():
        raise where.error(
            f'needle = "gold" asks the fixture\'s own question, but {question_var!r} is not a non-empty text',
            question_var,
            f"give the fixture the real question in {question_var!r}",
        )
    return question


def resolve_gold(
    variables: dict[str, Any],
    *,
    context_var: str,
    question_var: str,
    fixture: Path | None,
    config_where: dict[str, Any],
) -> Gold:
    """The fixture's gold fact: its ``expected`` answer, its question, and the gold item (list slot)
    or passage (string slot) with the rest of the context. Every mistake is a ConfigError."""
    if fixture is None:
        raise ConfigError(
            'needle = "gold" moves a fixture\'s own fact, but this prompt has no fixture',
            **config_where,
            hint="add a fixture with the real question, the context and expected: the answer",
        )
    where = _Where(fixture)
    if EXPECTED_KEY not in variables:
        raise where.error(
            f'needle = "gold" needs the fixture to name its answer, but it has no {EXPECTED_KEY!r}',
            question_var,
            f"add {EXPECTED_KEY} next to {question_var}: {_EXPECTED_HINT}",
        )
    expected = parse_expected(variables[EXPECTED_KEY], where)
    question = _question(variables, question_var, where)
    context = variables.get(context_var)
    raw = variables.get(GOLD_KEY)
    if isinstance(context, list) and context:
        index = _gold_index(context, raw, expected, where, context_var)
        return Gold(expected, question, index, None, context[:index] + context[index + 1 :])
    if isinstance(context, str) and context.strip():
        a, b = _passage_span(context, raw, expected, where, context_var)
        rest = re.sub(r"\n[ \t]*\n(?:[ \t]*\n)+", "\n\n", context[:a] + context[b:]).strip()
        return Gold(expected, question, None, context[a:b], rest)
    raise where.error(
        f"{context_var!r} is empty: there is no gold item to move",
        context_var,
        "the fixture's context must hold the gold item and, ideally, the items retrieved with it",
    )


EXHAUSTIVE_REST = 6  # up to this many items after the leader, try every order (720) for a new one
SAMPLED_ORDERS = 32  # beyond it, this many seeded shuffles per leader (a repeat is then ~impossible)


@dataclass
class TrialOrders:
    """The order of a gold fixture's N other items in each trial: trial 0 the retriever's (as the
    fixture lists them), trial T > 0 a permutation seeded by (SEED, T), so every run asks the same.

    A later trial leads with an item no earlier trial led with while there are such (n - 1 trials),
    then with any: the first item differs, so trials differ even when the size cuts the context
    after a few items. Its order also differs from every earlier trial's while there are orders
    left (n! of them). Orders depend only on (n, seed, trial), never on which trial is built first.
    """

    n: int
    seed: int
    _orders: list[tuple[int, ...]] = field(default_factory=list)
    _unled: list[int] = field(default_factory=list)  # leaders not used in the current round

    def of(self, trial: int) -> tuple[int, ...]:
        """The order of trial TRIAL: item indices into the fixture's other items."""
        while len(self._orders) <= trial:
            self._orders.append(self._next(len(self._orders)))
        return self._orders[trial]

    def _next(self, trial: int) -> tuple[int, ...]:
        identity = tuple(range(self.n))
        if trial == 0 or self.n < 2:
            self._unled = list(range(1, self.n))
            return identity
        # seeded, not secure: a trial's order is a pure function of the seed and its index
        rng = random.Random(f"{self.seed}:gold-order:{trial}")
        if not self._unled:
            self._unled = list(range(self.n))
        leaders = sorted(self._unled, key=lambda _: rng.random())
        leaders += [i for i in range(self.n) if i not in self._unled]
        seen = set(self._orders)
        for lead in leaders:
            for rest in _orders_of([i for i in identity if i != lead], rng):
                if (lead, *rest) not in seen:
                    if lead in self._unled:
                        self._unled.remove(lead)
                    return (lead, *rest)
        # every order is taken (n! <= trial): go round them again; the builder warns that prompts repeat
        return self._orders[trial % len(seen)]


def _orders_of(items: list[int], rng: random.Random) -> Iterator[tuple[int, ...]]:
    """Orders of ITEMS to try, in a seeded order: all of them when few, else seeded shuffles."""
    if len(items) <= EXHAUSTIVE_REST:
        every = list(itertools.permutations(items))
        rng.shuffle(every)
        yield from every
        return
    for _ in range(SAMPLED_ORDERS):
        shuffled = list(items)
        rng.shuffle(shuffled)
        yield tuple(shuffled)


def answer_keys(variables: dict[str, Any]) -> dict[str, Any]:
    """The fixture keys that decide a gold result without being rendered (for the settings hash)."""
    return {k: variables.get(k) for k in (EXPECTED_KEY, GOLD_KEY)}


__all__ = ["Expected", "Gold", "TrialOrders", "answer_keys", "parse_expected", "resolve_gold"]
