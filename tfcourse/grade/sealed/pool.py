"""Sealed workers started ahead, one sandbox per session, never reused.

A worker started from nothing imports torch, IPython and matplotlib before it runs a
line of the learner's (seconds on a laptop, more than grading the notebook takes). So
workers are started ahead: each in a sandbox of its own, as its process 1, imports them,
says it is ready and waits for its first message. Each serves exactly one session, one
learner's: when the session ends the worker is killed, and with it, as process 1, every
process of its sandbox; its private ``/tmp`` and ``/dev/shm`` go with its mount namespace.
Nothing of one learner's sandbox can be seen by another, by construction: no sandbox is
ever handed on, so nothing has to be proven clean. Taking a spare that is ready starts its
replacement in the background, so the imports of the next session run while this one
grades; when none is ready, one is started for the session (while the spares go on
importing).

Only bubblewrap's workers are started ahead; a worker of its own user (``users.py``) or
``--unsealed`` starts from nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import select
import shutil
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, cast

from ...language import say
from . import cgroups, protocol, undertaker
from .channel import WorkerFailed
from .sandbox import WORK, start_sealed

HERE = Path(__file__).resolve().parent
# What a worker needs beside it.
WORKER_FILES = ("worker.py", "watch.py", "protocol.py", "syscalls.py")
SESSION = "/tmp/session"  # the worker's folder, made by itself in the sandbox's private /tmp
START_SECONDS = 120  # importing torch on a loaded machine, with room to spare
# Workers started ahead, per set-up: one per job of a class run (each holds torch in memory).
SPARES = 2
# bubblewrap's --die-with-parent is PR_SET_PDEATHSIG, which fires when the *thread* that
# started it ends, not the process: a worker started by a grading thread would be killed
# when that thread ends, while it waits for its session or, worse, during it. Every worker
# is started by this one thread, which lives as long as the grader.
_starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tfcourse-workers")


class SealedWorker:
    """One worker in its sandbox, with the parts of ``subprocess.Popen`` that
    ``channel.Channel`` uses (``stdin``, ``stdout``, ``poll``, ``kill``); ``kill`` ends its
    sandbox."""

    def __init__(self, env: dict[str, str], hide: list[Path]):
        self.folder = Path(tempfile.mkdtemp(prefix="tfcourse-worker-"))
        for name in WORKER_FILES:
            shutil.copyfile(HERE / name, self.folder / name)
        # Outside what the worker sees; kept while it runs, for the reason it died.
        self.log = self.folder.parent / f"{self.folder.name}.log"
        for path in (self.folder, self.log):
            undertaker.keep("path", str(path))
        # The learner's processes together, where the grader can bound them (cgroups.py).
        self.group = cgroups.create()
        try:
            with open(self.log, "wb") as stderr:
                process = _starter.submit(
                    start_sealed,
                    [sys.executable, "-I", f"{WORK}/worker.py", SESSION],
                    work=self.folder,
                    env=env,
                    hide=hide,
                    writable=False,
                    init=True,
                    stderr=stderr,
                    group=self.group,
                ).result()
        except (OSError, RuntimeError) as error:
            self._remove()
            raise WorkerFailed(
                say(f"the sandbox did not start: {error}", f"沙箱没有启动：{error}")
            ) from None
        self.process = process
        self.stdin, self.stdout = cast(IO[bytes], process.stdin), cast(IO[bytes], process.stdout)
        self.said_ready: bool | None = None  # None: not yet; False: it ended or said otherwise

    def ready(self, seconds: float = 0.0) -> bool:
        """Whether the worker said it is ready (its imports done: ``worker.py``), waiting up
        to ``seconds``. Nothing of a learner's has run in it yet; its message is read here, so
        its channel then carries replies only."""
        if self.said_ready is None and select.select([self.stdout], [], [], seconds)[0]:
            try:
                header, _ = protocol.read_message(self.stdout)
                self.said_ready = header == {"ready": True}
            except (EOFError, OSError, protocol.ProtocolError):
                self.said_ready = False
        return bool(self.said_ready)

    def poll(self):
        return self.process.poll()

    def send_signal(self, number: int) -> None:
        """Signal the worker's process alone, waiting for nothing (``channel.stop``)."""
        self.process.send_signal(number)

    def kill(self) -> None:
        self.close()

    def last_words(self) -> str:
        """The last line the worker wrote to stderr before its channel (or as it died)."""
        try:
            lines = self.log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1][:200] if lines else ""

    def discard(self) -> str:
        """End the worker and its sandbox; its last words."""
        said = self.last_words()
        self.close()
        return said

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pipe in (self.stdin, self.stdout):
            with contextlib.suppress(OSError):
                pipe.close()
        self._remove()

    def _remove(self) -> None:
        if self.group is not None:
            self.group.kill()
        shutil.rmtree(self.folder, ignore_errors=True)
        self.log.unlink(missing_ok=True)
        for path in (self.folder, self.log):
            undertaker.done("path", str(path))


_lock = threading.Lock()
_spares: dict[tuple, list] = {}  # set-up -> futures of workers that never served anyone
_ahead = ThreadPoolExecutor(max_workers=SPARES, thread_name_prefix="tfcourse-spares")


def _alive(spare) -> bool:
    """Whether a spare may still serve: starting, or started and not ended (else closed)."""
    if not spare.done():
        return True
    if spare.exception() is not None:
        return False
    worker = spare.result()
    if worker.poll() is None and (worker.ready() or worker.said_ready is None):
        return True
    worker.close()
    return False


def start(env: dict[str, str], hide: list[Path]) -> SealedWorker:
    """A sealed worker, ready, with environment ``env`` and ``hide`` covered
    (``sandbox.start_sealed``) that never served anyone. Raises ``WorkerFailed``."""
    key = (tuple(sorted(env.items())), tuple(sorted(map(str, hide))))
    with _lock:
        spares = _spares.setdefault(key, [])
        spares[:] = [f for f in spares if _alive(f)]
        ready = next((f for f in spares if f.done() and f.result().ready()), None)
        if ready is not None:
            spares.remove(ready)
        while len(spares) < SPARES:  # the next sessions' workers start now
            spares.append(_ahead.submit(SealedWorker, env, hide))
    worker = ready.result() if ready is not None else SealedWorker(env, hide)
    if not worker.ready(START_SECONDS):
        said = worker.discard()
        raise WorkerFailed(
            say("the worker did not start", "隔离进程没有启动") + (f" ({said})" if said else "")
        )
    return worker


@atexit.register
def close_all() -> None:
    """End every spare worker (at exit, and for tests)."""
    with _lock:
        futures = [f for spares in _spares.values() for f in spares]
        _spares.clear()
    for future in futures:
        with contextlib.suppress(OSError, RuntimeError, WorkerFailed):
            future.result().close()
