"""The :class:`Needle`: what one trial hides in the context slot, asks in the question slot, and
accepts as the answer. Every style (``needle_action.recall.trials.needles``) produces one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Needle:
    """One trial's probe.

    ``facts[0]`` goes at the trial depth (for ``absent`` it is the near miss, not an answer; for
    ``gold`` the gold passage); a multi-hop needle's later facts go near the end. ``distractors`` go
    at other depths and ``distractor_values`` are the answers they would give, so an answer can be
    recognised as a confusion (precision). ``answer`` is the scoring target and what the results
    show as expected; ``gold`` adds ``accepted`` alternatives or a ``pattern``.
    """

    style: str  # codeword | sentence | distractors | multihop | custom | gold | nonlexical | absent
    facts: tuple[str, ...]
    question: str  # goes into the prompt's question slot
    answer: str  # expected answer (absent: a label; the scoring target is an abstention)
    distractors: tuple[str, ...] = ()  # look-alike facts placed at other depths
    distractor_values: tuple[str, ...] = ()  # the value each look-alike (or near miss) states
    accepted: tuple[str, ...] = ()  # gold: every accepted answer string (any one is a hit)
    pattern: str | None = None  # gold: a regex any match of which is a hit
    absent: bool = False  # the answer is not in the context: a correct reply says so
    item: Any = field(default=None, hash=False)  # gold in a list slot: the fixture's own item, as is

    @property
    def key(self) -> str:
        """A string unique to this trial's needle: seeds where its look-alikes go and its item title.
        Gold and absent answers repeat across trials, so the first fact and question join the value."""
        return f"{self.answer}\x00{self.facts[0] if self.facts else ''}\x00{self.question}"
