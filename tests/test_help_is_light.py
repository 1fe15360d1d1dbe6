"""`tfcourse COMMAND --help` answers without importing torch (seconds on a laptop): every
command's flags are defined apart from the machinery that runs them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tfcourse import cli

PROGRAM = """
import sys
from tfcourse import cli
try:
    cli.main([sys.argv[1], "--help"])
except SystemExit:
    pass
# rfc3987_syntax: jsonschema's, seconds of parser building (course/notebook_format.py keeps
# nbformat from importing it)
heavy = ("torch", "tfcourse.grade.sealed.session", "rfc3987_syntax")
print(sorted(m for m in heavy if sys.modules.get(m) is not None))
"""


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_help_imports_no_torch(command):
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, command], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout[-500:]


def test_the_check_is_real_a_heavy_command_is_seen():
    heavy = "import tfcourse.train.command\n" + PROGRAM  # the machinery behind the flags
    result = subprocess.run(
        [sys.executable, "-c", heavy, "train"], capture_output=True, text=True, check=True
    )
    assert "torch" in result.stdout.strip().splitlines()[-1]
