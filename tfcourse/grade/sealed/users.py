"""Seal a worker as a user of its own, where bubblewrap cannot run (containers).

A Docker-style grader (Gradescope's among them) often cannot create namespaces, so
bubblewrap fails there; but it grades as root. Then each worker runs as a **fresh
unprivileged user**: a uid (and gid) no account and no running process has, never
handed out twice in a run, with no supplementary groups, umask 077, the no-new-privileges
flag and a process limit (both set by ``worker.py``), in a folder of the grader's made
its own (mode 0700). What it cannot reach then rests on file permissions: the grader's
secrets (the solutions, the real package, the submissions, the output files, the grading
secret) must be readable by root only. Listing them does not prove it, so before any
learner code runs ``probe`` walks each secret path and tries, as a fresh user, to read and
to write every file and folder in it; grading refuses to start if one is within reach,
naming it. After the session, ``UserProcess.kill`` kills every process of that uid (a helper
running as the uid sends ``kill(-1)``, which a fork cannot outrun) and removes what the uid
left in the shared writable folders (``SHARED``).

Weaker than bubblewrap, and the report says so: the worker sees the rest of the file
system as any user would (what is world-readable), the process list, and the network.
No worker is started ahead: each imports torch once its session begins.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from ...language import say
from . import cgroups, undertaker

LOW, HIGH = 2**20, 2**31 - 2  # far above any account's uid; below the kernel's limits
# World-writable folders where a worker can leave files behind (removed after it).
SHARED = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock")
# Gradescope's folders (autograder.py): the bundle with the solutions and the secret, the
# submission, the results. Out of reach wherever they exist (setup.sh and run_autograder
# make them root's only).
GRADESCOPE = (
    "/autograder/source",
    "/autograder/submission",
    "/autograder/results",
    "/autograder/submission_metadata.json",
)
MAX_PROBED = 50_000  # files and folders the probe tries (a secret tree is small)
PROCESSES = 256  # per worker (RLIMIT_NPROC counts the uid's processes)

_lock = threading.Lock()
_given: set[int] = set()  # never reused in a run: nothing left by one reaches another


def available() -> str:
    """Why separate users cannot seal a worker here ("" when they can, as far as the
    platform goes; ``probe`` decides)."""
    if not sys.platform.startswith("linux"):
        return say(
            f"separate users need Linux (this is {sys.platform})",
            f"独立用户隔离需要 Linux（当前是 {sys.platform}）",
        )
    if os.geteuid() != 0:
        return say(
            "separate users need the grader to run as root",
            "独立用户隔离需要以 root 身份运行评分器",
        )
    return ""


def _mapped(kind: str) -> list[tuple[int, int]]:
    """The ids this process can switch to, as ``[(first, last)]`` (its user namespace's
    ``uid_map``/``gid_map``; all of them outside any)."""
    try:
        lines = Path(f"/proc/self/{kind}_map").read_text(encoding="utf-8").split("\n")
    except OSError:
        return [(0, 2**32 - 2)]
    ranges = []
    for line in lines:
        if len(fields := line.split()) == 3:
            first, count = int(fields[0]), int(fields[2])
            ranges.append((first, first + count - 1))
    return ranges


def _in_use() -> set[int]:
    """uids of running processes and of the accounts in ``/etc/passwd``."""
    used = set()
    for entry in Path("/proc").iterdir():
        try:
            used.add(entry.stat().st_uid) if entry.name.isdigit() else None
        except OSError:
            continue
    with contextlib.suppress(OSError):
        used |= {
            int(line.split(":")[2])
            for line in Path("/etc/passwd")
            .read_text(encoding="utf-8", errors="replace")
            .split("\n")
            if line.count(":") >= 3 and line.split(":")[2].isdigit()
        }
    return used


def fresh_id() -> int:
    """A uid (and the same gid) that nobody has, mapped in this user namespace, between
    ``LOW`` and ``HIGH``; never the same twice in this process. Raises ``RuntimeError``."""
    ranges = [
        (max(a, c, LOW), min(b, d, HIGH)) for a, b in _mapped("uid") for c, d in _mapped("gid")
    ]
    ranges = [(a, b) for a, b in ranges if a <= b]
    if not ranges:
        raise RuntimeError(
            say(
                f"no unprivileged ids between {LOW} and {HIGH} can be used here",
                f"这里无法使用 {LOW} 到 {HIGH} 之间的非特权用户 id",
            )
        )
    used = _in_use()
    picker = random.SystemRandom()
    with _lock:
        for _ in range(1000):
            first, last = picker.choice(ranges)
            uid = picker.randint(first, last)
            if uid not in used and uid not in _given:
                _given.add(uid)
                undertaker.keep("user", uid)
                return uid
    raise RuntimeError(say("no free unprivileged id was found", "找不到空闲的非特权用户 id"))


def _as_user(uid: int) -> dict:
    """``subprocess.Popen`` arguments that run the child as ``uid``: its gid, no other
    group, a private umask, a session of its own."""
    return {
        "user": uid,
        "group": uid,
        "extra_groups": [],
        "umask": 0o077,
        "start_new_session": True,
        "close_fds": True,
    }


class UserProcess:
    """A worker process running as a fresh user, as ``channel.Channel`` sees a process
    (``stdin``, ``stdout``, ``poll``, ``kill``); ``kill`` also ends everything the user
    started and removes what it left (``end_user``)."""

    def __init__(self, argv: list[str], *, folder: Path, env: dict[str, str], stderr=None):
        """``folder``: the worker's, made its own, inside a folder of the grader's. That one
        is made passable but not writable for others (0711): the user can use its folder,
        never swap it for a link the grader would follow when it removes it."""
        if folder.parent.stat().st_uid != os.geteuid():
            raise ValueError(f"{folder.parent} must be the grader's")
        os.chmod(folder.parent, 0o711)
        self.uid = fresh_id()
        for path in [folder, *folder.rglob("*")]:
            os.chown(path, self.uid, self.uid, follow_symlinks=False)
        os.chmod(folder, 0o700)
        # All of the user's processes together, where the machine offers it (cgroups.py).
        self.group = cgroups.create()
        try:
            self.process = cgroups.start(
                argv,
                self.group,
                cwd=folder,
                env=dict(env),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                **_as_user(self.uid),
            )
        except BaseException:
            if self.group is not None:
                self.group.kill()
            raise
        self.stdin, self.stdout, self.folder = self.process.stdin, self.process.stdout, folder
        self.ended = False

    def poll(self):
        # Running until killed: a worker that exits may have left a process behind.
        return self.process.returncode if self.ended else None

    def send_signal(self, number: int) -> None:
        """Signal the worker's process alone, waiting for nothing (``channel.stop``)."""
        self.process.send_signal(number)

    def kill(self) -> None:
        if self.ended:
            return
        self.ended = True
        self.process.kill()
        self.process.wait()
        if self.group is not None:
            self.group.kill()
        # The folder is the grader's again (it removes it), so end_user does not.
        os.chown(self.folder, os.geteuid(), os.getegid())
        # Every process of the uid first: one that kept the channel open (a fork that closed
        # only 0, 1 and 2) would otherwise block the close below, behind the reader thread.
        end_user(self.uid)
        for stream in (self.stdin, self.stdout):
            if stream is not None:
                stream.close()


