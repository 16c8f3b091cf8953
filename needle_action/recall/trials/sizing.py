"""How much filler makes a trial prompt of a given size: pre-counted filler units, and the search.

Filler units (the fixture's own context, repository passages, then generated prose) are counted in
one batch call each time a stream grows. A monotone search over "how many words of filler" starts
from an estimate built on those counts and the per-item template overhead, then corrects with real
measurements of the rendered prompt (a handful of renders, not hundreds).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from needle_action.core.errors import ConfigError
from needle_action.recall.trials.filler import Passage, generated_passages
from needle_action.recall.trials.slot import SlotShape
from needle_action.request.prompt import RenderedPrompt
from needle_action.tokens import TiktokenCounter, TokenCounter

MAX_MEASURES = 14  # renders one size search may measure

# words of filler -> (the rendered prompt, its measured tokens)
Render = Callable[[int], tuple[RenderedPrompt, int]]


class SizeTooSmall(ConfigError):
    """The requested size is below what the prompt needs with an empty context and the needle."""


class ContextDoesNotGrow(Exception):  # noqa: N818 - a fact the caller words, not an error of its own
    """Filler added to the context slot does not make the prompt grow (a filter cuts it, a branch
    skips it): the size cannot be reached. Carries the largest prompt measured."""

    def __init__(self, size: int, reached: int) -> None:
        super().__init__(size, reached)
        self.size, self.reached = size, reached


@dataclass
class FillerUnit:
    item: Any
    tokens: int
    word_ends: list[int]  # char offsets in the body after each word (for cutting)

    @property
    def words(self) -> int:
        return max(1, len(self.word_ends))


def unit_counter_for(counter: TokenCounter) -> TokenCounter:
    """A local counter for pre-counting filler units: tiktoken instead of one API call per unit."""
    if counter.calls_api:
        return TiktokenCounter("o200k_base", model="claude")
    return counter


@dataclass
class UnitMaker:
    """Slot items -> counted filler units (one batch count per call)."""

    shape: SlotShape
    counter: TokenCounter

    def units(self, items: list[Any]) -> list[FillerUnit]:
        texts = [self.shape.text_of(it) for it in items]
        counts = self.counter.count_texts(texts) if texts else []
        out = []
        for it, n in zip(items, counts, strict=True):
            body = self.shape.body(it)
            out.append(FillerUnit(it, int(n), [m.end() for m in re.finditer(r"\S+", body)]))
        return out

    def items(self, passages: list[Passage], start: int) -> list[Any]:
        """PASSAGES as slot items (the fixture items they copy taken in turn from START on)."""
        shape = self.shape
        return [shape.item(p.text, p.title, index=start + i, needle=False) for i, p in enumerate(passages)]


class FillerStream:
    """Filler units: fixture + repo then generated passages, counted. One stream serves every trial
    and every depth, so the text before a needle is a prefix of the text before any deeper needle
    (what prompt caching and the local model's KV reuse feed on). OVERHEAD: the template's tokens
    per item, added to each unit's estimate."""

    BATCH = 48

    def __init__(self, seed: str, fixed: list[FillerUnit], maker: UnitMaker, overhead: float) -> None:
        self.maker, self.overhead = maker, overhead
        self.units: list[FillerUnit] = list(fixed)
        self._gen: Iterator[Passage] = generated_passages(seed)
        self._cum_words = [0]
        self._cum_tokens = [0.0]
        for u in self.units:
            self._append_cum(u)

    def _append_cum(self, u: FillerUnit) -> None:
        self._cum_words.append(self._cum_words[-1] + u.words)
        self._cum_tokens.append(self._cum_tokens[-1] + u.tokens + self.overhead)

    def extend(self) -> None:
        passages = list(islice(self._gen, self.BATCH))
        for u in self.maker.units(self.maker.items(passages, len(self.units))):
            self.units.append(u)
            self._append_cum(u)

    def estimate(self, words: int) -> float:
        """Estimated filler tokens (overhead included) for the first WORDS words."""
        while self._cum_words[-1] < words:
            self.extend()
        k = bisect.bisect_right(self._cum_words, words) - 1
        rest = words - self._cum_words[k]
        est = self._cum_tokens[k]
        if rest > 0:
            u = self.units[k]
            est += u.tokens * rest / u.words + self.overhead
        return est

    def words_for(self, tokens: float) -> int:
        """Smallest word count whose estimate reaches TOKENS."""
        while self._cum_tokens[-1] < tokens:
            self.extend()
        lo, hi = 0, self._cum_words[-1]
        while lo < hi:
            mid = (lo + hi) // 2
            if self.estimate(mid) >= tokens:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def take(self, words: int) -> list[tuple[Any, float]]:
        """(slot item, its tokens) for the first WORDS words: whole units, the last cut at a word end."""
        while self._cum_words[-1] < words:
            self.extend()
        k = bisect.bisect_right(self._cum_words, words) - 1
        out = [(u.item, float(u.tokens)) for u in self.units[:k]]
        rest = words - self._cum_words[k]
        if rest > 0:
            u = self.units[k]
            shape = self.maker.shape
            body = shape.body(u.item)
            cut = body[: u.word_ends[rest - 1]] if u.word_ends else body
            out.append((shape.with_body(u.item, cut), u.tokens * rest / u.words))
        return out


def search_words(size: int, render: Render, stream: FillerStream, where: dict[str, Any]) -> int:
    """Filler words whose rendered prompt (with the reference needle) measures SIZE tokens. WHERE:
    the prompt's name, file and line, for the error when SIZE is below the prompt itself."""
    floor_prompt, floor = render(0)
    if floor > size:
        raise SizeTooSmall(
            f"size {size} is smaller than prompt {where['prompt']!r} itself: {floor} tokens with an "
            "empty context and only the needle",
            file=where["file"],
            line=where["line"],
            hint=f'use sizes above {floor} tokens, or sizes = "auto"',
        )
    tol = max(2, size // 200)
    best: tuple[int, RenderedPrompt, int, int] = (abs(size - floor), floor_prompt, floor, 0)
    if best[0] > tol:
        best = _search(size, tol, floor, stream, render, best)
    if best[2] < size - max(tol, size // 5):
        raise ContextDoesNotGrow(size, best[2])
    return best[3]


Best = tuple[int, RenderedPrompt, int, int]  # (distance to the size, prompt, its tokens, filler words)


def _search(size: int, tol: int, floor: int, stream: FillerStream, render: Render, best: Best) -> Best:
    """Monotone search for the filler word count whose rendered prompt measures SIZE."""
    lo: tuple[int, int] = (0, floor)  # (words, measured) known to be below the target
    hi: tuple[int, int] | None = None  # known to be above
    # start from the estimate, never from another cell's answer: a cell's layout must not depend
    # on which cells were built before it (shards, concurrency), or prompts would differ
    words = stream.words_for(size - floor)
    for _ in range(MAX_MEASURES):
        rendered, m = render(words)
        if abs(size - m) < best[0]:
            best = (abs(size - m), rendered, m, words)
        if abs(size - m) <= tol:
            break
        if m < size:
            lo = max(lo, (words, m))
        elif hi is None or words < hi[0]:
            hi = (words, m)
        if hi is not None:
            if hi[0] - lo[0] <= 1:
                break
            # secant between the bracket ends, kept strictly inside
            guess = lo[0] + (size - lo[1]) * (hi[0] - lo[0]) / max(1, hi[1] - lo[1])
            words = min(hi[0] - 1, max(lo[0] + 1, round(guess)))
        else:
            # no upper bound yet: step by the estimate's local rate of tokens per word
            rate = max(0.05, (stream.estimate(words + 50) - stream.estimate(words)) / 50)
            step = max(1, round((size - m) / rate))
            words = words + step
    return best
