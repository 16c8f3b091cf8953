"""Token counting behind one interface (:class:`TokenCounter`), each count labelled exact or not."""

from needle_action.tokens.anthropic_counter import AnthropicCounter
from needle_action.tokens.base import TokenCounter, is_claude
from needle_action.tokens.counting import (
    clear_cache,
    count_prompts,
    get_counter,
    safety_factor_for,
    set_cache_enabled,
)
from needle_action.tokens.local_counter import LocalCounter
from needle_action.tokens.tiktoken_counter import TiktokenCounter, load_encoding

__all__ = [
    "AnthropicCounter",
    "LocalCounter",
    "TiktokenCounter",
    "TokenCounter",
    "clear_cache",
    "count_prompts",
    "get_counter",
    "is_claude",
    "load_encoding",
    "safety_factor_for",
    "set_cache_enabled",
]
