"""Unit tests are pure: no sockets, no subprocesses. This guard makes the rule hold by itself: a
unit test that opens a connection, listens on a port or starts a process fails with a pointer to
tests/integration/, where such tests belong (tests/README.md)."""

from __future__ import annotations

import socket
import subprocess

import pytest


class NotAUnitTest(AssertionError):
    pass


def _refuse(what: str):
    def refuse(*args, **kwargs):
        raise NotAUnitTest(f"a unit test {what}: move it to tests/integration/ (see tests/README.md)")

    return refuse


@pytest.fixture(autouse=True)
def _no_sockets_or_processes(monkeypatch):
    monkeypatch.setattr(socket.socket, "connect", _refuse("opened a network connection"))
    monkeypatch.setattr(socket.socket, "connect_ex", _refuse("opened a network connection"))
    monkeypatch.setattr(socket.socket, "bind", _refuse("bound a socket (a server?)"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("started a subprocess"))


@pytest.fixture(autouse=True)
def _renders_in_process(monkeypatch):
    # production renders run in a bounded worker process (assemble/templates/isolate.py, tested in
    # tests/integration/); a unit test checks what the sandbox itself allows and refuses, the same
    # code the worker runs, without starting that process
    from needle_action.assemble.templates import isolate

    monkeypatch.setattr(isolate, "available", lambda: False)
