"""How the model worker's llama.cpp threads are chosen from the machine's load (pure functions)."""

from __future__ import annotations

from needle_action.providers.local.worker import threading_env


def test_an_idle_machine_gets_every_cpu_and_a_bounded_spin():
    env = threading_env({}, busy=0.1, cpus=2)
    assert env == {"GOMP_SPINCOUNT": "20000", "NEEDLE_LOCAL_THREADS": "2"}


def test_a_busy_machine_gets_half_the_cpus_waiting_passively():
    # a spinning thread takes the core its partner needs when another process runs beside them
    env = threading_env({}, busy=1.0, cpus=2)
    assert env == {"OMP_WAIT_POLICY": "PASSIVE", "NEEDLE_LOCAL_THREADS": "1"}
    assert threading_env({}, busy=3.0, cpus=8)["NEEDLE_LOCAL_THREADS"] == "4"


def test_the_users_own_settings_win():
    assert threading_env({"OMP_WAIT_POLICY": "ACTIVE"}, busy=0.0, cpus=2) == {"NEEDLE_LOCAL_THREADS": "2"}
    assert threading_env({"GOMP_SPINCOUNT": "0", "NEEDLE_LOCAL_THREADS": "1"}, busy=0.0, cpus=2) == {}
