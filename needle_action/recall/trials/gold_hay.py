"""The hay of gold trials (``needle = "gold"``): the fixture's context without its gold item, in
each trial's order, and the check that a cell's trials are not one prompt asked again.

The gold needle and its question are the fixture's own, the same in every trial, so trials differ
only by their hay: the fixture's other items in the trial's order
(:class:`~needle_action.recall.trials.probes.gold.TrialOrders`), then the repository's passages, then
generated filler from the trial's own stream (:mod:`~needle_action.recall.trials.haystack`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from needle_action.recall.trials.probes.gold import TrialOrders
from needle_action.recall.trials.sizing import FillerUnit
from needle_action.request.prompt import RenderedPrompt


@dataclass
class GoldHay:
    """One prompt's gold hay: REST (the fixture's other items, counted, as the fixture lists them),
    REPO (the repository's passages after them) and their ORDERS per trial. WHERE and PROMPT name
    the fixture and the prompt in the warning."""

    rest: list[FillerUnit]
    repo: list[FillerUnit]
    orders: TrialOrders
    where: str
    prompt: str
    warnings: list[str] = field(default_factory=list)  # printed once each (on stderr) as they arise
    _seen: dict[tuple[int, float], dict[str, int]] = field(default_factory=dict)  # cell -> digest -> trial

    def units(self, trial: int) -> list[FillerUnit]:
        """Trial TRIAL's fixed filler: the fixture's other items in its order, then the repo's."""
        return [self.rest[i] for i in self.orders.of(trial)] + self.repo

    def check_repeat(self, size: int, depth: float, trial: int, rendered: RenderedPrompt) -> None:
        """Warn (once per prompt) when TRIAL is word for word another trial of its cell: too few
        other items to reorder and no generated filler to differ in. It still counts as a trial."""
        first = self._seen.setdefault((size, depth), {}).setdefault(rendered.content_hash(), trial)
        if first == trial or self.warnings:  # one per prompt: the first says what to do
            return
        message = (
            f"{self.where}: gold trials {min(first, trial)} and {max(first, trial)} of prompt "
            f"{self.prompt!r} (size {size}, depth {depth:g}) are the same prompt word for word: the "
            f"fixture has {self.orders.n} item(s) besides the gold one to reorder and the size needs no "
            "generated filler, so such trials count more than once. Add the other items retrieved with "
            "the gold one to the fixture, or use a larger size"
        )
        self.warnings.append(message)
        print(f"warning: {message}", file=sys.stderr, flush=True)
