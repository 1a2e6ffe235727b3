"""The seccomp filter every replica of an isolated job runs under (installed by wrapper.py
just before it starts the command; inherited by everything the command starts).

It refuses what the kernel does not confine to a job:
- a user namespace (unshare/clone with CLONE_NEWUSER: EPERM; clone3, whose flags a filter
  cannot read, ENOSYS, so the C library falls back to clone): `unshare -Ur` would make the
  job root in a namespace of its own and open kernel code (mounts, netfilter...) to it;
- the kernel keyrings (add_key, keyctl, request_key: EPERM): a uid's keyrings belong to the
  host and outlive the job, so the next job given the same uid would read them;
- io_uring (io_uring_setup, io_uring_enter, io_uring_register: EPERM): a large kernel
  surface of its own, a frequent home of privilege escalations, that container runtimes'
  default filters refuse too; nothing a training job needs (TensorFlow uses plain I/O);
- any system call of another ABI (i386 and x32 on x86_64: ENOSYS), which the numbers
  below would not catch.

Standard library only (ctypes): the wrapper runs it with -I -S. x86_64 and aarch64."""
from __future__ import annotations

import ctypes
import errno
import os
import struct

CLONE_NEWUSER = 0x10000000
# (audit arch, {name: number})
ARCHES = {
    "x86_64": (0xC000003E, {"unshare": 272, "clone": 56, "clone3": 435, "add_key": 248, "request_key": 249,
                            "keyctl": 250, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}),
    "aarch64": (0xC00000B7, {"unshare": 97, "clone": 220, "clone3": 435, "add_key": 217, "request_key": 218,
                             "keyctl": 219, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}),
}
X32_BIT = 0x40000000
LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW = 0x7FFF0000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def _errno(code: int) -> int:
    return 0x00050000 | code


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions; offsets of struct seccomp_data: nr 0, arch 4,
    args[0] 16 (its low 32 bits: both arches are little-endian)."""
    arch, nr = ARCHES[machine]
    deny_nosys, deny_perm, check_flags = "nosys", "perm", "flags"  # labels: jumps only go forward
    code: list[tuple] = [
        (LD_W_ABS, 0, 0, 4), (JEQ, 0, deny_nosys, arch),
        (LD_W_ABS, 0, 0, 0), (JGE, deny_nosys, 0, X32_BIT),
        (JEQ, check_flags, 0, nr["unshare"]), (JEQ, check_flags, 0, nr["clone"]),
        (JEQ, deny_nosys, 0, nr["clone3"]),
        (JEQ, deny_perm, 0, nr["add_key"]), (JEQ, deny_perm, 0, nr["keyctl"]),
        (JEQ, deny_perm, 0, nr["request_key"]),
        (JEQ, deny_perm, 0, nr["io_uring_setup"]), (JEQ, deny_perm, 0, nr["io_uring_enter"]),
        (JEQ, deny_perm, 0, nr["io_uring_register"]),
        (RET, 0, 0, ALLOW),
        (LD_W_ABS, 0, 0, 16, check_flags), (JSET, deny_perm, 0, CLONE_NEWUSER),
        (RET, 0, 0, ALLOW),
        (RET, 0, 0, _errno(errno.ENOSYS), deny_nosys),
        (RET, 0, 0, _errno(errno.EPERM), deny_perm),
    ]
    labels = {ins[4]: i for i, ins in enumerate(code) if len(ins) == 5}
    out = []
    for i, (op, jt, jf, k, *_) in enumerate(code):
        def rel(target, i=i):
            return labels[target] - i - 1 if isinstance(target, str) else target
        out.append((op, rel(jt), rel(jf), k))
    return out


def install() -> None:
    """Apply the filter to this process and all it starts (no_new_privs set too: nothing it
    runs gains privileges by exec, setuid files included)."""
    machine = os.uname().machine
    if machine not in ARCHES:
        raise OSError(errno.ENOSYS, f"no seccomp filter for {machine}")
    ins = program(machine)
    buf = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *i) for i in ins))

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Prog(len(ins), ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    for option, arg, data in ((PR_SET_NO_NEW_PRIVS, 1, None), (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog))):
        if libc.prctl(option, ctypes.c_ulong(arg), data, ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"cannot install the job's seccomp filter: {os.strerror(err)}")
