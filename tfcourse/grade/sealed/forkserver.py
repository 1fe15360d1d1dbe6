"""A fork server in the sandbox: the imports paid ahead, one worker for one session.

Started by the grader (``pool.py``) under bubblewrap like a worker, its folder read-only,
as the sandbox's process 1 (``python -I forkserver.py FD``, where FD is its end of a Unix
socket to the grader). It imports what a worker needs (torch, IPython, matplotlib: seconds
that the grader starts ahead of the session), then waits for one ``fork``, with the two
ends of the session's channel: it forks the worker into a new, empty folder under ``/tmp``,
with the session's environment, running ``worker.serve`` on that channel, and replies with
its pid. Then it only waits: the grader ends the session by killing the server, and, as
process 1, it takes every process of the sandbox with it. A server never forks twice, so no
learner ever meets what another left.
"""

import json
import os
import socket
import sys
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

SESSION = "/tmp/session"  # a forked worker's folder (pool.py sets its HOME there)


def _refuse_to_start() -> str:
    """Why this process must not serve ("" when it may): as process 1 of a PID namespace
    of its own, its end is the end of every process of the sandbox; and a fork copies only
    the thread that forks, so it must have one thread."""
    if os.getpid() != 1:
        return "not process 1 of a PID namespace of its own"
    if len(os.listdir("/proc/self/task")) > 1:
        return "more than one thread (a fork would copy a lock held by another)"
    return ""


def _worker(fds: list[int], env: dict[str, str]) -> None:
    """The forked child: a folder, environment and channel of its own, then the worker."""
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
    control.send(json.dumps({"ready": True}).encode())
    message, fds, _, _ = socket.recv_fds(control, 1 << 20, 2)
    request = json.loads(message) if message else {}
    if request.get("op") != "fork" or len(fds) != 2:
        return  # the grader closed the channel, or asked for nothing this server does
    pid = os.fork()
    if pid == 0:
        status = 0
        try:
            _worker(fds, request.get("env", {}))
        except BaseException:  # noqa: BLE001 - logged, and the end is not a success
            traceback.print_exc(limit=-8)
            status = 1
        finally:
            sys.stderr.flush()
            os._exit(status)
    for fd in fds:
        os.close(fd)
    control.send(json.dumps({"pid": pid}).encode())
    while True:  # reap what ends, until the grader ends the session (and this server)
        try:
            os.wait()
        except ChildProcessError:
            control.recv(1)  # nothing left to reap: wait for the grader to close the channel
            return


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
