"""Orderings of retrieved context that suit how models read a long prompt.

Shared by the checker (recall's reorder arm measures what ``edge_order`` would change) and the
app-facing :mod:`needle_action.runtime`, which re-exports it; it needs only the standard library.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")

__all__ = ["edge_order"]


def edge_order(chunks: Iterable[T], scores: Sequence[float] | None = None) -> list[T]:
    """Reorder retrieved chunks so the most relevant sit at both edges, the least in the middle.

    Models recall what is at the start and at the end of a long context far better than what is
    in the middle ("lost in the middle", Liu et al. 2023). A retriever returns chunks best-first;
    sending them in that order buries ranks 2..n progressively deeper. ``edge_order`` deals the
    ranked chunks alternately to the front and to the back::

        ranks   1 2 3 4 5 6 7
        result  1 3 5 7 6 4 2      # 1st first, 2nd last, 3rd second, 4th second-to-last, ...

    so relevance falls from both edges towards the middle, where the weakest chunks end up.

    ``scores``: one relevance score per chunk, higher is more relevant. Without scores the input
    order is taken as the ranking (best first). With scores, chunks are ranked by score
    descending; ties keep their input order (the sort is stable), so the result is deterministic.
    Returns a new list; the input is not modified.
    """
    items = list(chunks)
    if scores is None:
        ranked = items
    else:
        scores = list(scores)
        if len(scores) != len(items):
            raise ValueError(
                f"edge_order: {len(items)} chunks but {len(scores)} scores; give one score per chunk"
            )
        for s in scores:
            if isinstance(s, bool) or not isinstance(s, int | float) or math.isnan(s):
                raise ValueError(f"edge_order: every score must be a number, got {s!r}")
        order = sorted(range(len(items)), key=lambda i: -scores[i])  # stable: ties keep input order
        ranked = [items[i] for i in order]
    front = ranked[0::2]  # ranks 1, 3, 5, ... from the start inwards
    back = ranked[1::2]  # ranks 2, 4, 6, ... from the end inwards
    return front + back[::-1]
