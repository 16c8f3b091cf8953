"""The unit-test guard (tests/unit/conftest.py) really refuses sockets and subprocesses."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest


def test_a_connection_is_refused():
    with pytest.raises(AssertionError, match="a unit test opened a network connection"):
        socket.create_connection(("127.0.0.1", 9), timeout=0.1)


def test_a_server_socket_is_refused():
    with socket.socket() as s, pytest.raises(AssertionError, match="a unit test bound a socket"):
        s.bind(("127.0.0.1", 0))


def test_a_subprocess_is_refused():
    with pytest.raises(AssertionError, match="a unit test started a subprocess"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)
