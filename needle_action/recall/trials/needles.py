"""Needles: the facts hidden in the haystack, and the questions that ask for them.

Styles (``[recall] needle = ...``; a list runs several, each cell carries its style):

- ``codeword``: "The secret launch codeword is QZT-4821-KLM." / "What is the secret launch codeword?"
- ``sentence``: a natural sentence that blends into business prose (a ticket, invoice, tracking number).
- ``distractors``: a fact about one subject among look-alikes about other subjects (other warehouses,
  other containers...) at other depths; the question names exactly one subject.
- ``multihop``: fact A at the trial depth links an entity to a key ("Project Heron was assigned locker
  4471."), fact B near the end gives the value for that key ("Locker 4471 holds the recovery code ...").
  Two decoy B facts for other lockers make the hop necessary: B alone does not say which locker is meant.
- ``custom``: the user's own ``[[recall.needles]]`` (fact / question / answer with ``{value}``).
- ``gold``: the fixture's own gold item and question, moved; scored against its ``expected``
  (:mod:`needle_action.recall.trials.probes.gold`).
- ``nonlexical``: a fact and a question with no content word in common, one hop of common knowledge
  apart (:mod:`needle_action.recall.trials.probes.bank`).
- ``absent``: a question whose answer is not in the context, a near miss at the trial depth; a
  correct reply abstains (:mod:`needle_action.recall.trials.probes.absent`).

``distractors = N`` and ``similarity`` add graded look-alikes to ``codeword`` (which then names a
subject, so look-alikes can differ from it), ``sentence``, ``distractors``, ``nonlexical`` and
``absent`` (:mod:`needle_action.recall.trials.probes.families`). Every value-style question ends by asking
for the value alone, which is what strict scoring expects.
"""

from __future__ import annotations

import random
import re
import string

from needle_action.config import RecallSettings
from needle_action.core.errors import ConfigError
from needle_action.recall.trials.probes.absent import absent
from needle_action.recall.trials.probes.bank import nonlexical
from needle_action.recall.trials.probes.families import FAMILIES, LookAlike, look_alikes
from needle_action.recall.trials.probes.needle import Needle
from needle_action.recall.trials.probes.values import VALUE_RE, distinct_values, make_value

# Multi-hop bridge keys ("locker 4471"): the link between fact A and fact B. Filler is scrubbed of this
# shape too, so the only bridge in a prompt is the one we put there.
BRIDGE_NOUNS = ("locker", "cabinet", "drawer", "mailbox")
BRIDGE_RE: re.Pattern[str] = re.compile(r"\b(?:locker|cabinet|drawer|mailbox) \d{4}\b", re.IGNORECASE)

__all__ = ["BRIDGE_RE", "VALUE_RE", "Needle", "make_needle", "make_value"]


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


def _codeword(rng: random.Random, distractors: int, similarity: str) -> Needle:
    if distractors:  # look-alikes need a subject to differ in: the codeword names one
        return _family(rng, distractors, similarity, style="codeword")
    subject, noun = rng.choice(_CODEWORDS)
    value = make_value(rng)
    return Needle(
        style="codeword",
        facts=(f"The {subject} is {value}.",),
        question=f"What is the {subject}? Answer with only the {noun}, nothing else.",
        answer=value,
    )


# --- sentence ----------------------------------------------------------------------------------

_FIELDS = {
    "item": (
        "damaged cargo rack",
        "cracked display panel",
        "leaking coffee machine",
        "bent wheel rim",
        "faulty battery charger",
        "scratched oak desk",
        "noisy ceiling fan",
        "broken garden pump",
        "torn awning fabric",
    ),
    "place": ("Lisbon", "Tampere", "Bristol", "Ghent", "Valencia", "Kraków", "Oulu", "Porto", "Aarhus"),
    "team": (
        "billing",
        "logistics",
        "field service",
        "procurement",
        "warranty",
        "facilities",
        "security",
        "catering",
        "quality",
    ),
    "product": (
        "analytics suite",
        "design studio",
        "mapping toolkit",
        "payroll service",
        "backup agent",
        "booking engine",
        "ticketing portal",
        "survey platform",
        "inventory tracker",
    ),
    "weekday": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday"),
}

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


def _asked_fields(question: str) -> list[str]:
    """The fields a question names (what a look-alike must differ in to be another fact)."""
    return [name for _, name, _, _ in string.Formatter().parse(question) if name]


