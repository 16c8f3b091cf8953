"""The non-lexical bank: every fact and its question share no content word (after stop words and
stemming, prefixes included), the bank is big and varied, names are fresh per trial and never
collide with the filler; and the overlap rule itself catches what it must."""

from __future__ import annotations

import random

import pytest

from needle_action.config import RecallSettings
from needle_action.recall.trials.filler import _FIRST as FILLER_NAMES
from needle_action.recall.trials.needles import make_needle
from needle_action.recall.trials.probes.bank import ANSWER_SUFFIX, NAMES, NEUTRAL, RELATIONS, bank_items
from needle_action.recall.trials.probes.lexical import STOP_WORDS, content_stems, overlap, stem


def _pairs():
    """Every (fact wording, question wording) of every item, as a trial would show them."""
    for relation, x, key in bank_items():
        for fact in relation.facts:
            for question in relation.questions:
                yield (
                    relation.name,
                    fact.format(name="Mara", x=x),
                    f"{question.format(key=key)} {ANSWER_SUFFIX}",
                )


def test_the_bank_is_big_and_varied():
    items = bank_items()
    assert len(items) >= 60
    assert len(RELATIONS) >= 6
    assert all(len(r.items) >= 8 for r in RELATIONS), [(r.name, len(r.items)) for r in RELATIONS]
    assert len({(x, key) for _, x, key in items}) == len(items)  # no item twice


@pytest.mark.parametrize(("relation", "fact", "question"), list(_pairs()))
def test_fact_and_question_share_no_content_word(relation, fact, question):
    assert overlap(fact, question) == set(), (relation, fact, question)


def test_the_overlap_rule_catches_shared_words_stems_and_prefixes():
    # the same word, a stemmed variant, and a word that begins another all count as shared
    assert overlap("Mara works in the Dresden office.", "Which colleague works in Dresden?") == {
        "work",
        "dresden",
    }
    assert overlap("The objects were restored.", "Can you restore one object?") == {"object", "restor"}
    assert overlap("Jonas cooked pad thai.", "Who cooked food from Thailand?") == {"cook", "thai"}
    # stop words and the shared answer suffix are not content
    assert overlap("The answer is with them.", "What is the answer?") == set()
    assert stem("restorable") == stem("restored") == stem("restore")
    assert stem("class") == stem("classes")
    assert stem("status") == stem("statuses")
    assert content_stems("Família Sagrada") == {"familia", "sagrada"}  # accents folded


def test_names_are_not_words_and_not_the_fillers():
    assert len(set(NAMES)) == len(NAMES) >= 60
    assert not set(NAMES) & set(FILLER_NAMES)  # a filler name could otherwise look like an answer
    assert all(n[0].isupper() and n.isalpha() and n.lower() not in STOP_WORDS for n in NAMES)
    for _, fact, question in _pairs():
        assert not any(n in fact.replace("Mara", "") or n in question for n in NAMES), (fact, question)


def _trials(n: int, **settings) -> list:
    rs = RecallSettings(needle="nonlexical", **settings)
    return [make_needle(rs, random.Random(f"bank:{i}")) for i in range(n)]


def test_every_trial_gets_a_fresh_name_that_only_the_fact_states():
    needles = _trials(300)
    assert {n.style for n in needles} == {"nonlexical"}
    assert len({n.answer for n in needles}) > 50  # names vary across trials
    assert len({n.facts[0].replace(n.answer, "") for n in needles}) > 60  # and so do the facts
    for n in needles:
        assert n.answer in NAMES
        assert n.answer in n.facts[0]
        assert n.answer not in n.question
        assert n.question.endswith(ANSWER_SUFFIX)
        assert n.question.count("?") == 1
        assert overlap(n.facts[0].replace(n.answer, ""), n.question) == set()


@pytest.mark.parametrize("similarity", ["low", "medium", "high"])
def test_look_alikes_name_other_people_and_never_answer_the_question(similarity):
    for n in _trials(200, distractors=3, similarity=similarity):
        assert len(n.distractors) == len(n.distractor_values) == 3
        assert n.answer not in n.distractor_values
        assert len(set(n.distractor_values)) == 3
        for text, name in zip(n.distractors, n.distractor_values, strict=True):
            assert text.startswith(name)
        relation = next(
            r
            for r in RELATIONS
            if any(n.facts[0] == f.format(name=n.answer, x=x) for f in r.facts for x, _ in r.items)
        )
        key = next(
            k
            for x, k in relation.items
            if any(n.facts[0] == f.format(name=n.answer, x=x) for f in relation.facts)
        )
        asked = {k for r in RELATIONS for x, k in r.items for d in n.distractors if f" {x}" in d}
        assert key not in asked  # no look-alike is a second right answer
        if similarity == "high":  # the same wording about another landmark, dish ...
            wording = next(
                f
                for f in relation.facts
                for x, _ in relation.items
                if n.facts[0] == f.format(name=n.answer, x=x)
            )
            stem_of = wording.split("{x}")[0].replace("{name}", "")
            assert all(stem_of in d for d in n.distractors), (wording, n.distractors)
        if similarity == "low":
            assert all(
                any(d == t.format(name=v) for t in NEUTRAL)
                for d, v in zip(n.distractors, n.distractor_values, strict=True)
            )
