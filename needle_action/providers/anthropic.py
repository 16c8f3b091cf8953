"""Anthropic Messages API through the official SDK (``AsyncAnthropic``).

* One shared async client per provider instance: safe for the recall engine's concurrent calls.
* Base URL: ``providers.anthropic.base_url`` in needle.toml, else ``ANTHROPIC_BASE_URL``, else the
  SDK default. Key: ``$<api_key_env>`` when configured, else ``ANTHROPIC_API_KEY`` (or
  ``ANTHROPIC_AUTH_TOKEN``). No key -> ProviderUnavailable before any call.
* No sampling parameters (``temperature``/``top_p``/``top_k``): the 2026-10-21 API refuses them for
  Claude 5.x, and for the others recall is measured at the model's defaults, like production.
* The SDK's own retries are off; :mod:`needle_action.providers.retry` does it, counted, and every
  attempt passes the adaptive rate gate (:mod:`needle_action.providers.ratelimit`), which reads the
  ``anthropic-ratelimit-*`` headers of every answer.
* The request is the prompt's own body (``request.wire.anthropic_body``): system blocks, tools,
  tool_choice, request parameters and content blocks (tool_use, tool_result, document, image) as
  the application sends them.
* Prompt caching: the caller's :class:`Breakpoint` s split the text into content blocks, and those
  marked ``cache`` get ``cache_control: {"type": "ephemeral"}``, within the API's four markers
  minus the application's own (:mod:`needle_action.providers.anthropic_cache`). The text sent is
  unchanged. ``cache_creation_input_tokens`` / ``cache_read_input_tokens`` come back in
  the Completion.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import anthropic
from anthropic.types.messages import MessageBatchIndividualResponse

from needle_action.config import ProviderSettings
from needle_action.core import environment
from needle_action.core.dataformats import JSON
from needle_action.core.errors import ConfigError, ProviderUnavailable
from needle_action.providers import specs
from needle_action.providers.anthropic_cache import MAX_BREAKPOINTS, own_markers, split_content
from needle_action.providers.base import Breakpoint, Completion
from needle_action.providers.retry import (
    MalformedResponse,
    Reply,
    RetriesExhausted,
    Retry,
    RetryingProvider,
    call_with_retries,
    classify_status,
    invalid_request,
)
from needle_action.providers.specs import SPECS
from needle_action.request.prompt import RenderedPrompt
from needle_action.request.wire import anthropic_body

DEFAULT_KEY_ENVS = SPECS["anthropic"].key_envs

T = TypeVar("T")


class ClaudeMessagesProvider(RetryingProvider):
    """Claude through one of the Anthropic SDK's async clients (the API's own or a cloud's): the
    request built by :func:`build_request`, the answer read by :func:`parse_message`."""

    _client: Any  # AsyncAnthropic, AsyncAnthropicBedrock or AsyncAnthropicVertex: one messages API
    prompt_cache = True  # caches shared prefixes: here explicitly, at the breakpoints' cache_control

    async def complete(
        self, prompt: RenderedPrompt, *, max_output_tokens: int, breakpoints: tuple[Breakpoint, ...] = ()
    ) -> Completion:
        request = build_request(self.model, prompt, max_output_tokens, breakpoints)

        async def attempt() -> Reply:
            raw = await self._client.messages.with_raw_response.create(**request)
            return parse_message(await raw.parse(), raw.headers)

        return await self._complete_with_retries(attempt)

    def _classify(self, exc: BaseException) -> Retry | BaseException:
        if isinstance(exc, anthropic.APITimeoutError):
            return Retry("timeout")
        if isinstance(exc, anthropic.APIConnectionError):
            return Retry("connection error")
        if isinstance(exc, anthropic.APIStatusError):
            return self._classify_status(exc)
        if isinstance(exc, MalformedResponse | anthropic.APIResponseValidationError | ValueError):
            # ValueError covers json.JSONDecodeError: a 200 whose body is not JSON
            return Retry("malformed response")
        return self._classify_other(exc)

    def _classify_status(self, exc: anthropic.APIStatusError) -> Retry | BaseException:
        """An HTTP error answer: retried, or the error to raise."""
        raise NotImplementedError

    def _classify_other(self, exc: BaseException) -> Retry | BaseException:
        """Any other exception of an attempt (a cloud's credential chain): raised as it is here."""
        return exc


class AnthropicProvider(ClaudeMessagesProvider):
    name = "anthropic"
    _client: anthropic.AsyncAnthropic

    def __init__(self, model: str, settings: ProviderSettings | None = None, **retry_kw: Any) -> None:
        super().__init__(model, settings, **retry_kw)  # retry_kw: sleep=, rng= (tests inject them)
        self.key_env, key = find_key(self.settings.api_key_env)
        base_url = specs.base_url("anthropic", self.settings.base_url, environment.process())
        self._client = anthropic.AsyncAnthropic(
            **client_auth(self.key_env, key),
            base_url=base_url,
            max_retries=0,
            timeout=self.settings.timeout_s,
        )

    def _classify_status(self, exc: anthropic.APIStatusError) -> Retry | BaseException:
        return classify_status(
            exc.status_code,
            provider=self.name,
            model=self.model,
            headers=exc.response.headers,
            error_type=exc.type,
            message=exc.api_message,
            key_env=self.key_env,
        )

    async def complete_batch(
        self, requests: list[tuple[str, RenderedPrompt, int, tuple[Breakpoint, ...]]], *, state_dir: Path
    ) -> dict[str, Completion | Exception]:
        """Every request through the Message Batches API (half price): (custom_id, prompt, max
        output tokens, breakpoints) -> {custom_id: Completion, or the error of that request}.

        The batch id is written to STATE_DIR under a digest of the requests before polling, so a
        rerun after an interruption polls the same batch instead of creating (and paying for) a
        new one; the file is removed once the results are in.
        """
        bodies = [
            {"custom_id": cid, "params": build_request(self.model, prompt, max_tokens, bps)}
            for cid, prompt, max_tokens, bps in requests
        ]
        state = batch_state_path(state_dir, self.model, bodies)
        batch_id = read_batch_id(state)
        if batch_id is None:
            # bodies are plain JSON built by build_request; the SDK's TypedDicts cannot be inferred from it
            batch = await self._retrying(lambda: self._client.messages.batches.create(requests=bodies))  # type: ignore[arg-type]
            batch_id = batch.id
            write_batch_id(state, batch_id)
        delay = self.settings.batch_poll_s
        while True:
            batch = await self._retrying(lambda: self._client.messages.batches.retrieve(batch_id))
            if batch.processing_status == "ended":
                break
            await self._sleep(delay)
            delay = min(MAX_POLL_S, delay * 1.5)
        out: dict[str, Completion | Exception] = {}
        decoder = await self._retrying(lambda: self._client.messages.batches.results(batch_id))
        async for entry in decoder:
            out[entry.custom_id] = batch_entry(entry)
        state.unlink(missing_ok=True)
        return out

    async def _retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        result, _ = await call_with_retries(
            call, self._classify, policy=self.policy, provider=self.name, sleep=self._sleep, rng=self._rng
        )
        return result


MAX_POLL_S = 300.0


def batch_state_path(state_dir: Path, model: str, bodies: list[JSON]) -> Path:
    """Where the batch id of exactly these requests is kept."""
    digest = hashlib.sha256(json.dumps([model, bodies], sort_keys=True).encode()).hexdigest()[:32]
    return state_dir / f"anthropic-{digest}.json"


def read_batch_id(state: Path) -> str | None:
    try:
        batch_id: str | None = json.loads(state.read_text())["batch_id"]
        return batch_id
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_batch_id(state: Path, batch_id: str) -> None:
    state.parent.mkdir(parents=True, exist_ok=True)
    tmp = state.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"batch_id": batch_id}))
    os.replace(tmp, state)


