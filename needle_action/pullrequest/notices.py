"""Where a pull request's measurement says what it is doing: the face decides.

The CLI prints progress and warnings on stderr (its stdout carries the report); the action writes
progress to the job's log and warnings as workflow annotations, and masks secrets it derives
(:class:`needle_action.action.workflow.WorkflowNotices`). The measurement only ever calls these.
"""

from __future__ import annotations

import sys
from typing import Protocol


class Notices(Protocol):
    """Progress, warnings and secrets to hide, as the face running the measurement shows them."""

    def say(self, message: str) -> None:
        """A progress line."""

    def warn(self, message: str) -> None:
        """A warning the user should read."""

    def mask(self, secret: str) -> None:
        """A value derived from a secret, never to be shown."""


class TerminalNotices:
    """The CLI's: progress and warnings on stderr; nothing is logged that needs masking."""

    def say(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    def warn(self, message: str) -> None:
        print(f"warning: {message}", file=sys.stderr, flush=True)

    def mask(self, secret: str) -> None:
        """A terminal keeps no log to mask."""
