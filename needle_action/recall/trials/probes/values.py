"""Needle values: fresh, unguessable strings shaped like ``QZT-4821-KLM``.

Three consonants, four digits, three consonants (:data:`VALUE_RE`): about 6.4e11 values, no vowels so
a value never spells a word, and a shape the filler is scrubbed of, so a model can only answer by
finding the fact. Values come from the ``random.Random`` the caller passes in (reproducible by seed).
"""

from __future__ import annotations

import random
import re

VALUE_RE: re.Pattern[str] = re.compile(r"\b[A-Z]{3}-\d{4}-[A-Z]{3}\b")

# Consonants only: a value never spells a word, so it cannot be guessed from language.
_LETTERS = "BCDFGHJKLMNPQRSTVWXZ"


def make_value(rng: random.Random) -> str:
    """A fresh ``ABC-1234-DEF`` value drawn from RNG."""
    head = "".join(rng.choice(_LETTERS) for _ in range(3))
    tail = "".join(rng.choice(_LETTERS) for _ in range(3))
    return f"{head}-{rng.randrange(10000):04d}-{tail}"


def distinct_values(rng: random.Random, n: int) -> list[str]:
    """N different fresh values."""
    out: list[str] = []
    while len(out) < n:
        v = make_value(rng)
        if v not in out:
            out.append(v)
    return out
