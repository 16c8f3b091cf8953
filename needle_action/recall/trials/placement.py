"""Where the needle, its later facts and its look-alikes go in the context slot, per slot shape.

- a **list slot** (documents, turns, strings): the needle item goes at the item boundary nearest to
  ``depth`` of the slot's tokens (``round(depth * n)`` when items are the same size);
- a **string slot**: the needle goes at the sentence boundary nearest to ``depth`` of the slot's
  tokens.

Distractors go at other depths (0.1 .. 0.9, at least 0.15 away from the needle); a multi-hop needle's
second fact goes near the end (depth 0.95, or just after the first fact when that is deeper).
"""

from __future__ import annotations

import bisect
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from needle_action.recall.trials.probes.needle import Needle
from needle_action.recall.trials.slot import SlotShape

DISTRACTOR_DEPTHS = (0.1, 0.3, 0.5, 0.7, 0.9)
SECOND_HOP_DEPTH = 0.95
_NEEDLE_TITLES = (
    "Operations note",
    "Internal memo",
    "Records update",
    "Team bulletin",
    "Reference sheet",
    "Status digest",
)
# sentence ends where a fact may go: after . ! ? (and a closing quote/bracket) before whitespace
_BOUNDARY = re.compile(r"[.!?][\"')\]]?(?=\s)|\n")

Place = tuple[float, int, str, bool]  # (depth, order, text, is_needle)


def placements(depth: float, needle: Needle, seed: int) -> list[Place]:
    """(depth, order, text, is_needle) for every fact and distractor, by depth."""
    out: list[Place] = [(depth, 0, needle.facts[0], True)]
    if len(needle.facts) > 1:
        second = SECOND_HOP_DEPTH if depth < SECOND_HOP_DEPTH else depth
        out.extend((second, i, f, True) for i, f in enumerate(needle.facts[1:], start=1))
    if needle.distractors:
        # seeded, not secure: a trial's layout is a pure function of the seed and the needle
        rng = random.Random(f"{seed}:{needle.key}:distractors")
        taken = [d for d, *_ in out]
        free = [d for d in DISTRACTOR_DEPTHS if all(abs(d - t) >= 0.15 for t in taken)]
        rng.shuffle(free)
        while len(free) < len(needle.distractors):  # few free depths: reuse them
            free.extend(free or list(DISTRACTOR_DEPTHS))
        for i, (text, d) in enumerate(zip(needle.distractors, free, strict=False)):
            out.append((d, 10 + i, text, False))
    return sorted(out, key=lambda p: (p[0], p[1]))


@dataclass(frozen=True)
class Placer:
    """Puts a needle into filler for one prompt's slot: SHAPE, the template's tokens per item
    (OVERHEAD), SEED, and DEAL, which reorders a list slot's items (``recall.reorder_ab``)."""

    shape: SlotShape
    seed: int
    overhead: float = 0.0
    deal: Callable[[list[Any]], list[Any]] | None = None

    def context(self, taken: list[tuple[Any, float]], depth: float, needle: Needle) -> Any:
        """The slot's value: the filler TAKEN ((item, tokens) in order) with NEEDLE at DEPTH."""
        places = placements(depth, needle, self.seed)
        filler = [item for item, _ in taken]
        if self.shape.is_list:
            return self._list_context(taken, places, needle)
        return string_context(filler, [c for _, c in taken], places)

    def _list_context(self, taken: list[tuple[Any, float]], places: list[Place], needle: Needle) -> Any:
        n = len(taken)
        # the item boundary nearest to DEPTH of the slot's tokens (= round(depth * n) for equal items)
        cum = [0.0]
        for _, tokens in taken:
            cum.append(cum[-1] + tokens + self.overhead)
        slots: dict[int, list[Any]] = {}
        for d, order, text, _ in places:
            k = bisect.bisect_left(cum, d * cum[-1])
            at = min(range(max(0, k - 1), min(n, k) + 1), key=lambda i: abs(cum[i] - d * cum[-1]))
            slots.setdefault(at, []).append(self.needle_item(text, needle, order))
        out: list[Any] = []
        for i in range(n + 1):
            out.extend(slots.get(i, []))
            if i < n:
                out.append(taken[i][0])
        return self.deal(out) if self.deal is not None else out

    def needle_item(self, text: str, needle: Needle, order: int) -> Any:
        """The slot item carrying fact or distractor TEXT (ORDER: its place in the needle)."""
        if order == 0 and needle.item is not None:
            return needle.item  # gold: the fixture's own item, title and role included
        # the needle item's title (and the fixture item it copies) do not depend on the needle's value:
        # every trial's text is then the same up to the fact itself, which is what trials can share
        rng = random.Random(f"{self.seed}:title:{order}")
        title = f"{rng.choice(_NEEDLE_TITLES)} {rng.randint(2, 48)}"
        return self.shape.item(text, title, index=rng.randrange(1 << 16), needle=True)


def string_context(paragraphs: list[str], counts: list[float], places: list[Place]) -> str:
    """PARAGRAPHS (their token COUNTS) joined, each fact of PLACES at the sentence boundary nearest
    to its depth of the tokens."""
    text = "\n\n".join(paragraphs)
    if not text:
        return "\n\n".join(t for _, _, t, _ in places)
    # token position -> char position, through the pre-counted paragraphs
    starts: list[int] = []
    cum: list[float] = [0]
    pos = 0
    for p, c in zip(paragraphs, counts, strict=True):
        starts.append(pos)
        pos += len(p) + 2
        cum.append(cum[-1] + c)
    total = cum[-1] or 1
    bounds = [0] + [m.end() for m in _BOUNDARY.finditer(text)] + [len(text)]
    pieces, last = [], 0
    for d, _, fact, _ in places:
        if d <= 0:
            at = 0
        elif d >= 1:
            at = len(text)
        else:
            target = d * total
            j = min(len(paragraphs) - 1, max(0, bisect.bisect_right(cum, target) - 1))
            frac = (target - cum[j]) / max(1, counts[j])
            char = starts[j] + frac * len(paragraphs[j])
            k = bisect.bisect_left(bounds, char)
            at = min(bounds[max(0, k - 1) : k + 1], key=lambda b: abs(b - char))
        at = max(at, last)
        pieces.append(text[last:at])
        pieces.append(_framed(fact, text, at))
        last = at
    pieces.append(text[last:])
    return "".join(pieces)


def _framed(fact: str, text: str, at: int) -> str:
    """FACT as inserted into TEXT at AT: its own paragraph at either end, else within the line."""
    if at == 0:
        return fact + "\n\n"
    if at == len(text):
        return "\n\n" + fact
    if text[at - 1] == "\n":
        return fact + "\n"
    return " " + fact
