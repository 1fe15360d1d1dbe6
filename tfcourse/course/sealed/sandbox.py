"""Start a sealed worker: its own folder, a scrubbed environment, limits, and (on Linux,
where permitted) no network, no course files, no privileges.

``launch`` returns the process and the isolation measures actually in force, in words,
for the report. The measures, strongest first:

- **Namespaces** (Linux, ``unshare`` from util-linux; as root, or as a user where user
  namespaces are allowed): a new network namespace (only a loopback, down: no network, not
  even the grader's 127.0.0.1), a new PID namespace (no other process is visible, so none
  of their ``/proc/PID/root`` or ``cwd`` leads back to the files), and a new mount
  namespace in which, before the worker starts,

  - every ``hide_paths`` entry (the course checkout, the real package) is covered by an
    empty read-only tmpfs (a file: by ``/dev/null``). Paths the worker needs that lie
    inside a hidden one (``keep_paths``, by default the running interpreter's prefix,
    e.g. a ``.venv`` inside the checkout) stay visible: the hidden folder's other entries
    are covered one by one instead;
  - ``/tmp``, ``/var/tmp``, ``/run``, ``/home``, ``/root`` are covered the same way
    (other graders' folders, sockets, home directories), except what the worker needs;
    ``/dev`` keeps only ``null``, ``zero``, ``full``, ``random``, ``urandom``, ``tty``
    and GPU nodes (no raw disks), ``/dev/shm`` is a fresh, small tmpfs;
  - every other mount becomes read-only, except the worker's own folder (``cwd``);
  - then all capabilities are dropped (``no_new_privs``, empty bounding set), so the
    worker cannot unmount what hides the files, remount, or reach devices it lost.

- **Resource limits** (``resource``): CPU seconds, file size, 256 open files, no core
  dumps and, when ``memory_bytes`` is given, ``RLIMIT_DATA``. Not ``RLIMIT_AS``: the CUDA
  driver reserves far more address space than it uses, so an address-space cap breaks
  ``torch.cuda`` init, while ``RLIMIT_DATA`` (private writable memory, Linux >= 4.7)
  stops a runaway allocation and leaves that reservation alone. (Measured on CPU: both
  let ``import torch`` + a matmul run under 2 GiB; a 2.4 GB tensor fails under a 2 GiB
  ``RLIMIT_DATA``. Not yet measured with CUDA.)

- Always: the worker starts in ``cwd`` with exactly ``env`` (nothing inherited), in its own
  session and process group (``start_new_session``), with no inherited file descriptors
  beyond ``stdin``/``stdout``/``stderr``.

How: ``launch`` starts ``[unshare --mount --net --pid] python -I -S sandbox.py --setup
PLAN -- ARGV``: this very file, run as a script (it imports only the standard library).
Without namespaces it sets the limits and execs the worker. With them it does the mounts,
then forks: the child is PID 1 of the new PID namespace, mounts its own ``/proc``, sets
the limits, drops its privileges and execs the worker; the parent stays outside as the
worker's *keeper*. The keeper passes ``SIGTERM``/``SIGINT``/``SIGHUP`` on as ``SIGKILL``
(the namespace dies with its PID 1) and then dies the way the worker died, so the caller
sees one ordinary process: ``returncode`` is the worker's exit status, or ``-N`` for a
death by signal ``N``. One difference: the kernel spares a PID 1 the signals it has no
handler for, ``SIGXCPU`` included, so in a namespace the CPU limit ends the worker with
the hard limit's ``SIGKILL``, one second after the soft limit (``-9``; ``-24`` without).
Killing the process group (``os.killpg(process.pid, SIGKILL)``) or the keeper ends
everything; a killed keeper takes the worker along (``PR_SET_PDEATHSIG``).
Nothing runs in a ``preexec_fn`` (unsafe in the threaded grader) and no path is ever
interpolated into shell code.

Where namespaces are unavailable (macOS, Windows subsystem, unprivileged containers, no
``unshare``), the worker still gets its folder, environment and limits, and the list says
what is missing and why ("network: not isolated (...)"). Whether namespaces work is
probed once per process with a real hide-and-look run (about 70 ms), and cached.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path(__file__).resolve()
OPEN_FILES = 256
PRIVATE = ("/tmp", "/var/tmp", "/run", "/home", "/root")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty", "shm")
GPU_DEVICE_PREFIXES = ("nvidia", "dri", "kfd")
SHM_OPTIONS = "size=64m,mode=1777"

# ---------------------------------------------------------------------------- paths

def _under(path: str, root: str) -> bool:
    """``path`` is ``root`` or lies inside it (both absolute, normalized)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def _norm(path) -> str:
    return os.path.realpath(os.fspath(path))


def deepest_rule(path: str, rules: dict[str, bool]) -> bool | None:
    """The verdict (``True`` = hidden) of the deepest rule covering ``path``; None if none."""
    best = None
    for root in rules:
        if _under(path, root) and (best is None or len(root) > len(best)):
            best = root
    return None if best is None else rules[best]


