"""Restamp a learner notebook's check cells from its solution notebook, by cell id.

Once a learner runs a check cell and saves, its stored output (the expected verdict) is
their own output, and the cell may have been edited or deleted. Before grading, every
check cell of the solution is put back: same source, same stored output, same position
if it was deleted. Everything the learner wrote elsewhere is left alone.

Other code cells lose their stored outputs, so that ``pytest --nbval-lax`` on the
restamped notebook compares exactly what ``tfcourse grade`` judges: the check cells
(nbval skips comparing cells that have no execution count).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from . import notebook_format
from .build import learner_check_cell


@dataclass(frozen=True)
class Restamp:
    """One repair: ``action`` is "edited" (source or tags changed back) or "deleted"
    (re-inserted)."""

    cell_id: str
    exercise: str | None
    action: str

    def describe(self) -> str:
        what = f"check cell {self.cell_id!r}" + (f" ({self.exercise})" if self.exercise else "")
        if self.action == "deleted":
            return f"{what} was missing; restored from the solution"
        return f"{what} was edited; the original was restored"


def restamp(learner, solution) -> tuple[object, list[Restamp]]:
    """Return a restamped copy of ``learner`` and the repairs made (see module docstring)."""
    nb = copy.deepcopy(learner)
    _dedupe_ids(nb)
    repairs = []
    solution_ids = [cell.get("id") for cell in solution.cells]
    for solution_index, reference in enumerate(solution.cells):
        if not notebook_format.is_check(reference):
            continue
        stamped = learner_check_cell(reference)
        positions = {cell.get("id"): index for index, cell in enumerate(nb.cells)}
        index = positions.get(reference.id)
        if index is None:
            nb.cells.insert(_insert_position(nb, solution_ids, solution_index, positions), stamped)
            repairs.append(Restamp(reference.id, notebook_format.exercise_name(reference), "deleted"))
            continue
        current = nb.cells[index]
        if (current.get("cell_type") != "code" or current.get("source") != reference.source
                or sorted(notebook_format.tags(current)) != sorted(notebook_format.tags(reference))):
            repairs.append(Restamp(reference.id, notebook_format.exercise_name(reference), "edited"))
        nb.cells[index] = stamped
    for cell in nb.cells:
        if cell.get("cell_type") == "code" and not notebook_format.is_check(cell):
            cell.outputs, cell.execution_count = [], None
        elif notebook_format.is_check(cell) and cell.get("id") not in solution_ids:
            # A copy of a check cell the learner made: no stored verdict to trust.
            cell.outputs, cell.execution_count = [], None
    nb.nbformat, nb.nbformat_minor = 4, max(5, int(nb.get("nbformat_minor", 5)))
    return nb, repairs


def _insert_position(nb, solution_ids, solution_index, positions) -> int:
    """After the nearest earlier solution cell the learner still has, else at the top."""
    for earlier in reversed(solution_ids[:solution_index]):
        if earlier in positions:
            return positions[earlier] + 1
    return 0


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
