"""Files written whole or not at all: the one way the package replaces a file.

Reports, Gradescope's results, the autograder zip and training checkpoints are read by
people and programs that must never find half of one. Imports nothing of the package, so
every wing may use it (``tests/test_layout.py``: a shared module).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replaced_atomically(
    path: str | os.PathLike, *, prefix: str = ".tfcourse-", mode: int | None = None
) -> Iterator[Path]:
    """A temporary file beside ``path`` to write; it replaces ``path`` when the block ends.

    Flushed to disk, then renamed over ``path``: a full disk, an exception or Ctrl-C inside
    the block leaves the old file (or none), never half of one, and never the temporary
    file. A symbolic link is written through, to its target. ``mode``: the new file's
    permissions, by default what ``open`` would give (``0o666`` less the umask; the
    temporary file's own ``0o600`` would hide a report from its readers, and a grader that
    keeps its files private, umask 077, keeps them so). The folder must exist. Raises
    ``OSError``.
    """
    target = Path(os.path.realpath(path))
    handle, name = tempfile.mkstemp(prefix=prefix, suffix=target.suffix, dir=target.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        if mode is None:
            mask = os.umask(0o022)
            os.umask(mask)
            mode = 0o666 & ~mask
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
