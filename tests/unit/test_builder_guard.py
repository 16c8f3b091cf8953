"""The seccomp filter of the builder worker, run by a small classic-BPF interpreter over the
system calls a builder could make, for both architectures (the kernel runs it for real in
tests/integration/test_builder_network.py, on this machine's architecture); and how a refused call
is recognised behind the error a client wraps it in."""

from __future__ import annotations

import errno
import socket
import struct

import pytest

from needle_action.assemble.builder import guard

AUDIT_ARCH_I386 = 0x40000003
AUDIT_ARCH_ARM = 0x40000028
SOCK_CLOEXEC = 0o2000000


def run_filter(program, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """What PROGRAM returns for one call: the classic BPF subset the filter uses, over struct
    seccomp_data (little-endian, as on x86_64 and aarch64)."""
    words = list(args) + [0] * (6 - len(args))
    data = struct.pack("<iIQ6Q", nr, arch, 0, *words)
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        pc += 1
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == 0x54:  # and #k
            acc &= k
        elif code in (0x15, 0x35):  # jeq / jge #k
            taken = acc == k if code == 0x15 else acc >= k
            pc += jt if taken else jf
        elif code == 0x06:  # ret #k
            return k
        else:
            raise AssertionError(f"an instruction the interpreter does not know: {code:#x}")


EACCES = guard.RET_ERRNO | errno.EACCES
EPERM = guard.RET_ERRNO | errno.EPERM


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_refuses_the_network_and_allows_the_rest(machine):
    table = guard.ARCHITECTURES[machine]
    program = guard.seccomp_program(table)
    arch = table["audit_arch"]

    def decide(name: str, *args: int) -> int:
        return run_filter(program, table[name], arch, args)

    for family in (socket.AF_INET, socket.AF_INET6, socket.AF_PACKET, socket.AF_NETLINK, socket.AF_UNIX, 40):
        assert decide("socket", family, socket.SOCK_STREAM) == EACCES
    for name in ("connect", "bind", "listen", "accept", "accept4"):
        assert decide(name, 3) == EACCES
    # asyncio's self-pipe: a connected Unix stream pair, with its flags
    assert decide("socketpair", socket.AF_UNIX, socket.SOCK_STREAM | SOCK_CLOEXEC) == guard.RET_ALLOW
    assert decide("socketpair", socket.AF_UNIX, socket.SOCK_DGRAM) == EACCES  # may sendto a path
    assert decide("socketpair", socket.AF_INET, socket.SOCK_STREAM) == EACCES
    for name in guard.PROCESS_CALLS:
        assert decide(name) == EPERM
    assert decide("ioctl", 3, guard.TUNSETIFF) == EPERM
    assert decide("ioctl", 1, 0x5401) == guard.RET_ALLOW  # TCGETS: a terminal's, as any program asks
    # calls of no interest pass: number 0 (read on x86_64, io_setup on aarch64), and one it does not name
    assert run_filter(program, 0, arch) == guard.RET_ALLOW
    assert run_filter(program, table["socket"] + 100, arch) == guard.RET_ALLOW


@pytest.mark.parametrize(("machine", "foreign"), [("x86_64", AUDIT_ARCH_I386), ("aarch64", AUDIT_ARCH_ARM)])
def test_another_abi_is_killed_not_refused(machine, foreign):
    table = guard.ARCHITECTURES[machine]
    program = guard.seccomp_program(table)
    assert run_filter(program, 359, foreign, (2, 1, 0)) == guard.RET_KILL_PROCESS  # i386 socket()
    assert run_filter(program, 0, foreign) == guard.RET_KILL_PROCESS


def test_the_x32_abi_is_killed_on_x86_64():
    table = guard.ARCHITECTURES["x86_64"]
    program = guard.seccomp_program(table)
    x32_socket = guard.X32_SYSCALL_BIT | table["socket"]
    assert run_filter(program, x32_socket, table["audit_arch"], (2, 1, 0)) == guard.RET_KILL_PROCESS
    assert run_filter(program, guard.X32_SYSCALL_BIT, table["audit_arch"]) == guard.RET_KILL_PROCESS
    # -1 is not an x32 call (the kernel answers ENOSYS): allowed, as libseccomp's filters do
    assert run_filter(program, -1, table["audit_arch"]) == guard.RET_ALLOW


@pytest.mark.parametrize(
    ("event", "args", "expected"),
    [
        ("socket.__new__", (None, socket.AF_INET, 1, 0), "open an AF_INET socket"),
        ("socket.connect", (None, ("10.0.0.1", 443)), "connect ('10.0.0.1', 443)"),
        ("socket.sendto", (None, ("10.0.0.1", 53)), "send to ('10.0.0.1', 53)"),
        ("socket.sendmsg", (None, None), None),  # on a connected pair: no address, nothing new
        ("socket.getaddrinfo", ("api.example.com", 443, 0, 0, 0), "resolve 'api.example.com'"),
        ("socket.gethostbyname", ("api.example.com",), "look up 'api.example.com'"),
        ("socket.gethostname", (), None),
        ("open", ("/etc/hosts", "r", 0), None),
    ],
)
def test_the_audit_events_that_are_network_calls(event, args, expected):
    assert guard.refused(event, args, None) == expected


def test_a_refusal_is_found_behind_a_clients_own_error(monkeypatch):
    monkeypatch.setattr(guard, "attempts", [])
    attempt = {"what": "resolve 'api.example.com'", "file": "app/p.py", "line": 7}
    refusal = guard.NetworkRefused(errno.EACCES, "builders run without network access")
    refusal.attempt = attempt
    wrapped = ConnectionError("the client could not connect")
    wrapped.__cause__ = refusal  # `raise ... from exc`, as an HTTP client does
    assert guard.refusal_behind(wrapped) == attempt
    context = RuntimeError("retries exhausted")
    context.__context__ = wrapped  # raised while handling it, two levels up
    assert guard.refusal_behind(context) == attempt
    # an unrelated permission error is not the network's while nothing was refused
    assert guard.refusal_behind(PermissionError(errno.EACCES, "a file")) is None
    # a new OSError with the same code after a refusal (a library that re-raises) is
    guard.attempts.append(attempt)
    assert guard.refusal_behind(RuntimeError("unrelated")) is None
    assert guard.refusal_behind(PermissionError(errno.EACCES, "re-raised")) == attempt
