"""A static look at a submission's code before it earns points: shortcuts and tampering.

The check cells run in the learner's kernel, where anything can be replaced, so the
grader first reads the code the learner wrote (every code cell that is not identical to
one of the solution's own cells, and every exercise cell) and looks for:

- **the reference**: an exercise answered with the package's own implementation of it
  (``LayerNorm = tc.LayerNorm``, ``class RMSNorm(tc.RMSNorm)``, a wrapper that calls
  ``tfcourse.nn.attention.causal_mask``). The names of an exercise are what the
  solution's exercise cell defines, plus ``metadata.tfcourse.reference``;
- **a built-in that does the whole exercise**: ``metadata.tfcourse.builtins`` of the
  exercise cell, dotted names such as ``torch.nn.functional.layer_norm``;
- **tampering with the grader**: touching ``tfcourse.checks`` or ``check_*`` functions
  outside the check cells, IPython's event hooks, ``sys.modules``, builtins, frames,
  or running code built from strings (``exec``, ``eval``, ``compile``, ``__import__``,
  ``importlib``), which could hide any of the above.

Names are resolved through the imports of all code cells (``import tfcourse as tc``,
``from torch.nn import functional as F``) and simple assignments (``f = F.layer_norm``).
A static look is not a sandbox: code can still reach things in ways no reader resolves.
It stops the direct routes and says so in plain words; the verdict is zero points.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..language import say
from . import notebook_format
from .restamp import defined_names

# Roots whose use outside check cells is tampering, whatever the attribute.
_TAMPER_ROOTS = ("tfcourse.checks", "tfcourse.course", "sys.modules", "sys._getframe",
                 "sys.settrace", "sys.setprofile", "builtins", "inspect", "gc", "importlib",
                 "ctypes")
_TAMPER_CALLS = {"exec", "eval", "compile", "__import__", "get_ipython", "globals", "vars",
                 "setattr", "delattr", "breakpoint"}
_TAMPER_NAMES = {"__builtins__", "__loader__", "__spec__"}


@dataclass(frozen=True)
class Finding:
    """One reason to give no points: ``exercise`` is None for tampering (every exercise)."""

    exercise: str | None
    kind: str           # "reference" | "builtin" | "tampering"
    what: str           # the dotted name or call found
    cell: str           # how the report names the cell

    def describe(self) -> str:
        if self.kind == "reference":
            return say(f"{self.cell} uses the course's own implementation ({self.what}); write "
                       f"the exercise yourself",
                       f"{self.cell} 用了课程自带的参考实现（{self.what}）；请自己完成这个练习")
        if self.kind == "builtin":
            return say(f"{self.cell} hands the whole exercise to PyTorch's built-in {self.what}; "
                       f"write it from primitives",
                       f"{self.cell} 把整个练习交给了 PyTorch 的内置函数 {self.what}；"
                       f"请用基本运算自己实现")
        return say(f"{self.cell} reaches into the grader or runs generated code ({self.what})",
                   f"{self.cell} 试图触碰评分器，或运行动态生成的代码（{self.what}）")


class _Names(ast.NodeVisitor):
    """Dotted names used in a module, resolved through its imports and aliases."""

    def __init__(self, aliases: dict[str, str]):
        self.aliases = aliases
        self.used: list[str] = []
        self.calls: list[str] = []

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
                alias.name if alias.asname else alias.name.split(".")[0])
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

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name):
            self.calls.append(node.func.id)
        self.generic_visit(node)


def _covers(name: str, target: str) -> bool:
    return name == target or name.startswith(target + ".")


def _is_reference(name: str, names: set[str]) -> bool:
    parts = name.split(".")
    return parts[0] == "tfcourse" and any(part in names for part in parts[1:])


def _bound(statement) -> set[str]:
    """Names a top-level statement (re)binds: assignment targets, defs, classes, imports."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return {alias.asname or alias.name.split(".")[0] for alias in statement.names}
    return {node.id for node in ast.walk(statement)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}


def _parse(cell):
    try:
        return notebook_format.parse_python(_without_magics(cell.get("source", "")))
    except SyntaxError:
        return None             # it fails when it runs; nothing to find here


def scan(solution, learner) -> list[Finding]:
    """Findings for a (restamped) learner notebook against its solution, in cell order.

    Tampering counts anywhere in code the learner wrote. The reference and built-ins of an
    exercise count in its exercise cell, and in any statement that binds the exercise's
    name or a name its exercise cell uses (``LayerNorm = tc.LayerNorm``, a helper function
    it calls, ``norm = F.layer_norm``). A scratch cell that compares your LayerNorm with
    ``tc.LayerNorm`` is fine.
    """
    ours = {cell.get("source", "").strip() for cell in solution.cells
            if cell.get("cell_type") == "code" and not notebook_format.is_exercise(cell)}
    exercises = {}
    for cell in solution.cells:
        if notebook_format.is_exercise(cell):
            meta = cell.metadata.get("tfcourse", {})
            exercises[notebook_format.exercise_name(cell)] = (
                defined_names(cell.source) | set(meta.get("reference", [])),
                set(meta.get("builtins", [])))
    # What can reach exercise E's graded code: its names, and every name its exercise cell
    # uses (a helper it calls, an alias it inherits from).
    reach: dict[str, set[str]] = {name: set(names) for name, (names, _) in exercises.items()}
    for cell in learner.cells:
        if notebook_format.is_exercise(cell) and (tree := _parse(cell)) is not None:
            reach.setdefault(notebook_format.exercise_name(cell), set()).update(
                node.id for node in ast.walk(tree) if isinstance(node, ast.Name))
    aliases: dict[str, str] = {}
    findings: list[Finding] = []
    for index, cell in enumerate(learner.cells):
        if cell.get("cell_type") != "code" or notebook_format.is_check(cell):
            continue
        tree = _parse(cell)
        if tree is None:
            continue
        mine = cell.get("source", "").strip() not in ours or notebook_format.is_exercise(cell)
        found = set()
        for statement in tree.body:
            names = _Names(aliases)
            names.visit(statement)
            if not mine:
                continue            # our own cell: its imports count, its uses are ours
            bound = _bound(statement)
            importing = isinstance(statement, (ast.Import, ast.ImportFrom))
            for name in names.used:
                if not importing and (any(_covers(name, root) for root in _TAMPER_ROOTS) or name in _TAMPER_NAMES
                        or name.split(".")[-1].startswith("check_")):
                    found.add((None, "tampering", name))
                for exercise, (reference, builtins) in exercises.items():
                    own = (notebook_format.is_exercise(cell)
                           and notebook_format.exercise_name(cell) == exercise)
                    if not (own or bound & reach.get(exercise, set())):
                        continue
                    if _is_reference(name, reference):
                        found.add((exercise, "reference", name))
                    if any(_covers(name, builtin) for builtin in builtins):
                        found.add((exercise, "builtin", name))
            found |= {(None, "tampering", f"{call}()") for call in names.calls
                      if call in _TAMPER_CALLS}
        label = notebook_format.cell_label(cell, index)
        findings += [Finding(exercise, kind, what, label)
                     for exercise, kind, what in sorted(found, key=lambda f: (f[1], f[2]))]
    return findings


def _without_magics(source: str) -> str:
    """IPython's ``%magic`` and ``!shell`` lines as calls the scan sees (shell: tampering)."""
    lines = []
    for line in source.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")):
            lines.append(line[: len(line) - len(stripped)] + "exec('magic')")
        else:
            lines.append(line)
    return "\n".join(lines)
