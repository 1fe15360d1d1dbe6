"""``tfcourse grade``: grade learner notebooks against the solution notebooks.

One path for every exercise of every notebook. For each learner notebook: choose its
solution (``--against NAME``, else by file name; never from the submission's metadata, and
always from the course the grader runs from or the teacher's ``--solutions``, never from
a folder near a submission), then judge each exercise sealed
(``sealed/session.py``): the learner's cells run in a worker inside bubblewrap's sandbox,
the check runs here, and an exercise passes when the check printed what the solution's
stored output says (in a container without namespaces, where the grader is root, the
worker runs as a fresh user instead: ``sealed/users.py``). Learner code never runs anywhere
else during grading; where neither can work, grading needs the teacher's ``--unsealed``
and every report line says so. A notebook that breaks anything gets its own line
(``grade_notebook`` never raises).
The command around this (flags, the class run, the outputs) is ``command.py``. What
is guaranteed, and what is not, is in docs/grading.md.

A notebook's report is in Chinese under ``TFCOURSE_LANG=zh`` or when the notebook is one of
the Chinese edition (``metadata.tfcourse.language == "zh"``); its workers then run with
``TFCOURSE_LANG=zh`` too, so the checks' diagnoses are in Chinese. Verdicts and scores do
not depend on the language.
"""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path

from ..course import installed, notebook_format
from ..course.stubs import is_stub_message
from ..language import current, say, speaking
from .records import ExerciseResult, NotebookGrade, exercise_names, exercise_points, not_implemented
from .sealed import cgroups, users
from .sealed.sandbox import Sandbox, measures, sandbox
from .sealed.seal import met_the_seal
from .sealed.session import (
    FILE_BYTES,
    MEMORY_BYTES,
    SealedVerdict,
    Setup,
    checks_of,
    grade_exercises,
)

NAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z_.-]*")
# The largest submission read: a course notebook with its outputs is well under 10 MiB; a
# file larger than this is not parsed at all (its JSON would cost the grader memory and time).
MAX_NOTEBOOK_BYTES = 64 * 2**20


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
            raise ValueError(
                say(
                    f"--against {against!r} is not one of the course's notebooks "
                    f"({', '.join(names) or 'none found'})",
                    f"--against {against!r} 不是本课程的 notebook"
                    f"（{', '.join(names) or '一个也没有找到'}）",
                )
            )
        return solutions_dir / f"{stem}.ipynb"
    contained = sorted((name for name in names if name in path.stem), key=len)
    if path.stem in names:
        return solutions_dir / f"{path.stem}.ipynb"
    if contained:
        return solutions_dir / f"{contained[-1]}.ipynb"
    folder = notebook_format.shown(solutions_dir)
    raise ValueError(
        say(
            f"no solution notebook for {path.name} in {folder}: name the file after "
            f"one of {', '.join(names) or '(none found)'}, or pass --against NAME",
            f"{folder} 中没有与 {path.name} 对应的参考答案 notebook：请用其中一个名字"
            f"（{', '.join(names) or '一个也没有找到'}）给文件命名，或使用 "
            f"--against NAME",
        )
    )


def report_language(notebook) -> str:
    """``"zh"`` when the reader asked for Chinese (``TFCOURSE_LANG=zh``) or ``notebook`` (a
    notebook, or its raw JSON) is one of the Chinese edition, else ``""``: as the reader
    asked."""
    chinese = notebook_format.language_of(notebook) == "zh"
    return "zh" if chinese or current() == "zh" else ""


def grade(
    learner,
    solution,
    setup: Setup,
    *,
    label: str = "notebook",
    identity: str | None = None,
    language: str | None = None,
) -> NotebookGrade:
    """Judge an in-memory learner notebook against ``solution``, every exercise sealed
    (``sealed/session.py``), on the cases of ``identity`` (default: ``label``). The notes,
    and the checks' diagnoses, are in the notebook's language (``language``, by default
    ``report_language``)."""
    language = report_language(learner) if language is None else language
    if language == "zh":
        setup = dataclasses.replace(setup, env=dict(setup.env, TFCOURSE_LANG="zh"))
    with speaking(language or None):
        started = time.monotonic()
        result = NotebookGrade(notebook=label)
        names = exercise_names(solution)
        verdicts = grade_exercises(learner, solution, names, setup, identity or label)
        result.exercises = [
            _result(name, verdicts[name], solution, sealed=not setup.unsealed) for name in names
        ]
        result.isolation = isolation(setup)
        if not result.exercises:
            result.error = say(
                "the solution notebook has no exercises", "参考答案 notebook 中没有练习"
            )
        result.seconds = time.monotonic() - started
    result.language = language
    return result


def isolation(setup: Setup) -> list[str]:
    """The measures every worker of this run was under, in words."""

    limits = say(
        f"CPU time per cell {setup.timeout:g} s, memory {MEMORY_BYTES >> 30} GiB, "
        f"files {FILE_BYTES >> 20} MiB each, 256 open files, no core dumps",
        f"每个单元格 CPU 时间 {setup.timeout:g} 秒、内存 {MEMORY_BYTES >> 30} GiB、"
        f"单个文件 {FILE_BYTES >> 20} MiB、最多打开 256 个文件、不生成核心转储",
    )
    if setup.sandbox == "users":
        return [*users.measures(limits), cgroups.said()]
    found = (
        Sandbox(None, ("the teacher asked for it", "教师要求这样做"))
        if setup.unsealed
        else sandbox()
    )
    return measures(found, limits) + ([] if found.bwrap is None else [cgroups.said()])


