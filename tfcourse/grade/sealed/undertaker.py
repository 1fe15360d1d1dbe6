"""What the grader leaves is removed even when the grader is killed outright.

A grader stopped by a signal it can catch cleans up as at a normal end (``command.py``). One
killed outright (SIGKILL, the kernel's out-of-memory killer) runs none of its clean-up: its
sandboxes end with it (bubblewrap's ``--die-with-parent``), but a fresh user's processes
would live on, and its control groups and temporary folders would stay. So the grader
leaves a will with an undertaker: a small process of its own, in a session of its own (a
signal to the grader's process group does not reach it), started with the first entry. The
grader writes ``("+", kind, value)`` when it makes something and ``("-", kind, value)`` when
it has removed it itself, one JSON line each, down a pipe that only the grader holds. When the
pipe ends (the grader gone, whichever way) the undertaker removes what is still listed:
every process and file of a learner's uid (``users.end_user``), a control group and its
processes (``cgroups.Group.kill``), a temporary file or folder. After a normal end nothing is
listed, and it just exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

PACKAGE_PARENT = Path(__file__).resolve().parents[3]  # the folder that holds tfcourse/
_lock = threading.Lock()
_will: subprocess.Popen | None = None
_carrying_out = False  # in the undertaker: what it removes leaves no will of its own
# The undertaker's program: the package's folder is put first on its path (``-I`` leaves the
# environment's own paths out), and nothing is imported until the grader has gone.
_START = "import sys; sys.path.insert(0, sys.argv[1]); from {} import main; main()"


def _write(sign: str, kind: str, value) -> None:
    global _will
    line = (json.dumps([sign, kind, value]) + "\n").encode()
    with _lock:
        if _carrying_out:
            return
        if _will is None:
            if sign == "-":
                return
            _will = subprocess.Popen(
                [sys.executable, "-I", "-c", _START.format(__name__), str(PACKAGE_PARENT)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                start_new_session=True,
            )
        with contextlib.suppress(OSError):  # an undertaker gone: nothing more can be left
            stdin = cast(IO[bytes], _will.stdin)
            stdin.write(line)
            stdin.flush()


def keep(kind: str, value) -> None:
    """Leave ``value`` to be removed if the grader dies first: kind ``"user"`` (a uid),
    ``"group"`` (``[version, [folder, ...]]``) or ``"path"`` (a file or folder)."""
    _write("+", kind, value)


def done(kind: str, value) -> None:
    """The grader removed ``value`` itself: nothing left to do for it."""
    _write("-", kind, value)


@contextlib.contextmanager
def temporary_folder(prefix: str) -> Iterator[str]:
    """``tempfile.TemporaryDirectory(prefix=prefix)``, kept in the will while it exists."""
    folder = tempfile.TemporaryDirectory(prefix=prefix)
    keep("path", folder.name)
    try:
        yield folder.name
    finally:
        folder.cleanup()
        done("path", folder.name)


def main() -> None:
    """The undertaker: read the will until the grader has gone, then carry it out."""
    global _carrying_out
    _carrying_out = True
    left: dict[str, tuple[str, Any]] = {}
    for line in sys.stdin:
        try:
            sign, kind, value = json.loads(line)
        except ValueError:
            break  # cut off mid-line as the grader died: the line's object was never made
        key = json.dumps([kind, value])
        if sign == "+":
            left[key] = (kind, value)
        else:
            left.pop(key, None)
    for kind, value in left.values():
        with contextlib.suppress(Exception):  # one that fails: the others still go
            _remove(kind, value)


def _remove(kind: str, value) -> None:
    if kind == "user":
        from .users import end_user

        end_user(int(value))
    elif kind == "group":
        from .cgroups import Group

        version, folders = value
        Group([Path(folder) for folder in folders], int(version)).kill()
    elif kind == "path":
        if os.path.isdir(value) and not os.path.islink(value):
            shutil.rmtree(value, ignore_errors=True)
        else:
            Path(value).unlink(missing_ok=True)
