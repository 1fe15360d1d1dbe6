"""The sealed worker's sandbox: each defence proven by a real attempt from inside.

Every test starts ``python -I -c CODE`` through ``sandbox.launch`` and lets the child
try the thing the defence forbids. Tests of namespace defences skip, saying why, where
the probe found namespaces unavailable; the rest run everywhere.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tfcourse.course.sealed import confine, sandbox

NS = sandbox.namespaces()
needs_namespaces = pytest.mark.skipif(NS.prefix is None,
                                      reason=f"namespaces unavailable here: {NS.reason}")
PREFIXES = [Path(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}]


def run(tmp_path: Path, code: str, *, hide=(), keep=None, cpu_seconds=30, file_bytes=2**30,
        env=None, timeout=60):
    """Run ``code`` sealed in ``tmp_path/work``; it fills ``out``, printed as JSON."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    program = ("import json, os, sys\nout = {}\n" + textwrap.dedent(code)
               + "\nprint(json.dumps(out), flush=True)\n")
    stderr = open(tmp_path / "stderr.log", "wb")  # noqa: SIM115 - closed below
    start = time.monotonic()
    process, isolation = sandbox.launch(
        [sys.executable, "-I", "-c", program], cwd=work,
        env={"PATH": os.defpath} if env is None else env, hide_paths=list(hide),
        keep_paths=keep, cpu_seconds=cpu_seconds, memory_bytes=None, file_bytes=file_bytes,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr)
    try:
        stdout, _ = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        stderr.close()
    elapsed = time.monotonic() - start
    lines = stdout.decode().strip().splitlines()
    out = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None
    return process.returncode, out, isolation, elapsed, (tmp_path / "stderr.log").read_text()


@needs_namespaces
def test_hidden_path_cannot_be_read(tmp_path):
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "answer.txt").write_text("42")
    (tmp_path / "visible.txt").write_text("seen")
    # keep tmp_path itself visible, so what hides `secret` is hide_paths, not /tmp's privacy
    code, out, isolation, _, err = run(tmp_path, f"""
        try:
            out["read"] = open({str(secret / "answer.txt")!r}).read()
        except OSError as error:
            out["read"] = type(error).__name__
        out["listdir"] = os.listdir({str(secret)!r})
        out["visible"] = open({str(tmp_path / "visible.txt")!r}).read()
        try:
            open({str(tmp_path / "visible.txt")!r}, "w")
            out["write_outside"] = "written"
        except OSError as error:
            out["write_outside"] = error.errno
        open("mine.txt", "w").write("ok")
    """, hide=[secret], keep=[tmp_path, *PREFIXES])
    assert code == 0, err
    assert out["read"] == "FileNotFoundError" and out["listdir"] == []
    assert out["visible"] == "seen"
    assert out["write_outside"] == 30                  # EROFS: only its own folder is writable
    assert (tmp_path / "work" / "mine.txt").read_text() == "ok"
    assert (secret / "answer.txt").read_text() == "42"   # hidden there, untouched here
    assert "course files hidden (mount namespace)" in isolation


@needs_namespaces
def test_no_way_back_to_hidden_files(tmp_path):
    """Unmounting needs privileges it no longer has; the grader's /proc/PID/root is not
    there to walk through; raw disks are /dev/null."""
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "answer.txt").write_text("42")
    code, out, _, _, err = run(tmp_path, f"""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        out["umount"] = libc.umount2({str(secret).encode()!r}, 2)
        out["errno"] = ctypes.get_errno()
        out["listdir"] = os.listdir({str(secret)!r})
        out["caps"] = [line.split()[1] for line in open("/proc/self/status")
                       if line.startswith(("CapEff", "CapPrm", "CapBnd"))]
        out["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        out["self"] = os.getpid()
        out["grader_root"] = os.path.exists("/proc/{os.getpid()}/root{secret}/answer.txt")
        out["disks"] = [name for name in os.listdir("/sys/block")
                        if os.path.exists("/dev/" + name)
                        and os.path.realpath("/dev/" + name) == "/dev/" + name
                        and open("/dev/" + name, "rb").read(512)]
    """, hide=[secret], keep=[tmp_path, *PREFIXES])
    assert code == 0, err
    assert out["umount"] == -1 and out["errno"] == 1          # EPERM
    assert out["listdir"] == []
    assert set(out["caps"]) == {"0000000000000000"}
    assert out["pids"] == [out["self"]] == [1]                # only itself
    assert not out["grader_root"]
    assert out["disks"] == []


