"""``tfcourse grade``: grade learner notebooks against the solution notebooks.

For each learner notebook: choose its solution (``--against NAME``, else by file name;
never from the submission's metadata), restamp the check cells from it (undoing edited,
moved or deleted checks, found by content, id and exercise name; see ``restamp``), then
judge each exercise the sealed way (``sealed/``): the learner's cells run in a confined
worker process, the check runs here, and an exercise passes when the check printed what
the solution's stored output says. ``--in-kernel`` (or an exercise whose metadata says
``tfcourse.sealed: false``) judges by the check cells instead: a copy of the notebook runs
alone in a fresh temporary folder, in a fresh kernel with a scrubbed environment and a
per-cell timeout, and each check cell's output is compared with the stored one (after
``sanitize``, on the same fields as nbval; ``judge``). ``--jobs N`` grades N notebooks at
once.

Why nbclient and not nbval under the hood. nbval is the runner in CI (the solution
notebooks must pass ``pytest --nbval-lax``), and the restamped notebook passes or fails
``pytest --nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg`` exactly where this
grader does (write it with ``--restamped DIR``). But as a grader nbval falls short:
after one timed-out cell it marks every later cell as an expected failure (so one
hanging cell hides every later verdict), it reports a mismatch as a diff with the
reference as "+", and its results come back as pytest reports to be parsed. Executing
with nbclient (``tfcourse.course.run``) gives per-cell results directly, carries on after a
timeout, and lets the report say "expected ... / got ..." in plain words.

Exit status: 0 only if every exercise of every notebook passes; 1 otherwise; 2 for bad
arguments (no notebooks found, an output path that cannot be written: all checked before
any grading). What is guaranteed, and what is not, is in docs/grading.md.

A notebook's report is in Chinese under ``TFCOURSE_LANG=zh`` or when the notebook is one of
the Chinese edition (``metadata.tfcourse.language == "zh"``); its kernel and sealed workers
then run with ``TFCOURSE_LANG=zh`` too, so the checks' diagnoses are in Chinese. Verdicts
and scores do not depend on the language.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..language import current, say, speaking
from . import notebook_format
from .build import STUB_SIGNATURE
from .judge import (
    ExerciseResult,
    NotebookGrade,
    exercise_names,
    exercise_points,
    judge,
    not_implemented,
    verb,
)
from .report import format_report, write_csv
from .restamp import restamp
from .run import grading_env, run_notebook
from .scan import Finding, scan

NAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z_.-]*")


def solution_names(solutions_dir: Path) -> list[str]:
    """The course's notebooks a submission can be graded against: ``solutions/*.ipynb`` stems."""
    return sorted(p.stem for p in solutions_dir.glob("*.ipynb") if p.is_file())


def find_solution(path: Path, solutions_dir: Path, against: str | None = None) -> Path:
    """The solution notebook to grade ``path`` against. Raises ``ValueError``.

    The grader decides, never the submission: ``against`` (a notebook name such as
    ``03_norms``, checked against the course's list), else the same file name, else the
    longest course notebook name contained in the file name (``alice_01_attention.ipynb``
    -> ``01_attention``). ``metadata.tfcourse.notebook`` in the submission is ignored: a
    crafted notebook could otherwise choose its own answer key.
    """
    names = solution_names(solutions_dir)
    if against is not None:
        stem = against.removesuffix(".ipynb")
        if not NAME.fullmatch(stem) or stem not in names:
            raise ValueError(say(f"--against {against!r} is not one of the course's notebooks "
                                 f"({', '.join(names) or 'none found'})",
                                 f"--against {against!r} 不是本课程的 notebook"
                                 f"（{', '.join(names) or '一个也没有找到'}）"))
        return solutions_dir / f"{stem}.ipynb"
    contained = sorted((name for name in names if name in path.stem), key=len)
    if path.stem in names:
        return solutions_dir / f"{path.stem}.ipynb"
    if contained:
        return solutions_dir / f"{contained[-1]}.ipynb"
    folder = notebook_format.shown(solutions_dir)
    raise ValueError(say(f"no solution notebook for {path.name} in {folder}: name the file after "
                         f"one of {', '.join(names) or '(none found)'}, or pass --against NAME",
                         f"{folder} 中没有与 {path.name} 对应的参考答案 notebook：请用其中一个名字"
                         f"（{', '.join(names) or '一个也没有找到'}）给文件命名，或使用 "
                         f"--against NAME"))


