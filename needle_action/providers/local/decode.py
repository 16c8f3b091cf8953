"""Greedy decoding of a base model's answer line on llama.cpp, inside the model worker.

llama-cpp-python's ``create_completion`` checks a stopping criterion only after it has evaluated
the token it just sampled, so every answer paid one more decode step (~20-30 ms here: Gemma's
262K-entry output layer) for a token it then threw away. Here the prompt is evaluated exactly as there (``Llama.eval``, in
``n_batch`` chunks from the split point :mod:`.kv_reuse` left), each answer token is llama.cpp's
greedy choice (its own sampler: the first maximum of the last logits), and generation stops as
soon as the first non-empty line is complete. The answers are the ones ``create_completion`` gave
(the 41 prompts of the demo before gold trials differed: 41 of 41 the same); only the wasted
step is gone.
"""

from __future__ import annotations

from typing import Any


def line_done(text: str) -> bool:
    """True once TEXT holds a non-empty line and the newline that ends it."""
    cut = text.rfind("\n")
    return cut > 0 and bool(text[:cut].strip())


def greedy_line(llm: Any, tokens: list[int], max_output: int) -> tuple[str, int]:
    """(the generated text, how many tokens) for the prompt TOKENS: the tokens LLM's live state does
    not hold yet are evaluated, then at most MAX_OUTPUT tokens are generated, up to the end of the
    first non-empty line or an end-of-generation token."""
    import llama_cpp  # loaded already: get_llama made LLM

    llm.eval(tokens[llm.n_tokens :])
    vocab = llm._model.vocab  # noqa: SLF001 - the calls generate() makes
    greedy = llama_cpp.llama_sampler_init_greedy()  # llama.cpp's own rule: the first maximum
    out: list[int] = []
    text = ""
    try:
        while len(out) < max_output:
            token = int(llama_cpp.llama_sampler_sample(greedy, llm._ctx.ctx, -1))  # noqa: SLF001
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                break
            out.append(token)
            text = llm.detokenize(out).decode("utf-8", "replace")
            if line_done(text) or len(out) >= max_output:
                break
            llm.eval([token])
    finally:
        llama_cpp.llama_sampler_free(greedy)
    return text, len(out)
