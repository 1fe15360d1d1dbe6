"""A static look at a submission's code before it earns points: the shortcuts.

The grader reads the code the learner wrote (every code cell that is not identical to one
of the solution's own cells, and every exercise cell) and gives no points where an
exercise is answered with:

- **the reference**: the package's own implementation of it (``LayerNorm = tc.LayerNorm``,
  ``class RMSNorm(tc.RMSNorm)``, a wrapper that calls ``tfcourse.nn.attention.causal_mask``).
  The names of an exercise are ``references.reference_names``: what the solution's
  exercise cell defines, its ``metadata.tfcourse.reference`` and the course helpers
  listed for it;
- **a built-in that does the whole exercise**: ``references.builtins``, dotted names such
  as ``torch.nn.functional.layer_norm``.

Names are resolved through the imports of all code cells (``import tfcourse as tc``,
``from torch.nn import functional as F``) and simple assignments (``f = F.layer_norm``).
The scan says in plain words why an exercise earns nothing. It is not what keeps the
grade honest: the sealed worker is (the reference is a stub there, the built-ins are
traps, and the checks run in the grader, out of the learner's reach). So the scan looks
for nothing else: ``exec``, ``globals()``, ``vars(cfg)``, ``sys.modules`` or a shell line
in a scratch cell cost no points. IPython syntax is read the way IPython runs it
(``_python``): a magic or shell line is a call with a string, and the Python body of a
``%%time``, ``%%timeit`` or ``%%capture`` cell is read like any cell.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..language import say
from . import notebook_format, references

FindingKind = Literal["reference", "builtin"]


@dataclass(frozen=True)
class Finding:
    """One reason to give ``exercise`` no points."""

    exercise: str
    kind: FindingKind
    what: str  # the dotted name found
    cell: str  # how the report names the cell

    def describe(self) -> str:
        if self.kind == "reference":
            return say(
                f"{self.cell} uses the course's own implementation ({self.what}); write "
                f"the exercise yourself",
                f"{self.cell} 用了课程自带的参考实现（{self.what}）；请自己完成这个练习",
            )
        return say(
            f"{self.cell} hands the whole exercise to PyTorch's built-in {self.what}; "
            f"write it from primitives",
            f"{self.cell} 把整个练习交给了 PyTorch 的内置函数 {self.what}；请用基本运算自己实现",
        )


class _Names(ast.NodeVisitor):
    """Dotted names used in a module, resolved through its imports and aliases."""

    def __init__(self, aliases: dict[str, str]):
        self.aliases = aliases
        self.used: list[str] = []

    def resolve(self, node) -> str | None:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.append(self.aliases.get(node.id, node.id))
        return ".".join(reversed(parts))

    def visit_Import(self, node):
        for alias in node.names:
            self.aliases[alias.asname or alias.name.split(".")[0]] = (
                alias.name if alias.asname else alias.name.split(".")[0]
            )
            self.used.append(alias.name)

    def visit_ImportFrom(self, node):
        base = "." * node.level + (node.module or "")
        for alias in node.names:
            full = f"{base}.{alias.name}" if base else alias.name
            self.aliases[alias.asname or alias.name] = full
            self.used.append(full)

    def visit_Assign(self, node):
        self.generic_visit(node)
        value = self.resolve(node.value)
        for target in node.targets:
            if value and isinstance(target, ast.Name):
                self.aliases[target.id] = value

    def visit_Attribute(self, node):
        name = self.resolve(node)
        if name:
            self.used.append(name)
        else:
            self.generic_visit(node)

    def visit_Name(self, node):
        self.used.append(self.aliases.get(node.id, node.id))


def _covers(name: str, target: str) -> bool:
    return name == target or name.startswith(target + ".")


def _is_reference(name: str, names: set[str]) -> bool:
    """Whether the dotted ``name`` reaches one of ``names`` in the package. A part that is
    one of the package's own modules is a path, not a name: ``tfcourse.train.loop.lm_loss``
    does not use a reference called ``train``."""
    parts = name.split(".")
    return parts[0] == "tfcourse" and any(
        part in names and ".".join(parts[: i + 1]) not in _MODULES
        for i, part in enumerate(parts[1:], 1)
    )


# The package's modules and subpackages, by dotted name (read from its files, not imported).
_PACKAGE = Path(__file__).resolve().parents[1]
_MODULES = frozenset(
    ".".join(("tfcourse", *path.relative_to(_PACKAGE).with_suffix("").parts)).removesuffix(
        ".__init__"
    )
    for path in _PACKAGE.rglob("*.py")
)


def _bound(statement) -> set[str]:
    """Names a top-level statement (re)binds: assignment targets, defs, classes, imports."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return {alias.asname or alias.name.split(".")[0] for alias in statement.names}
    return {
        node.id
        for node in ast.walk(statement)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    }