def end_user(uid: int) -> None:
    """Kill every process of ``uid`` and remove what it owns in ``SHARED``. Raises
    ``RuntimeError`` if a process survives (the notebook being graded then gets an error
    line; no later worker has this uid)."""
    for _ in range(200):
        # A shell (no Python needed) running as ``uid``: kill(-1) signals every process the
        # uid may signal, its own, never the caller; a fork cannot outrun it.
        subprocess.run(
            ["/bin/sh", "-c", "kill -9 -1"],
            env={},
            check=False,
            timeout=60,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            **_as_user(uid),
        )
        if not _running(uid):
            break
        time.sleep(0.02)
    else:
        raise RuntimeError(f"processes of uid {uid} survived kill(-1)")
    for top in SHARED:
        _remove_owned(Path(top), uid)
    undertaker.done("user", uid)


def _running(uid: int) -> bool:
    """Whether a process (not a zombie) has ``uid`` as its real, effective or saved uid."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(
                line.split(":", 1)
                for line in status.read_text(encoding="utf-8", errors="replace").split("\n")
                if ":" in line
            )
        except OSError:
            continue
        if str(uid) in fields.get("Uid", "").split()[:3] and fields.get("State", "").split()[
            :1
        ] not in (["Z"], ["X"]):
            return True
    return False


def _remove_owned(folder: Path, uid: int) -> None:
    """Remove what ``uid`` owns in ``folder``, looking only where it could have written:
    folders anyone may write to (a folder it owns goes as a whole)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if info.st_uid == uid:
            if stat.S_ISDIR(info.st_mode):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                Path(entry.path).unlink(missing_ok=True)
        elif stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_IWOTH:
            _remove_owned(Path(entry.path), uid)


# ------------------------------------------------------------------------------ probe

# Run as a fresh user: argv[1] is a JSON list of [path, is a folder]; prints what it reached.
_PROBE = """
import json, os, sys
reached = []
for path, folder in json.loads(sys.argv[1]):
    try:
        os.listdir(path) if folder else open(path, "rb").close()
        reached.append("read " + path)
    except OSError:
        pass
    try:
        if folder:
            os.close(os.open(os.path.join(path, ".tfcourse-probe"), os.O_CREAT | os.O_EXCL))
            os.unlink(os.path.join(path, ".tfcourse-probe"))
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
        reached.append("write " + path)
    except OSError:
        pass
try:
    os.kill(os.getppid(), 0)
    reached.append("signal the grader")
except OSError:
    pass
open("written", "w").write("ok")
print(json.dumps(reached))
"""


