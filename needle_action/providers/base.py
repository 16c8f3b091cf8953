"""One interface for every model provider. Providers know nothing of recall or needles."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from needle_action.assemble import RenderedPrompt


@dataclass(frozen=True)
class Completion:
    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    attempts: int = 1  # 1 + retries it took


class Provider(Protocol):
    name: str  # "anthropic", "openai", "local", ...
    model: str

    async def complete(self, prompt: RenderedPrompt, *, max_output_tokens: int) -> Completion:
        """Send one request; retry transient faults (429/5xx/timeouts, honouring retry-after).

        Raises ``ProviderUnavailable`` when the provider cannot be used at all (no key, refused
        auth, unreachable after all retries).
        """
        ...

    async def aclose(self) -> None: ...
