"""pip's index settings as uv's flags, for ``make setup``'s uv step.

uv reads none of pip's configuration: a mirror set the usual way (``pip config set
global.index-url ...``, a ``pip.conf`` or ``pip.ini``, or the ``PIP_INDEX_URL`` variable)
would reach pip's steps of ``make setup`` and not uv's. This prints, on one line, what pip
would use for an install as uv's flags: ``--default-index URL``, ``--index URL`` per extra
index (with ``--index-strategy unsafe-best-match``, pip's way of choosing among indexes), and
``--find-links URL`` per location. It asks pip itself (``pip config list``), so every place
pip reads is covered, with pip's precedence: the environment, then ``[install]``, then
``[global]``. Standard library only.

    python scripts/pip_indexes.py [--python PYTHON]
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys

FLAGS = {"index-url": "--default-index", "extra-index-url": "--index", "find-links": "--find-links"}
SECTIONS = (":env:", "install", "global")  # pip's precedence for an install's setting


def pip_settings(python: str) -> dict[str, dict[str, str]]:
    """``{section: {key: value}}`` from ``python -m pip config list`` (empty if pip fails)."""
    try:
        listed = subprocess.run(
            [python, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    settings: dict[str, dict[str, str]] = {}
    for line in listed.splitlines():
        name, equals, value = line.partition("=")
        section, dot, key = name.rpartition(".")
        if equals and dot:
            try:
                settings.setdefault(section, {})[key] = str(ast.literal_eval(value))
            except (ValueError, SyntaxError):
                continue
    return settings


def uv_flags(settings: dict[str, dict[str, str]]) -> list[str]:
    """uv's flags for pip's effective index, extra indexes and find-links."""
    flags = []
    for key, flag in FLAGS.items():
        value = next((settings[s][key] for s in SECTIONS if key in settings.get(s, {})), "")
        for location in value.split():  # pip takes several, separated by whitespace
            flags += [flag, location]
    if "--index" in flags:
        flags += ["--index-strategy", "unsafe-best-match"]
    return flags


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="whose pip to ask")
    args = parser.parse_args(argv)
    print(" ".join(uv_flags(pip_settings(args.python))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
