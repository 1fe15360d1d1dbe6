"""``tfcourse grade``: grade learner notebooks against the solution notebooks.

One path for every exercise of every notebook. For each learner notebook: choose its
solution (``--against NAME``, else by file name; never from the submission's metadata, and
always from the course the grader runs from or the teacher's ``--solutions``, never from
a folder near a submission), restamp the check cells from it (so a moved or edited check
does not move what is judged; see ``restamp``), then judge each exercise sealed
(``sealed/session.py``): the learner's cells run in a worker inside bubblewrap's sandbox,
the check runs here, and an exercise passes when the check printed what the solution's
stored output says. Learner code never runs anywhere else during grading; where the
sandbox cannot work, grading needs the teacher's ``--unsealed`` and every report line says
so. ``--jobs N`` grades N notebooks at once; a notebook that breaks anything gets its own
line and the run goes on; the CSV and JSON are always written.

Exit status: 0 only if every exercise of every notebook passes; 1 otherwise; 2 for bad
arguments (no notebooks found, a bad number, an output path that cannot be written, no
sandbox without ``--unsealed``: all checked before any grading). What is guaranteed, and
what is not, is in docs/grading.md.

A notebook's report is in Chinese under ``TFCOURSE_LANG=zh`` or when the notebook is one of
the Chinese edition (``metadata.tfcourse.language == "zh"``); its workers then run with
``TFCOURSE_LANG=zh`` too, so the checks' diagnoses are in Chinese. Verdicts and scores do
not depend on the language.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..language import current, say, speaking
from . import notebook_format
from .build import STUB_SIGNATURE
from .judge import ExerciseResult, NotebookGrade, exercise_names, exercise_points, not_implemented
from .report import format_report, json_report, probe_output, write_outputs
from .restamp import restamp
from .run import grading_env
from .scan import Finding, scan
from .sealed.sandbox import Sandbox, measures, sandbox
from .sealed.session import (
    FILE_BYTES,
    MEMORY_BYTES,
    SealedVerdict,
    Setup,
    checks_of,
    grade_exercises,
)

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


def grade(learner, solution, setup: Setup, *, label: str = "notebook",
          restamped_path: str | Path | None = None,
          identity: str | None = None) -> tuple[NotebookGrade, object]:
    """Restamp and judge an in-memory learner notebook against ``solution``, every exercise
    sealed (``sealed/session.py``), on the cases of ``identity`` (default: ``label``).
    Returns ``(NotebookGrade, restamped notebook)``; ``restamped_path`` (optional)
    receives the restamped notebook before anything runs.
    The notes, and the checks' diagnoses, are in the notebook's language
    (``report_language``)."""
    language = report_language(learner)
    if language == "zh":
        setup = dataclasses.replace(setup, env=dict(setup.env, TFCOURSE_LANG="zh"))
    with speaking(language or None):
        started = time.monotonic()
        result = NotebookGrade(notebook=label)
        notebook, repairs = restamp(learner, solution)
        result.restamped = [repair.describe() for repair in repairs]
        if restamped_path:
            notebook_format.write_notebook(notebook, restamped_path)
        names = exercise_names(solution)
        verdicts = grade_exercises(notebook, solution, names, setup, identity or label)
        result.exercises = [_result(name, verdicts[name], solution, sealed=not setup.unsealed)
                            for name in names]
        result.isolation = isolation(setup)
        refuse(result.exercises, scan(solution, notebook))
        if not result.exercises:
            result.error = say("the solution notebook has no exercises",
                               "参考答案 notebook 中没有练习")
        result.seconds = time.monotonic() - started
    result.language = language
    return result, notebook


def isolation(setup: Setup) -> list[str]:
    """The measures every worker of this run was under, in words."""

    limits = say(f"CPU time per cell {setup.timeout:g} s, memory {MEMORY_BYTES >> 30} GiB, "
                 f"files {FILE_BYTES >> 20} MiB each, 256 open files, no core dumps",
                 f"每个单元格 CPU 时间 {setup.timeout:g} 秒、内存 {MEMORY_BYTES >> 30} GiB、"
                 f"单个文件 {FILE_BYTES >> 20} MiB、最多打开 256 个文件、不生成核心转储")
    found = Sandbox(None, say("the teacher asked for it", "教师要求这样做")) if setup.unsealed \
        else sandbox()
    return measures(found, limits)


def _result(name: str, verdict: SealedVerdict, solution, *, sealed: bool) -> ExerciseResult:
    """The report's entry for one exercise from its verdict."""
    result = ExerciseResult(name=name, passed=verdict.status == "passed",
                            check_cells=[], points=exercise_points(solution, name),
                            sealed=sealed, notes=list(verdict.notes))
    if result.passed:
        return result
    result.reason = "builtin" if verdict.status == "builtin" else verdict.reason
    try:
        result.expected = checks_of(solution, name)[1].rstrip("\n")
    except (ValueError, SyntaxError):
        result.expected = ""
    result.got = verdict.output
    if STUB_SIGNATURE in result.got:
        result.got += not_implemented()
    return result


