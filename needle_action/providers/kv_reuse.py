"""Deterministic reuse of llama.cpp's KV state for shared prompt prefixes.

Recall trials share long prefixes (a cell's trials differ from the needle on; shallower needles'
text is a prefix of deeper ones'). Evaluating only the new suffix saves most of the prompt time,
but naive reuse (llama-cpp-python's own prefix match) changed 3 of 15 greedy answers: it resumes at
any token, so the suffix is evaluated in other chunks than a fresh evaluation would use, and the
floating point sums come out differently.

So reuse happens only at **fixed split points**: a fresh evaluation processes the prompt in chunks of
``n_batch`` tokens from position 0 ([0, 512), [512, 1024), ...). We keep the KV state of a common
prefix cut down to a multiple of ``n_batch`` (and short of the prompt's last token, whose logits
are needed), so the remaining tokens are evaluated in exactly the chunks, at exactly the positions,
of a fresh evaluation. The answer to a prompt is then the same whatever ran before it.

States are kept per prompt prefix: besides the live state, :class:`PrefixStates` keeps the KV cells
of recent prompts (``llama_state_seq_get_data``, KV only), keyed by a hash of their tokens cut at
the split point, and restores the one sharing the longest aligned prefix with a new prompt.
"""

from __future__ import annotations

import ctypes
import hashlib
from collections import OrderedDict
from dataclasses import dataclass

KEEP = 6  # saved prefix states (Gemma 3 270M: ~18 KB per token, so ~30 MB for 1.5K tokens)


def prompt_tokens(llm, prompt: str) -> list[int] | None:
    """PROMPT's tokens exactly as ``create_completion(prompt=str)`` builds them; None when the model
    adds an end-of-sequence token (then the string path is used, without reuse)."""
    model = llm._model  # noqa: SLF001 - the same private calls create_completion makes
    if model.add_eos_token():
        return None
    bos = [llm.token_bos()] if model.add_bos_token() and llm.token_bos() != -1 else []
    return bos + llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)


def aligned(common: int, length: int, n_batch: int) -> int:
    """The split point: the common prefix cut to a multiple of N_BATCH, short of the last token."""
    return (min(common, length - 1) // n_batch) * n_batch


def common_prefix(a, b) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass
class _Saved:
    tokens: list[int]
    data: bytes


class PrefixStates:
    """The live state plus a few saved ones, keyed by the digest of their aligned prefix."""

    def __init__(self, limit: int = KEEP) -> None:
        self.limit = limit
        self.saved: OrderedDict[str, _Saved] = OrderedDict()

    def prepare(self, llm, tokens: list[int]) -> int:
        """Leave LLM holding the longest aligned prefix of TOKENS it can (live or restored);
        returns how many tokens will not be evaluated."""
        n_batch = llm.n_batch
        live = list(llm._input_ids)  # noqa: SLF001
        best = aligned(common_prefix(live, tokens), len(tokens), n_batch)
        source: _Saved | None = None
        for entry in self.saved.values():
            cut = aligned(common_prefix(entry.tokens, tokens), len(tokens), n_batch)
            if cut > best:
                best, source = cut, entry
        if source is not None:
            self._restore(llm, source)
        if best <= 0:
            llm.reset()
            return 0
        llm.n_tokens = best  # create_completion's own prefix match then stops exactly here
        return best

    def keep_state(self, llm, tokens: list[int]) -> None:
        """Save the KV cells of TOKENS' aligned prefix for later prompts."""
        cut = aligned(len(tokens), len(tokens), llm.n_batch)
        if cut <= 0:
            return
        key = hashlib.sha256(str(tokens[:cut]).encode()).hexdigest()
        if key in self.saved:
            self.saved.move_to_end(key)
            return
        import llama_cpp

        ctx = llm._ctx.ctx  # noqa: SLF001
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        n = llama_cpp.llama_state_seq_get_data(ctx, buf, size, 0)
        self.saved[key] = _Saved(tokens[:cut], bytes(buf[:n]))
        while len(self.saved) > self.limit:
            self.saved.popitem(last=False)

    def _restore(self, llm, entry: _Saved) -> None:
        import llama_cpp

        ctx = llm._ctx.ctx  # noqa: SLF001
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
        buf = (ctypes.c_uint8 * len(entry.data)).from_buffer_copy(entry.data)
        if llama_cpp.llama_state_seq_set_data(ctx, buf, len(entry.data), 0) != len(entry.data):
            llm.reset()
            return
        # the saved cells may run past the prefix (answer tokens): only the aligned prefix is used
        n = len(entry.tokens)
        llm.input_ids[:n] = entry.tokens
        llm.n_tokens = n
