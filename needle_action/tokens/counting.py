"""Token counting behind one interface, each count labelled exact or approximate.

Counters (the ``tokenizer`` key of a prompt):

``tiktoken:o200k_base`` / ``tiktoken:cl100k_base``
    OpenAI's BPE encodings, offline. Exact only for an OpenAI model that uses that encoding
    (``gpt-4o`` -> o200k_base, ``gpt-4`` -> cl100k_base, ...). A chat request is counted the way
    OpenAI documents it: every message costs its content, its role, and 3 framing tokens, and the
    reply is primed with 3 more (see docs/tokens.md). Counting a Claude model this way is an
    approximation, so ``count_prompts`` multiplies by ``tokenizer_safety_factor``.
``anthropic``
    Exact: ``messages.count_tokens`` on the whole request, system included (one HTTP call each),
    through the prompt's provider when it has its own count endpoint (Bedrock's CountTokens,
    Vertex AI's count-tokens), else Anthropic's API.
``local``
    The embedded model's own tokenizer (llama-cpp-python, vocabulary only), on exactly the text the
    local provider feeds the model: the chat laid out by the gguf's chat template, or, for a base
    model without one (the bundled Gemma 3 270M), the provider's plain transcript plus BOS.

``count_prompts`` is the fast path the pipeline uses: it keeps a process-wide cache keyed by
(counter, content hash) holding each request's count and sections, so the base and head of an
unchanged prompt are never counted twice. The uncached requests of a call and their section
variants are counted together: with tiktoken, every distinct text of all of them goes to the
encoder in one batch (a variant repeats most of its request's texts, encoded once); with the
Anthropic counter, one ``count_tokens`` call per distinct request, concurrently.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from needle_action.config.model import Config, PromptSettings, ProviderSettings
from needle_action.core.errors import ConfigError
from needle_action.providers.specs import SPECS, model_family
from needle_action.request.prompt import RenderedPrompt
from needle_action.results import TokenCount
from needle_action.tokens import sections
from needle_action.tokens.anthropic_counter import AnthropicCounter
from needle_action.tokens.base import TokenCounter, is_claude
from needle_action.tokens.local_counter import LocalCounter
from needle_action.tokens.tiktoken_counter import TiktokenCounter

API_TOKENIZERS = ("anthropic",)  # tokenizers that count through a provider's count endpoint
OFFLINE_TOKENIZER = "tiktoken:o200k_base"  # what stands in for them with no network (an estimate)

_counters: dict[tuple[Any, ...], TokenCounter] = {}
_counters_lock = threading.Lock()


def count_offline(config: Config) -> None:
    """Count without the network: prompts whose tokenizer calls an API count with tiktoken instead
    (approximate, with their safety factor, marked ~ in the table)."""
    for prompt in config.prompts.values():
        if prompt.tokenizer in API_TOKENIZERS:
            prompt.tokenizer = OFFLINE_TOKENIZER


def get_counter(spec: str, *, model: str, settings: PromptSettings) -> TokenCounter:
    """The counter for tokenizer SPEC (``tiktoken:ENC``, ``anthropic``, ``local``), built once.
    ``anthropic`` counts through the prompt's provider when that provider has its own count
    endpoint (its spec's ``count_client``: Claude on Bedrock, on Vertex AI), else on Anthropic's API."""
    via = settings.provider if spec == "anthropic" and SPECS[settings.provider].count_client else None
    provider_key = via or (spec if spec in ("anthropic", "local") else None)
    ps = settings.providers.get(provider_key) if provider_key else None
    key = (spec, model, settings.provider, ps.model_dump_json() if ps else None)
    with _counters_lock:
        if key in _counters:
            return _counters[key]
    if spec == "anthropic":
        # not kept: the credentials and the endpoint are read from the environment each time
        return AnthropicCounter(model=model, provider_settings=ps or ProviderSettings(), via=via)
    if spec.startswith("tiktoken:"):
        # exact for the model's own encoding: a cloud's id (an Azure deployment) read as its model
        family = model_family(settings.provider, model)
        counter: TokenCounter = TiktokenCounter(spec.split(":", 1)[1], model=family)
    elif spec == "local":
        counter = LocalCounter(model=model, settings=settings)
    else:
        raise ConfigError(
            f"unknown tokenizer {spec!r}",
            hint='use "tiktoken:o200k_base", "tiktoken:cl100k_base", "anthropic" or "local"',
        )
    with _counters_lock:
        return _counters.setdefault(key, counter)


Key = tuple[str, str]  # (counter's cache_id, content hash)
Counted = tuple[int, dict[str, int]]  # a request's raw count and its sections
T = TypeVar("T")

_counted: dict[Key, Counted] = {}  # whole requests, with their sections
_raw: dict[Key, int] = {}  # single requests (section variants too) counted by a slow counter
_cache_lock = threading.Lock()
_cache_enabled = True


def set_cache_enabled(enabled: bool) -> None:
    """Switch the count cache on or off (the benchmark measures both)."""
    global _cache_enabled
    _cache_enabled = enabled


def clear_cache() -> None:
    with _cache_lock:
        _counted.clear()
        _raw.clear()


def safety_factor_for(counter: TokenCounter, settings: PromptSettings) -> float:
    """tiktoken's count of a Claude prompt is an estimate: pad it by the configured factor."""
    if isinstance(counter, TiktokenCounter) and is_claude(settings.model):
        return settings.tokenizer_safety_factor
    return 1.0


def _apply_factor(raw: int, factor: float) -> int:
    # round first so that 1000 * 1.15 (= 1150.0000000000002 in floating point) is 1150, not 1151
    return math.ceil(round(raw * factor, 6)) if factor != 1.0 else raw


def _counted_all(counter: TokenCounter, prompts: Sequence[RenderedPrompt]) -> list[Counted]:
    """Every prompt's raw count and sections: one cache lookup pass, then the misses counted
    together (:func:`_count_fresh`). Cache off: nothing is hashed."""
    if not _cache_enabled:
        return _count_fresh(counter, prompts)
    keys = [(counter.cache_id, p.content_hash()) for p in prompts]
    found, todo = _cached_and_todo(_counted, keys, prompts)
    if todo:
        fresh = dict(zip(todo, _count_fresh(counter, list(todo.values())), strict=True))
        found.update(fresh)
        with _cache_lock:
            _counted.update(fresh)
    return [found[k] for k in keys]


def _cached_and_todo(
    cache: dict[Key, T], keys: list[Key], prompts: Sequence[RenderedPrompt]
) -> tuple[dict[Key, T], dict[Key, RenderedPrompt]]:
    """What CACHE holds of KEYS (PROMPTS' keys), and each distinct prompt it does not hold."""
    with _cache_lock:
        found = {k: cache[k] for k in keys if k in cache}
    todo: dict[Key, RenderedPrompt] = {}
    for k, p in zip(keys, prompts, strict=True):
        if k not in found and k not in todo:
            todo[k] = p
    return found, todo


def _count_fresh(counter: TokenCounter, prompts: Sequence[RenderedPrompt]) -> list[Counted]:
    """PROMPTS and their section variants (tokens/sections.py) counted in one go, then each
    prompt's sections taken from its variants' counts."""
    found = [sections.variants(p) for p in prompts]
    flat = [*prompts, *(v for f in found for v in f.values())]
    raws = _count_requests(counter, flat)
    totals, rest = raws[: len(prompts)], iter(raws[len(prompts) :])
    out = []
    for p, f, total in zip(prompts, found, totals, strict=True):
        counted = {name: next(rest) for name in f}
        out.append((total, sections.from_counts(p, total, counted)))
    return out


def _count_requests(counter: TokenCounter, requests: list[RenderedPrompt]) -> list[int]:
    """The counter's count of every request. tiktoken: the texts of all of them in one batch
    (hashing each variant would cost more than counting it). Slow counters (an HTTP call or a
    llama.cpp tokenization each): each distinct request once, by content hash, cached, HTTP calls
    concurrently."""
    if isinstance(counter, TiktokenCounter):
        return counter.count_many(requests)
    keys = [(counter.cache_id, p.content_hash()) for p in requests]
    raw, todo = _cached_and_todo(_raw if _cache_enabled else {}, keys, requests)
    if todo:
        pending = list(todo.values())
        if isinstance(counter, AnthropicCounter):
            counted = _concurrently(counter.count_prompt, pending)
        else:
            counted = [counter.count_prompt(p) for p in pending]
        fresh = dict(zip(todo, counted, strict=True))
        raw.update(fresh)
        if _cache_enabled:
            with _cache_lock:
                _raw.update(fresh)
    return [raw[k] for k in keys]


HTTP_WORKERS = 8  # count_tokens calls in flight at once


def _concurrently(count: Callable[[RenderedPrompt], int], requests: list[RenderedPrompt]) -> list[int]:
    """COUNT of every request, one HTTP call each, several in flight. The first goes alone: a
    wrong key or an unknown model then fails once, not once per request; on a failure the calls
    not yet started are dropped."""
    if not requests:
        return []
    first = count(requests[0])
    if len(requests) == 1:
        return [first]
    pool = ThreadPoolExecutor(max_workers=min(HTTP_WORKERS, len(requests) - 1))
    try:
        rest = list(pool.map(count, requests[1:]))
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return [first, *rest]


def count_prompts(prompts: Sequence[RenderedPrompt], prompt_settings: PromptSettings) -> list[TokenCount]:
    """Count every prompt with PROMPT_SETTINGS' tokenizer, by section too; cached by (counter,
    content hash)."""
    counter = get_counter(prompt_settings.tokenizer, model=prompt_settings.model, settings=prompt_settings)
    factor = safety_factor_for(counter, prompt_settings)
    out = []
    for p, (raw, sec) in zip(prompts, _counted_all(counter, prompts), strict=True):
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