def refuse(exercises: list[ExerciseResult], findings: list[Finding]) -> None:
    """No points where the static scan found the reference or a built-in that does the
    whole exercise, whatever the checks said."""
    for result in exercises:
        mine = [f for f in findings if f.exercise == result.name]
        if mine:
            result.passed, result.reason = False, mine[0].kind
            result.got = "\n".join(finding.describe() for finding in mine)
            result.expected = result.expected or say("your own implementation, judged by its "
                                                     "check", "你自己的实现，由检查来评判")


def installed_solutions() -> Path | None:
    """The solution notebooks of the course this grader runs from (the checkout of an
    editable install), or None. Never a folder found near a submission."""
    folder = Path(__file__).resolve().parents[2] / "solutions"
    return folder if folder.is_dir() else None


def refused(path: Path, solutions: Path) -> str:
    """Why ``path`` is not graded ("" when it is): a symlink (it could point at the answer
    key), or a file inside the solutions folder."""
    if path.is_symlink():
        return say("the submission is a symbolic link; submit the notebook file itself",
                   "提交的是一个符号链接；请提交 notebook 文件本身")
    if path.resolve().is_relative_to(solutions.resolve()):
        return say("the submission lies inside the solutions folder",
                   "提交的文件位于参考答案文件夹中")
    return ""


def grade_notebook(path: str | Path, setup: Setup, *, solutions_dir: str | Path | None = None,
                   against: str | None = None, restamped: str | Path | None = None,
                   identity: str | None = None) -> NotebookGrade:
    """Grade one learner notebook file. Never raises: whatever goes wrong with this
    notebook (a malformed file, a grader error) goes to ``NotebookGrade.error``, so a class
    run carries on. ``restamped``: where to write the restamped notebook. ``identity``:
    the learner's identity for the grading cases (default: the file name). The report is
    in the notebook's language (``report_language``), even when it cannot be graded."""
    path = Path(path)
    label = notebook_format.shown(path)
    language = report_language(_raw(path))
    with speaking(language or None):
        try:
            result = _grade_notebook(path, setup, solutions_dir=solutions_dir, against=against,
                                     restamped=restamped, identity=identity, label=label)
        except Exception as error:  # noqa: BLE001 - one notebook's line; the class goes on
            result = NotebookGrade(notebook=label, error=say(
                f"the grader failed on this notebook ({type(error).__name__}: {error}); the "
                f"other notebooks are graded", f"评分器处理这个 notebook 时出错"
                f"（{type(error).__name__}: {error}）；其他 notebook 照常评分"))
    result.language = language
    return result


def _grade_notebook(path: Path, setup: Setup, *, solutions_dir, against, restamped, identity,
                    label) -> NotebookGrade:
    folder = Path(solutions_dir) if solutions_dir else installed_solutions()
    try:
        if folder is None:
            raise ValueError(say("no solutions are installed with this tfcourse: pass "
                                 "--solutions DIR", "这个 tfcourse 没有附带参考答案：请使用 "
                                 "--solutions DIR"))
        if why := refused(path, folder):
            raise ValueError(why)
        solution_path = find_solution(path, folder, against)
        learner = notebook_format.read_notebook(path, require_ids=False)
        solution = notebook_format.read_notebook(solution_path)
    except ValueError as error:
        return NotebookGrade(notebook=label, error=str(error))
    result, _ = grade(learner, solution, setup, label=label, restamped_path=restamped,
                      identity=identity or path.name)
    result.solution = notebook_format.shown(solution_path)
    meta = learner.metadata.get("tfcourse")
    named = meta.get("notebook") if isinstance(meta, dict) else None
    if isinstance(named, str) and named != solution_path.stem:
        result.notes.append(say(f"the notebook's metadata names {named!r}; ignored: graded "
                                f"against {solution_path.stem!r}",
                                f"notebook 的元数据指定的是 {named!r}；已忽略：按 "
                                f"{solution_path.stem!r} 评分"))
    return result