def batch_entry(entry: MessageBatchIndividualResponse) -> Completion | Exception:
    """One line of a batch's results: a Completion when it succeeded, else why it did not."""
    result = entry.result
    if result.type != "succeeded":
        error = getattr(getattr(result, "error", None), "error", None)
        detail = getattr(error, "message", None)
        if getattr(error, "type", None) == "invalid_request_error":  # a request bug, not a lost trial
            return invalid_request("anthropic", "batch request invalid_request_error", detail, 400)
        return RetriesExhausted(f"batch request {result.type}" + (f": {detail}" if detail else ""))
    return parse_message(result.message).answer


def find_key(api_key_env: str | None) -> tuple[str, str]:
    """(variable name, key): ``$api_key_env`` when configured, else the SDK's own variables."""
    names = (api_key_env,) if api_key_env else DEFAULT_KEY_ENVS
    for name in names:
        value = environment.value(name)
        if value:
            return name, value
    raise ProviderUnavailable(
        f"no Anthropic API key: ${names[0]} is not set",
        hint=f"export {names[0]}=... (in the action: pass it from a secret), "
        'or run recall on the embedded model with provider = "local"',
    )


def client_auth(key_env: str, key: str) -> JSON:
    """SDK keyword for the key: ANTHROPIC_AUTH_TOKEN is a bearer token, the others API keys."""
    return {"auth_token": key} if key_env == "ANTHROPIC_AUTH_TOKEN" else {"api_key": key}


