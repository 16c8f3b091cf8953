"""Token counting behind one interface, each count labelled exact or approximate.

Counters (the ``tokenizer`` key of a prompt):

``tiktoken:o200k_base`` / ``tiktoken:cl100k_base``
    OpenAI's BPE encodings, offline. Exact only for an OpenAI model that uses that encoding
    (``gpt-4o`` -> o200k_base, ``gpt-4`` -> cl100k_base, ...). A chat request is counted the way
    OpenAI documents it: every message costs its content, its role, and 3 framing tokens, and the
    reply is primed with 3 more (see docs/tokens.md). Counting a Claude model this way is an
    approximation, so ``count_prompts`` multiplies by ``tokenizer_safety_factor``.
``anthropic``
    Exact: ``messages.count_tokens`` on the whole request, system included (one HTTP call each).
``local``
    The embedded model's own tokenizer (llama-cpp-python, vocabulary only), on exactly the text the
    local provider feeds the model: the chat laid out by the gguf's chat template, or, for a base
    model without one (the bundled Gemma 3 270M), the provider's plain transcript plus BOS.

``count_prompts`` is the fast path the pipeline uses: it keeps a process-wide cache keyed by
(counter, content hash), so the base and head of an unchanged prompt, or recall trials that repeat
a prompt, are never encoded twice, and it sends every uncached text of a batch to the encoder in
one ``encode_ordinary_batch`` call.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from needle_action.assemble.prompt import RenderedPrompt
from needle_action.config.model import PromptSettings, ProviderSettings
from needle_action.errors import ConfigError
from needle_action.results import TokenCount
from needle_action.tokens import sections
from needle_action.tokens.anthropic_counter import AnthropicCounter
from needle_action.tokens.base import TokenCounter, is_claude
from needle_action.tokens.local_counter import LocalCounter
from needle_action.tokens.tiktoken_counter import TiktokenCounter

_counters: dict[tuple[Any, ...], TokenCounter] = {}
_counters_lock = threading.Lock()


def get_counter(spec: str, *, model: str, settings: PromptSettings) -> TokenCounter:
    """The counter for tokenizer SPEC (``tiktoken:ENC``, ``anthropic``, ``local``), built once."""
    provider_key = spec if spec in ("anthropic", "local") else None
    ps = settings.providers.get(provider_key) if provider_key else None
    key = (spec, model, settings.provider, ps.model_dump_json() if ps else None)
    with _counters_lock:
        if key in _counters:
            return _counters[key]
    if spec == "anthropic":
        # not kept: the key and ANTHROPIC_BASE_URL are read from the environment each time
        return AnthropicCounter(model=model, provider_settings=ps or ProviderSettings())
    if spec.startswith("tiktoken:"):
        counter: TokenCounter = TiktokenCounter(spec.split(":", 1)[1], model=model)
    elif spec == "local":
        counter = LocalCounter(model=model, settings=settings)
    else:
        raise ConfigError(
            f"unknown tokenizer {spec!r}",
            hint='use "tiktoken:o200k_base", "tiktoken:cl100k_base", "anthropic" or "local"',
        )
    with _counters_lock:
        return _counters.setdefault(key, counter)


_cache: dict[tuple[str, str], int] = {}
_cache_lock = threading.Lock()
_cache_enabled = True


def set_cache_enabled(enabled: bool) -> None:
    """Switch the count cache on or off (the benchmark measures both)."""
    global _cache_enabled
    _cache_enabled = enabled


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


def safety_factor_for(counter: TokenCounter, settings: PromptSettings) -> float:
    """tiktoken's count of a Claude prompt is an estimate: pad it by the configured factor."""
    if isinstance(counter, TiktokenCounter) and is_claude(settings.model):
        return settings.tokenizer_safety_factor
    return 1.0


def _apply_factor(raw: int, factor: float) -> int:
    # round first so that 1000 * 1.15 (= 1150.0000000000002 in floating point) is 1150, not 1151
    return math.ceil(round(raw * factor, 6)) if factor != 1.0 else raw


def _raw_counts(counter: TokenCounter, prompts: Sequence[RenderedPrompt]) -> list[int]:
    """The counter's count of every prompt; cached by (counter, content hash)."""
    keys = [(counter.cache_id, p.content_hash()) for p in prompts]
    raw: dict[tuple[str, str], int] = {}
    if _cache_enabled:
        with _cache_lock:
            raw = {k: _cache[k] for k in keys if k in _cache}
    todo: dict[tuple[str, str], RenderedPrompt] = {}
    for k, p in zip(keys, prompts, strict=True):
        if k not in raw and k not in todo:
            todo[k] = p
    if todo:
        pending = list(todo.values())
        if isinstance(counter, TiktokenCounter):
            counted = counter.count_many(pending)
        elif isinstance(counter, AnthropicCounter) and len(pending) > 1:
            with ThreadPoolExecutor(max_workers=min(8, len(pending))) as pool:  # one HTTP call each
                counted = list(pool.map(counter.count_prompt, pending))
        else:
            counted = [counter.count_prompt(p) for p in pending]
        fresh = dict(zip(todo, counted, strict=True))
        raw.update(fresh)
        if _cache_enabled:
            with _cache_lock:
                _cache.update(fresh)
    return [raw[k] for k in keys]


def _sections(
    counter: TokenCounter, prompts: Sequence[RenderedPrompt], raws: list[int]
) -> list[dict[str, int]]:
    """Each prompt's count by section (tokens/sections.py): the variants of every prompt are
    counted in one go, through the same cache."""
    found = [sections.variants(p) for p in prompts]
    flat = [v for f in found for v in f.values()]
    counted = iter(_raw_counts(counter, flat))
    out = []
    for p, f, raw in zip(prompts, found, raws, strict=True):
        mine = [next(counted) for _ in f]
        out.append(sections.by_difference(p, raw, _given(mine)))
    return out


def _given(counts: list[int]) -> Callable[[list[RenderedPrompt]], list[int]]:
    """A count function answering COUNTS (counted already, in the variants' order)."""
    return lambda _variants: counts


def count_prompts(prompts: Sequence[RenderedPrompt], prompt_settings: PromptSettings) -> list[TokenCount]:
    """Count every prompt with PROMPT_SETTINGS' tokenizer, by section too; cached by (counter,
    content hash)."""
    counter = get_counter(prompt_settings.tokenizer, model=prompt_settings.model, settings=prompt_settings)
    raws = _raw_counts(counter, prompts)
    parts = _sections(counter, prompts, raws)
    factor = safety_factor_for(counter, prompt_settings)
    out = []
    for p, raw, sec in zip(prompts, raws, parts, strict=True):
        tokens = _apply_factor(raw, factor)
        exact_for = getattr(counter, "exact_for", None)
        out.append(
            TokenCount(
                tokens=tokens,
                raw_tokens=raw,
                counter=counter.name,
                exact=exact_for(p) if exact_for is not None else counter.exact,
                safety_factor=factor,
                sections=sections.scaled(sec, raw, tokens),
            )
        )
    return out
