"""The system-call filter's list is pinned: removing an entry from ``syscalls.DENIED`` fails
here, and every entry is refused in a process that loaded the filter. (The sandbox tests loop
over the list itself, so a shorter list would still pass them.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tfcourse.grade.sealed import syscalls

# What reaches another process's memory, or outlives a process in the kernel (the module's
# docstring says why each one): written out here, apart from the module.
PINNED = (
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


def test_the_list_is_pinned():
    assert sorted(syscalls.DENIED) == sorted(PINNED)


@pytest.mark.skipif(bool(syscalls.unavailable()), reason="needs libseccomp (pyseccomp)")
def test_every_pinned_call_is_refused_once_the_filter_is_loaded():
    code = f"""
import ctypes, errno, os, sys
sys.path.insert(0, {os.path.dirname(syscalls.__file__)!r})
import pyseccomp, syscalls
syscalls.deny()
libc = ctypes.CDLL(None, use_errno=True)
made = []
for name in {PINNED!r}:
    number = pyseccomp.resolve_syscall(pyseccomp.system_arch(), name)
    if libc.syscall(number, 0, 0, 0, 0, 0) != -1 or ctypes.get_errno() != errno.EPERM:
        made.append(name)
print(",".join(made))
"""
    result = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "", f"not refused: {result.stdout.strip()}"
