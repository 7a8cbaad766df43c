"""The seccomp filter bwrap loads in the ``bwrap`` mode: a deny-list of syscalls, as classic BPF.

The filter runs over ``struct seccomp_data`` (syscall number at offset 0, arch at 4, the low 32 bits of args[0] at
16, as in the kernel's Documentation/userspace-api/seccomp_filter.rst) and refuses:

* ``socket()`` of any family but ``AF_UNIX``, io_uring (which can open sockets without ``socket()``), and syscalls
  of another ABI (x32, 32-bit): ``EACCES``. The network namespace already leaves nothing to reach; this makes "no
  network" visible at the first call.
* new namespaces: ``unshare()`` (any), ``clone()`` with a ``CLONE_NEW*`` flag (a new user namespace gives full
  capabilities inside it, the door to most kernel exploits of the last years), ``setns()``: ``EPERM``;
  ``clone3()`` with ``ENOSYS``, so that glibc falls back to ``clone()`` for threads and processes (clone3 passes
  its flags in memory a filter cannot read).
* the kernel keyring (add_key, request_key, keyctl: the child would otherwise share the reward process's session
  keyring), bpf, ptrace and process_vm_readv/writev (reading or steering another process of the same uid, such as
  the code rules' harness), perf_event_open, userfaultfd (a tool of kernel race exploits), kexec, modules, mount
  and the new mount API, pivot_root, chroot, swap, reboot, accounting, clock setting, fanotify, open by handle,
  pidfd_getfd, kcmp: ``EPERM``.

Everything else is allowed: Python needs a wide, changing set of syscalls, so an allow-list would break honest
code. See ``docs/sandbox.md`` (what is refused, and why the rest is not).
"""

from __future__ import annotations

import os
import struct

MACHINES = ("x86_64", "aarch64")
"""The machines (``os.uname().machine``) the filter knows; elsewhere bwrap runs without one."""

SECCOMP_ARCH = {  # machine -> (AUDIT_ARCH_*, __NR_socket, __NR_io_uring_setup)
    "x86_64": (0xC000003E, 41, 425),
    "aarch64": (0xC00000B7, 198, 425),
}
NR_CLONE = {"x86_64": 56, "aarch64": 220}
NR_CLONE3 = 435
CLONE_NEW_FLAGS = 0x7E020080  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWTIME

# name: (x86_64, aarch64) numbers from the kernel's syscall tables (x86_64: arch/x86/entry/syscalls/syscall_64.tbl;
# aarch64: the generic include/uapi/asm-generic/unistd.h); None where the machine has no such syscall.
_DENIED_TABLE: dict[str, tuple[int | None, int | None]] = {
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "unshare": (272, 97), "setns": (308, 268),
    "add_key": (248, 217), "request_key": (249, 218), "keyctl": (250, 219),
    "bpf": (321, 280), "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294),
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430), "fsconfig": (431, 431),
    "fsmount": (432, 432), "fspick": (433, 433), "mount_setattr": (442, 442),
    "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142), "acct": (163, 89),
    "settimeofday": (164, 170), "clock_settime": (227, 112), "adjtimex": (159, 171), "clock_adjtime": (305, 266),
    "fanotify_init": (300, 262), "name_to_handle_at": (303, 264), "open_by_handle_at": (304, 265),
    "pidfd_getfd": (438, 438), "kcmp": (312, 272), "syslog": (103, 116),
    "iopl": (172, None), "ioperm": (173, None), "quotactl": (179, 60),
}  # fmt: skip

DENIED_SYSCALLS: dict[str, dict[str, int]] = {
    machine: {name: numbers[column] for name, numbers in _DENIED_TABLE.items() if numbers[column] is not None}
    for column, machine in enumerate(MACHINES)
}
"""machine -> {syscall name: number} of the syscalls refused with ``EPERM`` (besides ``clone`` with a
``CLONE_NEW*`` flag)."""

_EACCES, _EPERM, _ENOSYS = 13, 1, 38


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The filter as bwrap's ``--seccomp`` reads it (packed ``struct sock_filter``), ``None`` on other machines.

    ``machine``: ``os.uname().machine`` by default (``x86_64``, ``aarch64``).
    """
    machine = machine or os.uname().machine
    arch = SECCOMP_ARCH.get(machine)
    if arch is None:
        return None
    audit_arch, nr_socket, nr_io_uring_setup = arch
    load, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ/JGE/JSET|K, BPF_RET|K
    errno, allow = 0x00050000, 0x7FFF0000  # SECCOMP_RET_ERRNO | errno, SECCOMP_RET_ALLOW
    program = [  # (code, jump if true, jump if false, k); jumps are relative to the next instruction
        (load, 0, 0, 4),  # A = arch
        (jeq, 1, 0, audit_arch),  # our ABI -> skip the deny
        (ret, 0, 0, errno | _EACCES),
        (load, 0, 0, 0),  # A = syscall number
        (jge, 0, 1, 0x40000000),  # x32 syscall
        (ret, 0, 0, errno | _EACCES),
        (jeq, 0, 1, nr_io_uring_setup),
        (ret, 0, 0, errno | _EACCES),
        (jeq, 0, 1, NR_CLONE3),
        (ret, 0, 0, errno | _ENOSYS),
    ]
    for nr in sorted(set(DENIED_SYSCALLS[machine].values())):
        program += [(jeq, 0, 1, nr), (ret, 0, 0, errno | _EPERM)]
    program += [
        (jeq, 0, 4, NR_CLONE[machine]),  # clone: deny a CLONE_NEW* flag, allow the rest
        (load, 0, 0, 16),  # A = flags (args[0])
        (jset, 0, 1, CLONE_NEW_FLAGS),
        (ret, 0, 0, errno | _EPERM),
        (ret, 0, 0, allow),
        (jeq, 0, 3, nr_socket),  # socket: only AF_UNIX
        (load, 0, 0, 16),  # A = family (args[0])
        (jeq, 1, 0, 1),  # AF_UNIX -> allow
        (ret, 0, 0, errno | _EACCES),
        (ret, 0, 0, allow),
    ]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in program)
