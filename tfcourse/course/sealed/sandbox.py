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

How: ``launch`` starts ``[unshare --mount --net --pid] python -I -S confine.py --setup
PLAN -- ARGV``; ``confine.py`` (standard library only) carries the plan out inside the
namespaces and execs the worker, leaving a *keeper* outside that ends as the worker ended,
so the caller sees one ordinary process: ``returncode`` is the worker's exit status, or
``-N`` for a death by signal ``N`` (in a namespace the CPU limit kills with ``SIGKILL``,
``-9``; ``-24`` without: see ``confine``). Killing the process group
(``os.killpg(process.pid, SIGKILL)``) or the keeper ends everything.
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

from ...language import say
from . import confine
from .confine import under

SCRIPT = Path(confine.__file__).resolve()
OPEN_FILES = 256
PRIVATE = ("/tmp", "/var/tmp", "/run", "/home", "/root")


def _norm(path) -> str:
    return os.path.realpath(os.fspath(path))


def deepest_rule(path: str, rules: dict[str, bool]) -> bool | None:
    """The verdict (``True`` = hidden) of the deepest rule covering ``path``; None if none."""
    best = None
    for root in rules:
        if under(path, root) and (best is None or len(root) > len(best)):
            best = root
    return None if best is None else rules[best]


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
    private = [p for p in private if not any(under(p, n) for n in [*needed, *keep])]
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
        if under(work, path) or under(path, work):
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
    words = [say(f"CPU {cpu_seconds} s", f"CPU {cpu_seconds} 秒"),
             say(f"files {_size(file_bytes)}", f"文件 {_size(file_bytes)}"),
             say(f"{OPEN_FILES} open files", f"最多打开 {OPEN_FILES} 个文件"),
             say("no core dumps", "不生成核心转储")]
    if memory_bytes is not None:
        limits.append(("RLIMIT_DATA", int(memory_bytes), int(memory_bytes)))
        words.insert(1, say(f"memory {_size(memory_bytes)} (data)",
                            f"内存 {_size(memory_bytes)}（数据段）"))
    else:
        words.insert(1, say("memory not limited", "内存不限"))
    isolation = [say("own temporary folder", "独立的临时文件夹"),
                 say(f"scrubbed environment ({len(env)} variables)",
                     f"清理过的环境变量（{len(env)} 个）"),
                 say(f"resource limits ({', '.join(words)})", f"资源限制（{'、'.join(words)}）")]

    ns = namespaces()
    if ns.prefix is not None:
        plan = namespace_plan(argv, work=work, hide=hide, keep=keep, limits=limits)
        command = [*ns.prefix, *_setup_command(plan, argv)]
        isolation += [say("no network (network namespace)", "无网络（网络命名空间）"),
                      say("course files hidden (mount namespace)", "课程文件已隐藏（挂载命名空间）")
                      if hide else say("course files: none named to hide",
                                       "课程文件：没有指定要隐藏的文件"),
                      say("read-only file system outside its folder; other temporary folders, "
                          "homes and raw devices hidden",
                          "自己文件夹之外的文件系统只读；其他临时文件夹、主目录和原始设备均已隐藏"),
                      say("other processes invisible (PID namespace)",
                          "看不到其他进程（PID 命名空间）"),
                      say("no privileges (capabilities dropped, no_new_privs)",
                          "没有特权（已丢弃 capabilities，no_new_privs）")]
    else:
        command = _setup_command(plain_plan(work, limits), argv)
        isolation += [say(f"network: not isolated ({ns.reason})", f"网络：未隔离（{ns.reason}）"),
                      say(f"course files: not hidden ({ns.reason})",
                          f"课程文件：未隐藏（{ns.reason}）"),
                      say("file system and processes: as the grader's user sees them",
                          "文件系统和进程：与评分器所用的用户看到的一样")]
    process = subprocess.Popen(command, cwd=work, env=dict(env), stdin=stdin, stdout=stdout,
                               stderr=stderr, start_new_session=True, close_fds=True)
    return process, isolation

