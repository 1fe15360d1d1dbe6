"""Grades as Gradescope's ``results.json`` (``tfcourse grade --gradescope OUT``).

The format is Gradescope's autograder results schema
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): a top-level ``score``,
``output`` and ``execution_time``, and one entry in ``tests`` per exercise with its
``score``, ``max_score``, ``status`` and an ``output`` that says "expected ... / got ..."
like the text report. ``tfcourse autograder`` bundles a script that writes this file on
Gradescope; see docs/grading.md.

Learner text is cleaned as for the text report (``report.clean_grade``): Gradescope shows it
in a browser, where a bidi override would reorder a line as well as in a terminal.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..language import say, speaking
from .records import ExerciseResult, NotebookGrade
from .report import clean_grade, failure_lines, indented, text_width, verdict, write_atomically

# Every string is plain text: Gradescope renders the top-level output as HTML by default
# ("simple_format"), and a diagnosis such as "x < 0" or "<lambda>" must show as written.
TEXT = "text"
# Shown to learners at once: the verdicts are what their own check cells print anyway,
# and nothing in the report is secret (the expected lines are in the learner notebook).
VISIBLE = "visible"


def _course_name(grade: NotebookGrade) -> str:
    """The course notebook's name (``03_norms``): the solution's stem, which is the same for
    every submission whatever the learner called the file, else the submission's stem."""
    return Path(grade.solution or grade.notebook).stem


def _test_output(result: ExerciseResult) -> str:
    """PASS, or the failure in the text report's words: reason, expected, got, notes."""
    first = verdict(result, with_reason=True)
    return first if result.passed else "\n".join([first, *failure_lines(result)])


def _test(name: str, score: float, max_score: float, passed: bool, output: str) -> dict:
    # status is explicit: by default Gradescope calls a test passed when score == max_score,
    # which would make a 0/0 "not graded" test look passed.
    return {
        "name": name,
        "score": score,
        "max_score": max_score,
        "status": "passed" if passed else "failed",
        "output": output,
        "visibility": VISIBLE,
    }


def _summary(grade: NotebookGrade, score: float, max_score: float) -> str:
    """The top-level text for one notebook: its verdict in one line, then its notes."""
    # The course notebook's name, not the solution's path (a folder on Gradescope's machine).
    course = _course_name(grade)
    against = say(f" (against {course})", f"（对照 {course}）") if grade.solution else ""
    if grade.error:
        error = indented(grade.error, "    ")
        lines = [
            say(
                f"{grade.notebook}{against}: NOT GRADED — {error}",
                f"{grade.notebook}{against}：未能评分——{error}",
            )
        ]
    else:
        lines = [
            say(
                f"{grade.notebook}{against}: {grade.passed}/{grade.total} exercises passed, "
                f"{score:g}/{max_score:g} points",
                f"{grade.notebook}{against}：通过 {grade.passed}/{grade.total} 个练习，"
                f"得分 {score:g}/{max_score:g}",
            )
        ]
    note = say("  note: ", "  说明：")
    pad = " " * text_width(note)
    lines += [note + indented(text, pad) for text in grade.notes]
    return "\n".join(lines)


def results(grades: list[NotebookGrade]) -> dict:
    """Gradescope's results for the graded notebooks: one test per exercise.

    A notebook that could not be graded (``grade.error``) scores 0 on each of its known
    exercises, with the error as their output; with no exercise known it gives one test
    worth 0 points, marked failed. The error is also in the top-level output. Each
    notebook's texts are in its language (``grade.language``); test names stay English, so
    that Gradescope's per-test statistics line up across the two editions.
    """
    tests, summaries = [], []
    total = seconds = 0.0
    for grade in grades:
        grade = clean_grade(grade)
        course = _course_name(grade)
        score = max_score = 0.0
        with speaking(grade.language or None):
            for result in grade.exercises:
                points = result.points
                passed = result.passed and not grade.error
                earned = points if passed else 0.0
                output = (
                    say(f"not graded: {grade.error}", f"未能评分：{grade.error}")
                    if grade.error
                    else _test_output(result)
                )
                tests.append(_test(f"{course}: {result.name}", earned, points, passed, output))
                score, max_score = score + earned, max_score + points
            if grade.error and not grade.exercises:
                tests.append(_test(f"{course}: not graded", 0.0, 0.0, False, grade.error))
            summaries.append(_summary(grade, score, max_score))
        total += score
        seconds += grade.seconds if math.isfinite(grade.seconds) else 0.0
    return {
        "score": total,
        "execution_time": round(seconds),  # whole seconds, as in Gradescope's example
        "output": (
            "\n".join(summaries)
            if summaries
            else say("no notebook was graded", "没有为任何 notebook 评分")
        ),
        "output_format": TEXT,
        "test_output_format": TEXT,
        "test_name_format": TEXT,
        "stdout_visibility": VISIBLE,
        "tests": tests,
    }


def write_results(grades: list[NotebookGrade], path: str | Path) -> None:
    """Write ``results(grades)`` to ``path`` as UTF-8 JSON.

    Written whole or not at all (``report.write_atomically``): Gradescope reads whatever is
    at ``path`` when the run ends, and a half-written file would lose the whole grade.
    Raises ``ValueError`` for points JSON cannot hold, ``OSError`` saying which file could
    not be written and why.
    """
    text = json.dumps(results(grades), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    try:
        write_atomically(path, text, prefix=".results-")
    except OSError as error:
        why = error.strerror or str(error)
        raise OSError(
            say(
                f"could not write Gradescope's results {path}: {why}",
                f"无法写入 Gradescope 结果文件 {path}：{why}",
            )
        ) from error
