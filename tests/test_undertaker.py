"""The undertaker removes what a killed grader left, and only that.

A stand-in grader (a Python process) leaves two folders in its will, says it removed one
of them itself (it did not: were the undertaker to touch it, it would show), and kills
itself with SIGKILL, which no clean-up of its own survives. The slow end-to-end tests, a
real grader killed while learners' code runs, are in test_grade_stopped.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ROOT

# Whether a process has ended is read from /proc.
pytestmark = pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs /proc (Linux)")

GRADER = """
import os, signal, sys
from tfcourse.grade.sealed import undertaker
undertaker.keep("path", sys.argv[1])
undertaker.keep("path", sys.argv[2])
undertaker.done("path", sys.argv[2])
print(undertaker._will.pid, flush=True)
if sys.argv[3] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
undertaker.done("path", sys.argv[1])
"""


def run_grader(tmp_path: Path, end: str) -> tuple[Path, Path, int]:
    """The stand-in grader, ended by ``end`` ("kill", or "exit" after saying that it removed
    both): (the folder it left, the one it said it removed, the undertaker's pid)."""
    left, removed = tmp_path / "left", tmp_path / "removed"
    for folder in (left, removed):
        folder.mkdir()
        (folder / "inside").write_text("x")
    out = subprocess.run(
        [sys.executable, "-c", GRADER, str(left), str(removed), end],
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=ROOT,
        check=False,
        timeout=60,
    )
    return left, removed, int(out.stdout)


def ended(pid: int, seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not Path(f"/proc/{pid}").exists()


def test_what_a_killed_grader_left_is_removed_and_nothing_else(tmp_path):
    left, removed, undertaker = run_grader(tmp_path, "kill")
    assert ended(undertaker)
    assert not left.exists()
    assert (removed / "inside").exists()


def test_after_a_normal_end_the_undertaker_removes_nothing_and_ends(tmp_path):
    left, removed, undertaker = run_grader(tmp_path, "exit")
    assert ended(undertaker)
    assert (left / "inside").exists() and (removed / "inside").exists()
