"""``tfcourse grade``: grade learner notebooks against the solution notebooks.

For each learner notebook: find its solution (``metadata.tfcourse.notebook``, else the
file name), restamp the check cells from it by cell id (undoing edited or deleted checks;
see ``tfcourse.restamp``), run the notebook top to bottom in a fresh kernel with a
per-cell timeout, then judge each exercise by its check cells: an exercise passes when
every one of its check cells ran without error and printed what the solution's stored
output says (compared after ``tfcourse.sanitize``, on the same fields as nbval).

Why nbclient and not nbval under the hood. nbval is the runner in CI (the solution
notebooks must pass ``pytest --nbval-lax``), and the restamped notebook passes or fails
``pytest --nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg`` exactly where this
grader does (write it with ``--restamped DIR``). But as a grader nbval falls short:
after one timed-out cell it marks every later cell as an expected failure (so one
hanging cell hides every later verdict), it reports a mismatch as a diff with the
reference as "+", and its results come back as pytest reports to be parsed. Executing
with nbclient (``tfcourse.course.run``) gives per-cell results directly, carries on after a
timeout, and lets the report say "expected ... / got ..." in plain words.

Exit status: 0 only if every exercise of every notebook passes; 1 otherwise; 2 for bad
arguments (no notebooks found). Not a sandbox: a learner who sets out to fool the grader
(say, by redefining a check function) can.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import notebook_format
from .build import STUB_SIGNATURE
from .restamp import restamp
from .run import CellRun, kernel_env, run_notebook
from .sanitize import sanitize

# Output fields nbval does not compare (nbval's skip list, without --nbdime): pictures,
# widget model ids, tracebacks, counters and the like.
_SKIP = {"metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
         notebook_format.WIDGET_MIME, "image/png", "image/jpeg"}
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass
class ExerciseResult:
    name: str
    passed: bool
    check_cells: list[str]
    expected: str = ""
    got: str = ""
    reason: str = ""  # "" when passed; mismatch | error | timeout | kernel-died | not-run
    notes: list[str] = field(default_factory=list)


@dataclass
class NotebookGrade:
    notebook: str
    solution: str = ""
    exercises: list[ExerciseResult] = field(default_factory=list)
    restamped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""  # set when the notebook could not be graded at all

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
        data.update(passed=self.passed, total=self.total, ok=self.ok,
                    seconds=round(self.seconds, 2))
        return data


def comparable(outputs) -> dict[str, list]:
    """The outputs as nbval compares them: streams merged per name (``\\r`` and ``\\b``
    applied), data flattened per MIME type, skipped fields dropped, text sanitized."""
    merged, streams = [], {}
    for output in outputs:
        if output.get("output_type") == "stream":
            name = output.get("name", "stdout")
            if name in streams:
                streams[name]["text"] += output.get("text", "")
            else:
                streams[name] = {"output_type": "stream", "name": name,
                                 "text": output.get("text", "")}
                merged.append(streams[name])
        else:
            merged.append(output)
    fields = defaultdict(list)
    for output in merged:
        if output.get("output_type") == "stream":
            fields[output["name"]].append(sanitize(_terminal(output["text"])))
            continue
        for key, value in output.items():
            if key in _SKIP:
                continue
            if key == "data":
                for mime, content in value.items():
                    if mime not in _SKIP:
                        fields[mime].append(sanitize(content) if isinstance(content, str)
                                            else content)
            else:
                fields[key].append(sanitize(value) if isinstance(value, str) else value)
    return dict(fields)


def _terminal(text: str) -> str:
    """Apply backspaces and carriage returns the way a terminal (and nbval) does."""
    previous = None
    while previous != text:
        previous, text = text, re.sub("[^\n]\x08", "", text)
    return re.sub(r"^.*\r(?=[^\n])", "", text, flags=re.MULTILINE)


def describe_outputs(fields: dict[str, list]) -> str:
    """Outputs (as from ``comparable``) in words: the printed text, other fields named."""
    parts = []
    for key, values in fields.items():
        text = "".join(str(value) for value in values).rstrip("\n")
        if key == "stdout":
            parts.append(text)
        elif key == "stderr":
            parts.append(f"(on stderr) {text}")
        elif key == "text/plain":
            parts.append(f"(displayed) {text}")
        else:
            parts.append(f"({key}) {text[:200]}")
    return "\n".join(parts) if parts else "(no output)"


def judge(solution, executed, run_by_id: dict[str, CellRun]) -> list[ExerciseResult]:
    """One result per exercise of ``solution``, in notebook order, from an executed,
    restamped learner notebook and its per-cell run records."""
    learner_cells = {cell.get("id"): cell for cell in executed.cells}
    results: dict[str, ExerciseResult] = {}
    for cell in solution.cells:
        name = notebook_format.exercise_name(cell)
        if name and (notebook_format.is_exercise(cell) or notebook_format.is_check(cell)) and name not in results:
            results[name] = ExerciseResult(name=name, passed=True, check_cells=[])
    for cell in solution.cells:
        name = notebook_format.exercise_name(cell)
        if name not in results:
            continue
        result = results[name]
        run = run_by_id.get(cell.get("id"))
        if notebook_format.is_exercise(cell):
            if run is not None and run.status != "ok":
                result.notes.append(f"its exercise cell {cell.id!r} {_verb(run)}")
            continue
        if not notebook_format.is_check(cell):
            continue
        result.check_cells.append(cell.id)
        expected = comparable(cell.outputs)
        if not result.passed:  # report the first failing check cell of an exercise
            continue
        if run is None or run.status != "ok":
            result.passed = False
            result.reason = run.status if run else "not-run"
            result.expected = describe_outputs(expected)
            result.got = _plain(run.error_text) if run else "the check cell did not run"
            if STUB_SIGNATURE in result.got:
                result.got += "\n(the exercise is not implemented yet)"
            continue
        got = comparable(learner_cells[cell.id].outputs)
        if got != expected:
            result.passed = False
            result.reason = "mismatch"
            result.expected = describe_outputs(expected)
            result.got = describe_outputs(got)
    for result in results.values():
        if result.passed:
            result.notes = []  # an exercise cell's hiccup does not matter if its check passes
        elif not result.check_cells:
            result.passed, result.reason = False, "missing"
    return list(results.values())


def _verb(run: CellRun) -> str:
    if run.status == "error":
        return f"raised {_plain(run.error_text)}"
    return _plain(run.error_text)


def _plain(text: str) -> str:
    return sanitize(_ANSI.sub("", text)).strip()


def find_solution(learner, path: Path, solutions_dir: Path) -> Path:
    """The solution notebook for a learner notebook: by ``metadata.tfcourse.notebook``,
    else the same file name, else the longest solution name contained in the file name
    (``alice_01_attention.ipynb`` -> ``01_attention.ipynb``). Raises ``ValueError``."""
    named = learner.metadata.get("tfcourse", {}).get("notebook")
    candidates = []
    if isinstance(named, str) and named:
        candidates.append(solutions_dir / f"{named}.ipynb")
    candidates.append(solutions_dir / path.name)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    stems = sorted((p for p in solutions_dir.glob("*.ipynb") if p.stem in path.stem),
                   key=lambda p: len(p.stem))
    if stems:
        return stems[-1]
    raise ValueError(f"no solution notebook for {path.name} in {notebook_format.shown(solutions_dir)} "
                     f"(pass --solutions DIR)")


def grade(learner, solution, *, cwd: str | Path, timeout: float = 120,
          env: dict[str, str] | None = None, label: str = "notebook",
          restamped_path: str | Path | None = None):
    """Restamp, run and judge an in-memory learner notebook against ``solution``.

    Returns ``(NotebookGrade, executed notebook)``; ``cwd`` is the kernel's working
    directory, ``restamped_path`` (optional) receives the restamped notebook before it runs.
    """
    started = time.monotonic()
    result = NotebookGrade(notebook=label)
    notebook, repairs = restamp(learner, solution)
    result.restamped = [repair.describe() for repair in repairs]
    if restamped_path:
        notebook_format.write_notebook(notebook, restamped_path)
    run = run_notebook(notebook, cwd=cwd, timeout=timeout,
                       env=env if env is not None else kernel_env())
    result.exercises = judge(solution, notebook, run.by_id())
    if not result.exercises:
        result.error = "the solution notebook has no exercises"
    judged = {cell.get("id") for cell in solution.cells
              if notebook_format.is_check(cell) or notebook_format.is_exercise(cell)}
    for cell_run in run.failures():
        if cell_run.cell_id not in judged and cell_run.status != "not-run":
            cell = notebook.cells[cell_run.index]
            result.notes.append(f"{notebook_format.cell_label(cell, cell_run.index)} {_verb(cell_run)}")
    result.seconds = time.monotonic() - started
    return result, notebook


def grade_notebook(path: str | Path, *, solutions_dir: str | Path | None = None,
                   timeout: float = 120, restamped_dir: str | Path | None = None,
                   env: dict[str, str] | None = None) -> NotebookGrade:
    """Grade one learner notebook file. Never raises for a bad notebook: the problem goes
    to ``NotebookGrade.error``. The kernel runs in the notebook's folder."""
    path = Path(path)
    try:
        folder = (Path(solutions_dir) if solutions_dir
                  else notebook_format.course_root(path.parent) / "solutions")
        learner = notebook_format.read_notebook(path, require_ids=False)
        solution_path = find_solution(learner, path, folder)
        solution = notebook_format.read_notebook(solution_path)
    except ValueError as error:
        return NotebookGrade(notebook=notebook_format.shown(path), error=str(error))
    try:
        result, _ = grade(learner, solution, cwd=path.parent, timeout=timeout, env=env,
                          label=notebook_format.shown(path),
                          restamped_path=Path(restamped_dir) / path.name if restamped_dir
                          else None)
    except Exception as error:  # noqa: BLE001 - e.g. no kernel; report it, grade the rest
        return NotebookGrade(notebook=notebook_format.shown(path), solution=notebook_format.shown(solution_path),
                             error=f"could not run the notebook: {type(error).__name__}: {error}")
    result.solution = notebook_format.shown(solution_path)
    return result


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
        if result.passed:
            lines.append(f"  {result.name}: PASS")
            continue
        lines.append(f"  {result.name}: FAIL")
        pad = " " * 16
        lines.append(f"      expected: {_quoted(result.expected, pad)}")
        lines.append(f"      got:      {_quoted(result.got, pad)}")
        for note in result.notes:
            lines.append(f"      note: {note}")
    for note in grade.restamped + grade.notes:
        lines.append(f"  note: {note}")
    lines.append(f"  score: {grade.passed}/{grade.total} exercises passed")
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


