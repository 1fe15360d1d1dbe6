"""``tfcourse progress [DIR]`` and ``tc.progress()``: every exercise of the course, for one learner.

A learner's folder holds their copies of the notebooks (``tfcourse lab`` made them). For each
notebook of the course this finds the learner's copy by name and runs every exercise's check
on the learner's code as ``tfcourse grade --unsealed`` does (the same cells, the check cell put
back as the course wrote it, each exercise in its own process), with the checks' public cases:
it is the learner's own code on their own machine, so there is nothing to seal. One table
comes out, in the reader's language: each exercise passed, failing (with the mistake the
check named), not started (still the stub), or without a notebook.

Nothing is written: the learner's notebooks are read, never changed.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..course import notebook_format
from ..course.screen import one_line
from ..language import pad, say, text_width
from .records import NotebookGrade

STATUSES = ("passed", "failing", "not started", "no notebook", "error")


@dataclass(frozen=True)
class Row:
    """One exercise of the course in the learner's folder."""

    notebook: str  # the course notebook's name, e.g. "03_norms"
    exercise: str
    status: str  # one of STATUSES
    detail: str = ""  # for "failing" and "error": the check's first line (the named mistake)


def _exercises(solution_path: Path) -> list[str]:
    solution = notebook_format.read_notebook(solution_path)
    names = [
        notebook_format.exercise_name(c) for c in solution.cells if notebook_format.is_exercise(c)
    ]
    return [name for name in names if name]


def _rows(name: str, exercises: list[str], graded: NotebookGrade | None) -> list[Row]:
    if graded is None:
        return [Row(name, exercise, "no notebook") for exercise in exercises]
    if graded.error:
        return [Row(name, exercise, "error", graded.error) for exercise in exercises]
    rows = []
    for result in graded.exercises:
        first = one_line(result.got or "")
        if result.passed:
            rows.append(Row(name, result.name, "passed"))
        elif "NotImplementedError" in first:
            rows.append(Row(name, result.name, "not started"))
        else:
            rows.append(Row(name, result.name, "failing", first))
    return rows


def learner_folder_and_solutions(folder: Path, solutions_dir: str | Path | None) -> Path:
    """The course's solutions (``solutions_dir``, else those installed) for reading the
    learner's ``folder``; ``ValueError`` if either is missing."""
    from . import notebook  # torch: not needed for `tfcourse progress --help`

    solutions = Path(solutions_dir) if solutions_dir else notebook.installed_solutions()
    if solutions is None or not folder.is_dir():
        raise ValueError(
            say(
                f"{folder} is not a folder, or no solutions are installed with this tfcourse",
                f"{folder} 不是文件夹，或者这个 tfcourse 没有附带参考答案",
            )
        )
    return solutions


def progress(
    folder: str | Path = ".",
    *,
    solutions_dir: str | Path | None = None,
    jobs: int = 2,
    timeout: float = 120,
) -> list[Row]:
    """Every exercise of the course, in course order, as it stands in ``folder``."""
    from . import notebook
    from .sealed.session import Setup, grading_env

    folder = Path(folder)
    solutions = learner_folder_and_solutions(folder, solutions_dir)
    course = sorted(solutions.glob("[0-9][0-9]_*.ipynb"))
    setup = Setup(env=grading_env(1), timeout=timeout, sandbox="none")

    def one(solution_path: Path) -> list[Row]:
        exercises = _exercises(solution_path)
        mine = folder / solution_path.name
        if not exercises:
            return []
        if not mine.exists():
            return _rows(solution_path.stem, exercises, None)
        graded = notebook.grade_notebook(mine, setup, solutions_dir=solutions)
        return _rows(solution_path.stem, exercises, graded)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return [row for rows in pool.map(one, course) for row in rows]


def _status(row: Row) -> str:
    words = {
        "passed": say("passed", "通过"),
        "failing": say("failing", "未通过"),
        "not started": say("not started", "尚未开始"),
        "no notebook": say("no notebook", "没有 notebook"),
        "error": say("cannot be checked", "无法检查"),
    }[row.status]
    return f"{words}: {row.detail}" if row.detail else words


def _clip(text: str, width: int) -> str:
    """``text``, cut to ``width`` columns with "…" when longer (a Chinese character takes two)."""
    if text_width(text) <= width:
        return text
    kept, used = "", 0
    for character in text:
        used += text_width(character)
        if used > width - 1:
            break
        kept += character
    return kept + "…"


def table(rows: list[Row], *, width: int = 160) -> str:
    """The rows as an aligned table (each notebook named once), then a count of each status."""
    header = (say("notebook", "notebook"), say("exercise", "练习"), say("status", "状态"))
    lines = [header]
    shown = None
    for row in rows:
        lines.append((row.notebook if row.notebook != shown else "", row.exercise, _status(row)))
        shown = row.notebook
    widths = [max(text_width(line[i]) for line in lines) for i in range(2)]
    out = []
    for line in lines:
        text = "  ".join([pad(line[0], widths[0]), pad(line[1], widths[1]), line[2]])
        out.append(_clip(text, width))
    counts = Counter(row.status for row in rows)
    out.append(
        say(
            f"{counts['passed']} of {len(rows)} exercises passed; {counts['failing']} failing; "
            f"{counts['not started']} not started; {counts['no notebook']} without a notebook",
            f"{len(rows)} 道练习中通过 {counts['passed']} 道；未通过 {counts['failing']} 道；"
            f"尚未开始 {counts['not started']} 道；缺少 notebook 的 {counts['no notebook']} 道",
        )
    )
    return "\n".join(out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "folder",
        nargs="?",
        default=".",
        help=say(
            "the folder with your notebooks (default: the current one)",
            "存放你的 notebook 的文件夹（默认：当前文件夹）",
        ),
    )
    parser.add_argument(
        "--solutions",
        default=None,
        metavar="DIR",
        help=say(
            "the course's solution notebooks (default: those installed with tfcourse)",
            "课程的参考答案 notebook（默认：随 tfcourse 安装的那一份）",
        ),
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=2,
        help=say("notebooks checked at once", "同时检查的 notebook 数"),
    )


def run(args: argparse.Namespace) -> int:
    try:
        rows = progress(args.folder, solutions_dir=args.solutions, jobs=args.jobs)
    except ValueError as error:
        print(say(f"error: {error}", f"错误：{error}"), file=sys.stderr)
        return 2
    print(table(rows))
    return 0
