"""The embedded model's prompt text: pure functions shared by the provider (parent), the model
worker (:mod:`.local_infer`) and the local token counter. Stdlib only: the worker imports it, and
its start-up time is every run's."""

from __future__ import annotations


def round_ctx(tokens: int) -> int:
    """Round up to a multiple of 1024 (llama.cpp allocates the KV cache for the whole window)."""
    return max(1024, -(-int(tokens) // 1024) * 1024)


def transcript(messages: list[dict]) -> str:
    """Plain-text rendering of a chat for a base model: system text, user turns as written,
    assistant turns as ``Answer: ...``, ending with ``Answer:`` for the model to complete."""
    parts: list[str] = []
    for m in messages:
        if m["role"] == "assistant":
            parts.append(f"Answer: {m['content']}")
        else:
            parts.append(m["content"])
    return "\n\n".join(parts).rstrip() + "\nAnswer:"


def first_line(text: str) -> str:
    """The first non-empty line, stripped (a base model keeps writing after its answer)."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def has_chat_template(llm) -> bool:
    """Whether the loaded GGUF carries a chat template (instruction models do)."""
    return "tokenizer.chat_template" in (getattr(llm, "metadata", None) or {})
