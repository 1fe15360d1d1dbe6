"""The second set-up: a worker as a fresh unprivileged user (containers without namespaces).

Every test lets a worker running as its own user (``users.py``) try what the defence
forbids: read the solutions, the real package, the course's history, a classmate's folder
or the grading secret; write into the Python environment; signal the grader; outlive its
session; leave files for the next learner. Then the whole grader runs in that mode.

These tests need root (the grader switches users), and are skipped without it; the
``separate_users`` fixture (conftest.py) prepares the machine as a container must be.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell

from tfcourse.authoring.build import make_learner, solve
from tfcourse.course import notebook_format
from tfcourse.course.restamp import restamp
from tfcourse.grade.notebook import grade
from tfcourse.grade.sealed import users
from tfcourse.grade.sealed.seal import package_dir
from tfcourse.grade.sealed.session import Setup, grading_env

from helpers import FIXTURE, ROOT, SOLUTIONS, grade_exercise


@pytest.fixture(scope="module", autouse=True)
def _prepared(separate_users):
    """Every test here needs root and a machine prepared as a container must be."""


LOOK = """
def look(path):
    try:
        return sorted(os.listdir(path)) if os.path.isdir(path) else open(path).read()[:20]
    except OSError as error:
        return type(error).__name__
"""


def start(code: str, folder: Path) -> users.UserProcess:
    """``code`` running as a fresh user in ``folder``; it fills ``out``, printed as JSON."""
    folder.mkdir(exist_ok=True)
    program = (
        "import json, os, sys\nout = {}\n"
        + LOOK
        + textwrap.dedent(code)
        + "\nprint(json.dumps(out), flush=True)\n"
    )
    return users.UserProcess(
        [sys.executable, "-I", "-c", program],
        folder=folder,
        env={"PATH": os.defpath},
        stderr=subprocess.PIPE,
    )


def result(worker: users.UserProcess, timeout: float = 60) -> dict:
    worker.process.wait(timeout=timeout)
    lines = worker.stdout.read().decode().strip().splitlines()
    assert worker.process.returncode == 0 and lines, worker.process.stderr.read().decode()
    return json.loads(lines[-1])


def run(code: str) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="tfcourse-users-test-"))
    worker = start(code, folder / "work")
    try:
        return result(worker)
    finally:
        worker.kill()
        subprocess.run(["rm", "-rf", str(folder)], check=True)


def test_the_graders_files_are_out_of_a_fresh_users_reach(tmp_path):
    classmate = Path(tempfile.mkdtemp(prefix="tfcourse-grade-"))  # the grader's, 0700
    (classmate / "bob_03_norms.ipynb").write_text("{}")
    secret = Path(tempfile.mkdtemp()) / "grading-secret"
    secret.write_text("s3cret")
    secret.chmod(0o600)
    try:
        out = run(f"""
            out["classmate"] = look({str(classmate / "bob_03_norms.ipynb")!r})
            out["secret"] = look({str(secret)!r})
            out["solutions"] = look({str(ROOT / "solutions" / "03_norms.ipynb")!r})
            out["fixture"] = look({str(FIXTURE)!r})
            out["package"] = look({str(package_dir() / "nn" / "norms.py")!r})
            out["history"] = look({str(ROOT / ".git" / "HEAD")!r})
            out["home"] = look(os.path.expanduser("~root"))
            out["uid"] = [os.getuid(), os.geteuid(), os.getgid(), os.getgroups()]
            try:            # swap its folder for a link the grader would follow on cleanup
                os.rename(os.getcwd(), "/tmp/moved-" + str(os.getpid()))
                out["rename"] = "renamed"
            except OSError as error:
                out["rename"] = type(error).__name__
            for path in ({sys.prefix!r} + "/planted.pth", {str(classmate)!r} + "/x", "/planted"):
                try:
                    open(path, "w")
                    out[path] = "written"
                except OSError as error:
                    out[path] = type(error).__name__
        """)
    finally:
        subprocess.run(["rm", "-rf", str(classmate), str(secret.parent)], check=True)
    uid, euid, gid, groups = out.pop("uid")
    assert uid == euid == gid >= users.LOW and groups == [], (uid, euid, gid, groups)
    assert all(value == "PermissionError" for value in out.values()), out
    assert not Path(sys.prefix, "planted.pth").exists()


def test_each_worker_is_a_new_user_that_cannot_touch_the_grader_or_another(tmp_path):
    first = start("import time\ntime.sleep(30)", tmp_path / "first")
    try:
        out = run(f"""
            import signal
            for name, pid in (("grader", os.getppid()), ("first", {first.process.pid})):
                try:
                    os.kill(pid, signal.SIGSTOP)
                    out[name] = "stopped"
                except OSError as error:
                    out[name] = type(error).__name__
            out["uid"] = os.getuid()
        """)
        assert first.process.poll() is None
    finally:
        first.kill()
    assert out.pop("uid") != first.uid
    assert out == {"grader": "PermissionError", "first": "PermissionError"}


def test_nothing_a_worker_starts_or_leaves_outlives_its_session(tmp_path):
    """A daemon in a session of its own, files in every shared writable folder (one in a
    world-writable folder of the worker's own making): all gone once the session ends."""
    marker = Path(tempfile.gettempdir()) / f"daemon-alive-{os.getpid()}"
    worker = start(
        f"""
        for place in ("/tmp", "/var/tmp", "/dev/shm"):
            if os.path.isdir(place):
                open(place + "/left-by-{os.getpid()}", "w").write("for the next learner")
        os.makedirs("/tmp/open-{os.getpid()}/inside", exist_ok=True)
        os.chmod("/tmp/open-{os.getpid()}", 0o777)
        if os.fork() == 0:
            os.setsid()
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            import time
            time.sleep(2)
            open({str(marker)!r}, "w").write("x")
            os._exit(0)
        out["done"] = 1
    """,
        tmp_path / "work",
    )
    assert result(worker) == {"done": 1}
    left = [
        Path(p, f"left-by-{os.getpid()}")
        for p in ("/tmp", "/var/tmp", "/dev/shm")
        if os.path.isdir(p)
    ] + [Path(f"/tmp/open-{os.getpid()}")]
    assert all(path.exists() for path in left)
    assert users._running(worker.uid)  # the daemon, before the end
    worker.kill()
    assert not users._running(worker.uid)
    assert not any(path.exists() for path in left), left
    time.sleep(3)
    assert not marker.exists()
    assert (tmp_path / "work").exists()  # the grader's, removed by it


def test_the_probe_refuses_a_secret_a_fresh_user_can_read_or_write(tmp_path):
    exposed = Path(tempfile.mkdtemp(prefix="tfcourse-exposed-"))
    try:
        (exposed / "answers.ipynb").write_text("{}")
        (exposed / "answers.ipynb").chmod(0o600)
        exposed.chmod(0o711)  # passable, not listable: the file is safe
        with tempfile.TemporaryDirectory() as folder:
            assert users.probe([exposed], Path(folder)) == ""
        (exposed / "answers.ipynb").chmod(0o644)  # readable by name
        with tempfile.TemporaryDirectory() as folder:
            why = users.probe([exposed], Path(folder))
        assert f"can read {exposed / 'answers.ipynb'}" in why, why
        (exposed / "answers.ipynb").chmod(0o600)
        exposed.chmod(0o733)  # writable: a file could be planted there
        with tempfile.TemporaryDirectory() as folder:
            why = users.probe([exposed], Path(folder))
        assert f"can write {exposed}" in why and "chmod -R go-rwx" in why, why
    finally:
        subprocess.run(["rm", "-rf", str(exposed)], check=True)


def test_ids_are_fresh_and_never_given_twice():
    taken = {users.fresh_id() for _ in range(200)}
    assert len(taken) == 200 and min(taken) >= users.LOW
    running = {
        int(line.split()[1])
        for status in Path("/proc").glob("[0-9]*/status")
        for line in status.read_text().splitlines()
        if line.startswith("Uid:")
    }
    assert not taken & running


# ------------------------------------------------------------------ the grader in this mode


def _rmsnorm(solution, source: str | None = None, extra: str | None = None):
    nb = solve(make_learner(solution, "99_fixture"), solution)
    index = next(i for i, c in enumerate(nb.cells) if c.get("id") == "ex-rmsnorm")
    if source is not None:
        nb.cells[index].source = source
    if extra:
        nb.cells.insert(index, new_code_cell(extra, id="extra"))
    return restamp(nb, solution)[0]


USERS = Setup(env=grading_env(1), timeout=60, sandbox="users", hide=(SOLUTIONS,))


@pytest.mark.slow
def test_solved_unsolved_and_the_reference_by_a_path_no_scan_sees(solution):
    assert grade_exercise(_rmsnorm(solution), solution, "RMSNorm", USERS).status == "passed"
    unsolved = restamp(make_learner(solution, "99_fixture"), solution)[0]
    verdict = grade_exercise(unsolved, solution, "RMSNorm", USERS)
    assert verdict.status == "failed" and "NotImplementedError" in verdict.output
    # The real package's reference, loaded by its path: unreadable for the worker's user.
    steal = (
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('n', {str(package_dir())!r}"
        " + '/nn/norms.py')\nmodule = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\nRMSNorm = module.RMSNorm\n"
    )
    verdict = grade_exercise(_rmsnorm(solution, steal), solution, "RMSNorm", USERS)
    assert verdict.status == "failed" and "PermissionError" in " ".join(verdict.notes), verdict


@pytest.mark.slow
def test_the_workers_limits_include_a_process_cap_and_no_new_privileges(solution):
    """The learner's RMSNorm works only where both are in force, so a pass proves them."""
    guard = (
        "import resource\n"
        "assert resource.getrlimit(resource.RLIMIT_NPROC)[1] <= 256\n"
        "assert 'NoNewPrivs:\\t1' in open('/proc/self/status').read()\n"
    )
    verdict = grade_exercise(_rmsnorm(solution, extra=guard), solution, "RMSNorm", USERS)
    assert verdict.status == "passed" and not verdict.notes, verdict


@pytest.mark.slow
def test_the_report_names_the_measures_and_root_without_bubblewrap_chooses_this_mode(
    solution, tmp_path
):
    result = grade(_rmsnorm(solution), solution, USERS)
    assert all(e.passed and e.sealed for e in result.exercises), result.exercises
    assert "fresh unprivileged user" in result.isolation[0]
    assert "NOT isolated" in result.isolation[1]
    submissions = tmp_path / "submissions"
    submissions.mkdir(mode=0o700)
    notebook_format.write_notebook(_rmsnorm(solution), submissions / "99_fixture.ipynb")
    # No bwrap on this PATH: the grader finds no bubblewrap and, being root, picks this mode.
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tfcourse",
            "grade",
            str(submissions),
            "--solutions",
            str(SOLUTIONS),
            "--csv",
            str(tmp_path / "grades.csv"),
            "--secret",
            str(tmp_path / "secret"),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, TFCOURSE_LANG="en", PATH=os.path.dirname(sys.executable)),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "fresh unprivileged user" in out.stdout and "score: 2/2" in out.stdout, out.stdout
    assert stat.S_IMODE((tmp_path / "grades.csv").stat().st_mode) == 0o600


@pytest.mark.slow
def test_a_worker_that_runs_out_of_time_leaves_no_process_of_its_user(solution):
    """A cell deaf to the per-cell alarm forks a daemon that closes its descriptors, then
    sleeps past the notebook's budget. The grade ends in a timeout, and every process of
    every user handed out meanwhile is gone. (The daemon kept the channel open: closing it
    blocked the grader behind its reader thread, and the worker outlived the grade.)"""
    deaf = (
        "import os, signal, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    for fd in range(3):\n"
        "        os.close(fd)\n"
        "    time.sleep(3600)\n"
        "signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
        "time.sleep(3600)\n"
    )
    before = set(users._given)
    setup = Setup(env=grading_env(1), timeout=2, sandbox="users", hide=(SOLUTIONS,))
    verdict = grade_exercise(_rmsnorm(solution, extra=deaf), solution, "RMSNorm", setup)
    assert (verdict.status, verdict.reason) == ("failed", "timeout"), verdict
    handed_out = users._given - before
    assert handed_out and not any(users._running(uid) for uid in handed_out)