@needs_namespaces
def test_no_network(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        code, out, isolation, _, err = run(tmp_path, f"""
            import socket
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=5)
                out["connect"] = "connected"
            except OSError as error:
                out["connect"] = type(error).__name__ + ": " + str(error)
        """)
        server.settimeout(0.5)
        with pytest.raises(socket.timeout):
            server.accept()                                   # nobody came
    finally:
        server.close()
    assert code == 0, err
    assert out["connect"] != "connected"
    assert "no network (network namespace)" in isolation


def test_cpu_limit_kills_a_busy_loop(tmp_path):
    code, out, _, elapsed, _ = run(tmp_path, "while True:\n    pass\n", cpu_seconds=1)
    assert out is None
    # SIGXCPU at the soft limit; in a PID namespace (as PID 1) SIGKILL at the hard one
    assert code in (-signal.SIGXCPU, -signal.SIGKILL), code
    assert elapsed < 15


def test_file_size_limit(tmp_path):
    code, out, _, _, err = run(tmp_path, """
        try:
            with open("big.bin", "wb") as f:
                for _ in range(10):
                    f.write(b"x" * 2**20)
            out["wrote"] = "all"
        except OSError as error:
            out["wrote"] = error.errno
    """, file_bytes=2**20)
    assert code == 0, err
    assert out["wrote"] == 27                                 # EFBIG
    assert (tmp_path / "work" / "big.bin").stat().st_size <= 2**20


def test_environment_is_scrubbed(tmp_path, monkeypatch):
    monkeypatch.setenv("TFCOURSE_SANDBOX_SECRET", "from the grader")
    code, out, isolation, _, err = run(tmp_path, """
        out["secret"] = os.environ.get("TFCOURSE_SANDBOX_SECRET")
        out["mine"] = os.environ.get("ONLY_THIS")
        out["cwd"] = os.getcwd()
    """, env={"PATH": os.defpath, "ONLY_THIS": "1"})
    assert code == 0, err
    assert out["secret"] is None and out["mine"] == "1"
    assert Path(out["cwd"]).resolve() == (tmp_path / "work").resolve()
    assert "scrubbed environment (2 variables)" in isolation


def test_isolation_list_matches_the_probe(tmp_path):
    code, _, isolation, _, err = run(tmp_path, "pass")
    assert code == 0, err
    assert ("no network (network namespace)" in isolation) == (NS.prefix is not None)
    assert any(word.startswith("resource limits (CPU 30 s") for word in isolation)
    if NS.prefix is None:
        assert any(word.startswith("network: not isolated (") for word in isolation)


def test_fallback_without_namespaces_says_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "_probe", sandbox.Namespaces(None, "tested without"))
    code, out, isolation, _, err = run(tmp_path, """
        out["cwd"] = os.getcwd()
        import resource
        out["cpu"] = resource.getrlimit(resource.RLIMIT_CPU)[0]
        out["files"] = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    """, cpu_seconds=7)
    assert code == 0, err
    assert out["cpu"] == 7 and out["files"] == sandbox.OPEN_FILES
    assert "network: not isolated (tested without)" in isolation
    assert "course files: not hidden (tested without)" in isolation
    assert not any(word.startswith("no network") for word in isolation)


def test_hidden_paths_must_not_cover_the_worker(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    common = {"env": {}, "cpu_seconds": 1, "memory_bytes": None, "file_bytes": 1,
              "stderr": subprocess.DEVNULL}
    argv = [sys.executable, "-I", "-c", "pass"]
    for hidden in (tmp_path, work, work / "inner"):
        with pytest.raises(ValueError, match="overlaps the worker's folder"):
            sandbox.launch(argv, cwd=work, hide_paths=[hidden], **common)
    package = tmp_path / "package"
    package.mkdir()
    with pytest.raises(ValueError, match="would be hidden"):
        sandbox.launch([*argv, str(package)], cwd=work, hide_paths=[package], **common)
    with pytest.raises(ValueError, match="would be hidden"):          # the interpreter
        sandbox.launch(argv, cwd=work, hide_paths=[Path(sys.executable).parent], keep_paths=[],
                       **common)


def test_cover_plan_carves_out_kept_paths(tmp_path):
    checkout = tmp_path / "checkout"
    for name in ("solutions", "tfcourse", ".venv/lib/tfcourse", ".git"):
        (checkout / name).mkdir(parents=True)
    (checkout / "README.md").write_text("x")
    (checkout / "link").symlink_to(checkout / "solutions")
    rules = {str(checkout): True, str(checkout / ".venv"): False,
             str(checkout / ".venv" / "lib" / "tfcourse"): True}
    plan = confine.cover_plan(rules)
    assert set(plan) == {("dir", str(checkout / name)) for name in (".git", "solutions",
                                                                    "tfcourse")} | {
        ("file", str(checkout / "README.md")),
        ("dir", str(checkout / ".venv" / "lib" / "tfcourse"))}
    assert confine.cover_plan({str(checkout): True}) == [("dir", str(checkout))]