def report_language(notebook) -> str:
    """``"zh"`` when the reader asked for Chinese (``TFCOURSE_LANG=zh``) or ``notebook`` (a
    notebook, or its raw JSON) is one of the Chinese edition, else ``""``: as the reader
    asked."""
    meta = notebook.get("metadata") if isinstance(notebook, dict) else None
    course = meta.get("tfcourse") if isinstance(meta, dict) else None
    chinese = isinstance(course, dict) and course.get("language") == "zh"
    return "zh" if chinese or current() == "zh" else ""


def _raw(path: Path):
    """The JSON of ``path``, or None (the grader reports unreadable notebooks itself)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def grade(learner, solution, *, cwd: str | Path, timeout: float = 120,
          env: dict[str, str] | None = None, label: str = "notebook",
          restamped_path: str | Path | None = None, sealed: bool = True):
    """Restamp and judge an in-memory learner notebook against ``solution``.

    ``sealed``: each exercise is judged by the sealed path (the learner's code in a worker,
    the check here); the notebook itself runs in a kernel (in ``cwd``) only when an
    exercise cannot be judged that way, or when ``sealed`` is False. Returns
    ``(NotebookGrade, notebook)``; ``restamped_path`` (optional) receives the restamped
    notebook before anything runs. The notes, and the checks' diagnoses, are in the
    notebook's language (``report_language``).
    """
    language = report_language(learner)
    env = env if env is not None else grading_env()
    if language == "zh":
        env = dict(env, TFCOURSE_LANG="zh")
    with speaking(language or None):
        result, notebook = _grade(learner, solution, cwd=cwd, timeout=timeout, env=env,
                                  label=label, restamped_path=restamped_path, sealed=sealed)
    result.language = language
    return result, notebook


def _grade(learner, solution, *, cwd, timeout, env, label, restamped_path, sealed):
    started = time.monotonic()
    result = NotebookGrade(notebook=label)
    notebook, repairs = restamp(learner, solution)
    result.restamped = [repair.describe() for repair in repairs]
    if restamped_path:
        notebook_format.write_notebook(notebook, restamped_path)
    names = exercise_names(solution)
    verdicts = {}
    if sealed:
        from .sealed.session import grade_exercises

        verdicts = grade_exercises(notebook, solution, names, env=env, timeout=timeout)
    if not sealed or any(v.status == "unsupported" for v in verdicts.values()):
        run = run_notebook(notebook, cwd=cwd, timeout=timeout, env=env)
        result.exercises = judge(solution, notebook, run.by_id())
        judged = {cell.get("id") for cell in solution.cells
                  if notebook_format.is_check(cell) or notebook_format.is_exercise(cell)}
        for cell_run in run.failures():
            if cell_run.cell_id not in judged and cell_run.status != "not-run":
                cell = notebook.cells[cell_run.index]
                result.notes.append(f"{notebook_format.cell_label(cell, cell_run.index)} "
                                    f"{verb(cell_run)}")
    else:
        result.exercises = [ExerciseResult(name=name, passed=False, check_cells=[],
                                           points=exercise_points(solution, name))
                            for name in names]
    for exercise in result.exercises:
        apply_sealed(exercise, verdicts.get(exercise.name), solution)
    result.isolation = next((v.isolation for v in verdicts.values() if v.isolation), [])
    refuse(result.exercises, scan(solution, notebook))
    if not result.exercises:
        result.error = say("the solution notebook has no exercises", "参考答案 notebook 中没有练习")
    result.seconds = time.monotonic() - started
    return result, notebook


def apply_sealed(exercise: ExerciseResult, verdict, solution) -> None:
    """The sealed verdict overrides what the check cells printed in the learner's kernel."""
    if verdict is None:
        return
    from .sealed.session import checks_of

    if verdict.status == "unsupported":
        exercise.notes.append(say("judged by its check cell in your kernel, not sealed: "
                                  + "; ".join(verdict.notes),
                                  "由检查单元格在你的内核中评判，而不是在隔离的进程中评判："
                                  + "；".join(verdict.notes)))
        return
    exercise.sealed = True
    expected = checks_of(solution, exercise.name)[1].rstrip("\n")
    if verdict.status == "passed":
        exercise.passed, exercise.reason, exercise.expected, exercise.got = True, "", "", ""
        exercise.notes = verdict.notes          # cells of yours that raised on the way
        return
    exercise.passed = False
    exercise.reason = "builtin" if verdict.status == "builtin" else verdict.reason
    exercise.expected, exercise.got, exercise.notes = expected, verdict.output, verdict.notes
    if STUB_SIGNATURE in exercise.got:
        exercise.got += not_implemented()


