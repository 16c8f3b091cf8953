"""The non-lexical bank: facts a question can only reach through one hop of common knowledge.

NoLiMa (Modarressi et al., ICML 2025) showed that needles sharing no words with their question are
where long-context recall really breaks: 10 of 12 models fell below half their short-context score
at 32K tokens. Every item here pairs a fact ("Mara's office is next to the Semperoper.") with a
question that shares none of its content words ("Which colleague works in Dresden?"): the link is
that the Semperoper stands in Dresden. ``tests/unit/test_bank.py`` checks every fact wording against
every question wording of its relation with :func:`~needle_action.recall.trials.probes.lexical.overlap`
(stems after stop words, prefixes included): zero shared stems.

Answers are person names, drawn fresh per trial from :data:`NAMES` (none of them a word, none used
by the built-in filler), so the answer cannot be guessed and never repeats across trials of a cell.

Look-alikes (``distractors = N``), graded like every style (``similarity``):

- ``high``: the same relation and wording about another landmark, dish... whose answer key differs
  ("Lena's office is next to the Colosseum.");
- ``medium``: a fact of another relation, again with another key ("Lena was paid in forint ...");
- ``low``: another name in a sentence that states no relation at all ("Lena joined the call late.").
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from needle_action.recall.trials.probes.needle import Needle

ANSWER_SUFFIX = "Answer with only the name, nothing else."


@dataclass(frozen=True)
class Relation:
    """One kind of hop: facts about ``{x}`` and questions about the ``{key}`` it implies."""

    name: str
    facts: tuple[str, ...]  # with {name} and {x}
    questions: tuple[str, ...]  # with {key}
    items: tuple[tuple[str, str], ...]  # (x, key): the Semperoper is in Dresden


RELATIONS: tuple[Relation, ...] = (
    Relation(
        "landmark -> city",
        ("{name}'s office is next to the {x}.", "{name} eats lunch on a bench facing the {x}."),
        ("Which colleague works in {key}?", "Who on the team is based in {key}?"),
        (
            ("Semperoper", "Dresden"),
            ("Hofburg", "Vienna"),
            ("Sagrada Família", "Barcelona"),
            ("Atomium", "Brussels"),
            ("Charles Bridge", "Prague"),
            ("Space Needle", "Seattle"),
            ("Brandenburg Gate", "Berlin"),
            ("Colosseum", "Rome"),
            ("Eiffel Tower", "Paris"),
            ("Rijksmuseum", "Amsterdam"),
            ("Alhambra", "Granada"),
        ),
    ),
    Relation(
        "dish -> country",
        ("{name} brought a big pot of {x} to the staff lunch.", "{name} served homemade {x} at the picnic."),
        ("Who prepared a recipe from {key}?", "Which teammate cooked something from {key}?"),
        (
            ("pierogi", "Poland"),
            ("goulash", "Hungary"),
            ("paella", "Spain"),
            ("moussaka", "Greece"),
            ("poutine", "Canada"),
            ("ceviche", "Peru"),
            ("feijoada", "Brazil"),
            ("bibimbap", "Korea"),
            ("haggis", "Scotland"),
            ("jollof rice", "Nigeria"),
        ),
    ),
    Relation(
        "instrument -> orchestra section",
        ("{name} practises the {x} every evening.", "{name} carried a {x} case onto the tram."),
        (
            "Which neighbour plays in the {key} section of an orchestra?",
            "Who could fill a gap in the {key} section?",
        ),
        (
            ("trombone", "brass"),
            ("tuba", "brass"),
            ("cello", "string"),
            ("viola", "string"),
            ("clarinet", "woodwind"),
            ("bassoon", "woodwind"),
            ("timpani", "percussion"),
            ("xylophone", "percussion"),
        ),
    ),
    Relation(
        "instrument -> country",
        ("{name} spent the weekend restringing an old {x}.", "{name} takes lessons on the {x} on Saturdays."),
        (
            "Which colleague plays a traditional instrument of {key}?",
            "Who is learning folk music from {key}?",
        ),
        (
            ("sitar", "India"),
            ("balalaika", "Russia"),
            ("bouzouki", "Greece"),
            ("koto", "Japan"),
            ("didgeridoo", "Australia"),
            ("mbira", "Zimbabwe"),
            ("steelpan", "Trinidad"),
            ("bandoneon", "Argentina"),
        ),
    ),
    Relation(
        "currency -> country",
        ("{name} sends invoices in {x}.", "{name} was paid in {x} for the last job."),
        ("Which contractor has a client in {key}?", "Who did freelance work for a company in {key}?"),
        (
            ("zloty", "Poland"),
            ("forint", "Hungary"),
            ("baht", "Thailand"),
            ("rand", "South Africa"),
            ("naira", "Nigeria"),
            ("ringgit", "Malaysia"),
            ("shekels", "Israel"),
            ("lira", "Turkey"),
            ("yen", "Japan"),
        ),
    ),
    Relation(
        "club -> city",
        ("{name} has a season ticket for {x}.", "{name} never misses a {x} home game."),
        ("Which colleague follows a team from {key}?", "Who cheers for a club from {key}?"),
        (
            ("Celtic", "Glasgow"),
            ("Ajax", "Amsterdam"),
            ("Boca Juniors", "Buenos Aires"),
            ("Galatasaray", "Istanbul"),
            ("Benfica", "Lisbon"),
            ("Juventus", "Turin"),
            ("the Red Sox", "Boston"),
            ("the Maple Leafs", "Toronto"),
        ),
    ),
    Relation(
        "tool -> profession",
        ("{name} keeps a {x} in the spare room.", "{name} bought a new {x} last week."),
        ("Which relative works as a {key}?", "Who in the family is a {key}?"),
        (
            ("stethoscope", "doctor"),
            ("scalpel", "surgeon"),
            ("gavel", "judge"),
            ("easel", "painter"),
            ("anvil", "blacksmith"),
            ("trowel", "bricklayer"),
            ("loom", "weaver"),
            ("chisel", "sculptor"),
        ),
    ),
    Relation(
        "river -> city",
        ("{name} goes rowing on the {x} before breakfast.", "{name}'s flat overlooks the {x}."),
        ("Which friend lives in {key}?", "Who has an address in {key}?"),
        (
            ("Vltava", "Prague"),
            ("Spree", "Berlin"),
            ("Tiber", "Rome"),
            ("Arno", "Florence"),
            ("Liffey", "Dublin"),
            ("Neva", "Saint Petersburg"),
            ("Thames", "London"),
            ("Seine", "Paris"),
            ("Tagus", "Lisbon"),
        ),
    ),
    Relation(
        "language -> country",
        ("{name} is fluent in {x}.", "{name} grew up speaking {x} at home."),
        (
            "Which colleague could help a customer calling from {key}?",
            "Who could translate for the office in {key}?",
        ),
        (
            ("Tagalog", "the Philippines"),
            ("Farsi", "Iran"),
            ("Amharic", "Ethiopia"),
            ("Hebrew", "Israel"),
            ("Quechua", "Peru"),
            ("Khmer", "Cambodia"),
            ("Urdu", "Pakistan"),
            ("Malagasy", "Madagascar"),
        ),
    ),
)

# Sentences that mention a person and state no relation: the low-similarity look-alikes.
NEUTRAL = (
    "{name} signed for a parcel at the front desk.",
    "{name} booked the small meeting room for Thursday afternoon.",
    "{name} asked for the quarterly figures to be sent again.",
    "{name} joined the call a few minutes late.",
    "{name} left a spare umbrella by the entrance.",
    "{name} updated the shared calendar on Monday.",
)

# First names that are not English words and that the built-in filler never uses.
NAMES = (
    "Mara",
    "Ilse",
    "Oskar",
    "Birgit",
    "Teodor",
    "Anouk",
    "Casimir",
    "Dagny",
    "Emeric",
    "Fenna",
    "Gideon",
    "Halvard",
    "Idris",
    "Jorunn",
    "Leocadia",
    "Magnus",
    "Noor",
    "Orla",
    "Priya",
    "Ragnhild",
    "Soren",
    "Ulla",
    "Valdemar",
    "Wenzel",
    "Ximena",
    "Yannick",
    "Zofia",
    "Aurelio",
    "Beatrix",
    "Cosimo",
    "Delphine",
    "Evander",
    "Florin",
    "Gunnar",
    "Henrike",
    "Isolde",
    "Jarek",
    "Kalani",
    "Linnea",
    "Matthias",
    "Nadia",
    "Odile",
    "Rafaela",
    "Sigrid",
    "Tamsin",
    "Ulrich",
    "Vesna",
    "Wilhelmina",
    "Xaver",
    "Yusuf",
    "Zeynep",
    "Alarik",
    "Benedikt",
    "Carys",
    "Dorian",
    "Estelle",
    "Fintan",
    "Hamish",
    "Ingrid",
    "Joakim",
    "Kaija",
    "Lorcan",
    "Maren",
    "Niamh",
    "Oriol",
    "Petra",
    "Saskia",
    "Thorsten",
    "Vivienne",
    "Wiebke",
    "Yorick",
    "Zainab",
)


def bank_items() -> list[tuple[Relation, str, str]]:
    """Every (relation, x, key) of the bank."""
    return [(r, x, key) for r in RELATIONS for x, key in r.items]


def _look_alikes(
    relation: Relation, fact: str, key: str, names: list[str], similarity: str, rng: random.Random
) -> list[str]:
    """One look-alike per name in NAMES, never about KEY (that would be a second right answer)."""
    if similarity == "low":
        return [rng.choice(NEUTRAL).format(name=n) for n in names]
    if similarity == "high":
        pool = [(fact, x) for x, k in relation.items if k != key]
    else:
        pool = [
            (rng.choice(r.facts), x) for r in RELATIONS if r is not relation for x, k in r.items if k != key
        ]
    picks = rng.sample(pool, min(len(names), len(pool)))
    return [f.format(name=n, x=x) for (f, x), n in zip(picks, names, strict=False)]


def nonlexical(rng: random.Random, *, distractors: int = 0, similarity: str = "high") -> Needle:
    """A bank fact with a fresh name, its question, and DISTRACTORS look-alikes of SIMILARITY."""
    relation = rng.choice(RELATIONS)
    x, key = rng.choice(relation.items)
    fact = rng.choice(relation.facts)
    names = rng.sample(NAMES, 1 + distractors)
    others = _look_alikes(relation, fact, key, names[1:], similarity, rng)
    return Needle(
        style="nonlexical",
        facts=(fact.format(name=names[0], x=x),),
        question=f"{rng.choice(relation.questions).format(key=key)} {ANSWER_SUFFIX}",
        answer=names[0],
        distractors=tuple(others),
        distractor_values=tuple(names[1 : 1 + len(others)]),
    )