def collect(paths: list[str]) -> list[tuple[Path, Path]]:
    """``(notebook file, its name under --restamped)`` for each notebook named on the
    command line; a folder means its ``*.ipynb``. The name is the file's path relative to
    the current folder (``outside/`` and its absolute path when it lies elsewhere), so two
    folders' same-named files stay apart; a name that still repeats gets ``-2``, ``-3``."""
    found = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found += sorted(p for p in path.glob("*.ipynb") if p.is_file() or p.is_symlink())
        elif path.is_file() or path.is_symlink():
            found.append(path)
        else:
            raise ValueError(say(f"no such notebook or folder: {name}",
                                 f"没有这个 notebook 或文件夹：{name}"))
    named, taken = [], set()
    for path in found:
        full = path.parent.resolve() / path.name
        try:
            relative = full.relative_to(Path.cwd().resolve())
        except ValueError:
            relative = Path("outside", *full.parts[1:])
        unique, count = relative, 1
        while unique in taken:
            count += 1
            unique = relative.with_name(f"{relative.stem}-{count}{relative.suffix}")
        taken.add(unique)
        named.append((path, unique))
    return named


def number(flag: str, value, *, low: float, high: float, integer: bool = False) -> str:
    """A problem with a numeric flag ("" when ``low <= value <= high``, finite, and an
    integer where asked)."""
    ok = (isinstance(value, (int, float)) and math.isfinite(value) and low <= value <= high
          and (not integer or float(value).is_integer()))
    if ok:
        return ""
    kind = say("an integer", "整数") if integer else say("a number", "数")
    return say(f"{flag} must be {kind} from {low:g} to {high:g}, got {value!r}",
               f"{flag} 必须是 {low:g} 到 {high:g} 之间的{kind}，实际是 {value!r}")


