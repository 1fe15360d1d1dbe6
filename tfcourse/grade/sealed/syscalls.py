"""The system calls a learner's code may not make: those that reach another process or
leave something behind that no file sweep can see.

A session ends by killing its processes and removing its files (``pool.py``: its whole
sandbox; ``users.py``); what else the kernel keeps after a process dies, and shares with the
next one, is listed here and refused (``EPERM``) by a seccomp filter that each worker
loads before any learner code runs. The filter is inherited by every child and cannot
be removed. libseccomp builds it (through ``pyseccomp``); a call made through another
architecture's entry (32-bit or x32 on x86-64) kills the calling thread (libseccomp's
default for an architecture the filter was not built for).

- another process's memory: ``ptrace``, ``process_vm_readv``/``process_vm_writev``,
  ``pidfd_getfd`` (another process's file), ``kcmp``;
- the kernel's key store, shared by every process of a user and by all that share a
  session keyring: ``add_key``, ``request_key``, ``keyctl``;
- System V IPC objects and POSIX message queues, which outlive their creator in the
  IPC namespace: ``shmget``, ``msgget``, ``semget``, ``mq_open``.

No part of torch, IPython or matplotlib uses them (shared memory between processes is
files under ``/dev/shm``, gone with the session).

Run by the worker, beside which this file is copied: the standard library and
``pyseccomp`` only.
"""

import errno
import functools

DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    "add_key",
    "request_key",
    "keyctl",
    "shmget",
    "msgget",
    "semget",
    "mq_open",
)


def deny() -> None:
    """Load the filter into this process (and so into every child it will have). Raises
    ``OSError`` (or ``ImportError``) when it cannot: a sealed worker then does not run."""
    import pyseccomp

    syscalls = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    for name in DENIED:
        syscalls.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
    syscalls.load()


@functools.cache
def unavailable() -> str:
    """Why this machine cannot filter a worker's system calls ("" when it can), tried once
    per process, in a child process so that the grader itself stays unfiltered."""
    import os
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    code = f"import sys; sys.path.insert(0, {here!r}); import syscalls; syscalls.deny()"
    try:
        result = subprocess.run(
            [sys.executable, "-I", "-c", code],
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    if result.returncode == 0:
        return ""
    return (result.stderr.strip().splitlines() or ["?"])[-1]