def collect(paths: list[str]) -> list[Path]:
    """Notebook files named on the command line; a folder means its ``*.ipynb``."""
    found = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found += sorted(p for p in path.glob("*.ipynb") if p.is_file())
        elif path.is_file():
            found.append(path)
        else:
            raise ValueError(f"no such notebook or folder: {name}")
    return found


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="NOTEBOOK_OR_FOLDER",
                        help="learner notebooks, or folders of them (e.g. submissions/)")
    parser.add_argument("--solutions", metavar="DIR",
                        help="folder of solution notebooks (default: the course's solutions/)")
    parser.add_argument("--timeout", type=float, default=120, metavar="SECONDS",
                        help="per-cell time limit; a cell running longer is interrupted and "
                             "reported (default: 120)")
    # One thread by default: verdicts do not depend on it (the determinism test checks),
    # and torch's OpenMP threads spin and multiply CPU time on a busy machine.
    parser.add_argument("--threads", type=int, default=1,
                        help="OMP/MKL threads in the kernel (default: 1; 0: torch's choice)")
    parser.add_argument("--json", action="store_true",
                        help="print a machine-readable report (a JSON list) instead of text")
    parser.add_argument("--csv", metavar="OUT",
                        help="also write one CSV row per notebook to OUT")
    parser.add_argument("--restamped", metavar="DIR",
                        help="also write each restamped notebook to DIR (to run "
                             "`pytest --nbval-lax` on it)")


def run(args: argparse.Namespace) -> int:
    try:
        paths = collect(args.paths)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not paths:
        print("error: no notebooks to grade", file=sys.stderr)
        return 2
    grades = []
    for path in paths:
        grade = grade_notebook(path, solutions_dir=args.solutions, timeout=args.timeout,
                               restamped_dir=args.restamped, env=kernel_env(args.threads or None))
        grades.append(grade)
        if not args.json:
            print(format_report(grade), flush=True)
    if args.json:
        print(json.dumps([grade.to_dict() for grade in grades], indent=2))
    elif len(grades) > 1:
        print(f"{sum(g.ok for g in grades)}/{len(grades)} notebooks passed every exercise")
    if args.csv:
        write_csv(grades, args.csv)
    return 0 if all(grade.ok for grade in grades) else 1
