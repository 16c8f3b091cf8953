"""A prompt builder (pull request code) reaches no network: not through Python, ctypes, a child
process, a socket handed down by the parent, nor the parent itself.

Listeners on this machine's loopback (TCP over IPv4 and IPv6, UDP, a Unix socket every user may
connect to) count every byte they receive. The probing builder tries each route and reports what
happened; the listeners must have received nothing. Each probe is first run without needle's guard
(a plain child process), where it does deliver: so a probe that is refused under the guard was
refused by the guard, not by an accident of this machine.

needle runs as a real process (``needle render``, ``needle budget``) as the suite's user (root
here: the worker then runs as ``nobody``); the same-user case (a developer's laptop: the worker is
the user, the parent holds the network) is driven by a small script run as a non-root user.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from needle_action.assemble.builder import client as builder
from needle_action.assemble.builder import sandbox
from needle_action.assemble.builder.guard import architecture
from needle_action.config.loader import load_config
from tests.builders import builder_project
from tests.needle_cli import NEEDLE, needle_env, run_needle

REPO = Path(__file__).resolve().parents[2]
AS_ROOT = os.name == "posix" and os.geteuid() == 0
LINUX_GUARD = architecture() is not None
pytestmark = pytest.mark.skipif(not LINUX_GUARD, reason="the kernel guard is Linux x86_64/aarch64 only")

NO_NETWORK = (
    "builders run without network access: build the request from the fixture, not from a live service"
)

# Every probe reports "OPEN ..." (it got through) or "REFUSED ..." (it did not). Standard library
# only: the worker runs the system's Python as nobody, without needle's packages.
PROBES = r'''
import ctypes, json, os, socket, struct, subprocess, sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def _try(fn):
    try:
        return "OPEN " + str(fn())
    except OSError as exc:
        return f"REFUSED {type(exc).__name__} errno={exc.errno}"


def _stream(family, address, data):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(address)
    s.sendall(data)
    s.close()
    return "sent"


def _udp(port):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"leak-udp", ("127.0.0.1", port))
    return "sent"


def _libc(family, address):
    """socket() and connect() straight from libc: no Python audit event on the way."""
    fd = libc.socket(family, socket.SOCK_STREAM, 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "socket")
    if family == socket.AF_INET:
        host, port = address
        raw = struct.pack("=H", family) + struct.pack("!H", port) + socket.inet_aton(host) + bytes(8)
    else:
        raw = struct.pack("=H", family) + address.encode() + b"\0"
    if libc.connect(fd, raw, len(raw)) != 0:
        raise OSError(ctypes.get_errno(), "connect")
    libc.send(fd, b"leak-libc", 9, 0)
    libc.close(fd)
    return "sent"


def _child(port):
    code = f"import socket; s = socket.create_connection(('127.0.0.1', {port}), 5); s.sendall(b'leak-child')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    if proc.returncode:
        raise OSError(0, proc.stderr.strip().splitlines()[-1])
    return "sent"


def _shell(port):
    if not os.path.exists("/bin/bash"):
        return "no bash"
    code = os.system(f"/bin/bash -c 'echo leak-shell > /dev/tcp/127.0.0.1/{port}' 2>/dev/null")
    if code:
        raise OSError(0, f"bash exited {code}")
    return "sent"


def _io_uring():
    fd = libc.syscall(425, 4, ctypes.create_string_buffer(120))  # io_uring_setup
    if fd < 0:
        raise OSError(ctypes.get_errno(), "io_uring_setup")
    return f"ring {fd}"


def _inherited():
    """Every descriptor above stderr that is a socket: send on it."""
    found = []
    for fd in range(3, 256):
        try:
            s = socket.socket(fileno=fd)
        except OSError:
            continue
        found.append(fd)
        s.send(b"leak-inherited")
        s.detach()
    if not found:
        raise OSError(9, "no socket among the inherited descriptors")
    return f"sent on {found}"


def _open(family, kind, proto=0):
    socket.socket(family, kind, proto).close()
    return "opened"


def probes(tcp4, tcp6, udp, unix):
    found = {
        "inherited": _try(_inherited),  # first: before any probe of ours has a socket
        "tcp4": _try(lambda: _stream(socket.AF_INET, ("127.0.0.1", tcp4), b"leak-tcp4")),
        "udp": _try(lambda: _udp(udp)),
        "unix": _try(lambda: _stream(socket.AF_UNIX, unix, b"leak-unix")),
        "raw": _try(lambda: _open(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),
        "packet": _try(lambda: _open(socket.AF_PACKET, socket.SOCK_RAW)),
        "dns": _try(lambda: socket.getaddrinfo("localhost", 80)),
        "libc_tcp4": _try(lambda: _libc(socket.AF_INET, ("127.0.0.1", tcp4))),
        "libc_unix": _try(lambda: _libc(socket.AF_UNIX, unix)),
        "child": _try(lambda: _child(tcp4)),
        "shell": _try(lambda: _shell(tcp4)),
        "io_uring": _try(_io_uring),
    }
    if tcp6:
        found["tcp6"] = _try(lambda: _stream(socket.AF_INET6, ("::1", tcp6), b"leak-tcp6"))
    return found


def build(question, tcp4, tcp6, udp, unix):
    return {"messages": [{"role": "user", "content": question + json.dumps(probes(tcp4, tcp6, udp, unix))}]}


def plain(question, tcp4, tcp6, udp, unix):
    """The first thing a builder that calls a service would do, uncaught."""
    conn = socket.create_connection(("127.0.0.1", tcp4), 5)
    conn.sendall(b"leak-plain")
    return {"messages": [{"role": "user", "content": question}]}


def wrapped(question, tcp4, tcp6, udp, unix):
    """What an HTTP client does with the refusal: its own error, the OSError as the cause."""
    try:
        socket.create_connection(("127.0.0.1", tcp4), 5)  # wrapped
    except OSError as exc:
        raise RuntimeError("the service could not be reached") from exc
    return {"messages": [{"role": "user", "content": question}]}


def caught_then_other(question, tcp4, tcp6, udp, unix):
    try:
        socket.create_connection(("127.0.0.1", tcp4), 5)  # caught
    except OSError:
        pass
    return {}["settings"]
'''


def _line(text: str) -> int:
    """The line of PROBES (as written to app/net.py) that holds TEXT."""
    return next(i for i, line in enumerate(PROBES.splitlines(), 1) if text in line)


# appended to the guard's source: the kernel's layers other than the seccomp filter are not taken
ONLY_SECCOMP = "\nnetwork_namespace = lambda libc, table: False\nlandlock = lambda libc, abi_cap=None: 0\n"


def only_seccomp(real):
    """worker_command with the guard's source made to take the seccomp filter alone."""

    def command(python, settings):
        argv = real(python, settings)
        return [*argv[:-1], argv[-1] + ONLY_SECCOMP]

    return command


