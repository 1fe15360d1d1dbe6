"""The sealed worker's sandbox: each defence proven by a real attempt from inside.

Every test starts ``python -I -c CODE`` through ``sandbox.start_sealed`` and lets the child try
what the defence forbids: read another worker's folder made after it started, a
classmate's submission, the submissions folder, a solutions folder, the grader's home and
the real package; write outside its folder; reach the grader's loopback. Without
bubblewrap these tests fail, saying so: the sealed grader is the course's security
boundary, and CI installs bubblewrap (.ci/run).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from tfcourse.grade.sealed import sandbox
from tfcourse.grade.sealed.seal import package_dir

pytestmark = pytest.mark.sandbox
FOUND = sandbox.sandbox()


@pytest.fixture(autouse=True)
def _passable(tmp_path):
    """As root, bubblewrap runs as a fresh unprivileged uid, which must pass the folders
    above its own to mount it (the grader makes its folders under /tmp)."""
    for folder in [tmp_path, *tmp_path.parents]:
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            folder.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)


LOOK = """
def look(path):
    try:
        return sorted(os.listdir(path)) if os.path.isdir(path) else open(path).read()
    except OSError as error:
        return type(error).__name__
"""


def run(work: Path, code: str, *, hide=(), env=None, timeout: float = 60) -> dict:
    """Run ``code`` in the sandbox with ``work`` as its folder; ``code`` fills ``out``."""
    work.mkdir(exist_ok=True)
    program = (
        "import json, os, sys\nout = {}\n"
        + LOOK
        + textwrap.dedent(code)
        + "\nprint(json.dumps(out), flush=True)\n"
    )
    process = sandbox.start_sealed(
        [sys.executable, "-I", "-c", program],
        work=work,
        env={"PATH": os.defpath} if env is None else env,
        hide=list(hide),
        stderr=subprocess.PIPE,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    finally:
        process.kill()
    lines = stdout.decode().strip().splitlines()
    assert process.returncode == 0 and lines, stderr.decode()[-2000:]
    return json.loads(lines[-1])


def test_other_workers_classmates_and_the_grader_are_out_of_sight(tmp_path):
    """The /tmp race and its neighbours: folders made before and after the worker started,
    the submissions folder, the grader's home, the course and its solutions."""
    classmate = Path(tempfile.mkdtemp(prefix="tfcourse-grade-"))
    (classmate / "bob_03_norms.ipynb").write_text("{}")
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    (submissions / "alice.ipynb").write_text("{}")
    solutions = Path(package_dir()).parent / "solutions"
    try:
        out = run(
            tmp_path / "work",
            f"""
            import time
            time.sleep(0.5)                      # the grader makes another folder meanwhile
            out["tmp"] = look("/tmp")
            out["classmate"] = look({str(classmate)!r})
            out["submissions"] = look({str(submissions)!r})
            out["solutions"] = look({str(solutions)!r})
            out["package"] = look({str(package_dir())!r})
            out["home"] = look(os.path.expanduser("~root"))
            out["autograder"] = look("/autograder/source")
            out["root"] = sorted(os.listdir("/"))
            out["own"] = sorted(os.listdir("."))
        """,
            hide=[package_dir()],
        )
        late = Path(tempfile.mkdtemp(prefix="tfcourse-sealed-"))
        late.rmdir()
    finally:
        (classmate / "bob_03_norms.ipynb").unlink()
        classmate.rmdir()
    assert out["tmp"] == sandbox.tmp_entries()  # only the way to a venv under /tmp
    for name in ("classmate", "submissions", "solutions", "home", "autograder"):
        assert out[name] == "FileNotFoundError", (name, out[name])
    assert out["package"] in ([], "FileNotFoundError")
    assert set(out["root"]) <= {
        "usr",
        "bin",
        "sbin",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "etc",
        "proc",
        "dev",
        "tmp",
        "sys",
        sandbox.WORK[1:],
        *(Path(p).parts[1] for p in sandbox.python_prefixes()),
    }, out["root"]


