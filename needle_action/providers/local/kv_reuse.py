"""Deterministic reuse of llama.cpp's KV state for shared prompt prefixes.

Recall trials share long prefixes (a cell's trials differ from the needle on; shallower needles'
text is a prefix of deeper ones'). Evaluating only the new suffix saves prompt time, but naive
reuse (llama-cpp-python's own prefix match) changed 3 of 15 greedy answers: it resumes at any
token, so the suffix is evaluated in other chunks than a fresh evaluation would use, and the
floating-point sums come out differently.

So reuse happens only at **fixed split points**. A fresh evaluation processes the prompt in chunks
of ``n_batch`` tokens from position 0 ([0, 64), [64, 128), ...: ``local_model.SPLIT_TOKENS``).
We keep the KV state of the common prefix with the previous prompt cut down to a multiple of
``n_batch`` (and short of the prompt's last token, whose logits are needed), keyed by those very
tokens, so the remaining tokens are evaluated in exactly the chunks, at exactly the positions, of a
fresh evaluation: the answer to a prompt is the same whatever ran before it
(``bench/bench_local.py`` checks every answer against a reset before each prompt, in the
scheduler's order and shuffled).

Only the live state is reused. Saving states and restoring them later
(``llama_state_seq_get/set_data``) was measured to change 2 of 12 answers in a shuffled order (the
restored cells' layout differs), so instead the scheduler sends a sequential provider's prompts so
that consecutive ones share the longest prefix (``recall.prefix.sequential_order``: prompt by
prompt, deepest cell first, a cell's trials back to back).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def prompt_tokens(llm: Any, prompt: str) -> list[int] | None:
    """PROMPT's tokens exactly as ``create_completion(prompt=str)`` builds them; None when the model
    adds an end-of-sequence token (then the string path is used, without reuse)."""
    model = llm._model  # noqa: SLF001 - the same private calls create_completion makes
    if model.add_eos_token():
        return None
    bos = [llm.token_bos()] if model.add_bos_token() and llm.token_bos() != -1 else []
    tokens: list[int] = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
    return bos + tokens


def aligned(common: int, length: int, n_batch: int) -> int:
    """The split point: the common prefix cut to a multiple of N_BATCH, short of the last token."""
    return (min(common, length - 1) // n_batch) * n_batch


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading items A and B share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def prepare(llm: Any, tokens: list[int]) -> int:
    """Leave LLM holding the longest aligned prefix of TOKENS that its live state shares; returns
    how many prompt tokens will not be evaluated."""
    keep = aligned(common_prefix(llm._input_ids, tokens), len(tokens), llm.n_batch)  # noqa: SLF001
    if keep <= 0:
        llm.reset()
        return 0
    llm.n_tokens = keep  # create_completion's own prefix match then stops exactly here
    return keep
