"""Splitting a run's cells over several machines, and joining the slices again.

``Shard(i, n)`` (``--shard i/n``) keeps every n-th cell of each prompt, offset by a stable hash of
the prompt's name so small grids spread over all shards. A cell is measured whole (all its trials,
early stopping included) and every trial's needle and filler come from its coordinates, so a cell
measured in a shard is the cell an unsharded run measures. :func:`merge` joins the slices' results
files into one, and recomputes each prompt's verdict from the joined cells with the same rule the
engine uses (:func:`needle_action.recall.run.engine.conclude`).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from needle_action.core.errors import ConfigError

T = TypeVar("T")
_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    """Slice INDEX (1-based) of COUNT."""

    index: int  # 1-based
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/3"`` -> Shard(2, 3); anything else is a ConfigError with an example."""
        m = _SPEC.match(text or "")
        if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
            raise ConfigError(
                f"--shard must look like i/n with 1 <= i <= n, not {text!r}", hint="e.g. --shard 2/3"
            )
        return cls(int(m.group(1)), int(m.group(2)))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def select(self, prompt_name: str, cells: Sequence[T]) -> list[T]:
        """The cells of PROMPT_NAME's grid (in grid order) that belong to this shard."""
        offset = zlib.crc32(prompt_name.encode("utf-8"))
        return [c for k, c in enumerate(cells) if (k + offset) % self.count == self.index - 1]