def cover_plan(rules: dict[str, bool]) -> list[tuple[str, str]]:
    """The mounts that realize ``rules`` (path -> hidden?): ``("dir"|"file", path)`` to cover.

    A hidden path with nothing visible inside is covered whole. One with visible paths
    inside (a kept ``.venv`` in a hidden checkout) is not covered itself; each of its
    entries is decided the same way, recursively. Symbolic links are left alone: a link
    holds only a path, and its target is judged by its own rules.
    """
    ops: list[tuple[str, str]] = []

    def walk(path: str, hidden: bool) -> None:
        inner = [root for root in rules if root != path and _under(root, path)]
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


# ---------------------------------------------------------------------------- setup (in the child)

# <linux/mount.h>, <linux/prctl.h>, <linux/capability.h>
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MOUNT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": 1024,
               "nodiratime": 2048, "relatime": 1 << 21, "strictatime": 1 << 24}
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4


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


class _Setup:
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
                if point in seen or any(_under(point, w) for w in writable):
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


def _setup_main(args: list[str]) -> None:
    """``sandbox.py --setup PLAN -- ARGV...``: prepare, then become (or keep) ARGV.

    See "How" in the module docstring.
    """
    split = args.index("--")
    plan, argv = json.loads(args[1]), args[split + 1:]
    child = 0
    try:
        import resource  # noqa: F401 - an extension module: load it before anything is hidden
        import signal

        setup = _Setup(plan) if plan["namespace"] else None
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


# ---------------------------------------------------------------------------- plans

def _setup_command(plan: dict, argv: list[str]) -> list[str]:
    return [sys.executable, "-I", "-S", str(SCRIPT), "--setup", json.dumps(plan), "--", *argv]


def _needed(argv: list[str]) -> list[str]:
    """What the worker must see: the program (as named and resolved) and every absolute
    path among its arguments (the worker script, the sealed package)."""
    paths = [argv[0], *(arg for arg in argv[1:] if os.path.isabs(arg) and os.path.exists(arg))]
    return sorted({os.path.abspath(p) for p in paths} | {_norm(p) for p in paths})


def namespace_plan(argv: list[str], *, work: str, hide: list[str], keep: list[str],
                   limits: list) -> dict:
    """The setup plan for a worker in namespaces (all paths absolute and normalized)."""
    needed = [work, *_needed(argv)]
    private = [_norm(p) for p in PRIVATE if os.path.isdir(p)]
    private = [p for p in private if not any(_under(p, n) for n in [*needed, *keep])]
    return {"namespace": True, "cwd": work, "writable": [work], "readonly": True,
            "hide": sorted({*hide, *private}), "keep": sorted({*keep, *needed}),
            "limits": limits}


def plain_plan(work: str, limits: list) -> dict:
    return {"namespace": False, "cwd": work, "limits": limits}


# ---------------------------------------------------------------------------- namespaces: probe

@dataclass(frozen=True)
class Namespaces:
    """What the probe found: the ``unshare`` command line to use, or why there is none."""

    prefix: tuple[str, ...] | None
    reason: str


_probe_lock = threading.Lock()
_probe: Namespaces | None = None

UNSHARE_FLAGS = ("--mount", "--net", "--pid")


def namespaces() -> Namespaces:
    """Probe once (cached) whether the full namespace setup works here: a real run that
    hides a folder and checks from inside that it looks empty and that only the worker's
    folder is writable."""
    global _probe
    with _probe_lock:
        if _probe is None:
            _probe = _probe_namespaces()
        return _probe


