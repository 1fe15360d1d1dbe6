"""Sealed workers from fork servers, one sandbox per session, never reused.

A worker started from nothing imports torch, IPython and matplotlib before it runs a
line of the learner's (seconds on a laptop, more than grading the notebook takes). A fork
server (``forkserver.py``), sandboxed like a worker, imports them and forks the session's
worker. Each server serves exactly one session, one learner's: when the session ends the
server is killed, and with it, as the sandbox's process 1, every process of that sandbox;
its private ``/tmp`` and ``/dev/shm`` go with its mount namespace. Nothing of one learner's
sandbox can be seen by another, by construction: no sandbox is ever handed on, so nothing
has to be proven clean. What keeps this fast is that servers are started ahead: taking a
spare starts its replacement in the background, so the imports of the next session run
while this one grades. ``start(...)`` returns an object with the parts of
``subprocess.Popen`` that ``channel.Channel`` uses (``stdin``, ``stdout``, ``poll``,
``kill``); ``kill`` ends the session and its server.

Only sealed grading uses servers; ``--unsealed`` starts each worker from nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ...language import say
from . import cgroups
from .channel import WorkerFailed
from .sandbox import WORK, start_sealed

HERE = Path(__file__).resolve().parent
# What a worker started on its own needs beside it.
WORKER_FILES = ("worker.py", "watch.py", "protocol.py", "syscalls.py")
FILES = (*WORKER_FILES, "forkserver.py")
START_SECONDS = 120  # importing torch on a loaded machine, with room to spare
ANSWER_SECONDS = 20  # a fork
SESSION = "/tmp/session"  # a forked worker's folder, inside the sandbox (forkserver.py)
# The server's own: its files in one folder of /tmp (matplotlib's font cache), and one
# thread while it imports (a fork copies only the thread that forks).
SERVER_ENV = {
    "HOME": "/tmp/.server",
    "MPLCONFIGDIR": "/tmp/.server/matplotlib",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
# Servers started ahead, per set-up: one per job of a class run (each holds torch in memory).
SPARES = 2
# bubblewrap's --die-with-parent is PR_SET_PDEATHSIG, which fires when the *thread* that
# started it ends, not the process: a server started by a grading thread would be killed
# when that thread ends, while idle or, worse, just after forking a worker. Every server
# is started by this one thread, which lives as long as the grader.
_starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tfcourse-forkservers")


class ForkServer:
    """One fork server in its sandbox, and the grader's end of its control socket."""

    def __init__(self, env: dict[str, str], hide: list[Path]):
        self.folder = Path(tempfile.mkdtemp(prefix="tfcourse-forkserver-"))
        for name in FILES:
            shutil.copyfile(HERE / name, self.folder / name)
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # Outside what the server sees; kept while it runs, for the reason a fork died.
        self.log = log = self.folder.parent / f"{self.folder.name}.log"
        # The learner's processes together, where the grader can bound them (cgroups.py).
        self.group = cgroups.create()
        try:
            with theirs, open(log, "wb") as stderr:
                self.process = _starter.submit(
                    start_sealed,
                    [sys.executable, "-I", f"{WORK}/forkserver.py", str(theirs.fileno())],
                    work=self.folder,
                    env=dict(env, **SERVER_ENV),
                    hide=hide,
                    writable=False,
                    init=True,
                    stderr=stderr,
                    pass_fds=(theirs.fileno(),),
                    group=self.group,
                ).result()
            self._answer(START_SECONDS, "ready")
        except (OSError, RuntimeError, WorkerFailed) as error:
            said = self.last_words()
            self.close()
            raise WorkerFailed(
                say(f"the sandbox did not start: {error}", f"沙箱没有启动：{error}")
                + (f" ({said})" if said else "")
            ) from None

    def _answer(self, seconds: float, key: str) -> dict:
        self.control.settimeout(seconds)
        try:
            reply = json.loads(self.control.recv(4096) or b"{}")
        except (OSError, ValueError) as error:
            raise WorkerFailed(f"the fork server did not answer ({error})") from None
        if not (isinstance(reply, dict) and key in reply):
            raise WorkerFailed("the fork server ended")
        return reply

    def fork(self, env: dict[str, str]) -> tuple:
        """A fresh worker on a channel of its own: ``(its stdin, its stdout)`` here."""
        into, out = os.pipe(), os.pipe()
        try:
            socket.send_fds(
                self.control, [json.dumps({"op": "fork", "env": env}).encode()], [into[0], out[1]]
            )
            self._answer(ANSWER_SECONDS, "pid")
        except (OSError, WorkerFailed):
            for fd in (*into, *out):
                os.close(fd)
            raise
        os.close(into[0])
        os.close(out[1])
        return os.fdopen(into[1], "wb"), os.fdopen(out[0], "rb")

    def last_words(self) -> str:
        """The last line the server (or a worker before its channel) wrote to stderr."""
        try:
            lines = self.log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1][:200] if lines else ""

    def close(self) -> None:
        if getattr(self, "process", None) is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.group is not None:
            self.group.kill()
        self.control.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        self.log.unlink(missing_ok=True)


class Session:
    """A forked worker as ``channel.Channel`` sees a process; ``kill`` ends the session and
    its server."""

    def __init__(self, server: ForkServer, env: dict[str, str]):
        self.server = server
        self.stdin, self.stdout = server.fork(env)
        self.ended = False

    def poll(self):
        return 0 if self.ended else None

    def kill(self) -> None:
        self.discard()

    def discard(self) -> str:
        """End the session and its server; the server's last words."""
        said = "" if self.ended else self.server.last_words()
        self.ended = True
        self.stdin.close()
        self.server.close()
        return said


_lock = threading.Lock()
_spares: dict[tuple, list] = {}  # set-up -> futures of servers that never served anyone
_ahead = ThreadPoolExecutor(max_workers=SPARES, thread_name_prefix="tfcourse-spares")


def start(server_env: dict[str, str], hide: list[Path], env: dict[str, str]) -> Session:
    """A sealed worker with environment ``env``, forked by a server of its own that never
    served anyone, started with ``server_env`` and ``hide`` (``sandbox.start_sealed``).
    Raises ``WorkerFailed``."""
    key = (tuple(sorted(server_env.items())), tuple(sorted(map(str, hide))))
    with _lock:
        spares = _spares.setdefault(key, [])
        spares[:] = [f for f in spares if not (f.done() and f.exception() is not None)]
        ready = next((f for f in spares if f.done()), None)
        if ready is not None:
            spares.remove(ready)
        while len(spares) < SPARES:  # the next sessions' servers start now
            spares.append(_ahead.submit(ForkServer, server_env, hide))
    server = ready.result() if ready is not None else ForkServer(server_env, hide)
    try:
        return Session(server, env)
    except (OSError, WorkerFailed):
        server.close()
        raise


@atexit.register
def close_all() -> None:
    """End every spare server (at exit, and for tests)."""
    with _lock:
        futures = [f for spares in _spares.values() for f in spares]
        _spares.clear()
    for future in futures:
        with contextlib.suppress(OSError, RuntimeError, WorkerFailed):
            future.result().close()