class Listeners:
    """Loopback listeners that record every byte they receive (TCP v4, TCP v6 where ::1 exists,
    UDP, a Unix socket any user may connect to)."""

    def __init__(self, folder: Path) -> None:
        self.received: list[bytes] = []
        self.barriers = 0  # barriers sent by settle()
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        self.tcp4 = self._stream(socket.AF_INET, ("127.0.0.1", 0))
        try:
            self.tcp6 = self._stream(socket.AF_INET6, ("::1", 0))
        except OSError:
            self.tcp6 = 0  # no IPv6 loopback on this machine
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("127.0.0.1", 0))
        self.sockets.append(udp)
        self.udp = udp.getsockname()[1]
        threading.Thread(target=self._datagrams, args=(udp,), daemon=True).start()
        folder.chmod(0o755)
        self.unix = str(folder / "service.sock")
        self._stream(socket.AF_UNIX, self.unix)
        os.chmod(self.unix, 0o777)  # noqa: S103 - any user may connect: what a builder would try

    def _stream(self, family: int, address: str | tuple[str, int]) -> int:
        server = socket.socket(family, socket.SOCK_STREAM)
        server.bind(address)
        server.listen(16)
        self.sockets.append(server)
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()
        name = server.getsockname()
        return name[1] if isinstance(name, tuple) else 0

    def _accept(self, server: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    def _drain(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            while data := conn.recv(65536):
                self._record(data)

    def _datagrams(self, udp: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                self._record(udp.recv(65536))

    def _record(self, data: bytes) -> None:
        with self.lock:
            self.received.append(data)

    def total(self) -> bytes:
        with self.lock:
            return b"".join(self.received)

    def settle(self, *expect: bytes) -> bytes:
        """What arrived, once every piece EXPECT names has (polled, at most 3 s). With nothing
        expected: once a barrier sent now through every listener has landed (then a short grace),
        so bytes that were in flight before it had their time, without waiting out the 3 s; the
        barrier itself is left out of the answer."""
        import time

        barrier = [] if expect else self._send_barrier()
        wanted = expect or tuple(barrier)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not all(e in self.total() for e in wanted):
            time.sleep(0.05)
        if barrier:
            time.sleep(0.2)  # the other drain threads were woken before the barrier's
        total = self.total()
        for mark in barrier:
            total = total.replace(mark, b"")
        return total

    def _send_barrier(self) -> list[bytes]:
        self.barriers += 1
        marks = []
        routes: list[tuple[int, str | tuple[str, int]]] = [
            (socket.AF_INET, ("127.0.0.1", self.tcp4)),
            (socket.AF_UNIX, self.unix),
        ]
        if self.tcp6:
            routes.append((socket.AF_INET6, ("::1", self.tcp6)))
        for i, (family, address) in enumerate(routes):
            mark = f"<barrier {self.barriers}.{i}>".encode()
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.connect(address)
                s.sendall(mark)
            marks.append(mark)
        mark = f"<barrier {self.barriers}.udp>".encode()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(mark, ("127.0.0.1", self.udp))
        return [*marks, mark]

    def fixture(self) -> dict[str, object]:
        return {"tcp4": self.tcp4, "tcp6": self.tcp6, "udp": self.udp, "unix": self.unix}

    def close(self) -> None:
        for s in self.sockets:
            s.close()


@pytest.fixture
def listeners():
    folder = Path(tempfile.mkdtemp(prefix="needle-listeners-", dir="/tmp"))
    found = Listeners(folder)
    yield found
    found.close()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def project(listeners):
    """A checkout other users may read, with the probing builder and a fixture naming the listeners."""
    folder = Path(tempfile.mkdtemp(prefix="needle-net-", dir="/tmp"))
    folder.chmod(0o755)
    (folder / "app").mkdir(mode=0o755)
    values = {"question": "Q? ", **listeners.fixture()}
    fixture = "".join(f"{k}: {json.dumps(v)}\n" for k, v in values.items())
    builder_project(folder, "app/net.py", PROBES, ("build", "plain", "wrapped", "caught_then_other"), fixture)
    yield folder
    builder.close_all()
    shutil.rmtree(folder, ignore_errors=True)


def _assert_refused_by_the_filter(found: dict[str, str]) -> None:
    """Every probe refused; what went around Python refused by the kernel with EACCES from the
    seccomp filter (not a missing privilege, which would be EPERM)."""
    for probe, outcome in found.items():
        if probe == "shell" and outcome == "OPEN no bash":
            continue
        assert outcome.startswith("REFUSED"), (probe, outcome)
    for probe in ("raw", "packet", "libc_tcp4", "libc_unix", "tcp4", "udp"):
        assert found[probe].endswith("errno=13"), (probe, found[probe])


def _found(stdout: str) -> dict[str, str]:
    body = json.loads(stdout)
    return json.loads(body["messages"][0]["content"].removeprefix("Q? "))


def test_without_the_guard_the_probes_deliver(project, listeners):
    """The control: run the same probes in a plain child process (no worker, no guard), holding a
    socket for it to find, and they deliver. A probe refused below was refused by the guard."""
    held = socket.create_connection(("127.0.0.1", listeners.tcp4))
    code = (
        f"import sys, json; sys.path.insert(0, {str(project / 'app')!r}); import net; "
        f"print(json.dumps(net.probes(**json.loads(sys.argv[1]))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(listeners.fixture())],
        capture_output=True,
        text=True,
        timeout=60,
        pass_fds=(held.fileno(),),
        check=True,
    )
    found = json.loads(proc.stdout)
    assert found["inherited"] == f"OPEN sent on [{held.fileno()}]"
    held.close()
    expected = {
        "tcp4": b"leak-tcp4",
        "udp": b"leak-udp",
        "unix": b"leak-unix",
        "libc_tcp4": b"leak-libc",
        "child": b"leak-child",
        "inherited": b"leak-inherited",
    }
    if listeners.tcp6:
        expected["tcp6"] = b"leak-tcp6"
    got = listeners.settle(*expected.values())
    for probe, data in expected.items():
        assert found[probe].startswith("OPEN"), (probe, found[probe])
        assert data in got, probe


@pytest.mark.parametrize("command", ["render", "budget"])
def test_a_builder_that_catches_every_refusal_delivers_nothing_and_the_run_goes_on(
    project, listeners, command
):
    held = socket.create_connection(("127.0.0.1", listeners.tcp4))  # needle's own, passed down to it
    args = (
        ["render", "build", "--format", "json"]
        if command == "render"
        else ["budget", "--offline", "-p", "build"]
    )
    run = subprocess.run(
        [*NEEDLE, *args, "--config", str(project / "needle.toml")],
        capture_output=True,
        text=True,
        env=needle_env(),
        cwd=project,
        timeout=180,
        pass_fds=(held.fileno(),),
    )
    held.close()
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert listeners.settle() == b""
    if command == "budget":
        assert "builder app/net.py:build: 1 call," in run.stdout
        assert "network calls refused (builders have no network)" in run.stdout
        return
    found = _found(run.stdout)
    _assert_refused_by_the_filter(found)
    assert found["io_uring"].endswith("errno=1")
    assert found["inherited"].endswith("errno=9")  # nothing inherited to send on
    if listeners.tcp6:
        assert found["tcp6"].startswith("REFUSED")


@pytest.mark.parametrize("command", ["render", "budget"])
def test_a_builder_that_calls_a_service_stops_with_its_own_line_and_exit_2(project, listeners, command):
    args = ["render", "plain"] if command == "render" else ["budget", "--offline", "-p", "plain"]
    run = run_needle([*args, "--config", str(project / "needle.toml")], cwd=project, timeout=180)
    assert run.returncode == 2, run.stderr
    line = _line('conn = socket.create_connection(("127.0.0.1", tcp4), 5)')
    assert (
        f"app/net.py:{line}: the builder app/net.py:plain tried to resolve '127.0.0.1': {NO_NETWORK}"
        in run.stderr
    )
    assert "Traceback" not in run.stderr
    assert "needle_action" not in run.stderr
    assert listeners.settle() == b""


def _render(config, name):
    from needle_action.assemble.render import render_case

    prompt = config.prompts[name]
    return render_case(config, prompt, config.fixture_paths(prompt)[0])


def test_a_refusal_wrapped_by_a_client_is_still_named_as_the_network(project, listeners):
    config = load_config(project / "needle.toml")
    with pytest.raises(builder.BuilderError) as err:
        _render(config, "wrapped")
    assert err.value.location.file == "app/net.py"
    assert err.value.location.line == _line("# wrapped")
    assert NO_NETWORK in err.value.message
    assert "it raised RuntimeError: the service could not be reached" in err.value.message
    assert listeners.settle() == b""


def test_a_refusal_caught_before_another_error_is_mentioned_in_the_hint(project):
    config = load_config(project / "needle.toml")
    with pytest.raises(builder.BuilderError) as err:
        _render(config, "caught_then_other")
    assert "raised KeyError: 'settings'" in err.value.message
    assert NO_NETWORK not in err.value.message  # the error is not the network's
    line = _line("# caught")
    assert f"(it also tried to resolve '127.0.0.1' at app/net.py:{line}, refused: {NO_NETWORK})" in (
        err.value.hint or ""
    )


def test_a_socket_passed_to_the_worker_itself_is_closed_before_the_builder_runs(tmp_path, listeners):
    """Even a worker started with a socket among its descriptors (a parent that forgot close_fds)
    finds none: the guard closes every descriptor but its pipes."""
    home = tmp_path / "home"
    (home / "app").mkdir(parents=True)
    (home / "app" / "net.py").write_text(PROBES)
    for path in (home, home / "app", home / "app" / "net.py"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    tmp_path.chmod(0o755)
    held = socket.create_connection(("127.0.0.1", listeners.tcp4))
    python, _ = sandbox.interpreter(sandbox.RunAs())
    settings = {
        "root": str(home),
        "file": "app/net.py",
        "function": "build",
        "seconds": 30,
        "memory_bytes": builder.MEMORY_BYTES,
        "file_bytes": builder.FILE_BYTES,
        "processes": None,
        "site": [],
    }
    from needle_action.core import pipes

    proc = subprocess.Popen(
        sandbox.worker_command(python, json.dumps(settings)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=home,
        pass_fds=(held.fileno(),),
    )
    import time

    try:
        hello = json.loads(pipes.receive(proc, time.monotonic() + 30))
        assert hello["guard"]["closed"], hello
        kwargs = {"question": "", **listeners.fixture()}
        pipes.send(proc, json.dumps({"calls": [kwargs]}).encode())
        answer = json.loads(pipes.receive(proc, time.monotonic() + 60))
    finally:
        proc.kill()
        proc.wait()
        held.close()
    found = json.loads(answer["ok"]["messages"][0]["content"])
    assert found["inherited"] == "REFUSED OSError errno=9", found["inherited"]
    assert listeners.settle() == b""


# --------------------------------------------------------------------------- another ABI

ABI = r"""
import ctypes, mmap

def x32(question):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall(0x40000000 | 41, 2, 1, 0)  # socket(AF_INET, SOCK_STREAM) through the x32 table
    return {"messages": [{"role": "user", "content": "x32 went through"}]}

def int80(question):
    # mov eax, 359 (socket in the i386 table); mov ebx, 2; mov ecx, 1; xor edx, edx; int 0x80; ret
    code = bytes.fromhex("b867010000" "bb02000000" "b901000000" "31d2" "cd80" "c3")
    page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()
    return {"messages": [{"role": "user", "content": "int 0x80 went through"}]}
"""


@pytest.fixture
def abi_repo(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "abi.py").write_text(ABI)
    (tmp_path / "fixture.yaml").write_text("question: hi\n")
    tables = "".join(
        f'[prompts.{name}]\nbuilder = "app/abi.py:{name}"\nfixtures = ["fixture.yaml"]\n'
        for name in ("x32", "int80")
    )
    (tmp_path / "needle.toml").write_text(tables + "\n[files]\nbuilders = true\n")
    yield tmp_path
    builder.close_all()


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the 32-bit and x32 ABIs are x86_64's")
@pytest.mark.parametrize("name", ["x32", "int80"])
def test_a_system_call_through_another_abi_stops_the_builder_with_its_error(abi_repo, name):
    config = load_config(abi_repo / "needle.toml")
    with pytest.raises(builder.BuilderError) as err:
        _render(config, name)
    assert f"the builder app/abi.py:{name} made a system call through another ABI" in err.value.message


# --------------------------------------------------------------------------- no guard on this machine

UNGUARDED = """
import os, socket

open(os.path.join("{markers}", "imported"), "w").close()

def build(question):
    try:
        socket.socket()
        got = "OPEN"
    except PermissionError as exc:
        got = f"REFUSED {{exc}}"
    return {{"messages": [{{"role": "user", "content": got}}]}}
"""


@pytest.fixture
def without_a_guard(tmp_path, monkeypatch):
    """A machine where no layer of the kernel's can be had: the guard knows no architecture."""
    real = sandbox.worker_command

    def command(python, settings):
        argv = real(python, settings)
        argv[-1] += "\nARCHITECTURES.clear()\n"
        return argv

    monkeypatch.setattr(sandbox, "worker_command", command)
    markers = Path(tempfile.mkdtemp(prefix="needle-markers-", dir="/tmp"))  # the worker's user may write here
    markers.chmod(0o777)
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "b.py").write_text(UNGUARDED.format(markers=markers))
    (tmp_path / "fixture.yaml").write_text("question: hi\n")
    yield tmp_path, markers
    builder.close_all()
    shutil.rmtree(markers, ignore_errors=True)


def _config(folder: Path, unguarded: bool):
    files = "[files]\nbuilders = true\n" + ("builders_unguarded = true\n" if unguarded else "")
    (folder / "needle.toml").write_text(
        f'[prompts.p]\nbuilder = "app/b.py:build"\nfixtures = ["fixture.yaml"]\n{files}'
    )
    return load_config(folder / "needle.toml")


def test_without_a_guard_builders_refuse_to_run_and_are_never_imported(without_a_guard):
    from needle_action.core.errors import ConfigError

    folder, markers = without_a_guard
    with pytest.raises(ConfigError) as err:
        _render(_config(folder, unguarded=False), "p")
    assert (
        "the builder app/b.py:build did not run: builders run without network access, and needle cannot take"
        in (err.value.message)
    )
    assert "needle knows no seccomp filter for linux" in err.value.message
    assert "`[files] builders_unguarded = true`" in (err.value.hint or "")
    assert not (markers / "imported").exists()


def test_the_policy_may_let_builders_run_unguarded_and_the_output_says_so(without_a_guard, capsys):
    folder, markers = without_a_guard
    rendered = _render(_config(folder, unguarded=True), "p")
    assert (markers / "imported").exists()
    assert "needle cannot take it away here" in capsys.readouterr().err
    # Python's own layer still refuses (the kernel's is what is missing)
    assert rendered.messages[0].content.startswith("REFUSED [Errno 13] builders run without network access")


# --------------------------------------------------------------------------- the same user as needle

STEAL = r"""
import ctypes, json, os, socket

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
PROCESS_VM_READV = {"x86_64": 310, "aarch64": 270}[os.uname().machine]


def _refused():
    return f"REFUSED errno={ctypes.get_errno()}"


def _borrow(parent):
    # pidfd_open, then pidfd_getfd of each descriptor number: the parent's socket, used here
    pidfd = libc.syscall(434, parent, 0)
    if pidfd < 0:
        return _refused()
    stolen = [fd for fd in (libc.syscall(438, pidfd, n, 0) for n in range(3, 64)) if fd >= 0]
    if not stolen:
        return _refused()
    for fd in stolen:
        try:
            s = socket.socket(fileno=fd)
            s.send(b"leak-stolen")
            s.detach()
        except OSError:
            pass
    return f"OPEN {len(stolen)}"


def _read_memory(parent):
    buf = ctypes.create_string_buffer(8)
    local = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)
    remote = (ctypes.c_void_p * 2)(id(None), 8)  # some address: the same interpreter's layout
    got = libc.syscall(PROCESS_VM_READV, parent, local, 1, remote, 1, 0)
    return "OPEN" if got >= 0 else _refused()


def steal(parent):
    found = {"pidfd_getfd": _borrow(parent), "process_vm_readv": _read_memory(parent)}
    found["ptrace"] = "OPEN" if libc.ptrace(0x4206, parent, None, None) == 0 else _refused()  # PTRACE_SEIZE
    for name, mode in (("mem", "r+b"), ("environ", "rb")):
        try:
            with open(f"/proc/{parent}/{name}", mode) as f:
                found[name] = "OPEN " + (f.read().decode(errors="replace") if name == "environ" else "")
        except OSError as exc:
            found[name] = f"REFUSED errno={exc.errno}"
    return found


def build(parent):
    return {"messages": [{"role": "user", "content": json.dumps(steal(parent))}]}
"""

# run as a non-root user with the system's Python: needle's own start_worker, as a developer's
# needle would start it (the worker is this user too), while this process holds a connection
DRIVER = r"""
import json, os, socket, subprocess, sys, time
from pathlib import Path
from needle_action.core import pipes
from needle_action.assemble.builder import sandbox
from needle_action.core.workspace import Workspace

port, project, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if mode == "seccomp-only":  # as in a container that allows neither Landlock nor user namespaces
    real = sandbox.worker_command
    sandbox.worker_command = lambda python, settings: [*real(python, settings)[:-1], real(python, settings)[-1] + ONLY_SECCOMP]
held = socket.create_connection(("127.0.0.1", port))  # the parent's network: no builder may borrow it
if mode == "control":  # the same probes in a plain child: no guard, no shield
    code = f"import sys, json; sys.path.insert(0, {project + '/app'!r}); import steal; print(json.dumps(steal.steal({os.getpid()})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    print(json.dumps({"found": json.loads(out.stdout)}))
else:
    who = sandbox.RunAs()
    home = sandbox.copy_repository(Workspace(Path(project)), who)
    settings = {
        "root": str(home), "file": "app/steal.py", "function": "build", "seconds": 30,
        "memory_bytes": 2 * 1024**3, "file_bytes": 64 * 1024**2, "processes": None, "site": [],
    }
    proc = sandbox.start_worker(sys.executable, json.dumps(settings), home, who)
    hello = json.loads(pipes.receive(proc, time.monotonic() + 30))
    pipes.send(proc, json.dumps({"calls": [{"parent": os.getpid()}]}).encode())
    answer = json.loads(pipes.receive(proc, time.monotonic() + 60))
    proc.kill()
    proc.wait()
    print(json.dumps({"hello": hello, "found": json.loads(answer["ok"]["messages"][0]["content"])}))
held.sendall(b"parent-ok")
held.close()
"""


def _other_user() -> tuple[int, int, str] | None:
    """A non-root user of this machine whose Python (same version, system-wide) can run needle's
    standard-library parts, or None."""
    import pwd

    if not AS_ROOT or shutil.which("setpriv") is None:
        return None
    for entry in pwd.getpwall():
        if 1000 <= entry.pw_uid < 65534:
            who = sandbox.RunAs(entry.pw_uid, entry.pw_gid, entry.pw_name)
            for python in sandbox._same_version_candidates():
                if os.path.exists(python) and sandbox.reachable(python, who):
                    return entry.pw_uid, entry.pw_gid, python
    return None


OTHER_USER = _other_user()


def _drive(user, project: Path, port: int, mode: str, canary: str) -> dict:
    uid, gid, python = user
    driver = DRIVER.replace("ONLY_SECCOMP", repr(ONLY_SECCOMP))
    tmp = tempfile.gettempdir()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "NEEDLE_CANARY": canary, "TMPDIR": tmp}
    run = subprocess.run(
        [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={gid}",
            "--clear-groups",
            python,
            "-c",
            driver,
            str(port),
            str(project),
            mode,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.skipif(OTHER_USER is None, reason="needs root, setpriv and a non-root user with a system Python")
@pytest.mark.parametrize("layers", ["guarded", "seccomp-only"])
def test_a_builder_running_as_needles_own_user_cannot_borrow_needles_network(listeners, layers):
    """On a laptop the worker is the user, like needle, which holds the key and the network: the
    builder must not take needle's sockets (pidfd_getfd), ptrace it, read or write its memory, or
    read its environment. Without the guard and the shield (the control) each of these works."""
    folder = Path(tempfile.mkdtemp(prefix="needle-same-user-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        (folder / "app").mkdir(mode=0o755)
        (folder / "app" / "steal.py").write_text(STEAL)
        (folder / "app" / "steal.py").chmod(0o644)
        canary = "canary-same-user-7f3a"

        control = _drive(OTHER_USER, folder, listeners.tcp4, "control", canary)["found"]
        assert control["pidfd_getfd"].startswith("OPEN"), control
        assert control["mem"].startswith("OPEN"), control
        assert canary in control["environ"], control
        assert b"leak-stolen" in listeners.settle(b"leak-stolen")
        listeners.received.clear()

        guarded = _drive(OTHER_USER, folder, listeners.tcp4, layers, canary)
        assert guarded["hello"]["guard"]["closed"], guarded["hello"]
        if layers == "seccomp-only":  # needle's own undumpable process is what holds here
            assert guarded["hello"]["guard"]["layers"] == ["seccomp", "audit hook"]
        found = guarded["found"]
        for probe in ("pidfd_getfd", "process_vm_readv", "ptrace", "mem", "environ"):
            assert found[probe].startswith("REFUSED"), (probe, found[probe])
        assert canary not in json.dumps(found)
        assert listeners.settle(b"parent-ok") == b"parent-ok"  # the parent's own bytes only
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_seccomp_filter_alone_refuses_every_route(project, listeners, monkeypatch):
    """Docker's default profile allows no user namespace (and older engines no Landlock): the
    filter must hold by itself."""
    monkeypatch.setattr(sandbox, "worker_command", only_seccomp(sandbox.worker_command))
    config = load_config(project / "needle.toml")
    rendered = _render(config, "build")
    found = json.loads(rendered.messages[0].content.removeprefix("Q? "))
    _assert_refused_by_the_filter(found)
    assert listeners.settle() == b""
