"""A fork server in the sandbox: the imports paid once, a fresh worker per session.

Started by the grader (``pool.py``) under bubblewrap like a worker, its folder read-only,
as the sandbox's process 1 (``python -I forkserver.py FD``, where FD is its end of a Unix
socket to the grader). It imports what every worker needs (torch, IPython, matplotlib:
seconds that a worker started from nothing pays each time) and then serves one session
at a time:

- ``fork``, with the two ends of the session's channel: fork a worker into a new, empty
  folder under ``/tmp``, with the session's environment, running ``worker.serve`` on that
  channel; reply with its pid;
- ``end``: kill every process in the sandbox but this one, remove what they left in
  ``/tmp`` and ``/dev/shm`` (the only writable places: ``sandbox.view``), check that the
  sandbox is as the first session found it, and reply ``clean``; when anything is not as
  it was, exit instead, and the grader starts a fresh server.

Why learners may share a server, one after another and never at once: each worker is a
fork of a process that never ran a learner's code; whatever a worker leaves behind is
gone before the next fork, or the server ends (what the kernel would keep beyond
processes and files, a worker cannot make: ``syscalls.py``). The server is the only
process that outlives a session, and no worker can reach it: it is not dumpable (no
worker can trace it, or read or write its memory or its files through ``/proc/1``),
holds no writable memory shared with its children, and, as process 1 of its PID
namespace, receives from inside only the signals it handles, and it handles none. It
will not start anywhere else (``kill(-1)`` must reach only the sandbox).
(``session.py`` never gives one server two learners at a time.)
"""

import ctypes
import json
import os
import shutil
import signal
import socket
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # worker.py beside us (-I)

# What every worker needs, imported once here: torch and the protocol (with worker.py),
# matplotlib with its font cache, IPython's shell.
import matplotlib
import worker

matplotlib.use("Agg")
import contextlib

import matplotlib.pyplot
from IPython.core.interactiveshell import InteractiveShell  # noqa: F401

WRITABLE = ("/tmp", "/dev/shm")
SESSION = "/tmp/session"  # a forked worker's folder (pool.py sets its HOME there)
PR_SET_DUMPABLE = 4
SWEEP_SECONDS = 10


def _prctl(option: int, value: int) -> None:
    if ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _others() -> list[int]:
    """Every process in this PID namespace but this server."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]


def _refuse_to_start() -> str:
    """Why this process must not serve ("" when it may): it has to be process 1 of a PID
    namespace of its own (``kill(-1)`` reaches the sandbox only, and no worker can
    signal it), and no page may be shared writable with the workers."""
    if os.getpid() != 1 or _others():
        return "not process 1 of a PID namespace of its own"
    if len(os.listdir("/proc/self/task")) > 1:
        return "more than one thread (a fork would copy a lock held by another)"
    with open("/proc/self/maps", encoding="utf-8") as maps:
        shared = [
            line.strip()
            for line in maps
            if line.split()[1].startswith("rw") and line.split()[1].endswith("s")
        ]
    return f"writable shared memory: {shared[0]}" if shared else ""


def _state() -> dict[str, tuple]:
    """What is on the writable mounts (never inside another mount, such as a virtual
    environment under ``/tmp``): a folder by its mode and owner, anything else by mode,
    owner, size and time of change."""
    found: dict[str, tuple[int, ...]] = {}
    for root in WRITABLE:
        device = os.lstat(root).st_dev
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if os.lstat(os.path.join(folder, d)).st_dev == device]
            for name in dirs:
                info = os.lstat(os.path.join(folder, name))
                found[os.path.join(folder, name)] = (info.st_mode, info.st_uid)
            for name in files:
                info = os.lstat(os.path.join(folder, name))
                found[os.path.join(folder, name)] = (
                    info.st_mode,
                    info.st_uid,
                    info.st_size,
                    info.st_ctime_ns,
                )
    return found


def _sweep(clean: dict[str, tuple]) -> bool:
    """Kill every other process here, remove what appeared since ``clean`` was taken, and
    say whether the sandbox is back to ``clean``."""
    deadline = time.monotonic() + SWEEP_SECONDS
    while _others():
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)  # atomic against fork: no process slips through
        while True:  # orphans come to process 1: reap them
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    new = set(_state()) - set(clean)
    for path in sorted(new):
        if os.path.dirname(path) in new:
            continue  # goes with its folder
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError:
            return False
    return _state() == clean


def _caught() -> list[signal.Signals]:
    """The signals this process handles (``SigCgt`` in ``/proc/self/status``)."""
    with open("/proc/self/status", encoding="utf-8") as status:
        mask = next(int(line.split()[1], 16) for line in status if line.startswith("SigCgt:"))
    return [s for s in signal.Signals if mask >> (s - 1) & 1]


def _worker(fds: list[int], env: dict[str, str], handlers: dict) -> None:
    """The forked child: a folder, environment, signal handlers and channel of its own,
    then the worker."""
    for number, handler in handlers.items():
        signal.signal(number, handler)
    os.mkdir(SESSION, 0o700)
    os.chdir(SESSION)
    os.environ.clear()
    os.environ.update(env)
    worker.take_channel(fds[0], fds[1])
    keep = {0, 1, 2, worker._CHANNEL_IN.fileno(), worker._CHANNEL_OUT.fileno()}
    for fd in map(int, os.listdir("/proc/self/fd")):
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)
    worker.serve()


def serve(control: socket.socket) -> None:
    why = _refuse_to_start()
    if why:
        sys.exit(f"fork server: {why}")
    _prctl(PR_SET_DUMPABLE, 0)
    handlers = {number: signal.getsignal(number) or signal.SIG_DFL for number in _caught()}
    for number in handlers:  # the workers get them back (_worker)
        signal.signal(number, signal.SIG_IGN)
    clean = _state()
    control.send(json.dumps({"ready": True}).encode())
    while True:
        message, fds, _, _ = socket.recv_fds(control, 1 << 20, 2)
        if not message:
            return  # the grader closed the channel
        request = json.loads(message)
        if request.get("op") == "fork" and len(fds) == 2:
            pid = os.fork()
            if pid == 0:
                status = 0
                try:
                    _worker(fds, request.get("env", {}), handlers)
                except BaseException:  # noqa: BLE001 - logged, and the end is not a success
                    traceback.print_exc(limit=-8)
                    status = 1
                finally:
                    sys.stderr.flush()
                    os._exit(status)
            for fd in fds:
                os.close(fd)
            control.send(json.dumps({"pid": pid}).encode())
        elif request.get("op") == "end" and _sweep(clean):
            control.send(json.dumps({"clean": True}).encode())
        else:
            sys.exit("fork server: the sandbox is not as clean as it was; ending")


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
