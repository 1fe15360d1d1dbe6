"""Limits on all of one learner's processes together (``cgroups.py``, SECURITY.md).

A process's own rlimits leave a learner's code free to multiply: each child gets the whole
limit again. Each test here does what a hostile cell would (fork until refused, allocate
in three children, leave a daemon behind) in a control group and, as the control, without
one, so a group that bounds nothing fails. The groups need root and the memory and pids
controllers; without them the tests are skipped, saying so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tfcourse.grade.sealed import cgroups, pool, sandbox
from tfcourse.grade.sealed.session import grading_env

_probe = cgroups.create()
if _probe is not None:
    _probe.kill()
pytestmark = pytest.mark.skipif(
    _probe is None,
    reason="control groups need root on Linux with the memory and pids controllers",
)


def gated_run(code: str, group: cgroups.Group | None) -> str:
    """Run ``code`` as a child that joins ``group`` (none: the control) before it runs;
    its standard output."""
    process = cgroups.start(
        [sys.executable, "-c", textwrap.dedent(code)], group, stdout=subprocess.PIPE
    )
    try:
        out, _ = process.communicate(timeout=120)
    finally:
        process.kill()
        if group is not None:
            group.kill()
    return out.decode()


FORK_FORTY = """
    import os, time
    forked = 0
    for _ in range(40):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            os.close(1)  # the reader waits for no child
            time.sleep(60)
            os._exit(0)
        forked += 1
    print(forked)
    """


def test_processes_are_counted_together_not_each():
    bounded = int(gated_run(FORK_FORTY, cgroups.create(processes=20)))
    assert bounded == 19  # the parent is one of the twenty
    # The control: the course's own limit is far above forty (and its group ends them).
    assert int(gated_run(FORK_FORTY, cgroups.create())) == 40


THREE_CHILDREN = """
    import os, time
    children = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            block = bytearray(150 * 2**20)
            for i in range(0, len(block), 4096):
                block[i] = 1
            time.sleep(1)
            os._exit(0)
        children.append(pid)
    print(sum(os.waitpid(pid, 0)[1] != 0 for pid in children))
    """


def test_memory_is_bounded_for_the_children_together():
    # Each child's 150 MiB is under the limit; three of them are not.
    assert int(gated_run(THREE_CHILDREN, cgroups.create(memory_bytes=300 * 2**20))) >= 1
    assert int(gated_run(THREE_CHILDREN, None)) == 0


def start_daemon(group: cgroups.Group, tmp_path: Path) -> int:
    """Start, in ``group``, a process that leaves a daemon in a session of its own; its pid."""
    marker = tmp_path / "daemon.pid"
    code = f"""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                open({str(marker)!r}, "w").write(str(os.getpid()))
                time.sleep(600)
            os._exit(0)
        """
    process = cgroups.start([sys.executable, "-c", textwrap.dedent(code)], group)
    process.wait(timeout=60)
    for _ in range(500):
        if marker.exists() and marker.read_text():
            break
        time.sleep(0.01)
    daemon = int(marker.read_text())
    assert daemon in group.pids()
    return daemon


def test_ending_the_group_ends_a_daemon_that_left_the_session(tmp_path):
    group = cgroups.create()
    assert group is not None
    daemon = start_daemon(group, tmp_path)
    group.kill()
    time.sleep(0.05)
    assert not Path(f"/proc/{daemon}").exists() or "Z" in _state(daemon)
    assert not any(folder.exists() for folder in group.folders)


def _unified() -> Path | None:
    """Where a cgroup v2 hierarchy is mounted (``/proc/self/mounts``), or ``None``."""
    for line in Path("/proc/self/mounts").read_text(encoding="ascii").splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def test_a_v2_group_ends_everything_in_it_at_once(tmp_path, monkeypatch):
    # The v2 path on a real v2 hierarchy, with whatever controllers it has (none is needed
    # to hold processes). Signals are taken away: only ``cgroup.kill`` can end the daemon.
    mount = _unified()
    folder = mount and cgroups._make(mount, {})
    if folder is None:
        pytest.skip("no cgroup v2 hierarchy the grader can make a group in")
    group = cgroups.Group([folder], 2)
    daemon = start_daemon(group, tmp_path)
    monkeypatch.setattr(cgroups.os, "kill", lambda pid, signal: None)
    group.kill()
    time.sleep(0.05)
    assert not Path(f"/proc/{daemon}").exists() or "Z" in _state(daemon)
    assert not folder.exists()


@pytest.mark.parametrize("controllers, version", [("cpu memory pids", 2), ("memory", None)])
def test_v2_is_used_where_it_offers_memory_and_pids_with_the_limits_written(
    tmp_path, monkeypatch, controllers, version
):
    # A v2 root in a folder of our own (the kernel's controllers cannot be moved out of the
    # v1 hierarchies that hold them on a v1 machine). Without pids there, v1 is looked for
    # (and here, with no v1 hierarchies under the root, nothing is made).
    (tmp_path / "cgroup.subtree_control").write_text(controllers, encoding="ascii")
    monkeypatch.setattr(cgroups, "MOUNT", tmp_path)
    group = cgroups.create(memory_bytes=300 * 2**20, processes=20)
    assert (group and group.version) == version
    if group is not None:
        (folder,) = group.folders
        written = {name: (folder / name).read_text() for name in os.listdir(folder)}
        assert written == {"memory.max": str(300 * 2**20), "memory.swap.max": "0", "pids.max": "20"}
        assert "cgroup v2" in group.said()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return "Z"


def test_a_process_that_cannot_join_runs_nothing(tmp_path):
    gone = cgroups.Group([tmp_path / "no-such-group"], 1)
    marker = tmp_path / "ran"
    line, inside, outside = cgroups.gated(
        [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('ran')"]
    )
    process = subprocess.Popen(line, pass_fds=(inside,))
    os.close(inside)
    with pytest.raises(OSError):
        cgroups.open_gate(gone, process.pid, outside)
    assert process.wait(timeout=60) == 125
    assert not marker.exists()


@pytest.mark.sandbox
def test_a_sandbox_and_everything_in_it_share_one_group_that_ends_with_it(tmp_path):
    if sandbox.sandbox().bwrap is None:
        pytest.skip(sandbox.sandbox().reason)
    worker = pool.SealedWorker(grading_env(), [])
    try:
        assert worker.group is not None
        time.sleep(1)  # bubblewrap has started the worker by now
        inside = worker.group.pids()
        # The gate become bubblewrap, and the sandbox's process 1 (the worker).
        assert worker.process.pid in inside and len(inside) >= 2, inside
    finally:
        worker.close()
    assert not any(folder.exists() for folder in worker.group.folders)


def test_the_report_says_which_limits_held(monkeypatch):
    assert "cgroup v" in cgroups.said()
    monkeypatch.setattr(cgroups, "create", lambda: None)
    assert "each process on its own" in cgroups.said()