def _sentence_look_alikes(
    index: int, fields: dict[str, str], n: int, similarity: str, rng: random.Random, avoid: set[str]
) -> list[LookAlike]:
    """``high``: the needle's sentence with one asked field changed; ``medium``: another kind of
    record about what the question names; ``low``: a fact of a value family (no shared subject)."""
    if n == 0:
        return []
    if similarity == "low":
        family = rng.choice(FAMILIES)
        return look_alikes(family, [], n, "low", rng, avoid)
    values = [v for v in distinct_values(rng, n + len(avoid)) if v not in avoid][:n]
    fact, question, _ = _SENTENCES[index]
    if similarity == "high":
        variants = [
            {**fields, f: other}
            for f in _asked_fields(question)
            for other in _FIELDS[f]
            if other != fields[f]
        ]
        picks = rng.sample(variants, min(n, len(variants)))
        return [LookAlike(fact.format(value=v, **p), v) for p, v in zip(picks, values, strict=False)]
    # medium: other records about what the question names; the fields it does not name are redrawn
    asked = _asked_fields(question)
    others = [i for i in range(len(_SENTENCES)) if i != index]
    out = []
    for v in values:
        redrawn = {f: (x if f in asked else rng.choice(_FIELDS[f])) for f, x in fields.items()}
        out.append(LookAlike(_SENTENCES[rng.choice(others)][0].format(value=v, **redrawn), v))
    return out


def _sentence(rng: random.Random, distractors: int, similarity: str) -> Needle:
    index = rng.randrange(len(_SENTENCES))
    fact, question, noun = _SENTENCES[index]
    value = make_value(rng)
    fields = {name: rng.choice(options) for name, options in _FIELDS.items()}
    others = _sentence_look_alikes(index, fields, distractors, similarity, rng, {value})
    return Needle(
        style="sentence",
        facts=(fact.format(value=value, **fields),),
        question=f"{question.format(**fields)} Answer with only the {noun}, nothing else.",
        answer=value,
        distractors=tuple(o.text for o in others),
        distractor_values=tuple(o.value for o in others),
    )


# --- subjects of a family (the distractors style; codeword with look-alikes) -------------------


def _family(rng: random.Random, distractors: int, similarity: str, *, style: str) -> Needle:
    """A fact about one subject of a value family, and DISTRACTORS look-alikes of SIMILARITY."""
    family = rng.choice(FAMILIES)
    subject = rng.choice(family.subjects)
    value = make_value(rng)
    others = look_alikes(family, [subject], distractors, similarity, rng, {value})
    return Needle(
        style=style,
        facts=(family.fact(subject, value),),
        question=f"{family.ask(subject)} Answer with only the {family.noun}, nothing else.",
        answer=value,
        distractors=tuple(o.text for o in others),
        distractor_values=tuple(o.value for o in others),
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
    values = distinct_values(rng, 3)
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
        distractor_values=tuple(values[1:]),
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


def _gold_unset() -> Needle:
    raise ConfigError(
        'needle = "gold" needs the fixture\'s gold item; it is resolved when the haystack is built',
        hint="run gold needles through the recall engine (needle recall), which reads the fixture",
    )


def make_needle(
    settings: RecallSettings, rng: random.Random, *, style: str | None = None, gold: Needle | None = None
) -> Needle:
    """A fresh needle of STYLE (default: the prompt's first style); deterministic given RNG's state.
    GOLD is the fixture's gold needle (:meth:`HaystackBuilder.gold_needle`), the same every trial."""
    style = style or settings.styles[0]
    n, similarity = settings.distractor_count(style), settings.similarity
    makers = {
        "codeword": lambda: _codeword(rng, n, similarity),
        "sentence": lambda: _sentence(rng, n, similarity),
        "distractors": lambda: _family(rng, n, similarity, style="distractors"),
        "multihop": lambda: _multihop(rng),
        "custom": lambda: _custom(settings, rng),
        "nonlexical": lambda: nonlexical(rng, distractors=n, similarity=similarity),
        "absent": lambda: absent(rng, distractors=n, similarity=similarity),
        "gold": lambda: gold if gold is not None else _gold_unset(),
    }
    maker = makers.get(style)
    if maker is None:
        raise ConfigError(f"unknown needle style {style!r}", hint=", ".join(makers))
    return maker()
