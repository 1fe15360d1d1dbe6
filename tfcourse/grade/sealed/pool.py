"""Sealed workers started ahead, one sandbox per session, never reused.

A worker started from nothing imports torch, IPython and matplotlib before it runs a
line of the learner's (seconds on a laptop, more than grading the notebook takes). So
workers are started ahead: each in a sandbox of its own, as its process 1, imports them
and waits for its first message. Each serves exactly one session, one learner's: when the
session ends the worker is killed, and with it, as process 1, every process of its sandbox;
its private ``/tmp`` and ``/dev/shm`` go with its mount namespace. Nothing of one learner's
sandbox can be seen by another, by construction: no sandbox is ever handed on, so nothing
has to be proven clean. Taking a spare starts its replacement in the background, so the
imports of the next session run while this one grades.

Only bubblewrap's workers are started ahead; a worker of its own user (``users.py``) or
``--unsealed`` starts from nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, cast

from ...language import say
from . import cgroups
from .channel import WorkerFailed
from .sandbox import WORK, start_sealed

HERE = Path(__file__).resolve().parent
# What a worker needs beside it.
WORKER_FILES = ("worker.py", "watch.py", "protocol.py", "syscalls.py")
SESSION = "/tmp/session"  # the worker's folder, made by itself in the sandbox's private /tmp
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

    def poll(self):
        return self.process.poll()

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


_lock = threading.Lock()
_spares: dict[tuple, list] = {}  # set-up -> futures of workers that never served anyone
_ahead = ThreadPoolExecutor(max_workers=SPARES, thread_name_prefix="tfcourse-spares")


def start(env: dict[str, str], hide: list[Path]) -> SealedWorker:
    """A sealed worker with environment ``env`` and ``hide`` covered
    (``sandbox.start_sealed``) that never served anyone. Raises ``WorkerFailed``."""
    key = (tuple(sorted(env.items())), tuple(sorted(map(str, hide))))
    with _lock:
        spares = _spares.setdefault(key, [])
        spares[:] = [f for f in spares if not (f.done() and f.exception() is not None)]
        ready = next((f for f in spares if f.done()), None)
        if ready is not None:
            spares.remove(ready)
        while len(spares) < SPARES:  # the next sessions' workers start now
            spares.append(_ahead.submit(SealedWorker, env, hide))
    return ready.result() if ready is not None else SealedWorker(env, hide)


@atexit.register
def close_all() -> None:
    """End every spare worker (at exit, and for tests)."""
    with _lock:
        futures = [f for spares in _spares.values() for f in spares]
        _spares.clear()
    for future in futures:
        with contextlib.suppress(OSError, RuntimeError, WorkerFailed):
            future.result().close()