def _probe_namespaces() -> Namespaces:
    if not sys.platform.startswith("linux"):
        return Namespaces(None, f"no Linux namespaces on {sys.platform}")
    unshare = shutil.which("unshare")
    if unshare is None:
        return Namespaces(None, "unshare (util-linux) not installed")
    user = (unshare, "--user", "--map-root-user", *UNSHARE_FLAGS)
    variants = [(unshare, *UNSHARE_FLAGS), user] if os.geteuid() == 0 else [user]
    reasons = []
    with tempfile.TemporaryDirectory(prefix="tfcourse-sandbox-probe-") as folder:
        root = _norm(folder)
        secret, work = os.path.join(root, "secret"), os.path.join(root, "work")
        os.mkdir(secret)
        os.mkdir(work)
        Path(secret, "answer.txt").write_text("42")
        code = ("import os, sys\n"
                f"assert not os.listdir({secret!r}), 'hidden folder visible'\n"
                "open('written', 'w').write('ok')\n"
                f"try:\n    open({os.path.join(root, 'x')!r}, 'w')\n"
                "except OSError:\n    pass\n"
                "else:\n    sys.exit('outside folder writable')\n")
        argv = [sys.executable, "-I", "-S", "-c", code]
        keep = sorted({_norm(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})
        plan = namespace_plan(argv, work=work, hide=[secret], keep=keep,
                              limits=[("RLIMIT_NOFILE", OPEN_FILES, OPEN_FILES)])
        for prefix in variants:
            try:
                result = subprocess.run([*prefix, *_setup_command(plan, argv)], cwd=work,
                                        env={"PATH": os.defpath}, capture_output=True,
                                        timeout=60, check=False)
            except (OSError, subprocess.TimeoutExpired) as error:
                reasons.append(str(error))
                continue
            if result.returncode == 0 and os.path.exists(os.path.join(work, "written")):
                return Namespaces(tuple(prefix), "")
            tail = (result.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
            reasons.append(f"{' '.join(prefix[1:3])}...: exit {result.returncode}: {tail}")
    return Namespaces(None, "unshare not permitted: " + "; ".join(reasons))


# ---------------------------------------------------------------------------- launch

def _size(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size and (n % size == 0 or n >= 10 * size):
            return f"{n / size:g} {unit}"
    return f"{n} B"


def launch(argv: list[str], *, cwd: Path, env: dict, hide_paths: list[Path], cpu_seconds: int,
           memory_bytes: int | None, file_bytes: int, stdin=subprocess.PIPE,
           stdout=subprocess.PIPE, stderr, keep_paths: list[Path] | None = None,
           ) -> tuple[subprocess.Popen, list[str]]:
    """Start ``argv`` sealed (see the module docstring); return it and the measures in force.

    ``cwd``: the worker's own folder, the only place it can write. ``env``: its whole
    environment. ``hide_paths``: what it must not read (the checkout with the solutions,
    the real package). ``keep_paths``: paths inside those that must stay readable
    (default: the running interpreter's ``sys.prefix``/``base_prefix``/``exec_prefix``,
    so a ``.venv`` inside the checkout still works; a hidden path inside a kept one, such
    as a non-editable install's ``site-packages/tfcourse``, is hidden all the same).

    Raises ``ValueError`` when ``cwd`` overlaps a hidden path, when a path is both hidden
    and kept, or when the program or an absolute path among the arguments (the worker
    script, the sealed package) would be hidden.
    """
    if not Path(cwd).is_dir():
        raise ValueError(f"the worker's folder does not exist: {cwd}")
    program = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=env.get("PATH"))
    if program is None:
        raise ValueError(f"{argv[0]!r} not found on the worker's PATH")
    argv = [os.path.abspath(program), *argv[1:]]
    work = _norm(cwd)
    hide = sorted({_norm(p) for p in hide_paths})
    keep = sorted({_norm(p) for p in (
        [sys.prefix, sys.base_prefix, sys.exec_prefix] if keep_paths is None else keep_paths)})
    for path in hide:
        if _under(work, path) or _under(path, work):
            raise ValueError(f"hidden path {path} overlaps the worker's folder {work}")
        if path in keep:
            raise ValueError(f"{path} is both hidden and kept")
    rules = {**{p: True for p in hide}, **{p: False for p in keep}}
    for path in _needed(argv):
        if deepest_rule(path, rules):
            raise ValueError(f"{path} would be hidden from the worker (it lies under a hidden "
                             "path); hide narrower paths or name it in keep_paths")

    limits = [("RLIMIT_CPU", int(cpu_seconds), int(cpu_seconds) + 1),
              ("RLIMIT_FSIZE", int(file_bytes), int(file_bytes)),
              ("RLIMIT_NOFILE", OPEN_FILES, OPEN_FILES),
              ("RLIMIT_CORE", 0, 0)]
    words = [f"CPU {cpu_seconds} s", f"files {_size(file_bytes)}", f"{OPEN_FILES} open files",
             "no core dumps"]
    if memory_bytes is not None:
        limits.append(("RLIMIT_DATA", int(memory_bytes), int(memory_bytes)))
        words.insert(1, f"memory {_size(memory_bytes)} (data)")
    else:
        words.insert(1, "memory not limited")
    isolation = ["own temporary folder", f"scrubbed environment ({len(env)} variables)",
                 f"resource limits ({', '.join(words)})"]

    ns = namespaces()
    if ns.prefix is not None:
        plan = namespace_plan(argv, work=work, hide=hide, keep=keep, limits=limits)
        command = [*ns.prefix, *_setup_command(plan, argv)]
        isolation += ["no network (network namespace)",
                      "course files hidden (mount namespace)" if hide
                      else "course files: none named to hide",
                      ("read-only file system outside its folder; other temporary folders, "
                       "homes and raw devices hidden"),
                      "other processes invisible (PID namespace)",
                      "no privileges (capabilities dropped, no_new_privs)"]
    else:
        command = _setup_command(plain_plan(work, limits), argv)
        isolation += [f"network: not isolated ({ns.reason})",
                      f"course files: not hidden ({ns.reason})",
                      "file system and processes: as the grader's user sees them"]
    process = subprocess.Popen(command, cwd=work, env=dict(env), stdin=stdin, stdout=stdout,
                               stderr=stderr, start_new_session=True, close_fds=True)
    return process, isolation


if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[1] == "--setup":
    _setup_main(sys.argv[1:])
