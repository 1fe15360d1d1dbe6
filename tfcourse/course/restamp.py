"""Restamp a learner notebook's check cells from its solution notebook.

Once a learner runs a check cell and saves, its stored output (the expected verdict) is
their own output, and the cell may have been edited, moved or deleted. Before the
learner's code is read as a whole (``tfcourse.yours``), or their notebook is run through
nbval next to the solution's verdicts, every check cell of the solution is put back: same
source, same id, same stored output. (``tfcourse grade`` needs none of this: it never runs
a check cell, and takes the checks from the solution.)

Cell ids cannot be trusted to find them: notebooks round-tripped through another editor
(Colab, nbformat 4.4 files, "Save as") lose or regenerate ids. So a solution check cell
is found in the learner notebook by, in this order: identical source; the same id; a
check tag for the same exercise (of several cells found by one rule, the first after the
learner's exercise cell: a scratch copy of the check above it is not the check). One
that is missing is restored right after the learner's exercise cell of that exercise
(found by its exercise tag, else by the function or class it defines), else after the
nearest earlier cell that was found, else at the end. Everything the learner wrote
elsewhere is left alone.

Other code cells lose their stored outputs, so that ``pytest --nbval-lax`` on the
restamped notebook compares the check cells alone (nbval skips comparing cells that have
no execution count).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from ..language import say
from . import notebook_format


@dataclass(frozen=True)
class Restamp:
    """One repair: ``action`` is "edited" (source or tags changed back) or "deleted"
    (re-inserted)."""

    cell_id: str
    exercise: str | None
    action: str

    def describe(self) -> str:
        what = say(
            f"check cell {self.cell_id!r}" + (f" ({self.exercise})" if self.exercise else ""),
            f"检查单元格 {self.cell_id!r}" + (f"（{self.exercise}）" if self.exercise else ""),
        )
        if self.action == "deleted":
            return say(
                f"{what} was missing; restored from the solution", f"{what}缺失，已按参考答案恢复"
            )
        return say(f"{what} was edited; the original was restored", f"{what}被改动过，已恢复原样")


def restamp(learner, solution) -> tuple[object, list[Restamp]]:
    """Return a restamped copy of ``learner`` and the repairs made (see module docstring)."""
    nb = copy.deepcopy(learner)
    _dedupe_ids(nb)
    repairs = []
    stamped_ids: set[str] = set()
    stamped_cells = []  # the cells put back (identity, not id: ids may clash)
    for reference in solution.cells:
        if not notebook_format.is_check(reference):
            continue
        exercise = notebook_format.exercise_name(reference)
        index = _find_check(nb, solution, reference, stamped_ids)
        if index is None:
            index = _insert_position(nb, solution, reference, stamped_ids)
            nb.cells.insert(index, notebook_format.learner_check_cell(reference))
            stamped_cells.append(nb.cells[index])
            repairs.append(Restamp(reference.id, exercise, "deleted"))
        else:
            current = nb.cells[index]
            if (
                current.get("cell_type") != "code"
                or current.get("source") != reference.source
                or sorted(notebook_format.tags(current)) != sorted(notebook_format.tags(reference))
            ):
                repairs.append(Restamp(reference.id, exercise, "edited"))
            nb.cells[index] = notebook_format.learner_check_cell(reference)
            stamped_cells.append(nb.cells[index])
        stamped_ids.add(reference.id)
    for index, cell in enumerate(nb.cells):
        stamped = any(cell is other for other in stamped_cells)
        if cell.get("id") in stamped_ids and not stamped:
            cell["id"] = _fresh_id(nb, f"learner-{index}")  # a learner cell using our id
        if cell.get("cell_type") == "code" and not stamped:
            # Learner cells, and copies of check cells the learner made: no stored verdict
            # to trust, and nothing for nbval to compare.
            cell.outputs, cell.execution_count = [], None
    nb.nbformat, nb.nbformat_minor = 4, max(5, int(nb.get("nbformat_minor", 5)))
    return nb, repairs


def _find_check(nb, solution, reference, taken: set[str]) -> int | None:
    """Where the learner notebook holds ``reference`` (a solution check cell), or None.
    Of several cells that match the same rule (a scratch copy of the check, in a file that
    lost its ids), the first one after the learner's exercise cell, else the last."""
    candidates = [
        (index, cell)
        for index, cell in enumerate(nb.cells)
        if cell.get("cell_type") == "code" and cell.get("id") not in taken
    ]
    exercise = notebook_format.exercise_name(reference)
    exercise_at = notebook_format.exercise_index(nb, solution, exercise)

    def same_source(cell):
        return cell.get("source", "").strip() == reference.source.strip()

    rules = (
        lambda cell: cell.get("id") == reference.id and same_source(cell),
        same_source,
        lambda cell: cell.get("id") == reference.id,
        lambda cell: (
            notebook_format.is_check(cell) and notebook_format.exercise_name(cell) == exercise
        ),
    )
    for rule in rules:
        found = [index for index, cell in candidates if rule(cell)]
        if found:
            after = [index for index in found if exercise_at is not None and index > exercise_at]
            return (after or found[-1:])[0]
    return None


def _insert_position(nb, solution, reference, stamped_ids: set[str]) -> int:
    """Right after the learner's exercise cell for this check, else after the nearest
    earlier solution cell the learner still has, else at the end."""
    exercise_at = notebook_format.exercise_index(
        nb, solution, notebook_format.exercise_name(reference)
    )
    if exercise_at is not None:
        return _after_own_checks(nb, exercise_at, stamped_ids)
    position = {cell.get("id"): index for index, cell in enumerate(nb.cells)}
    solution_ids = [cell.get("id") for cell in solution.cells]
    for earlier in reversed(solution_ids[: solution_ids.index(reference.id)]):
        if earlier in position and (earlier in stamped_ids or not _is_check_id(solution, earlier)):
            return _after_own_checks(nb, position[earlier], stamped_ids)
    return len(nb.cells)


def _is_check_id(solution, cell_id) -> bool:
    return any(
        cell.get("id") == cell_id and notebook_format.is_check(cell) for cell in solution.cells
    )


def _after_own_checks(nb, index: int, stamped_ids: set[str]) -> int:
    """Just after ``index`` and the check cells already restored right behind it, so that
    an exercise with two checks gets them back in order."""
    index += 1
    while index < len(nb.cells) and nb.cells[index].get("id") in stamped_ids:
        index += 1
    return index


def _fresh_id(nb, base: str) -> str:
    taken = {cell.get("id") for cell in nb.cells}
    number = 2
    while f"{base}-{number}" in taken:
        number += 1
    return f"{base}-{number}"


def _dedupe_ids(nb) -> None:
    """Give fresh ids to duplicates and id-less cells (copy-paste, old nbformat)."""
    seen = set()
    for index, cell in enumerate(nb.cells):
        cell_id = cell.get("id")
        if not cell_id or cell_id in seen:
            base = cell_id or f"cell{index}"
            number = 2
            while f"{base}-{number}" in seen:
                number += 1
            cell["id"] = cell_id = f"{base}-{number}"[:64]
        seen.add(cell_id)
