"""``tfcourse lab``: open the course's ``notebooks/`` folder in JupyterLab.

Extra arguments after ``--`` go to ``jupyter lab`` unchanged, e.g.
``tfcourse lab -- --port 8889 --no-browser``.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

FOLDER = "notebooks"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default=None,
                        help=f"folder to open (default: the course's {FOLDER}/ next to the "
                             f"package, else ./{FOLDER}/)")
    parser.add_argument("jupyter_args", nargs="*", metavar="-- JUPYTER_ARGS",
                        help="passed to `jupyter lab` (put them after --)")


def find_notebooks(explicit: str | None = None) -> Path | None:
    """The folder to open: ``explicit``, else the checkout's ``notebooks/``, else ./notebooks/."""
    if explicit is not None:
        candidates = [Path(explicit)]
    else:
        repository = Path(__file__).resolve().parent.parent      # an editable install / a checkout
        candidates = [repository / FOLDER, Path.cwd() / FOLDER]
    return next((c.resolve() for c in candidates if c.is_dir()), None)


def run(args: argparse.Namespace) -> int:
    folder = find_notebooks(args.dir)
    if folder is None:
        where = args.dir or f"{FOLDER}/ next to the tfcourse package or in the current directory"
        print(f"tfcourse lab: no notebook folder found (looked for {where}).\n"
              f"Run this from the course folder (the one with solutions/ and notebooks/), or pass "
              f"--dir FOLDER. If notebooks/ is missing but solutions/ exists, create it with "
              f"`tfcourse build-notebooks`. Meanwhile, `tfcourse demo` runs without notebooks.",
              file=sys.stderr)
        return 1
    if importlib.util.find_spec("jupyterlab") is None:
        print("tfcourse lab: JupyterLab is not installed in this environment; install it with "
              "`pip install -e '.[lab]'` (or run `make lab`).", file=sys.stderr)
        return 1
    extra = list(args.jupyter_args)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    command = [sys.executable, "-m", "jupyterlab", str(folder), *extra]
    print(f"tfcourse lab: opening {folder} in JupyterLab (Ctrl+C stops the server)", flush=True)
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 0
