"""How fast `tfcourse grade` grades, at class scale (a benchmark, not a test).

Three measurements, each a wall-clock time of the real command on solved learner
notebooks (the solutions with their exercises filled in, as a learner who solved
everything would hand them in):

1. per notebook: every course notebook graded alone with ``--jobs 1``: the command's wall
   time (starting Python and importing torch and nbformat, paid once per command) and the
   grader's own time for the notebook, which here includes starting its first sandboxed
   worker (importing torch, IPython and matplotlib there), which in a class run is started
   ahead while another notebook grades (``grade/sealed/pool.py``);
2. one learner: the course's graded notebooks (those with exercises) in one call,
   ``--jobs JOBS``;
3. a class: COPIES submissions of one notebook (``--notebook``) in one call,
   ``--jobs JOBS``: the wall time, the median of the grader's time per notebook, and the
   wall time per notebook per core (wall time x jobs / copies).

The targets the grader is held to (on 2 cores), at class scale (3.): median <= 3 s of
grading per notebook and <= 3 s of wall time per notebook per core; one learner's
notebooks (2.) <= 45 s; 100 submissions of one notebook <= 3 min with 2 jobs. Figure 1.
is the cold start, for comparison (no target).
The script prints each figure next to its target; numbers depend on the machine and
its load, so compare runs on one machine only.

    python benchmarks/grading.py                       # all three, 100 copies
    python benchmarks/grading.py --copies 20 --skip-single
    python benchmarks/grading.py --sandbox users       # as root: the container set-up
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tfcourse.authoring.build import make_learner, solve
from tfcourse.course import notebook_format

ROOT = Path(__file__).resolve().parents[1]


def solved_copy(solution_path: Path, folder: Path, name: str) -> Path:
    solution = notebook_format.read_notebook(solution_path)
    learner = solve(make_learner(solution, solution_path.stem), solution)
    path = folder / name
    notebook_format.write_notebook(learner, path)
    return path


def grade(
    paths: list[Path], jobs: int, against: str | None = None, sandbox: str = "auto"
) -> tuple[float, list]:
    command = [
        sys.executable,
        "-m",
        "tfcourse",
        "grade",
        *map(str, paths),
        "--json",
        "--jobs",
        str(jobs),
        "--sandbox",
        sandbox,
    ] + (["--against", against] if against else [])
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    grades = json.loads(result.stdout) if result.stdout.strip().startswith("[") else []
    if not grades or not all(g["ok"] for g in grades):
        print(
            f"  warning: not every notebook passed (exit {result.returncode}): "
            f"{result.stderr.strip()[-300:]}"
        )
    return seconds, grades


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--copies", type=int, default=100)
    parser.add_argument("--notebook", default="03_norms")
    parser.add_argument("--skip-single", action="store_true")
    parser.add_argument(
        "--sandbox",
        default="auto",
        choices=("auto", "bubblewrap", "users"),
        help="tfcourse grade's --sandbox (users: as root, a fresh user per "
        "worker, none started ahead)",
    )
    args = parser.parse_args()
    graded = [
        p
        for p in sorted((ROOT / "solutions").glob("*.ipynb"))
        if any(notebook_format.is_exercise(c) for c in notebook_format.read_notebook(p).cells)
    ]
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        learner = [solved_copy(p, folder, p.name) for p in graded]
        if not args.skip_single:
            print("1. each notebook alone, --jobs 1")
            times, own = [], []
            for path in learner:
                seconds, grades = grade([path], 1, sandbox=args.sandbox)
                sealed = sum(e["sealed"] for g in grades for e in g["exercises"])
                total = sum(len(g["exercises"]) for g in grades)
                times.append(seconds)
                own += [g["seconds"] for g in grades]
                print(
                    f"   {path.stem:28s} {seconds:6.1f} s command, "
                    f"{grades[0]['seconds'] if grades else float('nan'):5.1f} s grading "
                    f"({sealed}/{total} exercises sealed)"
                )
            print(
                f"   median {statistics.median(times):.1f} s per command, "
                f"{statistics.median(own):.1f} s of grading per notebook, each with a cold "
                f"start"
            )
        seconds, _ = grade(learner, args.jobs, sandbox=args.sandbox)
        print(
            f"2. one learner's {len(learner)} graded notebooks, --jobs {args.jobs}: "
            f"{seconds:.1f} s (target <= 45 s)"
        )
        class_folder = folder / "class"
        class_folder.mkdir()
        source = ROOT / "solutions" / f"{args.notebook}.ipynb"
        copies = [
            solved_copy(source, class_folder, f"learner{i:03d}_{args.notebook}.ipynb")
            for i in range(args.copies)
        ]
        seconds, grades = grade(
            [class_folder], args.jobs, against=args.notebook, sandbox=args.sandbox
        )
        passed = sum(g["ok"] for g in grades)
        print(
            f"3. {len(copies)} submissions of {args.notebook}, --jobs {args.jobs}: "
            f"{seconds:.1f} s (target for 100: <= 180 s); {passed}/{len(copies)} passed; "
            f"median {statistics.median(g['seconds'] for g in grades):.1f} s of grading per "
            f"notebook (target <= 3 s), {seconds * args.jobs / len(copies):.1f} s per notebook "
            f"per core (target <= 3 s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
