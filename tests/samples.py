"""Sample requests shared by unit and integration tests (data only, no behaviour)."""

from __future__ import annotations

from typing import Any

# A short retrieval chat in the Anthropic Messages shape: a system text, a multi-turn history and a
# last user turn given as content blocks (the runtime guard and the fake count both shapes).
SYSTEM = "You answer questions about the retrieved documents only. Cite the document id."
MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "Doc 1: The Rhine flows through six countries.\n\nQuestion: how many?"},
    {"role": "assistant", "content": "Six."},
    {"role": "user", "content": [{"type": "text", "text": "And which river is it?"}]},
]
