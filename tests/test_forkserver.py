"""Fork servers: learners share a server one after another, and nothing passes between them.

Each attack is a learner's cell in one session; the next session, on the same server
when the server could clear up and on a fresh one when it could not, looks for what the
attack left. Without bubblewrap these tests fail, saying so (see test_sealed_sandbox.py).
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
"""


def look_around() -> str:
    entries = [*sandbox.tmp_entries(), ".server", "session"]
    return f"sandbox_tmp = {entries!r}\n" + textwrap.dedent(LOOK_AROUND)


def test_a_fresh_worker_per_session_from_one_server():
    first, ran = run_cells("import tfcourse, torch\nx = torch.ones(3).sum().item()")
    server = served_by(first)
    first.kill()
    second, ran_again = run_cells(look_around(), "assert 'x' not in globals()")
    assert served_by(second) == server
    assert [r["ok"] for r in ran + ran_again] == [True, True, True], ran + ran_again
    second.kill()


def test_a_server_outlives_the_thread_that_started_it():
    """bubblewrap's --die-with-parent fires when the starting *thread* ends: a server
    started by a grading thread must still serve after that thread is gone."""
    started = []
    thread = threading.Thread(target=lambda: started.append(run_cells("x = 1")[0]))
    thread.start()
    thread.join()
    started[0].kill()
    time.sleep(1)  # the parent-death signal, if any, has arrived by now
    assert started[0].server.process.poll() is None
    second, ran = run_cells("y = 2")
    assert ran[0]["ok"] and served_by(second) == served_by(started[0])
    second.kill()


def test_what_a_learner_leaves_behind_is_gone_before_the_next():
    """Processes (a daemon in a session of its own, a fork loop), files in /tmp, in the
    session's folder and in /dev/shm: all removed, on the same server."""
    first, ran = run_cells("""
        import os, time
        for path in ("/tmp/planted", "/dev/shm/planted", "/tmp/session/planted"):
            open(path, "w").write("from the last learner")
        os.makedirs("/tmp/deep/er", exist_ok=True)
        if os.fork() == 0:
            os.setsid()
            while True:                      # forks on and on, each child sleeping
                if os.fork() == 0:
                    time.sleep(60)
                time.sleep(0.01)
    """)
    assert ran[0]["ok"], ran
    same_server, looked = next_session(first)
    assert same_server
    assert looked["ok"], looked["error"]


def test_the_servers_memory_is_out_of_reach():
    session, ran = run_cells("""
        import os
        for part in ("mem", "environ", "maps"):
            try:
                open(f"/proc/{os.getppid()}/{part}", "rb").read(1)
            except OSError:
                continue
            raise AssertionError(f"read the server's {part}")
    """)
    assert ran[0]["ok"], ran[0]["error"]
    session.kill()


@pytest.mark.parametrize("signal_name", ["SIGSTOP", "SIGKILL", "SIGINT", "SIGTERM"])
def test_no_signal_from_a_learner_reaches_the_server(monkeypatch, signal_name):
    """The server is process 1 of the sandbox and handles no signal: what a learner sends
    it never arrives, and the next learner is served by the same server."""
    monkeypatch.setattr(pool, "ANSWER_SECONDS", 2)
    first, ran = run_cells(f"import os, signal\nos.kill(1, signal.{signal_name})")
    assert ran[0]["ok"], ran
    same_server, looked = next_session(first)
    assert same_server and looked["ok"], looked


def test_a_learner_who_kills_the_server_from_outside_only_costs_time(monkeypatch):
    """Should the server end anyway (here: killed by the grader's side), the next learner
    gets a fresh one."""
    monkeypatch.setattr(pool, "ANSWER_SECONDS", 2)
    first, _ = run_cells("x = 1")
    first.server.process.kill()
    same_server, looked = next_session(first)
    assert not same_server and looked["ok"], looked


def test_a_changed_file_ends_the_server():
    """The server's own files in /tmp (matplotlib's font cache) are not the learner's to
    change: a server that finds one changed does not serve again."""
    first, ran = run_cells("""
        import glob
        for path in glob.glob("/tmp/.server/matplotlib/*"):
            open(path, "a").write(" ")
    """)
    assert ran[0]["ok"], ran
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


def test_process_1_is_out_of_reach():
    """The red team's hijack: trace process 1 (the only process that outlives a session),
    or write its memory, and every later learner of the sandbox runs patched code. Its
    files (``/proc/1/fd/2`` was the grader's log on the host) are out of reach too."""
    session, ran = run_cells("""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206
        for request in (PTRACE_ATTACH, PTRACE_SEIZE):
            assert libc.ptrace(request, 1, 0, 0) == -1, "traced process 1"
        for path, mode in [("/proc/1/mem", "r+b"), ("/proc/1/fd/2", "ab"), ("/proc/1/fd/2", "")]:
            try:
                os.readlink(path) if not mode else open(path, mode)
            except OSError:
                continue
            raise AssertionError(f"reached {path}")
    """)
    assert ran[0]["ok"], ran[0]["error"]
    session.kill()


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