# Refused by the API for Claude 5.x (and by the SDK's create()): recall runs at the model's defaults
# (module docstring), so a template's own sampling settings are left out of the call, not an error.
SAMPLING_PARAMS = ("temperature", "top_p", "top_k")


def build_request(
    model: str, prompt: RenderedPrompt, max_output_tokens: int, breakpoints: tuple[Breakpoint, ...] = ()
) -> JSON:
    """The exact keyword arguments for ``messages.create``: the prompt's own request body
    (``to_anthropic_body``: system blocks, tools, tool_choice, its parameters, content blocks), with
    needle's BREAKPOINTS applied (:mod:`needle_action.providers.anthropic_cache`: blocks split
    there, cache_control on those marked ``cache``, within the four markers the API allows)."""
    kept = [i for i, m in enumerate(prompt.messages) if m.role != "system"]
    if not kept:
        raise ConfigError(
            "the prompt has no user message to send",
            file=prompt.source or None,
            hint="a prompt needs at least one user turn besides the system text",
        )
    request = anthropic_body(prompt, model, max_output_tokens, split=_splitter(prompt, kept, breakpoints))
    for key in SAMPLING_PARAMS:  # a .prompty's `temperature`, say: the SDK and the API refuse them
        request.pop(key, None)
    return request


def _splitter(
    prompt: RenderedPrompt, kept: list[int], breakpoints: tuple[Breakpoint, ...]
) -> Callable[[JSON], JSON] | None:
    """What applies BREAKPOINTS to the raw body (before the API's rules tidy it): blocks split at
    each point, cache_control on those marked ``cache``, within the markers the app left free."""
    if not breakpoints:
        return None

    def split(request: JSON) -> JSON:
        cuts: dict[int, list[Breakpoint]] = {}
        for bp in _at_block_ends(prompt, breakpoints):
            cuts.setdefault(bp.part, []).append(bp)
        budget = [max(0, MAX_BREAKPOINTS - own_markers(request))]
        for position, i in enumerate(kept):
            if cuts.get(i):
                message = request["messages"][position]
                message["content"] = split_content(message["content"], cuts[i], budget)
        system_turns = any(m.role == "system" for m in prompt.messages)
        if cuts.get(-1) and prompt.system and not system_turns:
            request["system"] = split_content(request.get("system") or prompt.system, cuts[-1], budget)
        return request

    return split


def _at_block_ends(prompt: RenderedPrompt, breakpoints: tuple[Breakpoint, ...]) -> list[Breakpoint]:
    """A point at the very start of a message is the end of the part before it (the prefix is the
    same; a cache marker can only sit at the end of a block)."""
    kept = [-1] + [i for i, m in enumerate(prompt.messages) if m.role != "system"]
    lengths = {-1: len(prompt.system or ""), **{i: len(m.text) for i, m in enumerate(prompt.messages)}}
    out = []
    for bp in breakpoints:
        part, offset = bp.part, bp.offset
        while offset == 0 and part in kept and kept.index(part) > 0:
            part = kept[kept.index(part) - 1]
            offset = lengths[part]
        if offset > 0:
            out.append(Breakpoint(part, offset, bp.cache))
    return out


def parse_message(message: object, headers: Mapping[str, str] | None = None) -> Reply:
    content = getattr(message, "content", None)
    if not isinstance(message, anthropic.types.Message) or not isinstance(content, list):
        raise MalformedResponse("response is not a Message with a content list")
    texts: list[str] = []
    tool_call: str | None = None
    tool_input: str | None = None
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text":
            text = getattr(block, "text", None)
            if not isinstance(text, str):
                raise MalformedResponse("a text block has no text")
            texts.append(text)
        elif kind in ("tool_use", "server_tool_use") and tool_call is None:
            tool_call = str(getattr(block, "name", "") or "tool")
            tool_input = json.dumps(getattr(block, "input", None) or {}, ensure_ascii=False, default=str)
    usage = getattr(message, "usage", None)
    answer = Completion(
        text="".join(texts),
        tool_call=tool_call,
        tool_input=tool_input,
        input_tokens=getattr(usage, "input_tokens", None),
        output_tokens=getattr(usage, "output_tokens", None),
        cache_write_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
        cache_read_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
    )
    return Reply(answer, dict(headers) if headers is not None else None)
