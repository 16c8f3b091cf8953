"""The assembled request: what the application would send to the model.

Lives apart from ``assemble`` so that tokens, recall and providers can share it without importing
Jinja2 machinery.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Literal

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True)
class RenderedPrompt:
    """System text (Anthropic-style, separate) plus the user/assistant turns, in order."""

    system: str | None
    messages: tuple[Message, ...]
    source: str = ""  # template path, for messages and annotations
    fixture: str | None = None
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    def to_json(self) -> dict:
        return {
            "system": self.system,
            "messages": [{"role": m.role, "content": m.content} for m in self.messages],
        }

    def content_hash(self) -> str:
        blob = json.dumps(self.to_json(), sort_keys=True, ensure_ascii=False).encode("utf-8")
        return hashlib.sha256(blob).hexdigest()

    def texts(self) -> list[str]:
        out = [self.system] if self.system else []
        out.extend(m.content for m in self.messages)
        return out

    def as_text(self) -> str:
        """Human-readable form used by ``needle render``."""
        parts = []
        if self.system is not None:
            parts.append(f"--- system ---\n{self.system}")
        for m in self.messages:
            parts.append(f"--- {m.role} ---\n{m.content}")
        return "\n".join(parts) + "\n"
