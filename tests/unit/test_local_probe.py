"""The first-use self-test and its cache, against a stand-in worker (the real one, with the model,
is exercised by tests/e2e/test_local_crash.py and `needle doctor`'s test)."""

from __future__ import annotations

import json

import pytest

from needle_action.core.errors import ProviderUnavailable
from needle_action.providers.local import probe as local_probe

PORTABLE = "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | "
NATIVE = PORTABLE + "AVX512 = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | "


class StandInWorker:
    """Answers like the model worker: the build's info, and one fixed answer to every completion."""

    def __init__(self, model_path: str, *, answer: str = "Paris", system_info: str = PORTABLE) -> None:
        self.model_path = model_path
        self.probed = False
        self.answer = answer
        self.system_info = system_info
        self.completions: list[dict] = []

    def info(self) -> dict:
        return {"version": "0.3.36", "system_info": self.system_info}

    def request(self, kind: str, payload: dict | None = None) -> dict:
        assert kind == "complete"
        assert payload is not None
        self.completions.append(payload)
        return {"text": self.answer, "usage": {}, "reused": 0, "n_ctx": payload["n_ctx"], "max_ctx": 0}


@pytest.fixture
def model(tmp_path, monkeypatch):
    monkeypatch.setenv("NEEDLE_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF not really")
    return str(path)


def test_first_use_probes_once_per_machine_build_and_model(model):
    first = StandInWorker(model)
    local_probe.ensure_probed(first, n_ctx=2048, bundled=True)
    assert first.probed
    assert len(first.completions) == 1
    sent = first.completions[0]
    assert sent["messages"] == local_probe.PROBE_MESSAGES
    assert sent["n_ctx"] == 2048
    stored = json.loads(local_probe.probe_cache_path().read_text())
    (record,) = stored.values()
    assert record["ok"]
    assert record["answer"] == "Paris"
    assert "AVX2" in record["features"]

    again = StandInWorker(model)  # a later run: the pass is cached
    local_probe.ensure_probed(again, n_ctx=2048, bundled=True)
    assert again.probed
    assert again.completions == []

    rebuilt = StandInWorker(model, system_info=PORTABLE + "AVX512 = 1 | ")  # another build: probe again
    local_probe.ensure_probed(rebuilt, n_ctx=2048, bundled=True)
    assert len(rebuilt.completions) == 1


def test_a_wrong_answer_fails_with_the_reinstall_command_and_is_probed_again(model):
    broken = StandInWorker(model, answer="@@@@@@")
    with pytest.raises(ProviderUnavailable) as caught:
        local_probe.ensure_probed(broken, n_ctx=1024, bundled=True)
    assert "self-test answered '@@@@@@'" in caught.value.message
    assert "--force-reinstall" in caught.value.hint
    assert "llama-cpp-python==0.3.36" in caught.value.hint
    assert not broken.probed
    retry = StandInWorker(model, answer="@@@@@@")
    with pytest.raises(ProviderUnavailable):  # a failure is never trusted from the cache
        local_probe.ensure_probed(retry, n_ctx=1024, bundled=True)
    assert len(retry.completions) == 1


def test_a_custom_model_only_has_to_answer_something(model):
    custom = StandInWorker(model, answer="Lyon")
    local_probe.ensure_probed(custom, n_ctx=1024, bundled=False)
    assert custom.probed


def test_a_build_with_the_crashing_features_is_named_when_it_passes(model, capsys):
    native = StandInWorker(model, system_info=NATIVE)
    local_probe.ensure_probed(native, n_ctx=1024, bundled=True)
    err = capsys.readouterr().err
    assert native.probed
    assert "AVX512_BF16, AMX_INT8" in err
    assert "--no-cache-dir" in err
