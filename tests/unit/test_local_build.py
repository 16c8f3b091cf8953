"""What needle reads from a llama.cpp build's feature report, and what it tells the user to run."""

from __future__ import annotations

import signal

from needle_action.cli.doctor import Check, exit_code, format_line
from needle_action.providers.local.build import (
    BASELINE_CMAKE_ARGS,
    PORTABLE_CMAKE_ARGS,
    build_features,
    crash_hint,
    reinstall_command,
    risky_features,
)
from needle_action.providers.local.probe import probe_key
from needle_action.providers.local.worker import describe_exit

# the report of the build that crashed on the Xeon (issue 17), and of the README's portable build
NATIVE_XEON = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
    "AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | "
    "OPENMP = 1 | REPACK = 1 | "
)
PORTABLE = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | LLAMAFILE = 1 | REPACK = 1 | "
)


def test_features_are_the_switches_reported_on():
    assert build_features(PORTABLE) == ["SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "LLAMAFILE", "REPACK"]
    assert build_features("CPU : AVX = 0 | NEON = 1 | ARM_FMA = 1 |") == ["NEON", "ARM_FMA"]
    assert build_features("") == []


def test_the_crashing_features_are_flagged_and_the_portable_build_has_none():
    assert risky_features(build_features(NATIVE_XEON)) == ["AVX512_VBMI", "AVX512_BF16", "AMX_INT8"]
    assert risky_features(build_features(PORTABLE)) == []
    assert not any(f.startswith(("AVX512", "AMX")) for f in build_features(PORTABLE))


def test_the_reinstall_command_rebuilds_the_same_version_portably_past_pip_caches():
    cmd = reinstall_command("0.3.36")
    assert cmd.startswith(f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" python3 -m pip install ')
    for flag in ("--force-reinstall", "--no-cache-dir", "--no-deps", '"llama-cpp-python==0.3.36"'):
        assert flag in cmd
    assert "GGML_NATIVE=OFF" in PORTABLE_CMAKE_ARGS
    assert "AVX512" not in PORTABLE_CMAKE_ARGS
    assert reinstall_command(None).endswith('"llama-cpp-python"')
    assert BASELINE_CMAKE_ARGS in reinstall_command("1", cmake_args=BASELINE_CMAKE_ARGS)


def test_each_way_of_dying_gets_its_own_hint():
    assert "--no-cache-dir" in crash_hint("SIGSEGV", "0.3.36")
    assert "AMX" in crash_hint("SIGSEGV", "0.3.36")
    assert "--no-cache-dir" in crash_hint("SIGABRT", None)
    assert BASELINE_CMAKE_ARGS in crash_hint("SIGILL", "0.3.36")
    assert "out-of-memory" in crash_hint("SIGKILL", "0.3.36")
    assert "pip" not in crash_hint("SIGKILL", None)
    assert "needle doctor" in crash_hint("exit status 1", None)


def test_exits_are_named_by_signal():
    assert describe_exit(-signal.SIGSEGV) == "SIGSEGV"
    assert describe_exit(-signal.SIGKILL) == "SIGKILL"
    assert describe_exit(-signal.SIGILL) == "SIGILL"
    assert describe_exit(1) == "exit status 1"
    assert describe_exit(-200) == "signal 200"


def test_the_probe_cache_key_changes_with_the_build_and_the_model():
    info = {"version": "0.3.36", "system_info": PORTABLE}
    key = probe_key(info, "sha-a")
    assert key == probe_key(dict(info), "sha-a")
    assert key != probe_key(info, "sha-b")
    assert key != probe_key({**info, "version": "0.3.37"}, "sha-a")
    assert key != probe_key({**info, "system_info": NATIVE_XEON}, "sha-a")


def test_doctor_fails_only_on_a_failed_check_and_shows_fixes_for_the_others():
    ok = Check("git", "ok", "git version 2.39", fix="never shown")
    warn = Check("embedded model", "warn", "built with AMX_INT8", fix="CMAKE_ARGS=... pip install")
    fail = Check("python", "fail", "Python 3.10", fix="install Python 3.11+")
    assert exit_code([ok, warn]) == 0
    assert exit_code([ok, fail]) == 1
    assert format_line(ok) == "ok    git: git version 2.39"
    assert format_line(warn).splitlines()[1].strip() == "fix: CMAKE_ARGS=... pip install"
    assert format_line(fail).startswith("FAIL  python: Python 3.10")
