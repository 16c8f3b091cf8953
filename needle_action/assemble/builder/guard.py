"""The builder worker's network, taken away before the first line of the builder runs.

Standard library only. The worker never reads this file: the parent passes its source on the
worker's command line, and the worker runs it as a module of its own
(:func:`~needle_action.assemble.builder.worker.load_guard`), so it holds under an interpreter that
cannot read needle's folder. :func:`take_network_away` takes these steps, in this order, and every
process the builder starts inherits the last four:

1. **inherited descriptors**: every file descriptor but stdin, stdout and stderr (the worker's own
   pipes and ``/dev/null``) is closed, so a socket that leaked in from the parent cannot be used;
2. **no new privileges** (``PR_SET_NO_NEW_PRIVS``): no setuid or file-capability program (``ping``,
   ``sudo``) gains anything;
3. **a network namespace** of its own, where the kernel lets an unprivileged process make one
   (``unshare(CLONE_NEWUSER | CLONE_NEWNET)``, then every capability dropped): no interface, not
   even loopback. Docker's default profile forbids it, so it is defence in depth, never relied on;
4. **Landlock** where the kernel has it: a domain of its own, so the worker cannot ptrace or open
   ``/proc/<pid>/mem`` of any process outside it (needle itself, the user's browser: processes
   that have the network), and from ABI 4 TCP ``connect``/``bind`` refused, from ABI 6 abstract
   Unix sockets and signals outside the domain too. Files are untouched (see :func:`landlock`);
5. **a seccomp filter**, the guarantee (:func:`seccomp_program`): ``socket()`` of every family,
   ``connect``, ``bind``, ``listen`` and ``accept`` are refused with ``EACCES``;
   ``socketpair(AF_UNIX, SOCK_STREAM)`` stays (asyncio's event loop needs it, and a connected pair
   reaches nothing else); io_uring (whose opcodes open and connect sockets without those calls),
   ``ptrace``, ``process_vm_readv/writev``, ``pidfd_getfd`` and the ioctl that attaches a TUN/TAP
   device are refused with ``EPERM``. A call through another ABI (32-bit ``int 0x80``, x32) kills
   the process: the filter does not model those tables, and a refusal would have to cover even
   ``exit``. Refusals are errors, never a kill, so a builder that catches one goes on;
6. **a self-test**: an ``AF_INET`` socket must now be refused, or the guard reports that it failed;
7. **an audit hook** (:func:`install_audit_hook`), Python's own layer: the same calls refused one
   step earlier with :class:`NetworkRefused`, which names what the builder tried and where, so the
   parent can say so at the builder's own line. It works on every platform, but code that leaves
   Python (ctypes, a subprocess) walks past it: the kernel's layers are the guarantee.

Where the kernel's layers cannot be had (not Linux, an architecture the filter does not know, a
kernel without seccomp), :func:`take_network_away` says why, and the builder runs only if the base
branch's policy allows it (``[files] builders_unguarded = true``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import struct
import sys
from typing import Any

# --------------------------------------------------------------------------- the architectures

X32_SYSCALL_BIT = 0x40000000
# AUDIT_ARCH_* (linux/audit.h) and the syscall numbers the filter names, per architecture
_X86_64 = {
    "audit_arch": 0xC000003E,
    "x32_bit": True,
    "socket": 41,
    "connect": 42,
    "accept": 43,
    "bind": 49,
    "listen": 50,
    "socketpair": 53,
    "accept4": 288,
    "ioctl": 16,
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "pidfd_getfd": 438,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "unshare": 272,
    "capset": 126,
}
_AARCH64 = {
    "audit_arch": 0xC00000B7,
    "x32_bit": False,
    "socket": 198,
    "connect": 203,
    "accept": 202,
    "bind": 200,
    "listen": 201,
    "socketpair": 199,
    "accept4": 242,
    "ioctl": 29,
    "ptrace": 117,
    "process_vm_readv": 270,
    "process_vm_writev": 271,
    "pidfd_getfd": 438,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "unshare": 97,
    "capset": 91,
}
ARCHITECTURES: dict[str, dict[str, Any]] = {
    "x86_64": _X86_64,
    "amd64": _X86_64,
    "aarch64": _AARCH64,
    "arm64": _AARCH64,
}
LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446  # every arch

# refused with EACCES (what socket(2) documents for "not permitted"): the network
NETWORK_CALLS = ("socket", "connect", "bind", "listen", "accept", "accept4")
# refused with EPERM: what reaches around the filter (io_uring) or into another process
PROCESS_CALLS = (
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
)
TUNSETIFF = 0x400454CA  # _IOW('T', 202, int): attach to a TUN/TAP device (an existing one the user owns)
SOCK_FLAGS = 0o4000 | 0o2000000  # SOCK_NONBLOCK | SOCK_CLOEXEC, or'ed into socketpair's type


def architecture() -> dict[str, Any] | None:
    """The syscall table of this process's ABI, or None when the filter does not know it (a 32-bit
    interpreter on a 64-bit kernel counts as unknown: its calls use another table)."""
    if not sys.platform.startswith("linux") or sys.maxsize <= 2**32:
        return None
    return ARCHITECTURES.get(os.uname().machine.lower())


# --------------------------------------------------------------------------- the seccomp filter

# classic BPF (linux/filter.h, linux/seccomp.h)
_LD_W_ABS, _JEQ_K, _JGE_K, _AND_K, _RET_K = 0x20, 0x15, 0x35, 0x54, 0x06
RET_ALLOW, RET_ERRNO, RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (low half first)
_NR, _ARCH = 0, 4


def _arg(i: int) -> int:
    return 16 + 8 * i


def seccomp_program(table: dict[str, Any]) -> list[tuple[int, int, int, int]]:
    """The filter for TABLE as (code, jt, jf, k) instructions: network calls refused with EACCES,
    the calls in PROCESS_CALLS and TUNSETIFF with EPERM, another ABI killed, the rest allowed."""
    net, perm = RET_ERRNO | errno.EACCES, RET_ERRNO | errno.EPERM
    code: list[tuple[Any, ...] | str] = [
        (_LD_W_ABS, _ARCH),
        (_JEQ_K, table["audit_arch"], None, "kill"),
        (_LD_W_ABS, _NR),
    ]
    if table["x32_bit"]:  # -1 (0xffffffff: a probe, or a call a tracer skipped) is no x32 call
        code += [(_JEQ_K, 0xFFFFFFFF, "allow", None), (_JGE_K, X32_SYSCALL_BIT, "kill", None)]
    code += [(_JEQ_K, table[name], "net", None) for name in NETWORK_CALLS]
    code += [(_JEQ_K, table[name], "perm", None) for name in PROCESS_CALLS]
    code += [
        (_JEQ_K, table["socketpair"], None, "ioctl?"),
        (_LD_W_ABS, _arg(0)),  # family (an int: the kernel reads the low half only)
        (_JEQ_K, socket.AF_UNIX, None, "net"),
        (_LD_W_ABS, _arg(1)),
        (_AND_K, ~SOCK_FLAGS & 0xFFFFFFFF),
        (_JEQ_K, socket.SOCK_STREAM, "allow", "net"),
        "ioctl?",
        (_JEQ_K, table["ioctl"], None, "allow"),
        (_LD_W_ABS, _arg(1)),  # the request (an unsigned int)
        (_JEQ_K, TUNSETIFF, "perm", "allow"),
        "allow",
        (_RET_K, RET_ALLOW),
        "net",
        (_RET_K, net),
        "perm",
        (_RET_K, perm),
        "kill",
        (_RET_K, RET_KILL_PROCESS),
    ]
    return _assemble(code)


def _assemble(code: list[Any]) -> list[tuple[int, int, int, int]]:
    """Resolve the labels of CODE (strings between instructions) into relative jump offsets."""
    labels: dict[str, int] = {}
    ops: list[tuple[Any, ...]] = []
    for item in code:
        if isinstance(item, str):
            labels[item] = len(ops)
        else:
            ops.append(item)
    out = []
    for i, op in enumerate(ops):
        if len(op) == 2:
            out.append((op[0], 0, 0, op[1]))
            continue
        jt, jf = (0 if to is None else labels[to] - i - 1 for to in op[2:])
        if not (0 <= jt < 256 and 0 <= jf < 256):
            raise GuardFailed("a jump out of classic BPF's reach")
        out.append((op[0], jt, jf, op[1]))
    return out


def install_seccomp(libc: Any, table: dict[str, Any]) -> None:
    """Install the filter on this process (threads and children made later inherit it)."""
    import ctypes

    program = b"".join(struct.pack("=HBBI", *op) for op in seccomp_program(table))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _check(libc.prctl(22, 2, ctypes.addressof(fprog), 0, 0), "seccomp")  # PR_SET_SECCOMP, FILTER


# --------------------------------------------------------------------------- the other layers


class GuardFailed(Exception):
    """A layer that must hold could not be installed."""


def _check(result: int, what: str) -> None:
    if result != 0:
        import ctypes

        code = ctypes.get_errno()
        raise GuardFailed(f"{what}: {os.strerror(code) if code else 'failed'}")


def _libc() -> Any:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    libc.syscall.restype = ctypes.c_long
    return libc


def close_inherited(keep: tuple[int, ...] = (0, 1, 2)) -> None:
    """Close every file descriptor but KEEP: a socket handed down by whoever started the worker
    (a parent that forgot ``close_fds``, a runner's agent) is gone before the builder runs."""
    try:
        found = [
            int(name) for name in os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd")
        ]
    except OSError:
        found = list(range(3, 1024))
    for fd in found:
        if fd not in keep:
            with contextlib.suppress(OSError):  # the listing's own descriptor, closed already
                os.close(fd)


def network_namespace(libc: Any, table: dict[str, Any]) -> bool:
    """Move into a user and network namespace of our own (no interface at all), then drop the
    capabilities that namespace gave; False where the kernel or a container's profile forbids it."""
    import ctypes

    uid, gid = os.getuid(), os.getgid()
    if libc.syscall(table["unshare"], 0x10000000 | 0x40000000) != 0:  # CLONE_NEWUSER | CLONE_NEWNET
        return False
    # the same ids inside as outside, so files and os.getuid() look as they did
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    header = struct.pack("=Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    empty = bytes(24)  # two {effective, permitted, inheritable}: nothing
    _check(libc.syscall(table["capset"], ctypes.c_char_p(header), ctypes.c_char_p(empty)), "capset")
    return True


def landlock(libc: Any, abi_cap: int | None = None) -> int:
    """Enter a Landlock domain; the ABI used, or 0 where the kernel has none.

    From ABI 4 the domain handles TCP bind/connect (and from 6 abstract Unix sockets and signals),
    and no file access at all. ABI 2 and 3 have no network rights: the domain handles making
    device nodes (which no builder does) and cross-folder renames, and a rule grants the latter on
    ``/``, so files behave as before. ABI 1 cannot grant cross-folder renames: not used."""
    import ctypes

    abi = int(libc.syscall(LANDLOCK_CREATE_RULESET, None, 0, 1))  # LANDLOCK_CREATE_RULESET_VERSION
    abi = min(abi, abi_cap) if abi_cap is not None else abi
    if abi < 2:
        return 0
    make_devices, refer = (1 << 6) | (1 << 11), 1 << 13  # MAKE_CHAR | MAKE_BLOCK, REFER
    if abi >= 6:
        attr = struct.pack("=QQQ", 0, 0b11, 0b11)  # fs: none; net: bind, connect; scoped: unix, signal
    elif abi >= 4:
        attr = struct.pack("=QQ", 0, 0b11)
    else:
        attr = struct.pack("=Q", make_devices | refer)
    fd = int(libc.syscall(LANDLOCK_CREATE_RULESET, ctypes.c_char_p(attr), len(attr), 0))
    if fd < 0:
        return 0  # built without Landlock, or a container's profile forbids the calls
    try:
        if abi < 4:
            root = os.open("/", os.O_PATH | os.O_DIRECTORY)
            try:  # struct landlock_path_beneath_attr { u64 allowed_access; s32 parent_fd; } packed
                rule = struct.pack("=Qi", refer, root)
                _check(libc.syscall(LANDLOCK_ADD_RULE, fd, 1, ctypes.c_char_p(rule), 0), "landlock rule")
            finally:
                os.close(root)
        _check(libc.syscall(LANDLOCK_RESTRICT_SELF, fd, 0), "landlock")
    finally:
        os.close(fd)
    return abi


def self_test() -> None:
    """An AF_INET socket must be refused now (the kernel's answer: the audit hook is not on yet)."""
    try:
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    except PermissionError:
        return
    probe.close()
    raise GuardFailed("the seccomp filter was installed but an AF_INET socket still opened")


def _landlock_layer(libc: Any, abi_cap: int | None) -> str | None:
    try:
        abi = landlock(libc, abi_cap)
    except (GuardFailed, OSError):
        return None  # defence in depth: the filter below is the guarantee
    return f"Landlock ABI {abi}" if abi else None


def take_network_away(
    root: str, keep: tuple[int, ...] = (0, 1, 2), abi_cap: int | None = None
) -> dict[str, Any]:
    """Every layer this machine allows (see the module's docstring), then the audit hook; KEEP are
    the descriptors of the worker's own protocol.

    Returns ``{"closed": bool, "layers": [...], "reason": why not closed}``; "closed" means the
    seccomp filter is installed and has refused a test socket."""
    close_inherited(keep)
    layers: list[str] = []
    table = architecture()
    status: dict[str, Any] = {"closed": False, "layers": layers, "reason": ""}
    try:
        if table is None:
            raise GuardFailed(
                f"needle knows no seccomp filter for {sys.platform} on {os.uname().machine} "
                f"({8 * struct.calcsize('P')}-bit Python)"
            )
        libc = _libc()
        _check(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")  # PR_SET_NO_NEW_PRIVS
        if network_namespace(libc, table):
            layers.append("network namespace")
        landlocked = _landlock_layer(libc, abi_cap)
        if landlocked:
            layers.append(landlocked)
        install_seccomp(libc, table)
        self_test()
        layers.append("seccomp")
        status["closed"] = True
    except (GuardFailed, OSError, ImportError, AttributeError) as exc:
        status["reason"] = str(exc) or type(exc).__name__
    install_audit_hook(root)
    layers.append("audit hook")
    return status


# --------------------------------------------------------------------------- Python's own layer


class NetworkRefused(PermissionError):
    """A network call the audit hook refused (an ``OSError``: code that tolerates a failed
    connection tolerates this too). ``attempt`` says what was tried and at which line of the
    builder."""

    attempt: dict[str, Any]


attempts: list[dict[str, Any]] = []  # this call's refusals; the worker empties it before each call


def _family(number: int) -> str:
    try:
        return socket.AddressFamily(number).name
    except ValueError:
        return f"family {number}"


def refused(event: str, args: tuple[Any, ...], caller: Any) -> str | None:
    """What the audit EVENT would do, in words, when it is a network call; None otherwise.
    CALLER is the frame that raised it (socket.py wraps a socketpair's descriptor in a socket
    object: that is no new socket)."""
    if event == "socket.__new__":
        if (
            caller is not None
            and caller.f_code.co_name == "__init__"
            and caller.f_locals.get("fileno") is not None
        ):
            return None
        return f"open an {_family(args[1])} socket"
    if event in ("socket.connect", "socket.bind", "socket.sendto"):
        return f"{event.removeprefix('socket.').replace('sendto', 'send to')} {args[1]!r}"
    if event == "socket.sendmsg" and args[1] is not None:
        return f"send to {args[1]!r}"
    if event == "socket.getaddrinfo":
        return f"resolve {args[0]!r}"
    if event in ("socket.gethostbyname", "socket.gethostbyname_ex", "socket.gethostbyaddr"):
        return f"look up {args[0]!r}"
    if event == "socket.getnameinfo":
        return f"look up the name of {args[0]!r}"
    return None


def builder_line(root: str, frame: Any) -> tuple[str, int] | None:
    """The innermost line inside ROOT (the builder's copy) on FRAME's stack, relative to ROOT."""
    prefix = root.rstrip("/") + "/"
    while frame is not None:
        if frame.f_code.co_filename.startswith(prefix):
            return frame.f_code.co_filename[len(prefix) :], frame.f_lineno
        frame = frame.f_back
    return None


def install_audit_hook(root: str) -> None:
    """Refuse network calls at Python's level with :class:`NetworkRefused` (permanently: an audit
    hook cannot be removed), recording each in :data:`attempts`."""

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if not event.startswith("socket."):
            return
        caller = sys._getframe(1)
        what = refused(event, args, caller)
        if what is None:
            return
        where = builder_line(root, caller)
        attempt = {"what": what, "file": where[0] if where else None, "line": where[1] if where else None}
        attempts.append(attempt)
        exc = NetworkRefused(errno.EACCES, f"builders run without network access (tried to {what})")
        exc.attempt = attempt
        raise exc

    sys.addaudithook(hook)


def refusal_behind(exc: BaseException) -> dict[str, Any] | None:
    """The refused network call EXC comes from, looking through ``__cause__`` and ``__context__``
    (an HTTP client wraps the OSError in its own error), or None."""
    seen: set[int] = set()
    todo = [exc]
    fallback = None
    while todo and len(seen) < 100:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, NetworkRefused):
            return current.attempt
        if isinstance(current, OSError) and current.errno in (errno.EACCES, errno.EPERM) and attempts:
            fallback = attempts[-1]  # re-raised as a new OSError with the same code
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]
        if isinstance(current, BaseExceptionGroup):
            todo += list(current.exceptions)
    return fallback
