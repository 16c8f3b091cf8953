"""Provider health for the scheduler: each provider's calls in flight, its answers, the trials it
lost in a row, and whether it is dead.

A call that exhausts its retries loses that trial only: it is asked once more, then counted lost,
and the rest go on (lost trials alone never make a run partial). The provider is declared dead
(every prompt on it stops, partial) when it refuses our credentials or after ``DEAD_AFTER`` distinct
trials lost in a row, none of them outlived by another call's answer: at a 60% fault rate with 7
attempts a call is lost 2.8% of the time, so five in a row by chance is about 1 in 60 million. A
request the provider rejects for good (400/404) stops that prompt.
"""

from __future__ import annotations

from dataclasses import dataclass

from needle_action.recall.run.prompt_plan import PromptPlan

PROVIDER_STOP_PREFIX = "provider unavailable: "
DEAD_AFTER = 5  # distinct trials lost in a row (no success between) after which a provider is dead


@dataclass
class ProviderState:
    """One provider's calls in flight, answers and losses."""

    in_flight: int = 0
    lost_in_a_row: int = 0
    successes: int = 0  # answers received so far
    dead: str | None = None

    def answered(self) -> None:
        self.lost_in_a_row = 0
        self.successes += 1

    def lost(self, *, first: bool, successes_at_start: int) -> None:
        """A call exhausted its retries (FIRST: its trial's first failure; SUCCESSES_AT_START: the
        answers received when it started). A trial asked again after failing is expected to fail
        again: only first failures of distinct trials in a row say the provider itself is down, and
        only while nothing else got an answer since they started (a request the server always
        refuses fails after its retries, so such trials finish together, after their neighbours')."""
        if first and self.successes == successes_at_start:
            self.lost_in_a_row += 1

    @property
    def down(self) -> bool:
        """Have enough distinct trials been lost in a row to call the provider dead?"""
        return self.lost_in_a_row >= DEAD_AFTER


def stop_plan(plan: PromptPlan, message: str) -> None:
    """PLAN stops: its provider failed (MESSAGE says how; the first provider reason is kept)."""
    plan.outcome.provider_failed = True
    reason = plan.outcome.stop_reason
    if reason is None or not reason.startswith(PROVIDER_STOP_PREFIX):
        plan.outcome.stop_reason = f"{PROVIDER_STOP_PREFIX}{message}"
