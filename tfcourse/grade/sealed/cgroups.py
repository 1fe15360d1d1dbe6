"""Limits on all of one learner's processes together: a control group per sandbox.

A process's own limits (``worker._limit``: rlimits) bound each process alone, so a
learner's code that starts three children may use three times the memory. A control group
bounds the memory and the number of processes of everything in it together, and ends it
together. One is made for each sandbox (``pool.SealedWorker``) and each separate-user worker
(``users.UserProcess``): one learner's, never shared, removed when it ends.

It is used where the grader may make one: as root on Linux, with the memory and pids
controllers, from cgroup v2 (both enabled for the children of the hierarchy's root) or v1
(a hierarchy for each, the group made inside the grader's own, so a container's limits
still hold). Elsewhere (a learner grading their own notebook, macOS, a container that
mounts them read-only) ``create`` returns ``None``, each process's rlimits are what
holds, and the report says so (``said``).

A process joins its group before it runs anything: ``start`` runs it behind a gate that
waits on a pipe; the grader writes its pid into the group, then opens the gate. What it
starts afterwards is in the group too (a child starts in its parent's group), and cannot
leave: moving a process needs write access to the other group's files, which are root's.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ...language import say
from . import undertaker

MEMORY_BYTES = 8 * 2**30  # all of one learner's processes together
PROCESSES = 256
MOUNT = Path("/sys/fs/cgroup")
_names = itertools.count()

# Runs as the gated process: wait for the grader's byte, then become ``argv``. An end of
# file (the grader gone before it opened the gate) ends it instead.
_GATE = (
    "import os, sys\n"
    "fd = int(sys.argv[1])\n"
    "if os.read(fd, 1) != b'g': sys.exit(125)\n"
    "os.close(fd)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


class Group:
    """One control group, in one folder per hierarchy (v2: one; v1: memory and pids)."""

    def __init__(self, folders: list[Path], version: int):
        self.folders, self.version = folders, version
        undertaker.keep("group", self._entry())

    def _entry(self) -> list:
        """The group as the undertaker's will names it."""
        return [self.version, [str(folder) for folder in self.folders]]

    def add(self, pid: int) -> None:
        for folder in self.folders:
            (folder / "cgroup.procs").write_text(str(pid), encoding="ascii")

    def pids(self) -> set[int]:
        found = set()
        for folder in self.folders:
            with contextlib.suppress(OSError):
                text = (folder / "cgroup.procs").read_text(encoding="ascii")
                found |= {int(word) for word in text.split()}
        return found

    def kill(self) -> None:
        """End every process in the group and remove it. v2 ends them at once
        (``cgroup.kill``); v1 signals what it lists until nothing is left (a fork during the
        sweep is listed at the next, and the process limit bounds how many there can be)."""
        kill_file = self.folders[0] / "cgroup.kill"
        if self.version == 2 and kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1", encoding="ascii")
        for _ in range(500):
            alive = self.pids()
            for pid in alive:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            removed = True
            for folder in self.folders:
                try:
                    folder.rmdir()  # refused while a process (or an unreaped zombie) is in it
                except FileNotFoundError:
                    continue
                except OSError:
                    removed = False
            if removed:
                undertaker.done("group", self._entry())
                return
            time.sleep(0.01)

    def said(self) -> str:
        return say(
            f"all of the learner's processes together: at most {PROCESSES} processes and "
            f"{MEMORY_BYTES >> 30} GiB of memory (a control group, cgroup v{self.version})",
            f"学员的全部进程合计：最多 {PROCESSES} 个进程、{MEMORY_BYTES >> 30} GiB 内存"
            f"（控制组 cgroup v{self.version}）",
        )


def _own(hierarchy: str) -> str:
    """The grader's own group in a v1 ``hierarchy`` (``/proc/self/cgroup``), or ``""``."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text(encoding="ascii").split("\n"):
            fields = line.split(":", 2)
            if len(fields) == 3 and hierarchy in fields[1].split(","):
                return fields[2].strip("/")
    return ""


def _make(parent: Path, settings: dict[str, str]) -> Path | None:
    """A new group under ``parent`` with ``settings`` written, or ``None`` (nothing left)."""
    folder = parent / f"tfcourse-{os.getpid()}-{next(_names)}"
    try:
        folder.mkdir()
    except OSError:
        return None
    try:
        for name, value in settings.items():
            (folder / name).write_text(value, encoding="ascii")
    except OSError:
        folder.rmdir()
        return None
    return folder


def create(memory_bytes: int = MEMORY_BYTES, processes: int = PROCESSES) -> Group | None:
    """A new group that bounds what it holds to ``memory_bytes`` and ``processes``, or
    ``None`` where the grader cannot make one (see the module's docstring)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return None
    unified = MOUNT / "cgroup.subtree_control"
    with contextlib.suppress(OSError):
        if {"memory", "pids"} <= set(unified.read_text(encoding="ascii").split()):
            folder = _make(
                MOUNT,
                {
                    "memory.max": str(memory_bytes),
                    "memory.swap.max": "0",
                    "pids.max": str(processes),
                },
            )
            return Group([folder], 2) if folder else None
    memory = _make(MOUNT / "memory" / _own("memory"), {"memory.limit_in_bytes": str(memory_bytes)})
    if memory is None:
        return None
    pids = _make(MOUNT / "pids" / _own("pids"), {"pids.max": str(processes)})
    if pids is None:
        memory.rmdir()
        return None
    # Swap counts too where the kernel accounts it (v1 keeps it apart).
    with contextlib.suppress(OSError):
        (memory / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes), encoding="ascii")
    return Group([memory, pids], 1)


def said() -> str:
    """What bounds a learner's processes together in this run, in words, for the report."""
    group = create()
    if group is None:
        return say(
            "no control group here (it needs a grader running as root on Linux with the "
            "memory and pids controllers): the limits hold for each process on its own",
            "这里没有控制组（需要以 root 身份在带 memory 与 pids 控制器的 Linux 上评分）："
            "各项限制只对每个进程单独生效",
        )
    group.kill()
    return group.said()


def gated(argv: list[str]) -> tuple[list[str], int, int]:
    """``argv`` behind a gate: ``(the command line, the gate's end to pass to the child,
    the grader's end)``. Start the command line with the first end in ``pass_fds``, close
    it, ``open_gate`` with the second."""
    inside, outside = os.pipe()
    return [sys.executable, "-I", "-S", "-c", _GATE, str(inside), *argv], inside, outside


def open_gate(group: Group | None, pid: int, outside: int) -> None:
    """Put ``pid`` in ``group`` (none: nothing), then let it run. Raises ``OSError`` when
    it cannot join: the process is then left at the gate, which it leaves by ending."""
    try:
        if group is not None:
            group.add(pid)
        os.write(outside, b"g")
    finally:
        os.close(outside)


def start(argv: list[str], group: Group | None, /, **popen) -> subprocess.Popen:
    """``subprocess.Popen(argv, **popen)``, in ``group`` (none: no group)
    before it runs a line of its own (``group`` is positional: ``popen`` may name Popen's
    own ``group``, a gid). Raises ``RuntimeError`` when it cannot join (the
    process is ended first); ``Popen``'s own errors as they are."""
    line, inside, outside = gated(argv)
    try:
        process = subprocess.Popen(line, pass_fds=(inside,), **popen)
    except BaseException:
        os.close(outside)
        raise
    finally:
        os.close(inside)
    try:
        open_gate(group, process.pid, outside)
    except OSError as error:
        process.kill()
        process.wait()
        raise RuntimeError(f"the process could not join its control group: {error}") from None
    return process
