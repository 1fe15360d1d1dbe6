"""The grader's secret, and the salt it gives each learner's grading cases.

The checks draw their cases from fixed seeds, the same in every notebook, so a learner
could record the reference's outputs on those cases and replay them. The grader instead
salts every seed (``tfcourse.checks.grading_cases``) with a salt derived here from a
secret only the teacher's machine holds, the learner's identity and the exercise:

- the same learner, exercise and secret always get the same cases (a grade can be
  reproduced, and re-grading a submission does not change it),
- different learners get different cases (one learner's recording helps no other),
- without the secret nobody can compute them.

The secret is a file, created on first use with 32 random bytes. Keep it private (mode
0600: ``load_secret`` refuses one that others may read) and keep it across grading runs;
losing it only changes which cases later runs draw.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
import tempfile
from pathlib import Path

from ..language import say

ENVIRONMENT_VARIABLE = "TFCOURSE_GRADING_SECRET"
SECRET_BYTES = 32  # what a new secret holds
MINIMUM_BYTES = 16  # a shorter secret could be guessed


def secret_path() -> Path:
    """Where the secret lives: ``$TFCOURSE_GRADING_SECRET`` if set, else
    ``$XDG_CONFIG_HOME/tfcourse/grading-secret``, else ``~/.config/tfcourse/grading-secret``."""
    chosen = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if chosen:
        return Path(chosen).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME", "").strip()
    # The XDG specification says to ignore a relative value.
    base = Path(config) if config and Path(config).is_absolute() else Path.home() / ".config"
    return base / "tfcourse" / "grading-secret"


def load_secret(path: Path | None = None) -> bytes:
    """The secret in ``path`` (default ``secret_path()``), created on first use.

    A new secret is 32 random bytes from ``secrets``, written as 64 hex digits to a file
    of mode 0600 (its folder, if created here, gets 0700), atomically: a reader never
    sees half a secret, and of two graders starting at once both end up with the one
    that was written first. An existing file may hold hex digits or raw bytes.

    Raises ``ValueError`` (in the learner's language, like every message) for a file that
    group or others may access, that is not a regular file, or that holds fewer than 16
    bytes.
    """
    path = secret_path() if path is None else Path(path)
    if not os.path.lexists(path):
        _create(path)
    return _read(path)


def case_salt(secret: bytes, identity: str, exercise: str) -> int:
    """The salt of ``identity``'s cases for ``exercise``: 63 bits of HMAC-SHA256 under
    ``secret``, for ``tfcourse.checks.grading_cases``.

    ``identity`` names the learner (a submission's file name, a Gradescope submission
    id); ``exercise`` the exercise (its name in the notebook). Equal arguments give equal
    salts; any difference gives an unrelated salt.
    """
    if not isinstance(secret, (bytes, bytearray)):
        raise TypeError(
            say(
                f"the secret must be bytes, got {type(secret).__name__}",
                f"密钥必须是 bytes，实际得到 {type(secret).__name__}",
            )
        )
    if len(secret) < MINIMUM_BYTES:
        raise ValueError(_too_short(len(secret)))
    for name, value in (("identity", identity), ("exercise", exercise)):
        if not isinstance(value, str):
            raise TypeError(
                say(
                    f"{name} must be a str, got {type(value).__name__}",
                    f"{name} 必须是 str，实际得到 {type(value).__name__}",
                )
            )
    # A JSON list keeps the fields apart: ("ab", "c") and ("a", "bc") differ.
    message = json.dumps(["tfcourse grading salt", 1, identity, exercise]).encode()
    digest = hmac.new(bytes(secret), message, hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def _create(path: Path) -> None:
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".grading-secret-", dir=path.parent)
    try:
        # mkstemp makes the file 0600; chmod again in case a platform does otherwise.
        os.chmod(temporary, 0o600)
        with os.fdopen(handle, "w", encoding="ascii") as file:
            file.write(secrets.token_bytes(SECRET_BYTES).hex() + "\n")
            file.flush()
            os.fsync(file.fileno())
        try:
            # link, not replace: a secret another grader wrote meanwhile is kept, not lost.
            os.link(temporary, path)
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _read(path: Path) -> bytes:
    with open(path, "rb") as file:
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise ValueError(
                say(
                    f"the grading secret {path} is not a regular file",
                    f"评分密钥 {path} 不是普通文件",
                )
            )
        # Windows has no such permission bits to check.
        if os.name != "nt" and status.st_mode & 0o077:
            mode = oct(stat.S_IMODE(status.st_mode))
            raise ValueError(
                say(
                    f"the grading secret {path} may be read or changed by other users (mode "
                    f"{mode}); whoever reads it can compute the grading cases. Make it private "
                    f"with: chmod 600 {path}",
                    f"评分密钥 {path} 可被其他用户读取或修改（权限 {mode}）；读到它的人就能算出"
                    f"评分用例。请用以下命令把它设为仅自己可访问：chmod 600 {path}",
                )
            )
        content = file.read()
    text = content.strip()
    try:
        secret = bytes.fromhex(text.decode("ascii"))
    except ValueError:  # not hex digits: the raw bytes are the secret
        secret = content
    if len(secret) < MINIMUM_BYTES:
        raise ValueError(_too_short(len(secret), path))
    return secret


def _too_short(length: int, path: Path | None = None) -> str:
    where = say(f" in {path}", f"（{path}）") if path is not None else ""
    return say(
        f"the grading secret{where} has {length} bytes, fewer than {MINIMUM_BYTES}: it "
        f"could be guessed. Delete it to have a new one made, or use a longer one",
        f"评分密钥{where}只有 {length} 字节，少于 {MINIMUM_BYTES} 字节，可能被猜到。删除"
        f"它即可自动生成新的密钥，或换用更长的密钥",
    )