def _result(name: str, verdict: SealedVerdict, solution, *, sealed: bool) -> ExerciseResult:
    """The report's entry for one exercise from its verdict."""
    result = ExerciseResult(
        name=name,
        passed=verdict.status == "passed",
        points=exercise_points(solution, name),
        sealed=sealed,
        notes=list(verdict.notes),
        calls=list(verdict.calls),
    )
    if result.passed:
        return result
    result.reason = "shortcut" if verdict.status == "shortcut" else verdict.reason
    if result.reason == "error" and met_the_seal(verdict.output):
        result.reason = "reference"
    try:
        result.expected = checks_of(solution, name)[1].rstrip("\n")
    except (ValueError, SyntaxError):
        result.expected = ""
    result.got = verdict.output
    if is_stub_message(result.got):
        result.got += not_implemented()
    return result


def edition(solution: Path, language: str) -> Path:
    """The solution of the report's language: ``solutions/zh/NAME.ipynb`` for a Chinese
    report where the course has one (its check cells print the verdicts in Chinese, as the
    checks then do), else ``solution``."""
    translated = solution.parent / language / solution.name
    return translated if language and language != "en" and translated.is_file() else solution


def installed_solutions() -> Path | None:
    """The solution notebooks of the course this grader runs from (inside the package, or
    the checkout of an editable install: ``installed``), or None. Never a folder found near
    a submission."""
    return installed.solutions()


def why_not_read(path: Path) -> str:
    """Why ``path`` is not even read ("" when it may be): a symlink could point at the
    answer key, or at a pipe that blocks whoever reads it; a file over
    ``MAX_NOTEBOOK_BYTES`` is not parsed."""
    if path.is_symlink():
        return say(
            "the submission is a symbolic link; submit the notebook file itself",
            "提交的是一个符号链接；请提交 notebook 文件本身",
        )
    try:
        size = path.stat().st_size
    except OSError:
        return ""  # reading it says what is wrong
    if size > MAX_NOTEBOOK_BYTES:
        return say(
            f"the submission has {size:,} bytes, more than the {MAX_NOTEBOOK_BYTES >> 20} MiB "
            f"a notebook may have; clear its outputs (Edit > Clear Outputs of All Cells) and "
            f"submit it again",
            f"提交的文件有 {size:,} 字节，超过了 notebook 的上限 {MAX_NOTEBOOK_BYTES >> 20} MiB；"
            f"请清除所有输出（编辑 > 清除所有单元格的输出）后重新提交",
        )
    return ""


def inside_solutions(path: Path, solutions: Path) -> str:
    """Why ``path`` is not graded ("" when it is): it lies inside the solutions folder."""
    if path.resolve().is_relative_to(solutions.resolve()):
        return say(
            "the submission lies inside the solutions folder", "提交的文件位于参考答案文件夹中"
        )
    return ""


def grade_notebook(
    path: str | Path,
    setup: Setup,
    *,
    solutions_dir: str | Path | None = None,
    against: str | None = None,
    identity: str | None = None,
) -> NotebookGrade:
    """Grade one learner notebook file. Never raises: whatever goes wrong with this
    notebook (a malformed file, a grader error) goes to ``NotebookGrade.error``, so a class
    run carries on. ``identity``: the learner's identity for the grading cases (default:
    the file name). The file is read once; the report is in the notebook's language
    (``report_language``), even when it cannot be graded."""
    path = Path(path)
    label = notebook_format.shown(path)
    learner, unreadable = None, why_not_read(path)
    if not unreadable:
        try:
            learner = notebook_format.read_notebook(path, require_ids=False)
        except ValueError as error:
            unreadable = str(error)
    language = report_language(learner or {})
    with speaking(language or None):
        try:
            result = (
                NotebookGrade(notebook=label, error=unreadable)
                if learner is None
                else _grade_notebook(
                    path,
                    learner,
                    setup,
                    solutions_dir=solutions_dir,
                    against=against,
                    identity=identity,
                    label=label,
                    language=language,
                )
            )
        except Exception as error:  # noqa: BLE001 - one notebook's line; the class goes on
            result = NotebookGrade(
                notebook=label,
                error=say(
                    f"the grader failed on this notebook ({type(error).__name__}: {error}); the "
                    f"other notebooks are graded",
                    f"评分器处理这个 notebook 时出错"
                    f"（{type(error).__name__}: {error}）；其他 notebook 照常评分",
                ),
            )
    result.language = language
    return result


def _grade_notebook(
    path: Path, learner, setup: Setup, *, solutions_dir, against, identity, label, language
) -> NotebookGrade:
    """Choose the solution (no fitting one: the notebook's one line), then ``grade``."""
    folder = Path(solutions_dir) if solutions_dir else installed_solutions()
    try:
        if folder is None:
            raise ValueError(
                say(
                    "no solutions are installed with this tfcourse: pass --solutions DIR",
                    "这个 tfcourse 没有附带参考答案：请使用 --solutions DIR",
                )
            )
        if why := inside_solutions(path, folder):
            raise ValueError(why)
        solution_path = edition(find_solution(path, folder, against), language)
        solution = notebook_format.read_notebook(solution_path)
    except ValueError as error:
        return NotebookGrade(notebook=label, error=str(error))
    result = grade(
        learner, solution, setup, label=label, identity=identity or path.name, language=language
    )
    result.solution = notebook_format.shown(solution_path)
    meta = learner.metadata.get("tfcourse")
    named = meta.get("notebook") if isinstance(meta, dict) else None
    if isinstance(named, str) and named != solution_path.stem:
        result.notes.append(
            say(
                f"the notebook's metadata names {named!r}; ignored: graded "
                f"against {solution_path.stem!r}",
                f"notebook 的元数据指定的是 {named!r}；已忽略：按 {solution_path.stem!r} 评分",
            )
        )
    return result
