"""Confine a sealed worker from inside its namespaces: mounts, limits, privileges, then exec.

``sandbox.launch`` runs this file as a script, ``[unshare --mount --net --pid] python -I -S
confine.py --setup PLAN -- ARGV``, so it imports only the standard library (never the
package, which may be what it hides). ``PLAN`` is JSON: ``namespace`` (bool), ``cwd``,
``limits`` (``[RLIMIT_NAME, soft, hard]``) and, in namespaces, ``writable``, ``readonly``,
``hide`` and ``keep`` (absolute, normalized paths).

Without namespaces it sets the limits and execs the worker. With them it does the mounts
(``Setup.filesystem``: the one writable folder bound onto itself, every other mount
remounted read-only, hidden paths covered with ``cover_plan``, ``/dev`` trimmed to the
harmless devices and GPU nodes, a fresh ``/dev/shm``), then forks: the child is PID 1 of
the new PID namespace, mounts its own ``/proc``, sets the limits, drops its privileges
and execs the worker; the parent stays outside as the worker's *keeper*. The keeper
passes ``SIGTERM``/``SIGINT``/``SIGHUP`` on as ``SIGKILL`` (the namespace dies with its
PID 1) and then dies the way the worker died, so the caller sees one ordinary process:
``returncode`` is the worker's exit status, or ``-N`` for a death by signal ``N``. One
difference: the kernel spares a PID 1 the signals it has no handler for, ``SIGXCPU``
included, so in a namespace the CPU limit ends the worker with the hard limit's
``SIGKILL``, one second after the soft limit (``-9``; ``-24`` without). A killed keeper
takes the worker along (``PR_SET_PDEATHSIG``). Any failure before the exec exits 125.
"""

from __future__ import annotations

import json
import os
import sys

DEVICES = ("null", "zero", "full", "random", "urandom", "tty", "shm")
GPU_DEVICE_PREFIXES = ("nvidia", "dri", "kfd")
SHM_OPTIONS = "size=64m,mode=1777"

# <linux/mount.h>, <linux/prctl.h>, <linux/capability.h>
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MOUNT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": 1024,
               "nodiratime": 2048, "relatime": 1 << 21, "strictatime": 1 << 24}
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4

# ---------------------------------------------------------------------------- what to cover

def under(path: str, root: str) -> bool:
    """``path`` is ``root`` or lies inside it (both absolute, normalized)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def cover_plan(rules: dict[str, bool]) -> list[tuple[str, str]]:
    """The mounts that realize ``rules`` (path -> hidden?): ``("dir"|"file", path)`` to cover.

    A hidden path with nothing visible inside is covered whole. One with visible paths
    inside (a kept ``.venv`` in a hidden checkout) is not covered itself; each of its
    entries is decided the same way, recursively. Symbolic links are left alone: a link
    holds only a path, and its target is judged by its own rules.
    """
    ops: list[tuple[str, str]] = []

    def walk(path: str, hidden: bool) -> None:
        inner = [root for root in rules if root != path and under(root, path)]
        if not inner:
            if hidden:
                ops.append(("dir" if os.path.isdir(path) else "file", path))
            return
        if hidden:
            try:
                children = sorted(os.listdir(path))
            except OSError:
                return
            for name in children:
                child = os.path.join(path, name)
                if os.path.islink(child):
                    continue
                walk(child, rules.get(child, True))
        else:
            # only the children that lead to a rule need a look
            names = {root[len(path.rstrip("/")) + 1:].split("/")[0] for root in inner}
            for name in sorted(names):
                child = os.path.join(path, name)
                if os.path.lexists(child) and not os.path.islink(child):
                    walk(child, rules.get(child, hidden))

    walk("/", False)
    return ops


def _unescape(field: str) -> str:
    """A ``/proc/self/mountinfo`` path: octal escapes (``\\040`` for a space) decoded."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)

# ---------------------------------------------------------------------------- setup (in the child)