def secret_tree(paths: list[Path]) -> list[tuple[str, bool]]:
    """Every file and folder in ``paths`` (``[(path, is a folder)]``), walked as the grader
    sees them, without following links; at most ``MAX_PROBED``."""
    found: list[tuple[str, bool]] = []
    for root in paths:
        if not os.path.lexists(root):
            continue
        found.append((os.fspath(root), os.path.isdir(root) and not os.path.islink(root)))
        if found[-1][1]:
            for folder, dirs, files in os.walk(root):
                found += [(os.path.join(folder, name), True) for name in dirs]
                found += [(os.path.join(folder, name), False) for name in files]
                if len(found) >= MAX_PROBED:
                    return found[:MAX_PROBED]
    return found


def probe(secrets: list[Path], folder: Path) -> str:
    """Why a fresh user would not seal a worker here ("" when it does): it must be able to
    run this Python in ``folder`` (an empty folder of the grader's), and reach none of
    ``secrets`` (read or write), nor signal the grader. Run once per grading run, before
    any grading (``command.check_arguments``)."""
    if why := available():
        return why
    uid = fresh_id()
    os.chown(folder, uid, uid)
    try:
        result = subprocess.run(
            [sys.executable, "-I", "-c", _PROBE, json.dumps(secret_tree(secrets))],
            cwd=folder,
            env={"PATH": os.defpath},
            capture_output=True,
            timeout=120,
            check=False,
            stdin=subprocess.DEVNULL,
            **_as_user(uid),
        )
    except (OSError, subprocess.SubprocessError) as error:
        return _cannot_run(str(error))
    finally:
        written = (folder / "written").exists()
        os.chown(folder, os.geteuid(), os.getegid())  # the grader's again, kept by end_user
        end_user(uid)
    lines = result.stdout.decode(errors="replace").strip().split("\n")
    if result.returncode != 0 or not written:
        tail = (result.stderr.decode(errors="replace").strip().split("\n") or ["?"])[-1]
        return _cannot_run(tail)
    reached = json.loads(lines[-1])
    if reached:
        why = say(
            f"an unprivileged user can {reached[0]}"
            + (f" (and {len(reached) - 1} more)" if len(reached) > 1 else "")
            + ": make the grader's files readable by root only (chmod -R go-rwx)",
            f"非特权用户可以 {reached[0]}"
            + (f"（另有 {len(reached) - 1} 处）" if len(reached) > 1 else "")
            + "：请让评分器的文件只有 root 可读（chmod -R go-rwx）",
        )
    else:
        why = ""
    return why


def _cannot_run(error: str) -> str:
    """Why this Python does not run as a fresh user, and the folder to open if that is why."""
    why = say(
        f"this Python cannot run as an unprivileged user ({error[:200]})",
        f"这个 Python 无法以非特权用户身份运行（{error[:200]}）",
    )
    for path in (os.path.realpath(sys.executable), os.path.realpath(sys.prefix)):
        for folder in reversed(Path(path).parents):
            if not folder.stat().st_mode & stat.S_IXOTH:
                return why + say(
                    f": other users cannot pass through {folder} (chmod o+x "
                    f"{folder} lets them, without listing it)",
                    f"：其他用户无法进入 {folder}（chmod o+x {folder} "
                    "可以让他们进入，但不能列出其内容）",
                )
    return why


def measures(limits: str) -> list[str]:
    """The isolation in force, in words, for the report."""
    return [
        say(
            "a fresh unprivileged user for each worker (no groups, no new privileges, "
            f"at most {PROCESSES} processes), in a private folder; the solutions, the real "
            "package, the submissions, the outputs and the grading secret proven out of "
            "that user's reach before grading; every process of that user killed and its "
            "files in /tmp, /var/tmp and /dev/shm removed after it",
            "每个隔离进程使用一个全新的非特权用户（无附加组、不能提权、最多 "
            f"{PROCESSES} 个进程），在私有文件夹中运行；评分前已验证该用户无法访问参考答案、"
            "真正的课程包、提交、输出文件和评分密钥；结束后杀掉该用户的全部进程，并删除它在 "
            "/tmp、/var/tmp、/dev/shm 中留下的文件",
        ),
        say(
            "NOT isolated (no namespaces here): the network, the process list, and "
            "whatever any user may read",
            "未隔离（这里没有命名空间）：网络、进程列表，以及任何用户都能读取的文件",
        ),
        say(f"resource limits ({limits})", f"资源限制（{limits}）"),
    ]
