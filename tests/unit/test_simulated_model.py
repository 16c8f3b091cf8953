"""The simulated model: finds the right needle, answers with the curve's probability, deterministically."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from itertools import islice

import pytest

from needle_action.config import RecallSettings
from needle_action.core.names import NeedleStyle
from needle_action.recall.trials.filler import generated_passages
from needle_action.recall.trials.needles import VALUE_RE, make_needle
from needle_action.recall.trials.scoring import score
from tests.fakes.simulated_model import NOT_FOUND, SimulatedModel, cliff, flat, u_shape

FILLER = "\n".join(p.text for p in islice(generated_passages("sim-tests"), 60))


def _body(facts: list[tuple[float, str]], question: str, *, filler: str = FILLER) -> dict:
    """A Messages request whose user text has each fact at the given fraction of the filler."""
    text, last = [], 0
    for d, fact in sorted(facts):
        at = int(d * len(filler))
        ends = [j + 1 for j in (filler.find(". ", at), filler.find("\n", at)) if j >= 0]
        cut = min(ends, default=len(filler))
        text.append(filler[last:cut] + " " + fact)
        last = cut
    text.append(filler[last:])
    return {
        "model": "claude-sonnet-5-5",
        "max_tokens": 32,
        "system": "Answer from the context.",
        "messages": [{"role": "user", "content": "".join(text) + "\n\nQuestion: " + question}],
    }


def _needle(style: NeedleStyle, i: int):
    return make_needle(RecallSettings(needle=style), random.Random(f"sim:{style}:{i}"))


# --------------------------------------------------------------------------- curves


def test_curve_helpers():
    assert flat(0.4)(0.0, 10) == flat(0.4)(0.7, 10**6) == 0.4
    u = u_shape(edge=0.9, middle=0.1)
    assert u(0.0, 1) == pytest.approx(0.9)
    assert u(1.0, 1) == pytest.approx(0.9)
    assert u(0.5, 1) == pytest.approx(0.1)
    assert u(0.25, 1) == pytest.approx(0.1 + 0.8 * 0.25)  # quadratic
    assert u(0.2, 1) < u(0.1, 1) < u(0.0, 1)
    m = u_shape(edge=0.9, middle=0.1, margin=0.1)
    assert m(0.05, 1) == pytest.approx(0.9)
    assert m(0.5, 1) == pytest.approx(0.1)
    c = cliff(8000, before=0.95, after=0.1)
    assert c(0.5, 7999) == 0.95
    assert c(0.5, 8000) == 0.1


# --------------------------------------------------------------------------- finding the needle


@pytest.mark.parametrize("style", ["codeword", "sentence", "distractors", "multihop"])
def test_finds_the_asked_needle_among_look_alikes(style):
    model = SimulatedModel(flat(1.0))
    for i in range(40):
        needle = _needle(style, i)
        rng = random.Random(i)
        facts = [(rng.uniform(0, 0.8), needle.facts[0])]
        facts += [(0.95, f) for f in needle.facts[1:]]
        facts += [(rng.uniform(0, 1), d) for d in needle.distractors]
        obs = model.observe(_body(facts, needle.question))
        assert obs.value == needle.answer, (needle, obs)
        assert obs.hit
        assert model(_body(facts, needle.question)) == needle.answer
        assert len(obs.depths) == (2 if style == "multihop" else 1)


def test_observed_depth_and_size_are_measured_from_the_request():
    model = SimulatedModel(flat(1.0))
    needle = _needle("codeword", 0)
    for d in (0.0, 0.3, 0.6, 0.9):
        obs = model.observe(_body([(d, needle.facts[0])], needle.question))
        assert obs.depths[0] == pytest.approx(d, abs=0.03)
    body = _body([(0.5, needle.facts[0])], needle.question)
    from needle_action.tokens import load_encoding
    from tests.fakes.anthropic_server import request_texts

    # the same number the fake's count_tokens endpoint reports for this request
    assert obs.size == len(
        load_encoding("o200k_base").encode("\n".join(request_texts(body)), disallowed_special=())
    )
    assert 2000 < obs.size < 20000
    assert SimulatedModel(flat(1.0), exact_size=False).observe(body).size == pytest.approx(obs.size, rel=0.35)


def test_no_needle_no_answer():
    model = SimulatedModel(flat(1.0))
    obs = model.observe(_body([], "What is the secret launch codeword?"))
    assert obs.value is None
    assert obs.answer == NOT_FOUND
    assert not obs.hit


# --------------------------------------------------------------------------- probabilities


def test_hit_rate_follows_a_flat_curve():
    settings = RecallSettings()
    needles = [_needle("codeword", i) for i in range(800)]
    body_for = {n.answer: _body([(0.5, n.facts[0])], n.question, filler=FILLER[:1200]) for n in needles}
    for p in (0.0, 0.3, 0.8, 1.0):
        # a flat curve ignores size: characters / 4 spares 800 encodes per p (size is pinned above)
        model = SimulatedModel(flat(p), seed=3, exact_size=False)
        hits = [score(model(body_for[n.answer]), n, settings) for n in needles]
        assert sum(hits) / len(hits) == pytest.approx(p, abs=0.06)  # ~3.4 standard errors at p = 0.5


def test_hit_rate_follows_a_u_shape_over_depth():
    curve = u_shape(edge=0.95, middle=0.1)
    model = SimulatedModel(curve, seed=1, exact_size=False)  # the curve is over depth alone
    filler = FILLER[:4000]
    rates = []
    for d in (0.05, 0.5, 0.95):
        needles = [_needle("codeword", f"{d}:{i}") for i in range(500)]
        obs = [model.observe(_body([(d, n.facts[0])], n.question, filler=filler)) for n in needles]
        seen = sum(o.depths[0] for o in obs) / len(obs)
        assert seen == pytest.approx(d, abs=0.05)  # system text and question shift it a little
        rate = sum(o.hit for o in obs) / len(obs)
        assert rate == pytest.approx(curve(seen, 0), abs=0.07)
        rates.append(rate)
    assert rates[1] < 0.25 < 0.6 < min(rates[0], rates[2])  # the U itself


def test_cliff_over_size_and_multihop_uses_the_product():
    short, long = FILLER[:2000], FILLER
    model = SimulatedModel(cliff(at_size=1500, before=1.0, after=0.0))
    n = _needle("codeword", 1)
    assert model.observe(_body([(0.5, n.facts[0])], n.question, filler=short)).hit
    assert not model.observe(_body([(0.5, n.facts[0])], n.question, filler=long)).hit

    def half_early(depth, size):
        return 0.5 if depth < 0.5 else 0.8

    hop = _needle("multihop", 3)
    obs = SimulatedModel(half_early).observe(_body([(0.2, hop.facts[0]), (0.9, hop.facts[1])], hop.question))
    assert obs.p == pytest.approx(0.4)


def test_misses_are_plausible_wrong_answers():
    model = SimulatedModel(flat(0.0), seed=2)
    answers = []
    for i in range(300):
        n = _needle("distractors", i)
        facts = [(0.3, n.facts[0])] + [(0.6 + 0.1 * k, d) for k, d in enumerate(n.distractors)]
        a = model(_body(facts, n.question, filler=FILLER[:1500]))
        assert a != n.answer
        answers.append((a, n))
    distractor = sum(any(a in d for d in n.distractors) for a, n in answers)
    fabricated = sum(
        bool(VALUE_RE.fullmatch(a)) and not any(a in d for d in n.distractors) for a, n in answers
    )
    not_found = sum(a == NOT_FOUND for a, _ in answers)
    assert distractor > 100
    assert fabricated > 30
    assert not_found > 30


# --------------------------------------------------------------------------- determinism


def test_outcome_depends_on_seed_and_value_not_on_call_order():
    needles = [_needle("codeword", i) for i in range(120)]
    bodies = [_body([(0.5, n.facts[0])], n.question, filler=FILLER[:1500]) for n in needles]
    first = [SimulatedModel(flat(0.5), seed=9)(b) for b in bodies]
    model = SimulatedModel(flat(0.5), seed=9)
    order = list(range(len(bodies)))
    random.Random(0).shuffle(order)
    with ThreadPoolExecutor(8) as pool:  # concurrent, shuffled, each body asked twice
        shuffled = dict(zip(order * 2, pool.map(lambda i: model(bodies[i]), order * 2), strict=True))
    assert [shuffled[i] for i in range(len(bodies))] == first
    other_seed = [SimulatedModel(flat(0.5), seed=10)(b) for b in bodies]
    assert other_seed != first
    # the same needle value in a differently shaped request gets the same draw
    moved = [
        SimulatedModel(flat(0.5), seed=9)(_body([(0.2, n.facts[0])], n.question, filler=FILLER[:1000]))
        for n in needles
    ]
    assert moved == first