def _parse(cell):
    try:
        return notebook_format.parse_python(_python(cell.get("source", "")))
    except (SyntaxError, ValueError):  # ValueError: a null byte, on older Pythons
        return None  # it fails when it runs; nothing to find here


def scan(solution, learner) -> list[Finding]:
    """Findings for a (restamped) learner notebook against its solution, in cell order.

    The reference and built-ins of an exercise count in its exercise cell, and in any
    statement that binds the exercise's name or a name its exercise cell uses
    (``LayerNorm = tc.LayerNorm``, a helper function it calls, ``norm = F.layer_norm``). A
    scratch cell that compares your LayerNorm with ``tc.LayerNorm`` is fine.
    """
    ours = {
        cell.get("source", "").strip()
        for cell in solution.cells
        if cell.get("cell_type") == "code" and not notebook_format.is_exercise(cell)
    }
    names_in_order = (
        notebook_format.exercise_name(cell)
        for cell in solution.cells
        if notebook_format.is_exercise(cell)
    )
    exercises = {
        name: (
            set(references.reference_names(solution, name)),
            set(references.builtins(solution, name)),
        )
        for name in dict.fromkeys(names_in_order)
        if name is not None
    }
    # What can reach exercise E's graded code: its names, and every name its exercise cell
    # uses (a helper it calls, an alias it inherits from).
    reach: dict[str, set[str]] = {name: set(names) for name, (names, _) in exercises.items()}
    for cell in learner.cells:
        if (
            notebook_format.is_exercise(cell)
            and (name := notebook_format.exercise_name(cell)) is not None
            and (tree := _parse(cell)) is not None
        ):
            reach.setdefault(name, set()).update(
                node.id for node in ast.walk(tree) if isinstance(node, ast.Name)
            )
    aliases: dict[str, str] = {}
    findings: list[Finding] = []
    for index, cell in enumerate(learner.cells):
        if cell.get("cell_type") != "code" or notebook_format.is_check(cell):
            continue
        tree = _parse(cell)
        if tree is None:
            continue
        mine = cell.get("source", "").strip() not in ours or notebook_format.is_exercise(cell)
        found: set[tuple[str, FindingKind, str]] = set()
        for statement in tree.body:
            names = _Names(aliases)
            names.visit(statement)
            if not mine:
                continue  # our own cell: its imports count, its uses are ours
            bound = _bound(statement)
            for name in names.used:
                for exercise, (reference, builtins) in exercises.items():
                    own = (
                        notebook_format.is_exercise(cell)
                        and notebook_format.exercise_name(cell) == exercise
                    )
                    if not (own or bound & reach.get(exercise, set())):
                        continue
                    if _is_reference(name, reference):
                        found.add((exercise, "reference", name))
                    if any(_covers(name, builtin) for builtin in builtins):
                        found.add((exercise, "builtin", name))
        label = notebook_format.cell_label(cell, index)
        findings += [
            Finding(exercise, kind, what, label)
            for exercise, kind, what in sorted(found, key=lambda f: (f[1], f[2]))
        ]
    return findings


# Cell magics whose body is the learner's Python: grading runs ``%%time`` and
# ``%%capture`` and skips ``%%timeit`` (``sealed/worker.py``), but each body is theirs.
_PYTHON_CELL_MAGICS = {"time", "timeit", "capture"}


def _python(source: str) -> str:
    """A cell as the Python IPython runs: ``%magic`` and ``!shell`` lines become calls on
    ``get_ipython()`` (strings, in which the scan finds no names), and a cell magic whose
    body is Python (``%%time``) is read as that body. Another cell magic (``%%bash``) holds
    no Python: nothing to read."""
    from IPython.core.inputtransformer2 import TransformerManager

    lines = source.lstrip("\n").splitlines()
    if lines and lines[0].startswith("%%"):
        magic = lines[0][2:].split(maxsplit=1)
        if not magic or magic[0] not in _PYTHON_CELL_MAGICS:
            return ""
        source = "\n".join(lines[1:])
    return TransformerManager().transform_cell(source)