def refuse(exercises: list[ExerciseResult], findings: list[Finding]) -> None:
    """No points where the static scan found the reference, a built-in that does the whole
    exercise, or tampering (which voids every exercise): whatever the check cells printed."""
    for result in exercises:
        mine = [f for f in findings if f.exercise in (None, result.name)]
        if mine:
            result.passed, result.reason = False, mine[0].kind
            result.got = "\n".join(finding.describe() for finding in mine)
            result.expected = result.expected or say("your own implementation, judged by its "
                                                     "check", "你自己的实现，由检查来评判")


def grade_notebook(path: str | Path, *, solutions_dir: str | Path | None = None,
                   against: str | None = None, timeout: float = 120,
                   restamped_dir: str | Path | None = None,
                   env: dict[str, str] | None = None, sealed: bool = True) -> NotebookGrade:
    """Grade one learner notebook file. Never raises for a bad notebook: the problem goes
    to ``NotebookGrade.error``.

    The kernel runs in a fresh temporary folder that holds a copy of this submission and
    nothing else, so one submission cannot read or overwrite another, or find the
    solutions beside it; the folder is deleted afterwards. The report is in the notebook's
    language (``report_language``), even when the notebook cannot be graded.
    """
    path = Path(path)
    language = report_language(_raw(path))
    with speaking(language or None):
        result = _grade_notebook(path, solutions_dir=solutions_dir, against=against,
                                 timeout=timeout, restamped_dir=restamped_dir, env=env,
                                 sealed=sealed)
    result.language = language
    return result


def _grade_notebook(path: Path, *, solutions_dir, against, timeout, restamped_dir, env,
                    sealed) -> NotebookGrade:
    label = notebook_format.shown(path)
    try:
        folder = (Path(solutions_dir) if solutions_dir
                  else notebook_format.course_root(path.parent) / "solutions")
        solution_path = find_solution(path, folder, against)
        learner = notebook_format.read_notebook(path, require_ids=False)
        solution = notebook_format.read_notebook(solution_path)
    except ValueError as error:
        return NotebookGrade(notebook=label, error=str(error))
    named = learner.metadata.get("tfcourse", {}).get("notebook")
    try:
        with tempfile.TemporaryDirectory(prefix="tfcourse-grade-") as work:
            shutil.copyfile(path, Path(work) / path.name)
            result, _ = grade(learner, solution, cwd=work, timeout=timeout, env=env, label=label,
                              restamped_path=Path(restamped_dir) / path.name if restamped_dir
                              else None, sealed=sealed)
    except Exception as error:  # noqa: BLE001 - e.g. no kernel; report it, grade the rest
        return NotebookGrade(notebook=label, solution=notebook_format.shown(solution_path),
                             error=say(f"could not run the notebook: {type(error).__name__}: "
                                       f"{error}",
                                       f"无法运行这个 notebook：{type(error).__name__}: {error}"))
    result.solution = notebook_format.shown(solution_path)
    if isinstance(named, str) and named != solution_path.stem:
        result.notes.append(say(f"the notebook's metadata names {named!r}; ignored: graded "
                                f"against {solution_path.stem!r}",
                                f"notebook 的元数据指定的是 {named!r}；已忽略：按 "
                                f"{solution_path.stem!r} 评分"))
    return result


def collect(paths: list[str]) -> list[Path]:
    """Notebook files named on the command line; a folder means its ``*.ipynb``."""
    found = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found += sorted(p for p in path.glob("*.ipynb") if p.is_file())
        elif path.is_file():
            found.append(path)
        else:
            raise ValueError(say(f"no such notebook or folder: {name}",
                                 f"没有这个 notebook 或文件夹：{name}"))
    return found


