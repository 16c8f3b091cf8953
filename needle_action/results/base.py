"""What every part of the results file shares: the status words and the model base."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
)

Status = Literal["pass", "fail", "skipped", "error"]


RecallStatus = Literal["pass", "fail", "partial"]


CellStatus = Literal["pass", "fail", "undecided"]


Diagnosis = Literal[
    "all-pass",
    "lost-in-the-middle",
    "size-limited",
    "flaky",
    "inconclusive",
    "mixed-failure",
    "hallucination",
]


class Model(BaseModel):
    model_config = ConfigDict(extra="ignore")
