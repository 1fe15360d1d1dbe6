"""The course as a learner installs it: build the wheel, install it into a fresh virtual
environment (not editable, no checkout on the path), and use it from an empty folder.

    python scripts/check_wheel.py [--work DIR] [--torch SPEC]

Runs a check that the Chinese figures' font came with the package, then, in English and in
Chinese: ``tfcourse doctor``; ``tfcourse notebooks``; ``tfcourse grade`` on a copied solution
notebook (full marks) and on an untouched learner notebook (no marks). Exits 1, saying which
step failed, when anything is not so. ``make test-wheel`` and CI (``.ci/run``) run it with the
dev environment's Python (hatchling builds the wheel offline). Plain Python, so it runs on
Windows and macOS too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "03_norms"  # a short one: graded in seconds


def step(title: str, command: list[str], cwd: Path, env: dict[str, str]) -> str:
    """Run ``command``, print its title, time and output; return stdout. Exit 1 if it fails."""
    start = time.monotonic()
    result = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, encoding="utf-8", check=False
    )
    print(f"--- {title} ({time.monotonic() - start:.0f} s): {' '.join(command[-6:])}")
    print(result.stdout.rstrip()[-3000:])
    if result.returncode:
        print(result.stderr.rstrip()[-3000:])
        sys.exit(f"check_wheel: {title} exited {result.returncode}")
    return result.stdout


def grade(python: Path, notebook: Path, cwd: Path, env: dict[str, str]) -> dict:
    """``tfcourse grade NOTEBOOK --json`` in the installed package: the notebook's grade."""
    command = [str(python), "-m", "tfcourse", "grade", str(notebook), "--json", "--timeout", "120"]
    result = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, encoding="utf-8", check=False
    )
    try:
        (graded,) = json.loads(result.stdout)
    except ValueError:
        print(result.stdout[-3000:], result.stderr[-3000:], sep="\n")
        sys.exit(f"check_wheel: grading {notebook.name} gave no report (exit {result.returncode})")
    print(
        f"--- grade {notebook.relative_to(cwd)}: {graded['passed']}/{graded['total']} "
        f"exercises passed, exit {result.returncode} {graded.get('error') or ''}"
    )
    return graded


def install_command(python: Path, wheel: Path) -> list[str]:
    """The wheel's install, at constraints.txt's versions, as ``make setup`` installs the
    package: with uv (beside this Python in the dev environment, given pip's indexes as
    ``scripts/pip_indexes.py`` reads them), else with pip."""
    constraints = ["-c", str(ROOT / "constraints.txt"), str(wheel)]
    uv = Path(sys.executable).parent / ("uv.exe" if os.name == "nt" else "uv")
    if not uv.exists():
        return [str(python), "-m", "pip", "install", "--quiet", *constraints]
    indexes = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "pip_indexes.py"), "--python", sys.executable],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=True,
    ).stdout.split()
    command = [str(uv), "pip", "install", "--python", str(python), "--quiet", "--compile-bytecode"]
    return [*command, *indexes, *constraints]


def passable_python() -> None:
    """As root, the grader starts each learner's sandbox as a fresh unprivileged uid, which must
    be able to start Python: the folders above it made passable, not listable, as
    docs/grading.md asks of a grading machine (say, /root when Python lies under it)."""
    for path in (os.path.realpath(sys.executable), os.path.realpath(sys.base_prefix)):
        for folder in Path(path).parents:
            mode = folder.stat().st_mode
            if not mode & stat.S_IXOTH:
                folder.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
                print(f"check_wheel: {folder} made passable for the grader's unprivileged uid")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", default=None, help="folder to work in (default: a temporary one)")
    parser.add_argument("--torch", default="torch==2.13.0", help="torch to install first")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="tfcourse-wheel-")).resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    # A temporary folder (a venv with torch: gigabytes) is removed once every step passed;
    # after a failure it is kept, to look into.
    print(f"check_wheel: working in {work}")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        passable_python()

    step(
        "build",
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(work / "dist")],
        ROOT,
        env,
    )
    (wheel,) = (work / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    notebooks = [n for n in names if n.endswith(".ipynb")]
    print(
        f"{wheel.name}: {wheel.stat().st_size / 1e6:.1f} MB, {len(names)} files, "
        f"{len(notebooks)} notebooks"
    )

    venv = work / "venv"
    step("venv", [sys.executable, "-m", "venv", str(venv)], work, env)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    step(
        "torch",
        [
            sys.executable,
            str(ROOT / "scripts" / "install_torch.py"),
            "--python",
            str(python),
            "--torch",
            args.torch,
        ],
        work,
        env,
    )
    step("install", install_command(python, wheel), work, env)

    learner = work / "learner"  # an empty folder: no checkout, no solutions/ anywhere near
    learner.mkdir()
    where = step(
        "import", [str(python), "-c", "import tfcourse; print(tfcourse.__file__)"], learner, env
    )
    if not Path(where.strip()).is_relative_to(venv):
        sys.exit(f"check_wheel: tfcourse imported from {where.strip()}, not the fresh venv")
    font = "from tfcourse.lab import fonts; assert fonts.packaged_font_file(), 'no font file'"
    step("font", [str(python), "-c", f"{font}; print(fonts.installed_cjk_fonts())"], learner, env)
    step("doctor", [str(python), "-m", "tfcourse", "doctor"], learner, env)
    packaged = Path(where.strip()).parent / "_course" / "solutions"
    failures = []
    for language in ("en", "zh"):
        folder = learner / language
        step(
            f"notebooks ({language})",
            [str(python), "-m", "tfcourse", "notebooks", str(folder), "--language", language],
            learner,
            env,
        )
        solved = folder / f"solved_{NOTEBOOK}.ipynb"
        shutil.copyfile(
            (packaged if language == "en" else packaged / language) / f"{NOTEBOOK}.ipynb", solved
        )
        full = grade(python, solved, learner, env)
        none = grade(python, folder / f"{NOTEBOOK}.ipynb", learner, env)
        if not (full["ok"] and full["passed"] == full["total"] > 0):
            failures.append(f"the solution ({language}) did not get full marks")
        if none["passed"] != 0 or none["total"] == 0:
            failures.append(f"the untouched notebook ({language}) got marks")
    if failures:
        sys.exit("check_wheel: " + "; ".join(failures))
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    print("check_wheel: ok")


if __name__ == "__main__":
    main()
