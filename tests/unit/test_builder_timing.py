"""Each builder's time per call, as its worker reports it with every answer: summed per builder,
a warning past 200 ms per call, and numbers that are not plausible (the answer crossed from the
builder's own process) ignored."""

from __future__ import annotations

import pytest

from needle_action.assemble.builder import client as builder


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(builder, "_timings", {})


def _answers(name: str, *answers: dict) -> None:
    timing = builder._timing_of(builder.BuilderSpec.parse(name))
    for answer in answers:
        timing.add(answer)


def test_only_a_builder_slower_than_200_ms_per_call_is_a_warning(fresh):
    _answers("app/a.py:fast", *[{"ok": {}, "seconds": 0.0012, "refused": 0}] * 4)
    _answers("app/a.py:slow", {"ok": {}, "seconds": 0.15}, {"ok": {}, "seconds": 0.35, "refused": 2})
    lines, warnings = builder.timing_report()
    assert lines == [
        "builder app/a.py:fast: 4 calls, 1.2 ms per call",
        "builder app/a.py:slow: 2 calls, 250 ms per call, 2 network calls refused (builders have no network)",
    ]
    assert len(warnings) == 1
    assert warnings[0].startswith(
        "the builder app/a.py:slow takes 250 ms per call (over 200 ms): likely a client"
    )


def test_a_builder_at_the_limit_is_not_slow(fresh):
    _answers("app/a.py:edge", {"ok": {}, "seconds": builder.SLOW_CALL_SECONDS})
    assert builder.timing_report()[1] == []


@pytest.mark.parametrize("seconds", ["1", -1.0, float("nan"), float("inf"), True, None])
def test_an_implausible_time_is_not_counted(fresh, seconds):
    _answers("app/a.py:odd", {"ok": {}, "seconds": seconds, "refused": "many"})
    assert builder.timings() == []
    assert builder.timing_report() == ([], [])
