"""Gold needles: the fixture names its answer and its gold item; every mistake is a ConfigError at
the fixture's line with a hint, never a traceback."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from needle_action.assemble.templates.fixtures import load_fixture
from needle_action.core.errors import ConfigError
from needle_action.recall.trials.probes.gold import Expected, TrialOrders, resolve_gold

DOCS = """question: How long are deleted objects kept?
documents:
  - title: Versioning
    text: Old versions are kept until a lifecycle rule expires them.
  - title: Soft delete
    text: A deleted object stays restorable for 14 days by default.
  - title: Support
    text: Support answers within two business days.
"""

THREAD = """question: When was the export fixed?
thread: |
  Customer: the nightly export fails with 503.

  Support: we lowered concurrency to 300
  and the run finished on Tuesday.

  Customer: thanks, closing.
"""


def _gold(tmp_path: Path, text: str, *, context: str = "documents", question: str = "question"):
    path = tmp_path / "fixture.yaml"
    path.write_text(text, encoding="utf-8")
    return resolve_gold(
        load_fixture(path), context_var=context, question_var=question, fixture=path, config_where={}
    )


def _error(tmp_path: Path, text: str, **kw) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        _gold(tmp_path, text, **kw)
    return info.value


def test_the_gold_item_is_the_one_that_contains_the_answer(tmp_path):
    gold = _gold(tmp_path, DOCS + 'expected: "14 days"\n')
    assert gold.index == 1
    assert gold.passage is None
    assert [d["title"] for d in gold.rest] == ["Versioning", "Support"]
    assert gold.question == "How long are deleted objects kept?"
    assert gold.expected == Expected(strings=("14 days",))
    needle = gold.needle({"title": "Soft delete", "text": "..."}, "A deleted object ...")
    assert (needle.style, needle.question, needle.answer, needle.accepted) == (
        "gold",
        gold.question,
        "14 days",
        ("14 days",),
    )


def test_an_explicit_gold_index_wins_and_counts_from_zero(tmp_path):
    gold = _gold(tmp_path, DOCS + 'expected: ["two weeks", "14 days"]\ngold: 1\n')
    assert gold.index == 1
    assert gold.expected.label == "two weeks | 14 days"
    gold = _gold(tmp_path, DOCS + "expected: {regex: '(?i)fourteen|14'}\ngold: 0\n")
    assert gold.index == 0
    assert gold.expected.label == "/(?i)fourteen|14/"


def test_a_string_slot_moves_the_paragraph_that_holds_the_answer(tmp_path):
    gold = _gold(tmp_path, THREAD + "expected: Tuesday\n", context="thread")
    assert gold.passage == "Support: we lowered concurrency to 300\nand the run finished on Tuesday."
    assert gold.rest == "Customer: the nightly export fails with 503.\n\nCustomer: thanks, closing."
    # a quoted passage may wrap differently from the text
    quoted = _gold(
        tmp_path,
        THREAD + "expected: Tuesday\ngold: 'we lowered concurrency   to 300 and'\n",
        context="thread",
    )
    assert quoted.passage == "we lowered concurrency to 300\nand"


@pytest.mark.parametrize(
    ("extra", "line", "words", "hint"),
    [
        ("", 1, "has no 'expected'", "add expected next to question"),
        ("expected: 14\n", 9, "expected must be a non-empty string", 'expected: "14 days"'),
        ('expected: ""\n', 9, "expected must be a non-empty string", None),
        ("expected: [a, 3]\n", 9, "list of non-empty strings", None),
        ("expected: {regex: '(('}\n", 9, "regex does not compile", "Python re syntax"),
        ("expected: {pattern: x}\n", 9, "exactly one key, regex", None),
        (
            'expected: "14 days"\ngold: 3\n',
            10,
            "gold = 3 is out of range: 'documents' has 3 items (0 to 2)",
            "counts from 0",
        ),
        ('expected: "14 days"\ngold: true\n', 10, "gold must be the index", None),
        ('expected: "14 days"\ngold: "Soft delete"\n', 10, "gold must be the index", None),
        ('expected: "three weeks"\n', 9, "no item of 'documents' contains the expected answer", "gold = N"),
        ('expected: "days"\n', 9, "the expected answer", "ambiguous"),
    ],
)
def test_bad_gold_fixtures_are_config_errors_at_their_line(tmp_path, extra, line, words, hint):
    err = _error(tmp_path, DOCS + extra)
    text = err.format()
    assert text.startswith(f"fixture.yaml:{line}: ") or f"fixture.yaml:{line}:" in text, text
    assert words.split(":")[0] in err.message, err.message
    if hint:
        assert hint in (err.hint or "") or hint in err.message, text


def test_ambiguous_and_missing_passages_name_the_problem(tmp_path):
    err = _error(tmp_path, DOCS.replace("two business days", "14 days") + 'expected: "14 days"\n')
    assert "2 items of 'documents' contain the expected answer (1, 2)" in err.message
    err = _error(tmp_path, THREAD + "expected: Tuesday\ngold: 'not in the thread'\n", context="thread")
    assert "does not appear in 'thread'" in err.message
    assert err.location.line == 10
    err = _error(tmp_path, THREAD + "expected: Tuesday\ngold: 2\n", context="thread")
    assert "quote the gold passage" in err.message
    err = _error(tmp_path, "question: q\ndocuments: []\nexpected: x\n")
    assert "is empty" in err.message
    assert err.location.line == 2
    err = _error(tmp_path, "documents: [a]\nexpected: a\n")
    assert "asks the fixture's own question" in err.message


def test_a_prompt_without_fixture_cannot_run_gold():
    with pytest.raises(ConfigError) as info:
        resolve_gold(
            {},
            context_var="d",
            question_var="q",
            fixture=None,
            config_where={"file": "needle.toml", "line": 7},
        )
    assert info.value.format().startswith("needle.toml:7: ")


def test_fixture_text_is_data(tmp_path):
    # a Jinja expression or a regex bomb in the fixture is only text: compiled, matched, never run
    gold = _gold(tmp_path, DOCS.replace("14 days", "{{ 7 * 2 }} days") + "expected: '{{ 7 * 2 }} days'\n")
    assert gold.index == 1
    err = _error(tmp_path, DOCS + f"expected: {{regex: '{'a' * 600}'}}\n")
    assert "the limit is 500" in err.message


@pytest.mark.parametrize("expected", ["{regex: '.'}", "{regex: '.*'}", "'no'", "[14 days, know]", "'I'"])
def test_an_answer_that_a_non_answer_satisfies_is_refused(tmp_path, expected):
    # a mistake, or a pull request making its own gold probe pass
    err = _error(tmp_path, DOCS + f"expected: {expected}\n")
    assert "satisfied by a reply that answers nothing" in err.message
    assert err.location.line == 9


# ---- trial orders: trial 0 the retriever's, later trials seeded permutations that differ


@pytest.mark.parametrize("n", [2, 3, 5, 9, 20])
def test_gold_trial_orders_differ_lead_differently_and_repeat_with_the_seed(n):
    orders = TrialOrders(n, seed=7)
    got = [orders.of(t) for t in range(min(6, math.factorial(n)))]
    assert got[0] == tuple(range(n))  # the fixture's own order first
    assert all(sorted(o) == list(range(n)) for o in got)  # permutations: nothing lost or copied
    assert len(set(got)) == len(got)  # no two trials share an order while there are orders left
    leaders = [o[0] for o in got[:n]]
    assert len(set(leaders)) == len(leaders)  # the first n trials each lead with another item
    later_first = TrialOrders(n, seed=7)
    assert [later_first.of(t) for t in reversed(range(len(got)))] == got[::-1]  # not the build order
    if n > 2:  # two items have one other order only: every seed picks it
        assert [TrialOrders(n, seed=8).of(t) for t in range(1, len(got))] != got[1:]


def test_gold_trial_orders_go_round_when_every_order_is_taken():
    two = TrialOrders(2, seed=1)
    assert [two.of(t) for t in range(5)] == [(0, 1), (1, 0), (0, 1), (1, 0), (0, 1)]
    assert [TrialOrders(1, seed=1).of(t) for t in range(3)] == [(0,)] * 3
    assert TrialOrders(0, seed=1).of(4) == ()