def check_arguments(args: argparse.Namespace) -> list[str]:
    """Every problem found before any grading (which can take minutes): numbers, output
    files (created now, so a full disk or a typo shows at once), the sandbox."""
    problems = [p for p in (
        number("--timeout", args.timeout, low=1, high=24 * 3600),
        number("--threads", args.threads, low=0, high=256, integer=True),
        number("--jobs", args.jobs, low=1, high=256, integer=True)) if p]
    for flag, value in (("--csv", args.csv), ("--gradescope", args.gradescope)):
        if value is not None and (problem := probe_output(value)):
            problems.append(f"{flag} {value}: {problem}")
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
    if args.solutions is not None and not Path(args.solutions).is_dir():
        problems.append(say(f"--solutions {args.solutions}: not a folder",
                            f"--solutions {args.solutions}：不是文件夹"))
    if not args.unsealed and (found := sandbox()).bwrap is None:
        problems.append(say(
            f"cannot seal the learners' code here: {found.reason}. Install bubblewrap "
            "(Debian/Ubuntu: apt-get install bubblewrap) and grade as a user allowed to "
            "create namespaces, or pass --unsealed to grade without the sandbox (every "
            "report line then says the grade is unsealed)",
            f"无法在这里隔离学员的代码：{found.reason}。请安装 bubblewrap（Debian/Ubuntu："
            "apt-get install bubblewrap）并以可以创建命名空间的用户评分，或者使用 --unsealed "
            "在没有沙箱的情况下评分（报告的每一行都会注明成绩未经隔离）"))
    return problems


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="NOTEBOOK_OR_FOLDER",
                        help="learner notebooks, or folders of them (e.g. submissions/)")
    parser.add_argument("--solutions", metavar="DIR",
                        help="folder of solution notebooks (default: the course's own)")
    parser.add_argument("--against", metavar="NAME",
                        help="grade every notebook against this course notebook (e.g. 03_norms); "
                             "default: the one whose name the file name contains")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="notebooks graded at once (default: the number of cores)")
    parser.add_argument("--timeout", type=float, default=120, metavar="SECONDS",
                        help="per-cell and per-check-call time limit (default: 120)")
    # One thread by default: verdicts do not depend on it (the determinism test checks),
    # and torch's OpenMP threads spin and multiply CPU time on a busy machine.
    parser.add_argument("--threads", type=int, default=1,
                        help="OMP/MKL threads for learner code (default: 1; 0: torch's choice)")
    parser.add_argument("--unsealed", action="store_true",
                        help="grade without the sandbox where it cannot work (no bubblewrap, "
                             "macOS): learner code can then read and write what you can; "
                             "every report line says so")
    parser.add_argument("--secret", metavar="FILE",
                        help="the grading secret that draws each learner's cases (default: "
                             "created on first use in your config folder)")
    parser.add_argument("--identity", metavar="ID",
                        help="the learner's identity that draws their cases, e.g. a Gradescope "
                             "submission id (default: each notebook's file name; one notebook "
                             "only)")
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
    problems = check_arguments(args)
    try:
        paths = collect(args.paths)
    except ValueError as error:
        problems.append(str(error))
        paths = []
    if not paths and not problems:
        problems.append(say("no notebooks to grade", "没有要评分的 notebook"))
    if args.restamped is not None:
        clashes = [path for path, name in paths
                   if (Path(args.restamped) / name).resolve() == path.resolve()]
        if clashes:
            problems.append(say(f"--restamped {args.restamped} would overwrite the notebook "
                                f"{clashes[0]} itself: choose another folder",
                                f"--restamped {args.restamped} 会覆盖 notebook {clashes[0]} "
                                f"本身：请换一个文件夹"))
    if args.identity is not None and len(paths) > 1:
        problems.append(say(f"--identity names one learner, but {len(paths)} notebooks were "
                            f"given",
                            f"--identity 只能对应一位学员，但给出了 {len(paths)} 个 notebook"))
    salt = None
    try:
        salt = learner_salt(args.secret)
    except (ValueError, OSError) as error:
        problems.append(say(f"the grading secret: {error}", f"评分密钥：{error}"))
    if problems:
        for problem in problems:
            print(say(f"error: {problem}", f"错误：{problem}"), file=sys.stderr)
        return 2
    setup = Setup(env=grading_env(int(args.threads) or None), timeout=args.timeout,
                  unsealed=args.unsealed, salt=salt,
                  hide=hidden_paths(args))

    def grade_one(item: tuple[Path, Path]) -> NotebookGrade:
        path, name = item
        out = Path(args.restamped) / name if args.restamped else None
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
        return grade_notebook(path, setup, solutions_dir=args.solutions, against=args.against,
                              restamped=out, identity=args.identity)

    # Threads are enough: each exercise runs in its own worker process, and a crash or a
    # hang there is that exercise's verdict alone. Reports come out in the input order.
    with ThreadPoolExecutor(max_workers=min(int(args.jobs), len(paths))) as pool:
        grades = []
        for grade in pool.map(grade_one, paths):
            grades.append(grade)
            if not args.json:
                print(format_report(grade), flush=True)
    if args.json:
        print(json_report(grades))
    elif len(grades) > 1:
        passed = f"{sum(g.ok for g in grades)}/{len(grades)}"
        print(say(f"{passed} notebooks passed every exercise",
                  f"{passed} 个 notebook 通过了全部练习"))
    errors = write_outputs(grades, csv=args.csv, gradescope=args.gradescope)
    for error in errors:
        print(say(f"error: {error}", f"错误：{error}"), file=sys.stderr)
    return 2 if errors else 0 if all(grade.ok for grade in grades) else 1


def hidden_paths(args: argparse.Namespace) -> tuple[Path, ...]:
    """The teacher's own paths: covered in a worker wherever a mount it needs would show
    them (the sandbox shows only system and Python folders to begin with)."""
    named = [*args.paths, args.solutions, args.csv, args.gradescope, args.restamped,
             args.secret]
    return tuple(Path(p).resolve() for p in named if p is not None and Path(p).exists())


def learner_salt(secret_file: str | None):
    """``salt(identity, exercise)`` from the grader's secret (created on first use)."""
    from .secret import case_salt, load_secret

    secret = load_secret(Path(secret_file) if secret_file else None)
    return lambda identity, exercise: case_salt(secret, identity, exercise)