def test_a_secret_inside_a_mounted_prefix_is_covered(tmp_path):
    """The real package of a non-editable install lies inside site-packages, which the
    worker needs: it is covered by an empty read-only folder."""
    inside = Path(sandbox.python_prefixes()[0])
    probe = next(p for p in inside.rglob("*") if p.is_dir() and os.listdir(p))
    out = run(
        tmp_path / "work",
        f"out['hidden'] = look({str(probe)!r})\nout['python'] = sys.version_info[0]",
        hide=[probe],
    )
    assert out["hidden"] == [] and out["python"] == 3


def test_a_secret_inside_a_covered_folder_needs_no_cover_of_its_own(tmp_path):
    """An installed wheel: the course (tfcourse/_course) lies inside the package, and both
    are hidden. The worker starts (bwrap cannot make a mount point inside the read-only
    cover), and sees neither."""
    inside = Path(sandbox.python_prefixes()[0])
    outer = next(
        p for p in inside.rglob("*") if p.is_dir() and any(q.is_dir() for q in p.iterdir())
    )
    nested = next(q for q in outer.iterdir() if q.is_dir())
    out = run(
        tmp_path / "work",
        f"out['outer'] = look({str(outer)!r})\nout['nested'] = look({str(nested)!r})",
        hide=[nested, outer],
    )
    assert out == {"outer": [], "nested": "FileNotFoundError"}
    arguments = sandbox.view(str(tmp_path), [str(nested), str(outer)])
    assert str(outer) in arguments and str(nested) not in arguments


def test_only_its_own_folder_is_writable(tmp_path):
    out = run(
        tmp_path / "work",
        f"""
        out["own"] = open("mine.txt", "w").write("x")
        out["tmp"] = open("/tmp/scratch", "w").write("y")
        for path in ({sys.prefix!r} + "/planted.pth", "/usr/planted", "/planted", "/dev/planted",
                     {str(tmp_path)!r} + "/escaped"):
            try:
                open(path, "w")
                out[path] = "written"
            except OSError as error:
                out[path] = type(error).__name__
    """,
    )
    assert out.pop("own") == 1 and out.pop("tmp") == 1
    assert "written" not in out.values(), out
    assert (tmp_path / "work" / "mine.txt").exists() and not (tmp_path / "escaped").exists()
    assert not Path(sys.prefix, "planted.pth").exists()


