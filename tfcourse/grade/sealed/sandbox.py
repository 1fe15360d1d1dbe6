"""Start a sealed worker under bubblewrap: a file system built from nothing.

Deny by default. The worker does not start from the grader's view and have parts of it
hidden (a list of what to hide always misses something: another worker's folder made a
millisecond later, a classmate's copy, the submissions folder). It starts from an empty
root in which bubblewrap (``bwrap``, a maintained sandbox, the one Flatpak uses) mounts
only what it needs:

- the system's programs and libraries, read-only (``/usr``, ``/bin``, ``/lib*`` and the
  dynamic loader's files in ``/etc``), and the running Python's prefixes, read-only
  (``sys.prefix``, ``sys.base_prefix``: the virtual environment and its interpreter);
- ``/tfcourse-worker``: its own folder, holding the worker script, the protocol module
  and nothing else (the grader sends the code and the sealed package); read-only for a
  worker started ahead (``pool.py``), which works in a folder of the private ``/tmp``;
- a fresh, small, private ``/tmp`` and ``/dev/shm``, the only other writable places
  (the root and ``/dev`` are remounted read-only); a fresh ``/proc`` of its own PID
  namespace; a minimal ``/dev`` (``null``, ``zero``, ``random``, ``urandom``, ``tty``; GPU
  device nodes when the machine has them).

Anything that the grader must keep secret but that lies inside one of those mounts (the
real ``tfcourse`` of a non-editable install inside ``site-packages``; the course folder
when the virtual environment sits inside it) is covered by an empty read-only tmpfs.
Nothing else exists there: no home folders, no ``/autograder``, no submissions, no
solutions, no output files, no other worker.

The worker also gets new network (no interface but a loopback of its own), PID, IPC and
UTS namespaces, a new session (no terminal to inject keystrokes into), every capability
dropped, and dies with the grader. It is never root, not even inside: a grader running as
root starts bubblewrap as a fresh unprivileged uid (``users.fresh_id``), so the worker's
uid 0 in its user namespace is that uid to the kernel, which refuses it the host's
settings (``/proc/sys``, also mounted read-only) and every root-owned file. Resource
limits are set by the worker itself before any learner code runs (``worker.py``); being
unprivileged it cannot raise them again.

Where bubblewrap is missing or not permitted (macOS, Windows, a container without user
namespaces), ``sandbox()`` says why. A grader running as root then seals each worker as a
fresh unprivileged user instead (``users.py``); elsewhere grading refuses to start unless
the teacher passes ``--unsealed``: then the worker runs as a plain process (own folder,
scrubbed environment, resource limits) and every line of every report says the grade is
unsealed. There is no silent downgrade and no hand-written mount code to audit.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from ...language import say
from . import cgroups

WORK = "/tfcourse-worker"  # the worker's folder, inside the sandbox
TMP_BYTES = 256 * 2**20  # the private /tmp and /dev/shm (memory-backed: keep them small)
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
LOADER = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")


@dataclass(frozen=True)
class Sandbox:
    """What the probe found: the ``bwrap`` program to use, or why there is none."""

    bwrap: str | None
    # The probe runs once per process, so its reason is kept in both languages and said in
    # the language of each use (a class run grades English and Chinese notebooks).
    why: str | tuple[str, str] = ""
    version: str = ""

    @property
    def reason(self) -> str:
        return self.why if isinstance(self.why, str) else say(*self.why)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def python_prefixes() -> list[str]:
    """The running interpreter's folders (the venv and the Python it was made from)."""
    found = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    found |= {os.path.abspath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    found.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    return sorted(p for p in found if not any(_under(p, s) for s in SYSTEM))


def tmp_entries() -> list[str]:
    """What the worker's private ``/tmp`` holds: nothing but the folders leading to a
    Python prefix that lies under ``/tmp`` (mounted read-only inside them)."""
    return sorted(
        {
            Path(p).relative_to("/tmp").parts[0]
            for p in python_prefixes()
            if _under(p, "/tmp") and p != "/tmp"
        }
    )


def view(work: str, hide: list[str], writable: bool = True) -> list[str]:
    """bwrap's arguments for the worker's file system (see the module docstring).

    ``work``: the grader's folder mounted at ``WORK`` (read-only unless ``writable``).
    ``hide``: paths covered by an empty tmpfs (a file: by ``/dev/null``) wherever a mount
    above would show them.
    """
    args: list[str] = []
    shown: list[str] = []
    for top in SYSTEM:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
            shown.append(top)
    # /tmp before the Python prefixes: a virtual environment may live under /tmp (a CI
    # checkout), and a tmpfs mounted after it would cover it.
    # The kernel's settings read-only (a second lock: an unprivileged uid may not write them).
    args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev"]
    args += ["--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    for path in [*LOADER, *python_prefixes()]:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
            shown.append(os.path.realpath(path))
    gpus = sorted(str(p) for p in Path("/dev").glob("nvidia*")) + (
        ["/dev/dri"] if os.path.isdir("/dev/dri") else []
    )
    for node in gpus:
        args += ["--dev-bind", node, node]
    if gpus and os.path.isdir("/sys"):
        args += ["--ro-bind", "/sys", "/sys"]  # the CUDA driver reads its devices there
    covered: list[str] = []
    for path in sorted({os.path.realpath(p) for p in hide}):  # a folder before its contents
        # Inside a cover already (the course inside an installed package): hidden, and bwrap
        # could not make a mount point in the read-only tmpfs.
        if any(_under(path, done) for done in covered):
            continue
        if any(_under(path, root) for root in shown) and os.path.exists(path):
            args += cover(path)
            covered.append(path)
    if any(_under(path, WORK) for path in [*SYSTEM, *python_prefixes()]):
        raise ValueError(f"{WORK} is already taken by a system or Python folder")
    args += ["--bind" if writable else "--ro-bind", work, WORK, "--chdir", WORK]
    return args


# After every mount: nothing else is writable, so what a worker can leave behind is in
# /tmp and /dev/shm, private to its sandbox, which no other session ever uses.
READ_ONLY = (
    "--remount-ro",
    "/dev",
    "--size",
    str(TMP_BYTES),
    "--tmpfs",
    "/dev/shm",
    "--remount-ro",
    "/",
)


def cover(path: str, at: str | None = None) -> list[str]:
    """bwrap's arguments that cover ``path`` (mounted at ``at``, by default the same path):
    an empty read-only tmpfs over a folder, ``/dev/null`` over a file."""
    at = at or path
    if os.path.isdir(path):
        return ["--tmpfs", at, "--remount-ro", at]
    return ["--ro-bind", "/dev/null", at]


FLAGS = ("--unshare-all", "--new-session", "--die-with-parent", "--cap-drop", "ALL")


def command(
    bwrap: str,
    argv: list[str],
    *,
    work: str,
    hide: list[str],
    writable: bool = True,
    init: bool = False,
    extra: list[str] | None = None,
) -> list[str]:
    """The full command line that runs ``argv`` (paths as seen inside) in the sandbox;
    with ``init``, as the PID namespace's process 1 (bubblewrap's own process 1 would
    be a process of the learner's uid that outlives every session in the sandbox);
    ``extra``: more of bwrap's mounts, after the view (the probe's hidden file)."""
    pid_1 = ["--as-pid-1"] if init else []
    view_ = view(work, hide, writable)
    return [bwrap, *FLAGS, *pid_1, *view_, *(extra or []), *READ_ONLY, "--", *argv]


# ------------------------------------------------------------------------------ probe

_lock = threading.Lock()
_found: Sandbox | None = None

# Run inside the sandbox by the probe: every promise of the view, looked at from inside.
_PROBE = f"""
import os, socket, sys
assert sorted(os.listdir("/tmp")) == sys.argv[3].split(), "/tmp not private"
assert os.listdir("/hidden") == [], "hidden folder visible"
assert not os.path.exists(sys.argv[1]), "the grader's folder visible"
open("{WORK}/written", "w").write("ok")
for path in ("/usr/probe", "/hidden/x", "/x", "/dev/x", "/proc/sys/kernel/core_pattern"):
    try:
        open(path, "w")
    except OSError:
        continue
    sys.exit("writable: " + path)
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=2)
except OSError:
    pass
else:
    sys.exit("the grader's network reachable")
"""


def sandbox() -> Sandbox:
    """Probe once per process (cached) whether bubblewrap seals a worker here: a real run
    that checks, from inside, that a hidden folder looks empty, that the grader's own
    folder and its loopback cannot be reached, and that only ``WORK`` is writable."""
    global _found
    with _lock:
        if _found is None:
            _found = _probe()
        return _found


def _probe() -> Sandbox:
    if not sys.platform.startswith("linux"):
        return Sandbox(
            None,
            (
                f"bubblewrap needs Linux (this is {sys.platform})",
                f"bubblewrap 需要 Linux（当前是 {sys.platform}）",
            ),
        )
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Sandbox(
            None, ("bubblewrap (bwrap) is not installed", "没有安装 bubblewrap（bwrap）")
        )
    version = subprocess.run(
        [bwrap, "--version"], capture_output=True, text=True, encoding="utf-8", check=False
    ).stdout.strip()
    with (
        tempfile.TemporaryDirectory(prefix="tfcourse-probe-") as folder,
        socket.socket() as listener,
    ):
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        root = os.path.realpath(folder)
        os.chmod(root, 0o711)  # passable for the unprivileged uid that runs bubblewrap
        work, secret = (os.path.join(root, name) for name in ("w", "s"))
        for path in (work, secret):
            os.mkdir(path)
        Path(secret, "answer.txt").write_text("42", encoding="utf-8")
        # The secret stands for something hidden inside a mounted prefix: shown, then covered.
        argv = [
            sys.executable,
            "-I",
            "-S",
            "-c",
            _PROBE,
            root,
            str(listener.getsockname()[1]),
            " ".join(tmp_entries()),
        ]
        hidden = ["--ro-bind", secret, "/hidden", *cover(secret, "/hidden")]
        line = command(bwrap, argv, work=work, hide=[], extra=hidden)
        try:
            result = subprocess.run(
                line,
                env={"PATH": os.defpath},
                capture_output=True,
                timeout=60,
                check=False,
                **unprivileged(Path(work), Path(secret)),
            )
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as error:
            return Sandbox(
                None, (f"bubblewrap did not start: {error}", f"bubblewrap 无法启动：{error}")
            )
        if result.returncode == 0 and os.path.exists(os.path.join(work, "written")):
            return Sandbox(bwrap, "", version)
        tail = (result.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
        hint = ("", "")
        if os.geteuid() == 0 and "Permission denied" in tail:
            hint = (
                "; as root, bubblewrap runs as an unprivileged uid, which must be able to "
                "start Python: chmod o+x on the closed folder above it (docs/grading.md)",
                "；以 root 运行时，bubblewrap 以非特权 uid 启动，它必须能启动 Python："
                "请对 Python 上方那个关闭的文件夹执行 chmod o+x（见 docs/grading.md）",
            )
        return Sandbox(
            None,
            (
                f"bubblewrap cannot seal a worker here (exit {result.returncode}: {tail}{hint[0]})",
                f"bubblewrap 无法在这里隔离进程（退出码 {result.returncode}：{tail}{hint[1]}）",
            ),
        )


# ------------------------------------------------------------------------ start_sealed


def unprivileged(*folders: Path) -> dict:
    """``subprocess`` arguments that start bubblewrap as an unprivileged user. A grader
    running as root hands ``folders`` (and everything in them) to a fresh uid and starts
    bubblewrap as that uid, so nothing in the sandbox is root to the kernel; any other grader
    is unprivileged already (``{}``). Raises ``RuntimeError`` when no uid is free."""
    if os.geteuid() != 0:
        return {}
    from .users import fresh_id

    uid = fresh_id()
    for folder in folders:
        for path in [folder, *folder.rglob("*")]:
            os.chown(path, uid, uid, follow_symlinks=False)
    return {"user": uid, "group": uid, "extra_groups": []}


def measures(found: Sandbox, limits: str) -> list[str]:
    """The isolation in force, in words, for the report."""
    if found.bwrap is None:
        return [
            say(
                f"UNSEALED (--unsealed): {found.reason}; the learner's code ran as the "
                "grader's user and could read and write whatever that user can",
                f"未隔离（--unsealed）：{found.reason}；学员的代码以评分器的用户身份运行，"
                "能读写该用户能读写的一切",
            ),
            say(
                f"own temporary folder; scrubbed environment; resource limits ({limits})",
                f"独立的临时文件夹；清理过的环境变量；资源限制（{limits}）",
            ),
        ]
    return [
        say(
            f"{found.version or 'bubblewrap'}: a file system built from nothing "
            "(system and Python read-only, its own folder, a private /tmp; no course "
            "files, solutions, submissions, homes or other workers)",
            f"{found.version or 'bubblewrap'}：从零搭建的文件系统（系统和 Python 只读、"
            "自己的文件夹、私有的 /tmp；看不到课程文件、参考答案、其他提交、主目录和"
            "其他进程）",
        ),
        say(
            "no network; own PID, IPC and UTS namespaces; new session; capabilities dropped; "
            "never root (an unprivileged uid; the kernel's settings read-only)",
            "无网络；独立的 PID、IPC、UTS 命名空间；新会话；已丢弃全部 capabilities；"
            "绝不是 root（非特权 uid；内核设置只读）",
        ),
        say(f"resource limits ({limits})", f"资源限制（{limits}）"),
    ]


def start_sealed(
    argv: list[str],
    *,
    work: Path,
    env: dict[str, str],
    hide: list[Path],
    writable: bool = True,
    init: bool = False,
    stderr=None,
    group: cgroups.Group | None = None,
) -> subprocess.Popen:
    """Start ``argv`` sealed, with ``stdin``/``stdout`` as pipes.

    ``argv`` names the worker's files as it sees them, under ``WORK``; ``work`` is the
    grader's folder behind it (read-only inside unless ``writable``); ``init``: ``argv``
    is the sandbox's process 1 (``command``); ``group``: the control group that holds it
    and all it starts, joined before it runs (``cgroups.start``). Raises ``RuntimeError``
    when the sandbox is unavailable or it cannot join its group: never a silent downgrade.
    """
    found = sandbox()
    if found.bwrap is None:
        raise RuntimeError(found.reason)
    real_work = os.path.realpath(work)
    line = command(
        found.bwrap,
        argv,
        work=real_work,
        hide=[os.fspath(p) for p in hide],
        writable=writable,
        init=init,
    )
    return cgroups.start(
        line,
        group,
        cwd=real_work,
        env=dict(env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        start_new_session=True,
        close_fds=True,
        **unprivileged(Path(real_work)),
    )