class Setup:
    """Runs in the child, inside the namespaces, before the worker: mounts, limits, caps."""

    def __init__(self, plan: dict):
        import ctypes

        self.plan = plan
        self.libc = ctypes.CDLL(None, use_errno=True)   # the C library the interpreter uses
        self.ctypes = ctypes

    def _call(self, what: str, result: int) -> None:
        if result != 0:
            errno = self.ctypes.get_errno()
            raise OSError(errno, f"{what}: {os.strerror(errno)}")

    def mount(self, source, target, fstype, flags, data=None) -> None:
        enc = (lambda s: None if s is None else os.fsencode(s))
        self._call(f"mount {target}", self.libc.mount(enc(source), enc(target), enc(fstype),
                                                      self.ctypes.c_ulong(flags), enc(data)))

    def mounts(self) -> list[tuple[str, int]]:
        """(mount point, locked per-mount flags) for each mount, in mount order."""
        found = []
        with open("/proc/self/mountinfo") as info:
            for line in info:
                fields = line.split()
                flags = 0
                for option in fields[5].split(","):
                    flags |= MOUNT_FLAGS.get(option, 0)
                found.append((_unescape(fields[4]), flags))
        return found

    def filesystem(self) -> None:
        plan = self.plan
        self.mount(None, "/", None, MS_REC | MS_PRIVATE)
        writable = plan["writable"]
        for path in writable:
            self.mount(path, path, None, MS_BIND)
        if plan["readonly"]:
            seen = set()
            for point, flags in self.mounts():
                if point in seen or any(under(point, w) for w in writable):
                    continue
                seen.add(point)
                try:
                    self.mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
                except OSError as error:
                    if error.errno not in (2, 13):   # ENOENT/EACCES: shadowed by another mount
                        raise
        rules = {path: True for path in plan["hide"]}
        rules.update({path: False for path in plan["keep"]})
        if os.path.isdir("/dev"):
            rules["/dev"] = True
            for name in os.listdir("/dev"):
                if name in DEVICES or name.startswith(GPU_DEVICE_PREFIXES):
                    rules[f"/dev/{name}"] = False
        for kind, path in cover_plan(rules):
            try:
                if kind == "dir":
                    self.mount("sealed", path, "tmpfs",
                               MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")
                else:
                    self.mount("/dev/null", path, None, MS_BIND)
            except OSError as error:
                if error.errno != 2:                # ENOENT: gone since listed, nothing to hide
                    raise
        if os.path.isdir("/dev/shm"):
            self.mount("shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, SHM_OPTIONS)

    def drop_privileges(self) -> None:
        libc = self.libc
        self._call("no_new_privs", libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        for cap in range(64):
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and self.ctypes.get_errno() == 22:
                break                                   # EINVAL: past the last capability
        libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)

        u32 = self.ctypes.c_uint32

        class Header(self.ctypes.Structure):
            _fields_ = (("version", u32), ("pid", self.ctypes.c_int))

        class Data(self.ctypes.Structure):
            _fields_ = (("effective", u32), ("permitted", u32), ("inheritable", u32))

        data = (Data * 2)()                             # version 3: two 32-bit halves, all 0
        self._call("capset", libc.capset(self.ctypes.byref(Header(0x20080522, 0)), data))


def _set_limits(limits: list) -> None:
    import resource

    for name, soft, hard in limits:
        which = getattr(resource, name)
        _, current = resource.getrlimit(which)
        if current != resource.RLIM_INFINITY:       # never ask to raise a hard limit
            soft, hard = min(soft, current), min(hard, current)
        resource.setrlimit(which, (soft, hard))


def main(args: list[str]) -> None:
    """``confine.py --setup PLAN -- ARGV...``: prepare, then become (or keep) ARGV."""
    split = args.index("--")
    plan, argv = json.loads(args[1]), args[split + 1:]
    child = 0
    try:
        import resource  # noqa: F401 - an extension module: load it before anything is hidden
        import signal

        setup = Setup(plan) if plan["namespace"] else None
        if setup is not None:
            setup.filesystem()
            child = os.fork()
        if child == 0:
            if setup is not None:
                setup.libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)   # keeper gone: die
                setup.mount("proc", "/proc", "proc",
                            MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
            _set_limits(plan["limits"])
            if setup is not None:
                setup.drop_privileges()
            os.chdir(plan["cwd"])
            os.execv(argv[0], argv)
    except Exception as error:  # noqa: BLE001 - any failure here means: no worker
        sys.stderr.write(f"sandbox setup failed: {type(error).__name__}: {error}\n")
        sys.stderr.flush()
        os._exit(125)
    _keep(child)


def _keep(child: int) -> None:
    """Wait for ``child`` (the worker), passing termination on; then end as it ended."""
    import signal

    received = []

    def forward(signum, frame):
        received.append(signum)
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    for fd in (0, 1):            # the worker holds the pipes; its keeper keeps none open
        os.close(fd)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            sys.stderr.write("sandbox: lost the worker\n")
            os._exit(125)
    if os.WIFSIGNALED(status):
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))     # die as it died, without a core
        signum = received[0] if received else os.WTERMSIG(status)
        if signum not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)
    os._exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[1] == "--setup":
    main(sys.argv[1:])
