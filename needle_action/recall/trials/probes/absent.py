"""``needle = "absent"``: the answer is not in the context, and a correct reply says so.

Michelangelo's Latent List / "answer not present" tasks and MRCR's similar items measure what a
positional codeword probe cannot: whether the model *invents* an answer. Every absent trial asks for
the value of a subject that appears nowhere in the prompt, while a **near miss**, a fact of the same
kind about another subject (graded by ``similarity``, :mod:`families`), sits at the trial depth, so
the hallucination rate is measured by size and position like recall. ``distractors = N`` adds more
near misses at other depths.

The question is asked bare ("What is the access code for the harbour warehouse?"), with no "say so
if it is missing" hint: whether the model abstains is up to the prompt under test, which is what a
pull request can break. A reply counts as an abstention when it matches one of ``abstain_phrases``
(default :data:`DEFAULT_ABSTAIN_PHRASES`, compared like ``contains`` scoring) or ``abstain_regex``,
and names no value: neither a near miss's value nor anything shaped like one.
"""

from __future__ import annotations

import random
import re

from needle_action.recall.trials.probes.families import FAMILIES, look_alikes
from needle_action.recall.trials.probes.lexical import contains
from needle_action.recall.trials.probes.needle import Needle
from needle_action.recall.trials.probes.values import VALUE_RE

ABSENT_ANSWER = "(not in the context)"
_ANY_VALUE = re.compile(VALUE_RE.pattern, re.IGNORECASE)

DEFAULT_ABSTAIN_PHRASES = (
    "not in the context",
    "not in the document",
    "not in the documents",
    "not in the documentation",
    "not in the text",
    "not in the notes",
    "not in the conversation",
    "not mentioned",
    "isn't mentioned",
    "wasn't mentioned",
    "not present",
    "does not appear",
    "doesn't appear",
    "not stated",
    "not provided",
    "not given",
    "not specified",
    "not included",
    "does not say",
    "doesn't say",
    "does not mention",
    "doesn't mention",
    "does not contain",
    "doesn't contain",
    "do not contain",
    "don't contain",
    "no information",
    "no mention",
    "could not find",
    "couldn't find",
    "cannot find",
    "can't find",
    "unable to find",
    "not found",
    "not available",
    "not known",
    "unknown",
    "i don't know",
    "i do not know",
    "there is no",
    "none",
)


def absent(rng: random.Random, *, distractors: int = 0, similarity: str = "high") -> Needle:
    """A question about a subject that is not in the context, a near miss of SIMILARITY for the
    trial depth and DISTRACTORS more near misses."""
    family = rng.choice(FAMILIES)
    asked = rng.choice(family.subjects)
    near, *others = look_alikes(family, [asked], 1 + distractors, similarity, rng, avoid=set())
    return Needle(
        style="absent",
        facts=(near.text,),
        question=family.ask(asked),
        answer=ABSENT_ANSWER,
        distractors=tuple(o.text for o in others),
        distractor_values=(near.value, *(o.value for o in others)),
        absent=True,
    )


def abstained(answer: str, *, phrases: tuple[str, ...] | list[str], pattern: str | None) -> bool:
    """True when ANSWER says the context does not hold the answer and names no value."""
    if _ANY_VALUE.search(answer):
        return False
    if pattern is not None and re.search(pattern, answer):
        return True
    return any(contains(answer, p) for p in phrases)
