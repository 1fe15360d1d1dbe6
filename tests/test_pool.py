"""Workers started ahead: a sandbox of its own for every session, never handed on.

Each attack is a learner's cell in one session; the next session, always in another
sandbox, looks for what the attack left. Without bubblewrap these tests fail, saying so
(see test_sealed_sandbox.py).
"""

from __future__ import annotations

import textwrap
import threading
import time

import pytest
import torch

from tfcourse.grade.sealed import channel, pool, protocol, sandbox
from tfcourse.grade.sealed.seal import sealed_archive
from tfcourse.grade.sealed.session import grading_env

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]
ENV = dict(grading_env(1), MPLBACKEND="Agg")


@pytest.fixture(autouse=True)
def _own_workers():
    pool.close_all()
    yield
    pool.close_all()


def run_cells(*cells: str) -> tuple[pool.SealedWorker, list[dict]]:
    """A session that runs ``cells`` as a learner's; the session and the cells' results."""
    session = pool.start(dict(ENV, HOME=pool.SESSION), [])
    package = torch.frombuffer(bytearray(sealed_archive(set())), dtype=torch.uint8)
    protocol.write_message(
        session.stdin,
        {
            "cells": [textwrap.dedent(cell) for cell in cells],
            "builtins": [],
            "threads": 1,
            "cell_seconds": 60,
            "limits": {},
        },
        {"package": package},
    )
    reply, _ = protocol.read_message(session.stdout)
    return session, reply["cells"]


def next_session(first: pool.SealedWorker) -> tuple[bool, dict]:
    """End ``first`` and look around from the next session: (the same process?, the result
    of ``look_around``)."""
    pid = first.process.pid
    first.kill()
    assert first.process.poll() is not None  # its sandbox ended with the session
    second, ran = run_cells(look_around())
    second.kill()
    return second.process.pid == pid, ran[0]


LOOK_AROUND = """
    import os
    others = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    assert others == [1] and os.getpid() == 1, others    # the worker is process 1
    assert sorted(os.listdir("/tmp")) == sorted(sandbox_tmp), os.listdir("/tmp")
    assert "planted" not in os.listdir("/tmp/session"), os.listdir("/tmp/session")
    assert os.listdir("/dev/shm") == [], os.listdir("/dev/shm")
    for path in ("/tmp", "/tmp/session", "/dev/shm"):
        assert os.listxattr(path) == [], (path, os.listxattr(path))
        assert os.stat(path).st_mtime > 1e9 + 1, path     # not the planted time
    assert os.uname().nodename != "planted", os.uname()
"""


def look_around() -> str:
    entries = [*sandbox.tmp_entries(), "session"]
    return f"sandbox_tmp = {entries!r}\n" + textwrap.dedent(LOOK_AROUND)


def test_every_session_has_a_worker_and_a_sandbox_of_its_own():
    first, ran = run_cells("import tfcourse, torch\nx = torch.ones(3).sum().item()")
    same_worker, looked = next_session(first)
    assert not same_worker
    assert ran[0]["ok"] and looked["ok"], (ran, looked)


def test_a_spare_that_ended_is_never_taken():
    """A spare that said it was ready and then ended (killed while it waited) is passed
    over: the session gets a worker that runs its cells."""
    first, _ = run_cells("x = 1")  # two spares start behind it
    first.kill()
    spares = [future.result() for futures in pool._spares.values() for future in futures]
    assert spares
    for spare in spares:
        assert spare.ready(pool.START_SECONDS)
        spare.process.kill()
        spare.process.wait()
    second, ran = run_cells("x = 2")
    assert ran[0]["ok"] and second not in spares, ran
    second.kill()


def test_a_worker_that_ended_on_its_own_still_leaves_nothing():
    """A sandbox that ended before its session did (killed from outside, or out of memory):
    the session's end still removes its folder and its control group."""
    worker, _ = run_cells("x = 1")
    worker.process.kill()
    worker.process.wait()
    channel.Channel(worker, timeout=5).kill()
    assert not worker.folder.exists() and not worker.log.exists()
    assert worker.group is None or not any(f.exists() for f in worker.group.folders)


def test_a_worker_outlives_the_thread_that_took_it():
    """bubblewrap's --die-with-parent fires when the starting *thread* ends: a session
    taken by a grading thread must still be served after that thread is gone."""
    started = []
    thread = threading.Thread(target=lambda: started.append(run_cells("x = 1")[0]))
    thread.start()
    thread.join()
    time.sleep(1)  # the parent-death signal, if any, has arrived by now
    assert started[0].process.poll() is None
    started[0].kill()


def test_what_a_learner_leaves_behind_is_never_seen_by_the_next():
    """Processes (a daemon in a session of its own, a fork loop), files in /tmp, in the
    session's folder and in /dev/shm (made unlistable), extended attributes and times on
    the writable folders, the hostname: the next session sees none of them."""
    first, ran = run_cells("""
        import os, socket, time
        for path in ("/tmp/planted", "/dev/shm/planted", "/tmp/session/planted"):
            open(path, "w").write("from the last learner")
        os.makedirs("/tmp/deep/er", exist_ok=True)
        for path in ("/tmp", "/tmp/session", "/dev/shm"):
            try:
                os.setxattr(path, "user.planted", b"1")
            except OSError:
                pass
            os.utime(path, (1e9, 1e9))
        try:
            socket.sethostname("planted")
        except OSError:
            pass
        os.chmod("/dev/shm", 0)
        if os.fork() == 0:
            os.setsid()
            while True:                      # forks on and on, each child sleeping
                if os.fork() == 0:
                    time.sleep(60)
                time.sleep(0.01)
    """)
    assert ran[0]["ok"], ran
    same_worker, looked = next_session(first)
    assert not same_worker
    assert looked["ok"], looked["error"]


def test_a_learner_who_signals_process_1_reaches_only_their_own_sandbox():
    """The worker is the sandbox's process 1: a signal the learner sends it (SIGINT reaches
    a Python process 1) stays in their own sandbox."""
    first, ran = run_cells("import os, signal\nos.kill(1, signal.SIGINT)")
    same_worker, looked = next_session(first)
    assert not same_worker and looked["ok"], looked


def test_what_the_kernel_would_keep_cannot_be_made():
    """Keys, System V IPC objects and message queues outlive the process that made them:
    each call that makes or reaches one fails with EPERM (``syscalls.DENIED``), and so
    does each call that reaches another process's memory."""
    first, ran = run_cells("""
        import ctypes, errno, pyseccomp
        import syscalls
        libc = ctypes.CDLL(None, use_errno=True)
        arch = pyseccomp.system_arch()
        for name in syscalls.DENIED:
            number = pyseccomp.resolve_syscall(arch, name)
            assert libc.syscall(number, 0, 0, 0, 0, 0) == -1, name
            assert ctypes.get_errno() == errno.EPERM, (name, ctypes.get_errno())
    """)
    assert ran[0]["ok"], ran[0]["error"]
    first.kill()
