"""Needles: the facts hidden in the haystack, and the questions that ask for them.

Every needle carries a fresh value shaped like ``QZT-4821-KLM`` (:data:`VALUE_RE`): three consonants,
four digits, three consonants. About 6.4e11 possible values, no vowels so no value spells a word, and a
shape that the filler is scrubbed of, so a model can only answer by actually finding the fact.
Values come from the ``random.Random`` the engine passes in, so a run is reproducible from its seed.

Styles (``[recall] needle = ...``):

- ``codeword``: "The secret launch codeword is QZT-4821-KLM." / "What is the secret launch codeword?"
- ``sentence``: a natural sentence that blends into business prose (a ticket, invoice, tracking number).
- ``distractors``: the needle plus three look-alikes about other subjects (other warehouses, other
  containers...) spread at other depths; the question asks for exactly one of them.
- ``multihop``: fact A at the trial depth links an entity to a key ("Project Heron was assigned locker
  4471."), fact B near the end gives the value for that key ("Locker 4471 holds the recovery code ...").
  Two decoy B facts for other lockers make the hop necessary: B alone does not say which locker is meant.
- ``custom``: the user's own ``[[recall.needles]]`` (fact / question / answer with ``{value}``).

Every question ends by asking for the value alone, which is what strict scoring expects.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from needle_action.config import RecallSettings
from needle_action.errors import ConfigError

VALUE_RE: re.Pattern[str] = re.compile(r"\b[A-Z]{3}-\d{4}-[A-Z]{3}\b")

# Multi-hop bridge keys ("locker 4471"): the link between fact A and fact B. Filler is scrubbed of this
# shape too, so the only bridge in a prompt is the one we put there.
BRIDGE_NOUNS = ("locker", "cabinet", "drawer", "mailbox")
BRIDGE_RE: re.Pattern[str] = re.compile(r"\b(?:locker|cabinet|drawer|mailbox) \d{4}\b", re.IGNORECASE)

# Consonants only: a value never spells a word, so it cannot be guessed from language.
_LETTERS = "BCDFGHJKLMNPQRSTVWXZ"


@dataclass(frozen=True)
class Needle:
    style: str  # codeword | sentence | distractors | multihop | custom
    facts: tuple[str, ...]  # inserted in the context; multihop: (fact at the trial depth, fact near the end)
    question: str  # goes into the prompt's question slot
    answer: str  # expected answer (the scoring target)
    distractors: tuple[str, ...] = ()  # look-alike facts with other values, placed at other depths


def make_value(rng: random.Random) -> str:
    """A fresh ``ABC-1234-DEF`` value drawn from RNG."""
    head = "".join(rng.choice(_LETTERS) for _ in range(3))
    tail = "".join(rng.choice(_LETTERS) for _ in range(3))
    return f"{head}-{rng.randrange(10000):04d}-{tail}"


def _values(rng: random.Random, n: int) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        v = make_value(rng)
        if v not in out:
            out.append(v)
    return out


# --- codeword ---------------------------------------------------------------------------------

# (subject, what to call it in "Answer with only the ...")
_CODEWORDS = (
    ("secret launch codeword", "codeword"),
    ("vault access code", "access code"),
    ("emergency override phrase", "override phrase"),
    ("backup recovery passphrase", "passphrase"),
    ("conference room door code", "door code"),
    ("server rack unlock code", "unlock code"),
    ("annual audit reference", "reference"),
    ("greenhouse alarm code", "alarm code"),
)


def _codeword(rng: random.Random) -> Needle:
    subject, noun = rng.choice(_CODEWORDS)
    value = make_value(rng)
    return Needle(
        style="codeword",
        facts=(f"The {subject} is {value}.",),
        question=f"What is the {subject}? Answer with only the {noun}, nothing else.",
        answer=value,
    )


# --- sentence ----------------------------------------------------------------------------------

_ITEMS = (
    "damaged cargo rack",
    "cracked display panel",
    "leaking coffee machine",
    "bent wheel rim",
    "faulty battery charger",
    "scratched oak desk",
    "noisy ceiling fan",
    "broken garden pump",
)
_PLACES = ("Lisbon", "Tampere", "Bristol", "Ghent", "Valencia", "Kraków", "Oulu", "Porto")
_TEAMS = ("billing", "logistics", "field service", "procurement", "warranty", "facilities")
_PRODUCTS = ("analytics suite", "design studio", "mapping toolkit", "payroll service", "backup agent")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")

# (fact, question, noun); fields filled from the lists above
_SENTENCES = (
    (
        "The refund for the {item} was approved on {weekday} and logged by the {team} team under ticket {value}.",
        "Under which ticket was the refund for the {item} logged?",
        "ticket number",
    ),
    (
        "Invoice {value} covers the {item} delivered to the {place} site and is due at the end of the month.",
        "Which invoice covers the {item} delivered to the {place} site?",
        "invoice number",
    ),
    (
        "The replacement for the {item} left the {place} depot on {weekday} with tracking number {value}.",
        "What is the tracking number of the replacement for the {item}?",
        "tracking number",
    ),
    (
        "The {team} lead confirmed that the licence key for the {product} renewal is {value}.",
        "What is the licence key for the {product} renewal?",
        "licence key",
    ),
    (
        "Purchase order {value} was raised by the {team} team for the {place} office on {weekday}.",
        "Which purchase order did the {team} team raise for the {place} office?",
        "purchase order number",
    ),
)


def _sentence(rng: random.Random) -> Needle:
    fact, question, noun = rng.choice(_SENTENCES)
    value = make_value(rng)
    fields = {
        "item": rng.choice(_ITEMS),
        "place": rng.choice(_PLACES),
        "team": rng.choice(_TEAMS),
        "product": rng.choice(_PRODUCTS),
        "weekday": rng.choice(_WEEKDAYS),
    }
    return Needle(
        style="sentence",
        facts=(fact.format(value=value, **fields),),
        question=f"{question.format(**fields)} Answer with only the {noun}, nothing else.",
        answer=value,
    )


# --- distractors -------------------------------------------------------------------------------

# (fact template, question template, noun, subjects): subjects are single distinct words, so the
# question names exactly one of them and a reader must match it, not just find "a code".
_FAMILIES = (
    (
        "The access code for the {s} warehouse is {value}.",
        "What is the access code for the {s} warehouse?",
        "access code",
        ("north", "harbour", "river", "airport", "mountain", "canal", "orchard", "quarry"),
    ),
    (
        "The shipping reference for the {s} container is {value}.",
        "What is the shipping reference for the {s} container?",
        "shipping reference",
        ("amber", "cobalt", "crimson", "olive", "ivory", "teal", "violet", "slate"),
    ),
    (
        "The badge number issued to {s} is {value}.",
        "What is the badge number issued to {s}?",
        "badge number",
        ("Okafor", "Lindqvist", "Moreau", "Tanaka", "Haddad", "Kowalczyk", "Ferreira", "Brennan"),
    ),
    (
        "The maintenance permit for the {s} bridge is {value}.",
        "What is the maintenance permit for the {s} bridge?",
        "permit number",
        ("eastern", "railway", "stone", "suspension", "footpath", "castle", "market", "ferry"),
    ),
)


def _distractors(rng: random.Random) -> Needle:
    fact, question, noun, subjects = rng.choice(_FAMILIES)
    count = 3  # three look-alikes + the needle: four similar facts in the context
    picked = rng.sample(subjects, count + 1)
    values = _values(rng, count + 1)
    return Needle(
        style="distractors",
        facts=(fact.format(s=picked[0], value=values[0]),),
        question=f"{question.format(s=picked[0])} Answer with only the {noun}, nothing else.",
        answer=values[0],
        distractors=tuple(fact.format(s=s, value=v) for s, v in zip(picked[1:], values[1:], strict=True)),
    )


# --- multihop ----------------------------------------------------------------------------------

_ENTITIES = (
    "Project Heron",
    "the Marlow account",
    "the Quayside branch",
    "the Ferris contract",
    "Operation Bluebell",
    "the Ashdown estate",
    "the Kestrel pilot",
    "the Northgate archive",
)
_SECRETS = (
    ("recovery code", "code"),
    ("vault combination", "combination"),
    ("signing key", "key"),
    ("release token", "token"),
)


def _multihop(rng: random.Random) -> Needle:
    entity = rng.choice(_ENTITIES)
    noun = rng.choice(BRIDGE_NOUNS)
    secret, short = rng.choice(_SECRETS)
    numbers = rng.sample(range(1000, 10000), 3)
    values = _values(rng, 3)
    key = f"{noun} {numbers[0]}"
    first = f"{entity[0].upper()}{entity[1:]} was assigned {key}."
    second = f"{noun.capitalize()} {numbers[0]} holds the {secret} {values[0]}."
    decoys = tuple(
        f"{noun.capitalize()} {n} holds the {secret} {v}."
        for n, v in zip(numbers[1:], values[1:], strict=True)
    )
    return Needle(
        style="multihop",
        facts=(first, second),
        question=(
            f"What is the {secret} held in the {noun} that was assigned to {entity}? "
            f"Answer with only the {short}, nothing else."
        ),
        answer=values[0],
        distractors=decoys,
    )


# --- custom ------------------------------------------------------------------------------------


def _custom(settings: RecallSettings, rng: random.Random) -> Needle:
    spec = rng.choice(settings.needles)
    if "{value}" not in spec.fact:
        raise ConfigError(
            "a custom needle's fact must contain {value}",
            hint='e.g. fact = "The staging password is {value}."; the value is fresh for every trial',
        )
    if "{value}" in spec.question:
        raise ConfigError(
            "a custom needle's question must not contain {value}: it would give the answer away",
            hint='ask for the value, e.g. question = "What is the staging password? Answer with only the password."',
        )
    value = make_value(rng)
    return Needle(
        style="custom",
        facts=(spec.fact.replace("{value}", value),),
        question=spec.question,
        answer=spec.answer.replace("{value}", value),
    )


def make_needle(settings: RecallSettings, rng: random.Random) -> Needle:
    """A fresh needle of ``settings.needle`` style; deterministic given RNG's state."""
    style = settings.needle
    if style == "codeword":
        return _codeword(rng)
    if style == "sentence":
        return _sentence(rng)
    if style == "distractors":
        return _distractors(rng)
    if style == "multihop":
        return _multihop(rng)
    if style == "custom":
        return _custom(settings, rng)
    raise ConfigError(
        f"unknown needle style {style!r}", hint="codeword, sentence, distractors, multihop or custom"
    )
