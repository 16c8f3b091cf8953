"""Counting answers in trial order: whatever order the answers arrive in, and however many were
started ahead, a cell settles exactly where one-call-at-a-time early stopping settles."""

from __future__ import annotations

import itertools
import random

import pytest

from needle_action.recall.run.cells import CellRun
from needle_action.results import RecallAnswer
from needle_action.stats import cells as stat_cells


def sequential(outcomes: tuple[bool, ...], threshold: float) -> tuple[int, int, str]:
    """(hits, trials, status) of the textbook loop: one trial at a time, stop once decided."""
    hits = 0
    for n, hit in enumerate(outcomes, start=1):
        hits += hit
        if stat_cells.is_decided(hits, n, len(outcomes), threshold):
            return hits, n, stat_cells.cell_status(hits, n, len(outcomes), threshold)
    return hits, len(outcomes), stat_cells.final_status(hits, len(outcomes), threshold)


def answer(i: int, hit: bool) -> RecallAnswer:
    return RecallAnswer(trial=i, needle="V", answer="V" if hit else "x", hit=hit)


@pytest.mark.parametrize(("planned", "threshold"), [(3, 0.8), (5, 0.8), (6, 0.5), (8, 0.9)])
def test_any_arrival_order_settles_where_sequential_early_stopping_does(planned, threshold):
    rng = random.Random(planned)
    for outcomes in itertools.product([False, True], repeat=planned):
        hits, trials, status = sequential(outcomes, threshold)
        order = list(range(planned))
        rng.shuffle(order)  # every answer started at once (full speculation), arriving shuffled
        cell = CellRun(2000, 0.5, planned)
        for i in order:
            cell.take(i) if cell.next_index() == i else cell.in_flight.add(i)
            cell.receive(answer(i, outcomes[i]), threshold, early_stop=True)
        result = cell.to_result(threshold)
        assert (result.hits, result.trials, result.status) == (hits, trials, status), outcomes
        assert cell.settled
        assert cell.discarded == planned - trials
        assert [a.trial for a in result.answers] == list(range(trials))


def test_the_horizon_never_asks_beyond_what_could_decide():
    cell = CellRun(2000, 0.0, 5)
    assert cell.horizon(0.8, early_stop=True) == 3  # three misses could already fail the cell
    assert cell.horizon(0.8, early_stop=False) == 5
    for i in range(3):
        cell.take(i)
        cell.receive(answer(i, True), 0.8, early_stop=True)
    assert cell.horizon(0.8, early_stop=True) == 4  # one more hit passes it


def test_a_lost_trial_is_asked_again_once_then_skipped():
    cell = CellRun(2000, 0.0, 5)
    for i in range(5):
        cell.take(i)
    assert cell.fail(2) is False
    assert cell.next_index() == 2
    cell.take(2)
    assert cell.fail(2) is True
    assert 2 in cell.lost
    for i in (0, 1, 3, 4):
        cell.receive(answer(i, True), 0.8, early_stop=False)
    r = cell.to_result(0.8)
    assert cell.settled
    assert r.trials == 4
    assert r.hits == 4
    assert r.status == "pass"


def test_tool_call_answers_are_misses_counted_apart():
    cell = CellRun(size=800, depth=0.5, planned=4)
    for i, (hit, tool) in enumerate([(True, None), (False, "search"), (False, None), (False, "search")]):
        cell.take(i)
        cell.receive(
            RecallAnswer(trial=i, needle="X", answer="", hit=hit, tool_call=tool), 0.8, early_stop=False
        )
    result = cell.to_result(0.8)
    assert (result.hits, result.trials, result.tool_call_answers) == (1, 4, 2)
    assert [a.tool_call for a in result.answers] == [None, "search", None, "search"]
