"""A grader stopped by a signal leaves nothing behind, as one that ends normally does.

``docker stop``, ``timeout`` and ``kill`` send SIGTERM; Ctrl-C, SIGINT. The grader catches
them (``command._stop_on_signals``) and cleans up as at a normal end. SIGKILL, and the
kernel's out-of-memory killer, cannot be caught: the undertaker (``undertaker.py``) removes
what the grader left. Without either, its sandboxes die with it (bubblewrap's
``--die-with-parent``), but their folders and control groups stay, and under ``--sandbox
users`` the processes of a learner's fresh user outlive it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell

from tfcourse.authoring.build import make_learner, solve
from tfcourse.course import notebook_format
from tfcourse.course.restamp import restamp
from tfcourse.grade import command
from tfcourse.grade.sealed import channel

from helpers import SOLUTIONS

# A learner's cell that leaves a process with a name to look for, then keeps its worker busy.
MARK = f"tfcourse-stopped-{os.getpid()}"
LINGER = f"""
import os, time
if os.fork() == 0:
    os.setsid()
    os.execv("/bin/sleep", [{MARK!r}, "3600"])
time.sleep(3600)
"""


def lingering(solution):
    """The fixture notebook, solved, with ``LINGER`` before its first exercise."""
    notebook = solve(make_learner(solution, "99_fixture"), solution)
    index = next(i for i, c in enumerate(notebook.cells) if c.get("id") == "ex-rmsnorm")
    notebook.cells.insert(index, new_code_cell(LINGER, id="linger"))
    return restamp(notebook, solution)[0]


def marked() -> list[int]:
    """Processes running ``LINGER``'s sleep."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and MARK.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def groups_of(pid: int) -> list[Path]:
    """The control groups the grader ``pid`` made (``cgroups._make`` names them)."""
    return [path for path in Path("/sys/fs/cgroup").glob(f"**/tfcourse-{pid}-*") if path.is_dir()]


# The three signals the grader catches share one handler (``command.STOP_SIGNALS``): each
# set-up meets one of them, and SIGKILL, which nothing catches.
@pytest.mark.parametrize(
    ("sandbox", "number"),
    [
        pytest.param("bubblewrap", signal.SIGTERM, marks=pytest.mark.sandbox),
        pytest.param("bubblewrap", signal.SIGKILL, marks=pytest.mark.sandbox),
        ("users", signal.SIGINT),
        ("users", signal.SIGKILL),
    ],
)
@pytest.mark.slow
def test_a_grader_stopped_by_a_signal_leaves_nothing_behind(
    solution, tmp_path, sandbox, number, request
):
    if sandbox == "users":
        request.getfixturevalue("separate_users")
    submissions = tmp_path / "submissions"
    submissions.mkdir(mode=0o700)
    for learner in ("alice", "bob"):
        notebook = lingering(solution)
        notebook_format.write_notebook(notebook, submissions / f"{learner}_99_fixture.ipynb")
    # The grader's temporary folder, empty at its end; passable, as /tmp is, for a fresh
    # user on its way to its own folder inside.
    scratch = Path(tempfile.mkdtemp(prefix="tfcourse-stop-tmp-"))
    request.addfinalizer(lambda: shutil.rmtree(scratch, ignore_errors=True))
    scratch.chmod(0o711)
    path = os.environ["PATH"]
    if sandbox == "users":  # no bubblewrap on the PATH: as root, the grader picks users
        path = os.path.dirname(sys.executable)
    grader = subprocess.Popen(
        [sys.executable, "-m", "tfcourse", "grade", str(submissions)]
        + ["--solutions", str(SOLUTIONS), "--jobs", "2", "--timeout", "600"],
        env=dict(os.environ, TFCOURSE_LANG="en", TMPDIR=str(scratch), PATH=path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    try:
        deadline = time.monotonic() + 240
        while len(marked()) < 2 and grader.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if len(marked()) != 2:  # both learners' cells are running
            grader.kill()
            pytest.fail(f"no lingering cells: {grader.communicate()}")
        grader.send_signal(number)
        out, err = grader.communicate(timeout=120)
    finally:
        if grader.poll() is None:
            grader.kill()
    if number == signal.SIGKILL:
        assert grader.returncode == -number, (out, err)
    else:
        assert grader.returncode == 128 + number, (out, err)
        assert f"stopped by {signal.Signals(number).name}" in err, err
    assert "score" not in out, out  # no report, no grade: nothing was finished

    def left() -> tuple:
        return marked(), groups_of(grader.pid), sorted(os.listdir(scratch))

    deadline = time.monotonic() + 30  # the undertaker's work, or a process's last moment
    while any(left()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left() == ([], [], [])


def test_a_grade_run_in_a_process_that_goes_on_leaves_it_as_it_was(capsys):
    """``tfcourse grade`` called in a process that outlives it (a test, a notebook): a signal
    during the grade ends it as in the command, and afterwards the signal's handler is the
    process's own again and workers can start (the stop was the grade's, not the process's)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers belong to the main thread")
    before = signal.getsignal(signal.SIGHUP)
    with pytest.raises(SystemExit) as raised, command._stop_on_signals():
        signal.raise_signal(signal.SIGHUP)
    assert raised.value.code == 128 + signal.SIGHUP
    assert "stopped by SIGHUP" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGHUP) is before
    assert not channel._stopping