def check_outputs(args: argparse.Namespace) -> list[str]:
    """Problems with the output paths, found before any grading (which can take minutes)."""
    problems = []
    for flag, value in (("--csv", args.csv), ("--gradescope", args.gradescope)):
        if value is None:
            continue
        path = Path(value)
        if path.is_dir():
            problems.append(say(f"{flag} {value}: is a folder; name a file",
                                f"{flag} {value}：这是一个文件夹；请给出文件名"))
        elif not path.parent.resolve().is_dir():
            problems.append(say(f"{flag} {value}: the folder {path.parent} does not exist",
                                f"{flag} {value}：文件夹 {path.parent} 不存在"))
        elif not os.access(path.parent.resolve(), os.W_OK) or (path.exists()
                                                               and not os.access(path, os.W_OK)):
            problems.append(say(f"{flag} {value}: cannot write there",
                                f"{flag} {value}：无法写入该位置"))
    if args.restamped is not None:
        folder = Path(args.restamped)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            problems.append(say(f"--restamped {args.restamped}: cannot create it "
                                f"({error.strerror})",
                                f"--restamped {args.restamped}：无法创建（{error.strerror}）"))
        else:
            if not os.access(folder, os.W_OK):
                problems.append(say(f"--restamped {args.restamped}: cannot write there",
                                    f"--restamped {args.restamped}：无法写入该位置"))
    return problems


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="NOTEBOOK_OR_FOLDER",
                        help="learner notebooks, or folders of them (e.g. submissions/)")
    parser.add_argument("--solutions", metavar="DIR",
                        help="folder of solution notebooks (default: the course's solutions/)")
    parser.add_argument("--against", metavar="NAME",
                        help="grade every notebook against this course notebook (e.g. 03_norms); "
                             "default: the one whose name the file name contains")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="notebooks graded at once, each in its own kernel (default: the "
                             "number of cores)")
    parser.add_argument("--in-kernel", action="store_true",
                        help="judge by the check cells in the learner's own kernel only, as a "
                             "learner's check cell does (not sealed: for debugging, not grades)")
    parser.add_argument("--timeout", type=float, default=120, metavar="SECONDS",
                        help="per-cell time limit; a cell running longer is interrupted and "
                             "reported (default: 120)")
    # One thread by default: verdicts do not depend on it (the determinism test checks),
    # and torch's OpenMP threads spin and multiply CPU time on a busy machine.
    parser.add_argument("--threads", type=int, default=1,
                        help="OMP/MKL threads in the kernel (default: 1; 0: torch's choice)")
    parser.add_argument("--json", action="store_true",
                        help="print a machine-readable report (a JSON list) instead of text")
    parser.add_argument("--csv", metavar="OUT",
                        help="also write one CSV row per notebook to OUT")
    parser.add_argument("--gradescope", metavar="OUT",
                        help="also write Gradescope's results.json to OUT")
    parser.add_argument("--restamped", metavar="DIR",
                        help="also write each restamped notebook to DIR (to run "
                             "`pytest --nbval-lax` on it)")


def run(args: argparse.Namespace) -> int:
    problems = check_outputs(args)
    if args.jobs < 1:
        problems.append(say(f"--jobs must be >= 1, got {args.jobs}",
                            f"--jobs 必须 >= 1，实际是 {args.jobs}"))
    try:
        paths = collect(args.paths)
    except ValueError as error:
        problems.append(str(error))
        paths = []
    if not paths and not problems:
        problems.append(say("no notebooks to grade", "没有要评分的 notebook"))
    if problems:
        for problem in problems:
            print(say(f"error: {problem}", f"错误：{problem}"), file=sys.stderr)
        return 2
    env = grading_env(args.threads or None)

    def grade_one(path: Path) -> NotebookGrade:
        return grade_notebook(path, solutions_dir=args.solutions, against=args.against,
                              timeout=args.timeout, restamped_dir=args.restamped, env=env,
                              sealed=not args.in_kernel)

    # Threads are enough: each notebook runs in its own kernel process, and a crash or a
    # hang there is that notebook's verdict alone. Reports come out in the input order.
    with ThreadPoolExecutor(max_workers=min(args.jobs, len(paths))) as pool:
        grades = []
        for grade in pool.map(grade_one, paths):
            grades.append(grade)
            if not args.json:
                print(format_report(grade), flush=True)
    if args.json:
        print(json.dumps([grade.to_dict() for grade in grades], indent=2, ensure_ascii=False))
    elif len(grades) > 1:
        passed = f"{sum(g.ok for g in grades)}/{len(grades)}"
        print(say(f"{passed} notebooks passed every exercise",
                  f"{passed} 个 notebook 通过了全部练习"))
    if args.csv:
        write_csv(grades, args.csv)
    if args.gradescope:
        from .gradescope import write_results

        write_results(grades, args.gradescope)
    return 0 if all(grade.ok for grade in grades) else 1
