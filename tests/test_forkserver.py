"""Fork servers: a sandbox of its own for every session, never handed on.

Each attack is a learner's cell in one session; the next session, always in another
sandbox, looks for what the attack left. Without bubblewrap these tests fail, saying so
(see test_sealed_sandbox.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch

from tfcourse.grade.sealed import pool, protocol, sandbox
from tfcourse.grade.sealed.seal import sealed_archive
from tfcourse.grade.sealed.session import grading_env

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]
ENV = dict(grading_env(1), MPLBACKEND="Agg")


@pytest.fixture(autouse=True)
def _own_servers():
    pool.close_all()
    yield
    pool.close_all()


def run_cells(*cells: str) -> tuple[pool.Session, list[dict]]:
    """A session that runs ``cells`` as a learner's; the session and the cells' results."""
    session = pool.start(ENV, [], dict(ENV, HOME=pool.SESSION))
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


def served_by(session: pool.Session) -> int:
    return session.server.process.pid


def next_session(first: pool.Session) -> tuple[bool, dict]:
    """End ``first`` and look around from the next session: (served by the same server?,
    the result of ``look_around``)."""
    server = served_by(first)
    first.kill()
    assert first.server.process.poll() is not None  # its sandbox ended with the session
    second, ran = run_cells(look_around())
    second.kill()
    return served_by(second) == server, ran[0]


LOOK_AROUND = """
    import os
    others = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    assert others == [1, os.getpid()] and os.getppid() == 1, others
    assert sorted(os.listdir("/tmp")) == sorted(sandbox_tmp), os.listdir("/tmp")
    assert "planted" not in os.listdir("/tmp/session"), os.listdir("/tmp/session")
    assert os.listdir("/dev/shm") == [], os.listdir("/dev/shm")
    for path in ("/tmp", "/tmp/.server", "/tmp/.server/matplotlib", "/dev/shm"):
        assert os.listxattr(path) == [], (path, os.listxattr(path))
        assert os.stat(path).st_mtime > 1e9 + 1, path     # not the planted time
    assert os.uname().nodename != "planted", os.uname()
"""


def look_around() -> str:
    entries = [*sandbox.tmp_entries(), ".server", "session"]
    return f"sandbox_tmp = {entries!r}\n" + textwrap.dedent(LOOK_AROUND)


def test_every_session_has_a_server_and_a_sandbox_of_its_own():
    first, ran = run_cells("import tfcourse, torch\nx = torch.ones(3).sum().item()")
    same_server, looked = next_session(first)
    assert not same_server
    assert ran[0]["ok"] and looked["ok"], (ran, looked)


def test_a_server_outlives_the_thread_that_started_it():
    """bubblewrap's --die-with-parent fires when the starting *thread* ends: a session
    started by a grading thread must still be served after that thread is gone."""
    started = []
    thread = threading.Thread(target=lambda: started.append(run_cells("x = 1")[0]))
    thread.start()
    thread.join()
    time.sleep(1)  # the parent-death signal, if any, has arrived by now
    assert started[0].server.process.poll() is None
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
        for path in ("/tmp", "/tmp/.server", "/tmp/.server/matplotlib", "/dev/shm"):
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
    same_server, looked = next_session(first)
    assert not same_server
    assert looked["ok"], looked["error"]


def test_a_learner_who_ends_their_own_server_only_ends_their_session():
    """The server is the sandbox's process 1: a learner may end it (SIGINT reaches a
    Python process 1), which ends their own sandbox and nobody else's."""
    first, ran = run_cells("import os, signal\nos.kill(1, signal.SIGINT)")
    same_server, looked = next_session(first)
    assert not same_server and looked["ok"], looked


def test_the_server_refuses_to_serve_outside_a_pid_namespace_of_its_own():
    """``kill(-1)`` must never reach the grader's processes: outside the sandbox the server
    refuses (only the check runs here, never the server)."""
    folder = os.path.dirname(pool.__file__)
    code = (
        f"import sys; sys.path.insert(0, {folder!r}); import forkserver; "
        "print(forkserver._refuse_to_start())"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
        check=True,
    )
    assert "not process 1 of a PID namespace" in result.stdout


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
