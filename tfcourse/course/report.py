"""Grade reports for people and spreadsheets: plain words ("expected ... / got ..."), CSV."""

from __future__ import annotations

import csv
import unicodedata
from pathlib import Path

from ..language import say, speaking
from .judge import NotebookGrade


def _quoted(text: str, indent: str) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return repr(text) if text and not text.startswith(("(", "（")) else text
    return ("\n" + indent).join(lines)


def format_report(grade: NotebookGrade) -> str:
    """The plain-words report for one notebook, in its language (``grade.language``)."""
    with speaking(grade.language or None):
        return _format_report(grade)


def _format_report(grade: NotebookGrade) -> str:
    if grade.error:
        return say(f"{grade.notebook}: NOT GRADED — {grade.error}",
                   f"{grade.notebook}：未能评分——{grade.error}")
    seconds = f"{grade.seconds:.1f}"
    lines = [say(f"{grade.notebook} ("
                 + (f"against {grade.solution}, " if grade.solution else "") + f"{seconds} s)",
                 f"{grade.notebook}（" + (f"对照 {grade.solution}，" if grade.solution else "")
                 + f"{seconds} 秒）")]
    # The continuation lines of a multi-line expected/got start under its first line.
    expected, got = say("expected: ", "预期："), say("got:      ", "实际：")
    pad = " " * (6 + _width(expected))
    for result in grade.exercises:
        unsealed = ("" if result.sealed or not grade.isolation
                    else say(" (judged in your kernel)", "（在你的内核中评判）"))
        if result.passed:
            lines.append(say(f"  {result.name}: PASS{unsealed}", f"  {result.name}：PASS{unsealed}"))
            continue
        lines.append(say(f"  {result.name}: FAIL{unsealed}", f"  {result.name}：FAIL{unsealed}"))
        lines.append(f"      {expected}{_quoted(result.expected, pad)}")
        lines.append(f"      {got}{_quoted(result.got, pad)}")
        for note in result.notes:
            lines.append(say(f"      note: {note}", f"      说明：{note}"))
    for note in grade.restamped + grade.notes:
        lines.append(say(f"  note: {note}", f"  说明：{note}"))
    if grade.isolation:
        lines.append(say(f"  sealed: {'; '.join(grade.isolation)}",
                         f"  隔离措施：{'；'.join(grade.isolation)}"))
    lines.append(say(f"  score: {grade.passed}/{grade.total} exercises passed",
                     f"  成绩：通过 {grade.passed}/{grade.total} 个练习"))
    if any(result.points != 1 for result in grade.exercises):
        earned = f"{sum(r.score for r in grade.exercises):g}/{sum(r.points for r in grade.exercises):g}"
        lines.append(say(f"  points: {earned}", f"  得分：{earned}"))
    return "\n".join(lines)


def _width(text: str) -> int:
    """Columns ``text`` takes in a terminal: two for each Chinese character."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def write_csv(grades: list[NotebookGrade], out: str | Path) -> None:
    """One row per notebook, one column per exercise (1 pass, 0 fail, empty if the
    notebook's solution has no such exercise), then passed, total, seconds, error."""
    exercises: list[str] = []
    for grade in grades:
        for result in grade.exercises:
            if result.name not in exercises:
                exercises.append(result.name)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["notebook", "solution", *exercises, "passed", "total", "seconds",
                         "error"])
        for grade in grades:
            marks = {result.name: int(result.passed) for result in grade.exercises}
            writer.writerow([grade.notebook, grade.solution,
                             *(marks.get(name, "") for name in exercises),
                             grade.passed, grade.total, f"{grade.seconds:.1f}", grade.error])


