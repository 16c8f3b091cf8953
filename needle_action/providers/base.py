"""One interface for every model provider. Providers know nothing of recall or needles."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from needle_action.request.prompt import RenderedPrompt


@dataclass(frozen=True)
class Breakpoint:
    """A point in a prompt where a prefix that other requests share ends.

    ``part`` is -1 for the system text, else the index of a message of the RenderedPrompt;
    ``offset`` is a character offset into that text. ``cache`` asks the provider to cache the
    prefix ending here (Anthropic: a ``cache_control`` breakpoint); without it the point only
    splits the text into blocks, so the provider can find an entry that an earlier request wrote
    there. Providers that cache prefixes by themselves (OpenAI-compatible servers) or do not cache
    ignore breakpoints: the text sent is the same either way.
    """

    part: int
    offset: int
    cache: bool = False


@dataclass(frozen=True)
class Completion:
    text: str
    input_tokens: int | None = None  # uncached input tokens, as the provider bills them
    output_tokens: int | None = None
    attempts: int = 1  # 1 + retries it took
    cache_write_tokens: int = 0  # input tokens written to the prompt cache (billed above the base price)
    cache_read_tokens: int = 0  # input tokens read from the prompt cache (billed far below it)
    # the name of the tool the model called instead of answering in text (None: it answered)
    tool_call: str | None = None
    # that call's input as JSON: the answer when the request forces a tool (tool_choice any/tool)
    tool_input: str | None = None


class Provider(Protocol):
    name: str  # "anthropic", "openai", "local", ...
    model: str

    async def complete(
        self, prompt: RenderedPrompt, *, max_output_tokens: int, breakpoints: tuple[Breakpoint, ...] = ()
    ) -> Completion:
        """Send one request; retry transient faults (429/5xx/timeouts, honouring retry-after).

        Raises ``ProviderUnavailable`` when the provider cannot be used at all (no key, refused
        auth), ``RetriesExhausted`` (a subclass) when this one request kept failing.
        """
        ...

    async def aclose(self) -> None: ...
