"""Grade reports for people and spreadsheets: plain words ("expected ... / got ..."), CSV."""

from __future__ import annotations

import csv
from pathlib import Path

from .judge import NotebookGrade


def _quoted(text: str, indent: str) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return repr(text) if text and not text.startswith("(") else text
    return ("\n" + indent).join(lines)


def format_report(grade: NotebookGrade) -> str:
    """The plain-words report for one notebook."""
    if grade.error:
        return f"{grade.notebook}: NOT GRADED — {grade.error}"
    against = f"against {grade.solution}, " if grade.solution else ""
    lines = [f"{grade.notebook} ({against}{grade.seconds:.1f} s)"]
    for result in grade.exercises:
        unsealed = "" if result.sealed or not grade.isolation else " (judged in your kernel)"
        if result.passed:
            lines.append(f"  {result.name}: PASS{unsealed}")
            continue
        lines.append(f"  {result.name}: FAIL{unsealed}")
        pad = " " * 16
        lines.append(f"      expected: {_quoted(result.expected, pad)}")
        lines.append(f"      got:      {_quoted(result.got, pad)}")
        for note in result.notes:
            lines.append(f"      note: {note}")
    for note in grade.restamped + grade.notes:
        lines.append(f"  note: {note}")
    if grade.isolation:
        lines.append(f"  sealed: {'; '.join(grade.isolation)}")
    lines.append(f"  score: {grade.passed}/{grade.total} exercises passed")
    if any(result.points != 1 for result in grade.exercises):
        lines.append(f"  points: {sum(r.score for r in grade.exercises):g}/"
                     f"{sum(r.points for r in grade.exercises):g}")
    return "\n".join(lines)


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


