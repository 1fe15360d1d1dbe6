"""Every learner's and teacher's command, run for real in a Chinese setting
(``TFCOURSE_LANG=zh``), prints no English sentence of ours: copying the notebooks, the
progress table, the doctor, the demo, a small training run and a sample from it, grading a
Chinese notebook, and building a Gradescope autograder. (Their ``--help`` is tested in
test_commands_speak_chinese.py; `lab` starts a server, tested in test_launch.py.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from helpers import english_sentences, needs_sandbox

pytestmark = pytest.mark.slow
CHINESE = re.compile(r"[\u4e00-\u9fff]")


def tfcourse(*argv: str, cwd, status: int = 0) -> str:
    """``tfcourse ARGV`` in Chinese in ``cwd``, ending with ``status``: its stdout and stderr
    together."""
    env = dict(os.environ, TFCOURSE_LANG="zh", OMP_NUM_THREADS="1")
    result = subprocess.run(
        [sys.executable, "-m", "tfcourse", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = result.stdout + result.stderr
    assert result.returncode == status, out[-2000:]
    return out


def test_the_commands_speak_chinese_from_start_to_end(tmp_path):
    needs_sandbox()
    said = {"notebooks": tfcourse("notebooks", "course", cwd=tmp_path)}
    # One notebook is enough to hear every kind of row (not started, no notebook):
    # test_progress.py runs the whole course.
    for copied in (tmp_path / "course").glob("*.ipynb"):
        if copied.stem != "01_attention":
            copied.unlink()
    said["progress"] = tfcourse("progress", "course", cwd=tmp_path)
    said["doctor"] = tfcourse("doctor", cwd=tmp_path)
    said["demo"] = tfcourse(
        "demo", "--layers", "1", "--d-model", "16", "--heads", "2", cwd=tmp_path
    )
    said["train"] = tfcourse(
        "train", "--dataset", "text", "--preset", "tiny", "--steps", "3", "--out", "run",
        cwd=tmp_path,
    )  # fmt: skip
    said["sample"] = tfcourse("sample", "run", "--chars", "40", cwd=tmp_path)
    # a notebook as copied, its exercises not started: they fail, and the status says so
    said["grade"] = tfcourse("grade", "course/01_attention.ipynb", cwd=tmp_path, status=1)
    said["autograder"] = tfcourse(
        "autograder", "01_attention", "--out", "autograder.zip", cwd=tmp_path
    )
    for command, out in said.items():
        # `sample` prints the model's text and nothing of ours
        assert CHINESE.search(out) or command == "sample", (command, out[-1000:])
        assert english_sentences(out) == [], (command, english_sentences(out))


def test_the_scan_would_see_an_english_line():
    assert english_sentences("tfcourse grade: graded 2 notebooks in 3.1 s") != []
