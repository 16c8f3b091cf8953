"""Value facts about named subjects, and look-alikes graded by similarity.

A *family* is one kind of fact about a subject ("the access code for the north warehouse"): a frame,
a paraphrase of it, the question that asks for it, and subjects that tell its instances apart.
The ``distractors`` style, ``codeword`` with ``distractors = N`` and ``absent`` draw from here.

Similarity of a look-alike to the needle (``[recall] similarity``), the same three grades every
style uses (see :data:`SIMILARITY`):

- ``high``: the same frame about another subject with another value: only the subject and the
  value differ ("The access code for the harbour warehouse is ...");
- ``medium``: the same kind of fact in other words about another subject ("Drivers at the harbour
  warehouse key in ... at the gate");
- ``low``: a fact of another family ("The shipping reference for the amber container is ...").
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from needle_action.recall.trials.probes.values import distinct_values

SIMILARITY = ("low", "medium", "high")


@dataclass(frozen=True)
class Family:
    """One kind of value fact about a subject, in two wordings, and the question that asks for it."""

    frame: str  # the fact, with {s} (subject) and {value}
    paraphrase: str  # the same kind of fact in other words
    question: str  # asks for the value of {s}
    noun: str  # what to call the value in "Answer with only the ..."
    subjects: tuple[str, ...]  # single words, distinct, so a question names exactly one

    def fact(self, subject: str, value: str, *, paraphrased: bool = False) -> str:
        """The fact stating VALUE for SUBJECT, in the frame or in its paraphrase."""
        return (self.paraphrase if paraphrased else self.frame).format(s=subject, value=value)

    def ask(self, subject: str) -> str:
        """The question for SUBJECT's value."""
        return self.question.format(s=subject)


FAMILIES: tuple[Family, ...] = (
    Family(
        "The access code for the {s} warehouse is {value}.",
        "Drivers delivering to the {s} warehouse key in {value} at the gate.",
        "What is the access code for the {s} warehouse?",
        "access code",
        (
            "north",
            "harbour",
            "river",
            "airport",
            "mountain",
            "canal",
            "orchard",
            "quarry",
            "railway",
            "forest",
        ),
    ),
    Family(
        "The shipping reference for the {s} container is {value}.",
        "Customs released the {s} container under reference {value}.",
        "What is the shipping reference for the {s} container?",
        "shipping reference",
        ("amber", "cobalt", "crimson", "olive", "ivory", "teal", "violet", "slate", "saffron", "copper"),
    ),
    Family(
        "The badge number issued to {s} is {value}.",
        "{s} signs in at reception with badge {value}.",
        "What is the badge number issued to {s}?",
        "badge number",
        (
            "Okafor",
            "Lindqvist",
            "Moreau",
            "Tanaka",
            "Haddad",
            "Kowalczyk",
            "Ferreira",
            "Brennan",
            "Achterberg",
            "Szabo",
        ),
    ),
    Family(
        "The maintenance permit for the {s} bridge is {value}.",
        "Repairs on the {s} bridge run under permit {value}.",
        "What is the maintenance permit for the {s} bridge?",
        "permit number",
        (
            "eastern",
            "stone",
            "suspension",
            "footpath",
            "castle",
            "market",
            "ferry",
            "viaduct",
            "swing",
            "toll",
        ),
    ),
)
MAX_LOOK_ALIKES = 8  # subjects per family minus the asked one and an absent trial's near miss


@dataclass(frozen=True)
class LookAlike:
    """A look-alike fact and the value it states."""

    text: str
    value: str


def look_alikes(
    family: Family, taken: list[str], n: int, similarity: str, rng: random.Random, avoid: set[str]
) -> list[LookAlike]:
    """N look-alikes of FAMILY's facts (graded by SIMILARITY) about subjects other than TAKEN, each
    with a fresh value not in AVOID. ``low`` ones come from the other families."""
    if n == 0:
        return []
    values = [v for v in distinct_values(rng, n + len(avoid)) if v not in avoid][:n]
    if similarity == "low":
        pool = [(f, s) for f in FAMILIES if f is not family for s in f.subjects]
        picks = rng.sample(pool, n)
        return [LookAlike(f.fact(s, v), v) for (f, s), v in zip(picks, values, strict=True)]
    free = [s for s in family.subjects if s not in taken]
    subjects = rng.sample(free, n)
    paraphrased = similarity == "medium"
    return [
        LookAlike(family.fact(s, v, paraphrased=paraphrased), v)
        for s, v in zip(subjects, values, strict=True)
    ]
