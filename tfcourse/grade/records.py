"""A grade's records and what the solution says about its exercises.

``ExerciseResult`` per exercise and ``NotebookGrade`` per submission (what the reports
print); each exercise's name and points.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Literal

from ..course import notebook_format
from ..language import say

# Why an exercise earned nothing ("" when it passed). The sealed path (sealed/session.py):
# the check printed something else (mismatch), the check failed or the learner's code raised
# (error), the worker hung (timeout), died (worker-died) or sent a reply that does not add
# up (protocol), the solution marks the exercise unsealable (not-gradeable), or the check
# itself broke (check-bug: the course's bug); the learner's code called the course's own
# implementation, sealed away (reference), or ran a function that does the whole exercise
# (shortcut, references.py).
Reason = Literal[
    "",
    "mismatch",
    "error",
    "timeout",
    "worker-died",
    "protocol",
    "not-gradeable",
    "check-bug",
    "reference",
    "shortcut",
]


@dataclass
class ExerciseResult:
    name: str
    passed: bool
    expected: str = ""
    got: str = ""
    reason: Reason = ""
    notes: list[str] = field(default_factory=list)
    points: float = 1.0  # what the exercise is worth (the solution's metadata.tfcourse.points)
    sealed: bool = True  # False: graded with --unsealed, outside the sandbox
    # The torch functions and methods (torch.<name>) and course functions the learner's code
    # called while the checks ran, and any kernel it reached past torch's functions (aten::):
    # for a teacher to look where the shortcut watch promises nothing (SECURITY.md).
    calls: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        """Points earned: all of them or none (a grade is earned only when every case matches)."""
        return self.points if self.passed else 0.0


@dataclass
class NotebookGrade:
    notebook: str
    solution: str = ""
    exercises: list[ExerciseResult] = field(default_factory=list)
    isolation: list[str] = field(default_factory=list)  # what the sealed workers ran under
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""  # set when the notebook could not be graded at all
    # "zh": a notebook of the Chinese edition, reported in Chinese; "": the reader's language
    # (TFCOURSE_LANG). Not in to_dict(): machine-readable output is the same in both.
    language: str = ""

    @property
    def passed(self) -> int:
        return sum(result.passed for result in self.exercises)

    @property
    def total(self) -> int:
        return len(self.exercises)

    @property
    def ok(self) -> bool:
        return not self.error and self.total > 0 and self.passed == self.total

    def to_dict(self) -> dict:
        data = asdict(self)
        del data["language"]
        data.update(
            passed=self.passed, total=self.total, ok=self.ok, seconds=round(self.seconds, 2)
        )
        return data


def exercise_points(solution, name: str) -> float:
    """What exercise ``name`` is worth: ``metadata.tfcourse.points`` of its exercise cell in
    the solution notebook (a number >= 0), else 1."""
    cell = notebook_format.exercise_cell(solution, name)
    points = cell.metadata.get("tfcourse", {}).get("points", 1) if cell is not None else 1
    if (
        isinstance(points, bool)
        or not isinstance(points, (int, float))
        or not 0 <= points < math.inf
    ):
        raise ValueError(
            say(
                f"exercise {name!r}: metadata tfcourse.points must be a number >= 0, "
                f"got {points!r}",
                f"练习 {name!r}：元数据 tfcourse.points 必须是 >= 0 的数，实际是 {points!r}",
            )
        )
    return float(points)


def exercise_names(solution) -> list[str]:
    """The solution's exercises, in notebook order."""
    names = []
    for cell in solution.cells:
        name = notebook_format.exercise_name(cell)
        if (
            name
            and (notebook_format.is_exercise(cell) or notebook_format.is_check(cell))
            and name not in names
        ):
            names.append(name)
    return names


def not_implemented() -> str:
    """Added to what a stub printed."""
    return say("\n(the exercise is not implemented yet)", "\n（这个练习还没有实现）")
