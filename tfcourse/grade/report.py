"""Grade reports for people and spreadsheets: plain words ("expected ... / got ..."), CSV, JSON.

Every text a submission controls (what it printed or raised, notes about it, its file name)
goes through ``clean_grade`` first (see untrusted.py), and each continuation line of a
multi-line text is indented under its first line: a learner's output cannot draw a line
that reads like the report's own. Output files are written whole or not at all, and can be
probed before the grading that fills them.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

from ..files import replaced_atomically
from ..language import say, speaking, text_width
from .records import ExerciseResult, NotebookGrade
from .untrusted import clean_dict, csv_text, plain

# File names and exercise names stay on one line, and short.
LABEL_LIMIT = 300


def clean_grade(grade: NotebookGrade) -> NotebookGrade:
    """A copy of ``grade`` with every text passed through ``untrusted.plain``; names and
    labels (notebook, solution, exercise, check cells, reason) kept on one line."""
    if not isinstance(grade, NotebookGrade):
        raise TypeError(
            say(
                f"expected a NotebookGrade, got {type(grade).__name__}",
                f"需要 NotebookGrade，实际是 {type(grade).__name__}",
            )
        )

    def label(text: str) -> str:
        return plain(text, LABEL_LIMIT, one_line=True)

    exercises = [
        dataclasses.replace(
            result,
            name=label(result.name),
            expected=plain(result.expected),
            got=plain(result.got),
            notes=[plain(note) for note in result.notes],
            calls=[label(name) for name in result.calls],
        )
        for result in grade.exercises
    ]
    return dataclasses.replace(
        grade,
        notebook=label(grade.notebook),
        solution=label(grade.solution),
        exercises=exercises,
        isolation=[plain(text) for text in grade.isolation],
        notes=[plain(text) for text in grade.notes],
        error=plain(grade.error),
    )


def verdict(result: ExerciseResult, with_reason: bool = False) -> str:
    """An exercise's verdict in every report's words: PASS, or FAIL (with its reason when
    asked), and UNSEALED where it was graded outside the sandbox."""
    unsealed = "" if result.sealed else say(" (UNSEALED)", "（未隔离）")
    if result.passed:
        return say("PASS", "通过") + unsealed
    why = (
        say(f" ({result.reason})", f"（{result.reason}）") if with_reason and result.reason else ""
    )
    return say("FAIL", "未通过") + why + unsealed


def _quoted(text: str, indent: str) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return repr(text) if text and not text.startswith(("(", "（")) else text
    return ("\n" + indent).join(lines)


def failure_lines(result: ExerciseResult, lead: str = "") -> list[str]:
    """What a failed exercise shows under its verdict, in every report: expected, got, and
    its notes, each line starting with ``lead``; a continuation line of a multi-line text
    starts under its first line's text, so a learner's output cannot make a line of its own
    that starts like "expected:" or "note:"."""
    lines = []
    for label, text, quote in (
        (say("expected: ", "预期："), result.expected, True),
        (say("got:      ", "实际："), result.got, True),
        *((say("note: ", "说明："), note, False) for note in result.notes),
    ):
        pad = " " * (text_width(lead) + text_width(label))
        lines.append(lead + label + (_quoted(text, pad) if quote else indented(text, pad)))
    return lines


def indented(text: str, indent: str) -> str:
    """``text`` with each line after the first starting with ``indent``: under the first line's
    text, never at a column where a report line of its own starts."""
    return ("\n" + indent).join(text.split("\n"))


def format_report(grade: NotebookGrade) -> str:
    """The plain-words report for one notebook, in its language (``grade.language``)."""
    grade = clean_grade(grade)
    with speaking(grade.language or None):
        return _format_report(grade)


def _format_report(grade: NotebookGrade) -> str:
    if grade.error:
        error = indented(grade.error, "    ")
        return say(
            f"{grade.notebook}: NOT GRADED — {error}", f"{grade.notebook}：未能评分——{error}"
        )
    seconds = f"{grade.seconds:.1f}"
    lines = [
        say(
            f"{grade.notebook} ("
            + (f"against {grade.solution}, " if grade.solution else "")
            + f"{seconds} s)",
            f"{grade.notebook}（"
            + (f"对照 {grade.solution}，" if grade.solution else "")
            + f"{seconds} 秒）",
        )
    ]
    note = say("note: ", "说明：")
    grade_note_pad = " " * (2 + text_width(note))
    for result in grade.exercises:
        lines.append(f"  {result.name}{say(': ', '：')}{verdict(result)}")
        if not result.passed:
            lines += failure_lines(result, "      ")
        if result.calls:
            lines.append(say("      called: ", "      调用了：") + ", ".join(result.calls))
    for text in grade.notes:
        lines.append(f"  {note}{indented(text, grade_note_pad)}")
    if grade.isolation:
        lines.append(
            say(
                f"  sealed: {'; '.join(grade.isolation)}",
                f"  隔离措施：{'；'.join(grade.isolation)}",
            )
        )
    lines.append(
        say(
            f"  score: {grade.passed}/{grade.total} exercises passed",
            f"  成绩：通过 {grade.passed}/{grade.total} 个练习",
        )
    )
    if any(result.points != 1 for result in grade.exercises):
        score = sum(result.score for result in grade.exercises)
        earned = f"{score:g}/{sum(result.points for result in grade.exercises):g}"
        lines.append(say(f"  points: {earned}", f"  得分：{earned}"))
    return "\n".join(lines)


def json_report(grades: list[NotebookGrade]) -> str:
    """The machine-readable report (``tfcourse grade --json``): a JSON list, one object per
    notebook (``NotebookGrade.to_dict``), its texts cleaned as in the text report."""
    grades = _checked(grades)
    return json.dumps(
        [clean_dict(clean_grade(grade).to_dict()) for grade in grades], indent=2, ensure_ascii=False
    )


def _checked(grades) -> list[NotebookGrade]:
    if not isinstance(grades, (list, tuple)) or not all(
        isinstance(g, NotebookGrade) for g in grades
    ):
        raise TypeError(
            say("grades must be a list of NotebookGrade", "grades 必须是 NotebookGrade 的列表")
        )
    return list(grades)


def csv_text_of(grades: list[NotebookGrade]) -> str:
    """The CSV ``write_csv`` writes, as text."""
    grades = [clean_grade(grade) for grade in _checked(grades)]
    exercises: list[str] = []
    for grade in grades:
        for result in grade.exercises:
            if result.name not in exercises:
                exercises.append(result.name)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(
        [
            csv_text(name)
            for name in [
                "notebook",
                "solution",
                *exercises,
                "passed",
                "total",
                "seconds",
                "sealed",
                "error",
            ]
        ]
    )
    for grade in grades:
        # Only text cells are guarded against formulas: marks, counts and seconds are numbers
        # we wrote, and must stay numbers (a negative one would be shown as text otherwise).
        marks = {result.name: int(result.passed) for result in grade.exercises}
        writer.writerow(
            [
                csv_text(grade.notebook),
                csv_text(grade.solution),
                *(marks.get(name, "") for name in exercises),
                grade.passed,
                grade.total,
                f"{grade.seconds:.1f}",
                "no" if unsealed(grade) else "yes",
                csv_text(grade.error),
            ]
        )
    return out.getvalue()


def unsealed(grade: NotebookGrade) -> bool:
    """True when any exercise of ``grade`` was judged outside the sandbox (--unsealed)."""
    return any(not result.sealed for result in grade.exercises)


def write_csv(grades: list[NotebookGrade], out: str | Path) -> None:
    """One row per notebook, one column per exercise (1 pass, 0 fail, empty if the
    notebook's solution has no such exercise), then passed, total, seconds, sealed (yes,
    or no under --unsealed), error.

    Written whole or not at all (``write_atomically``); raises ``OSError`` saying which file
    could not be written and why.
    """
    text = csv_text_of(grades)
    try:
        write_atomically(out, text)
    except OSError as error:
        raise OSError(
            say(
                f"could not write the CSV {out}: {_why(error)}",
                f"无法写入 CSV 文件 {out}：{_why(error)}",
            )
        ) from error


def write_atomically(path: str | Path, text: str, *, prefix: str = ".tfcourse-") -> None:
    """Write ``text`` (UTF-8, newlines as given) to ``path`` whole or not at all.

    It goes to a temporary file beside ``path``, flushed to disk, then renamed over it: a
    full disk or a crash while writing leaves the old file (or none), never half of one,
    and never a temporary file. A symbolic link is written through, to its target.
    """
    with replaced_atomically(path, prefix=prefix) as temporary:
        temporary.write_text(text, encoding="utf-8", newline="")


def _why(error: OSError) -> str:
    return error.strerror or str(error)


def probe_output(path: str | Path) -> str | None:
    """Why ``path`` could not take a report file, in one line; ``None`` when it can.

    Called before grading (which can take many minutes), so a bad ``--csv`` or
    ``--gradescope`` is found before the work it would lose. It opens the file for appending
    (nothing in it is changed; a file it had to create is removed again), makes and removes
    a temporary file beside it (``write_atomically`` needs one there) and looks for free
    space on the disk.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            say(
                f"path must be a str or a path, got {type(path).__name__}",
                f"path 必须是字符串或路径，实际是 {type(path).__name__}",
            )
        )
    given = Path(path)
    target = Path(os.path.realpath(given))
    if target.is_dir():
        return say(f"{path}: is a folder; name a file", f"{path}：这是一个文件夹；请给出文件名")
    if not target.parent.is_dir():
        return say(
            f"{path}: the folder {given.parent} does not exist",
            f"{path}：文件夹 {given.parent} 不存在",
        )
    if target.exists() and not target.is_file():
        # A device or a pipe: it would be replaced by the file, not written into.
        return say(f"{path}: is not a regular file", f"{path}：不是普通文件")
    existed = target.exists()
    try:
        with open(target, "a", encoding="utf-8"):
            pass
        if not existed:
            target.unlink()
        handle, temporary = tempfile.mkstemp(prefix=".tfcourse-probe-", dir=target.parent)
        os.close(handle)
        os.unlink(temporary)
        free = shutil.disk_usage(target.parent).free
    except OSError as error:
        return say(
            f"{path}: cannot write there ({_why(error)})",
            f"{path}：无法写入该位置（{_why(error)}）",
        )
    if free == 0:
        return say(f"{path}: the disk is full", f"{path}：磁盘已满")
    return None