def test_no_network_not_even_the_graders_loopback(tmp_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        out = run(
            tmp_path / "work",
            f"""
            import socket
            try:
                socket.create_connection(("127.0.0.1", {server.getsockname()[1]}), timeout=3)
                out["connect"] = "connected"
            except OSError as error:
                out["connect"] = type(error).__name__
        """,
        )
        server.settimeout(0.3)
        with pytest.raises(socket.timeout):
            server.accept()  # nobody came
    assert out["connect"] != "connected"


def test_no_other_process_is_visible_and_nothing_outlives_the_worker(tmp_path):
    marker = tmp_path / "work" / "daemon-alive"
    out = run(
        tmp_path / "work",
        """
        out["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        if os.fork() == 0:                        # a daemon that tries to outlive grading
            os.setsid()
            import time
            time.sleep(2)
            open("daemon-alive", "w").write("x")
            os._exit(0)
    """,
    )
    assert len(out["pids"]) <= 3, out  # bubblewrap's init, the worker, a child
    import time

    time.sleep(3)
    assert not marker.exists()


def test_environment_is_only_what_the_grader_gave(tmp_path, monkeypatch):
    monkeypatch.setenv("TFCOURSE_SANDBOX_SECRET", "from the grader")
    out = run(
        tmp_path / "work",
        """
        out["secret"] = os.environ.get("TFCOURSE_SANDBOX_SECRET")
        out["mine"] = os.environ.get("ONLY_THIS")
        out["cwd"] = os.getcwd()
    """,
        env={"PATH": os.defpath, "ONLY_THIS": "1"},
    )
    assert out == {"secret": None, "mine": "1", "cwd": sandbox.WORK}


def test_without_the_sandbox_nothing_starts_and_the_report_says_unsealed(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "_found", sandbox.Sandbox(None, "tested without"))
    with pytest.raises(RuntimeError, match="tested without"):
        run(tmp_path / "work", "pass")
    words = " ".join(sandbox.measures(sandbox.sandbox(), "limits"))
    assert "UNSEALED" in words and "tested without" in words


def test_the_probe_notices_a_sandbox_that_does_not_hide(monkeypatch):
    """The probe looks from inside: a view that showed a hidden folder would be refused."""
    monkeypatch.setattr(sandbox, "cover", lambda path, at=None: [])
    found = sandbox._probe()
    assert found.bwrap is None and "hidden folder visible" in found.reason, found


def test_the_inside_names_cannot_shadow_a_needed_folder(monkeypatch):
    monkeypatch.setattr(sandbox, "python_prefixes", lambda: [sandbox.WORK + "/venv"])
    with pytest.raises(ValueError, match="already taken"):
        sandbox.view("/x", [])


# The host's settings a root process could change (nothing is written: opening is the test).
GLOBAL_SETTINGS = (
    "kernel/core_pattern",
    "kernel/pid_max",
    "kernel/panic",
    "kernel/randomize_va_space",
    "vm/drop_caches",
    "vm/overcommit_memory",
    "vm/min_free_kbytes",
    "fs/protected_symlinks",
)
OPEN_SETTINGS = f"""
for name in {GLOBAL_SETTINGS!r}:
    try:
        os.close(os.open("/proc/sys/" + name, os.O_WRONLY))
        out[name] = "writable"
    except OSError as error:
        out[name] = type(error).__name__
"""


def test_never_root_not_even_inside_and_the_kernels_settings_are_read_only(tmp_path):
    """Whoever starts the grader (root included), the sandbox's processes are not root to the
    kernel, and every global setting refuses to open for writing."""
    assert 0 not in _kernel_uids(tmp_path / "idle")
    out = run(tmp_path / "work", OPEN_SETTINGS)
    assert sorted(out) == sorted(GLOBAL_SETTINGS) and "writable" not in out.values(), out


def _kernel_uids(work: Path) -> set[int]:
    """The real uids, as the kernel sees them, of a sandbox's processes (bubblewrap and the
    worker it runs), read from outside while the worker waits."""
    work.mkdir()
    process = sandbox.start_sealed(
        [sys.executable, "-I", "-c", "import sys; sys.stdin.read()"],
        work=work,
        env={"PATH": os.defpath},
        hide=[],
    )
    try:
        time.sleep(1)
        tree, uids, more = {process.pid}, set(), True
        while more:  # the sandbox's processes: bubblewrap and its descendants
            more = False
            for status in Path("/proc").glob("[0-9]*/status"):
                try:
                    fields = dict(
                        line.split(":", 1)
                        for line in status.read_text().splitlines()
                        if ":" in line
                    )
                except OSError:
                    continue
                pid, parent = int(fields["Pid"]), int(fields["PPid"])
                if parent in tree and pid not in tree:
                    tree.add(pid)
                    more = True
                if pid in tree:
                    uids.add(int(fields["Uid"].split()[0]))
        return uids
    finally:
        process.kill()
        process.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="the attack needs a grader running as root")
def test_the_settings_check_is_real_root_inside_could_open_them(tmp_path, monkeypatch):
    """Without both locks (the unprivileged uid, /proc/sys read-only), a root grader's
    worker is real root, and the test above would see it."""
    monkeypatch.setattr(sandbox, "unprivileged", lambda *folders: {})
    view = sandbox.view

    def without_the_read_only_settings(*args, **kwargs):
        arguments = view(*args, **kwargs)
        at = arguments.index("/proc/sys") - 1
        return arguments[:at] + arguments[at + 3 :]

    monkeypatch.setattr(sandbox, "view", without_the_read_only_settings)
    assert 0 in _kernel_uids(tmp_path / "idle")
    out = run(tmp_path / "work", OPEN_SETTINGS)
    assert set(out.values()) == {"writable"}, out
