"""The interface every token counter implements."""

from __future__ import annotations

from typing import Protocol

from needle_action.request.prompt import RenderedPrompt


class TokenCounter(Protocol):
    name: str  # e.g. "tiktoken:o200k_base", "anthropic", "local:gemma3-270m"
    exact: bool  # True when this is the model's own tokenizer / API
    cache_id: str  # what the count cache is keyed by (name + anything else the count depends on)
    calls_api: bool  # each count is a network call (the provider's count endpoint)

    def count_texts(self, texts: list[str]) -> list[int]: ...

    def count_prompt(self, prompt: RenderedPrompt) -> int: ...


def is_claude(model: str) -> bool:
    return "claude" in model.lower()
