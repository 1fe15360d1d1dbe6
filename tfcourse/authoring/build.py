"""``tfcourse build-notebooks``: generate learner notebooks from the solution notebooks.

With a translation file beside a solution (``solutions/NN_topic.zh.md``, see
``translation``) it also writes the Chinese edition: ``solutions/zh/`` and ``notebooks/zh/``.

``solutions/NN_topic.ipynb`` (complete, executed, the source of truth) becomes
``notebooks/NN_topic.ipynb``:

- in exercise cells, each ``### BEGIN SOLUTION`` ... ``### END SOLUTION`` region becomes,
  at the marker's indentation, ``# Hint: ...`` (first region; wrapped at ``HINT_WIDTH``
  display columns, each further line a ``# `` comment) and
  ``raise NotImplementedError("Exercise '<Name>': ...")``; the code around it stays;
- check cells keep their source and become read-only; like every other code cell they
  have no execution count (nothing ran in a fresh notebook), and their one output says
  what the reference printed, marked as such: "expected (the reference's output):
  causal_mask: 4/4 checks passed" (``expected_output``). Nothing reads it back: the grader
  and ``restamp`` take the verdicts from the solution;
- every other code cell loses its outputs and execution count, so learners start clean;
- cell ids are kept (the grader restamps check cells by id); notebook metadata is
  normalized (standard kernel, ``tfcourse`` kept, widget state and paths dropped).

Solutions are validated first; any problem is reported with the notebook and the cell.
``--check`` writes nothing and exits 1 if a learner notebook differs from what would be
generated, or if ``notebooks/`` holds a notebook with no solution.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..course import notebook_format
from ..course.stubs import stub_message
from ..language import text_width
from . import translation
from .sanitize import find_machine_paths

HINT_PREFIX = "# Hint: "
HINT_PREFIXES = {"en": HINT_PREFIX, "zh": "# 提示："}  # by the notebook's language
HINT_CONTINUATION = "# "
# Display columns of a hint line, indentation included (a Chinese character takes two):
# longer lines ran past a JupyterLab window 1400 px wide.
HINT_WIDTH = 88
# What a fresh learner notebook shows under a check cell: the reference's verdict, said to be
# the reference's (the cell has not run there), by the notebook's language.
EXPECTED_LABELS = {"en": "expected (the reference's output):", "zh": "预期（参考实现的输出）："}
EXPECTED_KEY = "expected"  # output metadata tfcourse.expected: true marks that output
_CJK = "\u2e80-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
_HINT_UNITS = re.compile(f"\\s+|[{_CJK}]|[^\\s{_CJK}]+")  # spaces, one CJK character, a word
_NO_LINE_START = set("，。、；：！？）」』》〉】”’,.;:!?)]}")  # stays with what precedes it
_NO_LINE_END = set("（「『《〈【“‘([{")  # stays with what follows it
_CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_STUB = re.compile(r"^(?P<indent>[ \t]*)raise NotImplementedError\(\s*[\"'](?:Exercise|练习) ")


@dataclass(frozen=True)
class Region:
    """Lines ``begin`` (the BEGIN marker) to ``end`` (the END marker) of a cell's source."""

    begin: int
    end: int
    indent: str


def solution_regions(source: str) -> list[Region]:
    """Find the ``### BEGIN SOLUTION`` / ``### END SOLUTION`` regions of a cell source.

    Raises ``ValueError`` for an unbalanced or nested marker, naming the line.
    """
    regions, begin = [], None
    for number, line in enumerate(source.split("\n")):
        marker = line.strip()
        if marker == notebook_format.BEGIN_MARKER:
            if begin is not None:
                raise ValueError(
                    f"line {number + 1}: '{notebook_format.BEGIN_MARKER}' inside another "
                    f"solution region (opened on line {begin + 1})"
                )
            begin = number
        elif marker == notebook_format.END_MARKER:
            if begin is None:
                raise ValueError(
                    f"line {number + 1}: '{notebook_format.END_MARKER}' without a "
                    f"'{notebook_format.BEGIN_MARKER}' before it"
                )
            opening = source.split("\n")[begin]
            regions.append(Region(begin, number, opening[: len(opening) - len(opening.lstrip())]))
            begin = None
    if begin is not None:
        raise ValueError(
            f"line {begin + 1}: '{notebook_format.BEGIN_MARKER}' "
            f"has no '{notebook_format.END_MARKER}'"
        )
    return regions


def make_stub(
    source: str, name: str | None, hint: str | None = None, *, language: str = "en"
) -> str:
    """Replace every solution region of ``source`` by the learner's stub.

    >>> print(make_stub("def f(x):\\n    ### BEGIN SOLUTION\\n    return x\\n"
    ...                 "    ### END SOLUTION", "F", "return it"))
    def f(x):
        # Hint: return it
        raise NotImplementedError("Exercise 'F': replace this line with your implementation")
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"exercise name must be a non-empty string, got {name!r}")
    lines = source.split("\n")
    regions = solution_regions(source)
    if not regions:
        raise ValueError(
            f"no '{notebook_format.BEGIN_MARKER}' / '{notebook_format.END_MARKER}' region"
        )
    out, position = [], 0
    for number, region in enumerate(regions):
        out += lines[position : region.begin]
        if hint and number == 0:
            out += hint_lines(hint, region.indent, language)
        out.append(f"{region.indent}raise NotImplementedError({stub_message(name, language)!r})")
        position = region.end + 1
    return "\n".join(out + lines[position:])


def hint_lines(hint: str, indent: str = "", language: str = "en") -> list[str]:
    """The hint as comment lines at ``indent``: ``# Hint: ...`` and, past ``HINT_WIDTH``
    display columns, further lines starting ``# ``. Lines break at spaces, and between
    Chinese characters but never before a closing mark (，。）) or after an opening one
    (（“); a word longer than a line stays whole.

    >>> hint_lines("keep the lower triangle", "    ")
    ['    # Hint: keep the lower triangle']
    """
    words: list[str] = []  # each with the space before it, if any, as its first character
    space, glue = False, False
    for unit in _HINT_UNITS.findall(" ".join(hint.split())):
        if unit.isspace():
            space = True
            continue
        if words and not space and (glue or unit[0] in _NO_LINE_START):
            words[-1] += unit
        else:
            words.append((" " if space and words else "") + unit)
        space, glue = False, unit[-1] in _NO_LINE_END
    lines, line = [], indent + HINT_PREFIXES[language]
    fresh = True  # nothing on this line yet but its prefix
    for word in words:
        if not fresh and text_width(line + word) > HINT_WIDTH:
            head, tail = _break_after_a_mark(line, len(indent + HINT_CONTINUATION))
            lines.append(head)
            tail = tail.lstrip(" ")
            # The word keeps its space when the line it joins already has words
            # ("均方加 self.eps", not "均方加self.eps").
            line, word = indent + HINT_CONTINUATION + tail, word if tail else word.lstrip(" ")
        line, fresh = line + word, False
    return [*lines, line]


# Chinese breaks best after a mark that ends a phrase: a line may give back up to this many
# columns to end on one rather than inside a word (对角 / 线).
_MARKS_THAT_END_A_PHRASE = "，。；：、？！）”"
_GIVE_BACK = 24


def _break_after_a_mark(line: str, start: int) -> tuple[str, str]:
    """``line`` cut after its last phrase-ending mark within ``_GIVE_BACK`` columns of its
    end (the part after it opens the next line), or left whole."""
    for cut in range(len(line) - 1, start, -1):
        if text_width(line[cut + 1 :]) > _GIVE_BACK:
            break
        if line[cut] in _MARKS_THAT_END_A_PHRASE:
            return line[: cut + 1], line[cut + 1 :]
    return line, ""


def expected_output(outputs, language: str = "en"):
    """The output a fresh learner notebook shows under a check cell: the verdict the
    reference printed (``outputs``, the solution's), marked as the reference's, in the
    notebook's language; None when it printed nothing."""
    verdict = "".join(
        output.get("text", "")
        if output.get("output_type") == "stream"
        else output.get("data", {}).get("text/plain", "")
        for output in outputs
        if (output.get("output_type"), output.get("name")) == ("stream", "stdout")
        or output.get("output_type") in ("execute_result", "display_data")
    ).strip("\n")
    if not verdict:
        return None
    label, lines = EXPECTED_LABELS[language], verdict.split("\n")
    text = (
        f"{label}{'' if language == 'zh' else ' '}{verdict}"
        if len(lines) == 1
        else "\n".join([label, *(f"  {line}" for line in lines)])
    )
    # nbformat through notebook_format, whose import keeps nbformat's fast
    return notebook_format.nbformat.v4.new_output(
        "display_data", data={"text/plain": text}, metadata={"tfcourse": {EXPECTED_KEY: True}}
    )


def fill_in(learner_source: str, solution_source: str, *, keep_markers: bool = False) -> str:
    """Put the solution's regions back in place of the stubs of a learner cell.

    The inverse of ``make_stub`` (exactly, with ``keep_markers=True``). Used by the tests
    that grade "a learner notebook with every exercise solved". Raises ``ValueError`` if
    the learner cell no longer has one stub per solution region.
    """
    solution_lines = solution_source.split("\n")
    bodies = [
        solution_lines[r.begin : r.end + 1] if keep_markers else solution_lines[r.begin + 1 : r.end]
        for r in solution_regions(solution_source)
    ]
    out, used = [], 0
    for line in learner_source.split("\n"):
        match = _STUB.match(line)
        if not match:
            out.append(line)
            continue
        if used == len(bodies):
            raise ValueError(
                "the learner cell has more exercise stubs than the solution has regions"
            )
        # The hint right above the stub: its first line and the lines it wraps onto.
        starts = tuple(match.group("indent") + prefix for prefix in HINT_PREFIXES.values())
        top = len(out)
        while (
            top
            and out[top - 1].startswith(match.group("indent") + HINT_CONTINUATION)
            and not out[top - 1].startswith(starts)
        ):
            top -= 1
        if top and out[top - 1].startswith(starts):
            del out[top - 1 :]
        out += bodies[used]
        used += 1
    if used != len(bodies):
        raise ValueError(
            f"the learner cell has {used} exercise stubs, the solution {len(bodies)} regions"
        )
    return "\n".join(out)


def _compiles(source: str) -> str | None:
    """None if the cell source is valid IPython, else the SyntaxError message."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        compile(TransformerManager().transform_cell(source), "<cell>", "exec")
    except SyntaxError as error:
        return f"{error.msg} (line {error.lineno})"
    return None


def validate_solution(nb) -> list[str]:
    """Every problem that stops ``nb`` from being a course solution notebook.

    Each message names the cell ("cell 'ex-rmsnorm' (#5): ..."). Checks: unique valid ids;
    exercise cells have a name and balanced markers, and their stub still compiles;
    markers appear only in exercise cells; check cells have a name, the
    ``nbval-check-output`` tag and a stored, error-free output; every exercise has a check
    and every check an exercise; no machine paths in sources or outputs.
    """
    problems: list[str] = []
    seen_ids: dict[str, int] = {}
    exercises: dict[str, int] = {}
    checks: dict[str, int] = {}
    for index, cell in enumerate(nb.cells):
        label = notebook_format.cell_label(cell, index)
        cell_id = cell.get("id")
        if not cell_id or not _CELL_ID.match(str(cell_id)):
            problems.append(f"{label}: id must be 1-64 letters, digits, '-' or '_'")
        elif cell_id in seen_ids:
            problems.append(f"{label}: id {cell_id!r} is also used by cell #{seen_ids[cell_id]}")
        else:
            seen_ids[cell_id] = index
        source = cell.get("source", "")
        for path in find_machine_paths(source):
            problems.append(f"{label}: machine-specific path {path!r} in the source")
        for text in notebook_format.text_of_outputs(cell.get("outputs", [])):
            for path in find_machine_paths(text):
                problems.append(
                    f"{label}: machine-specific path {path!r} in an output "
                    f"(run `tfcourse execute` to re-run and strip it)"
                )
        if cell.cell_type != "code":
            continue
        has_markers = notebook_format.BEGIN_MARKER in source or notebook_format.END_MARKER in source
        name = notebook_format.exercise_name(cell)
        if notebook_format.is_exercise(cell):
            if name is None:
                problems.append(
                    f"{label}: exercise cell without metadata tfcourse.exercise "
                    f"(the exercise's name)"
                )
            try:
                if not solution_regions(source):
                    problems.append(
                        f"{label}: exercise cell without a '{notebook_format.BEGIN_MARKER}' "
                        f"/ '{notebook_format.END_MARKER}' region"
                    )
                else:
                    error = _compiles(make_stub(source, name or "?"))
                    if error:
                        problems.append(f"{label}: the learner's stub does not compile: {error}")
            except ValueError as error:
                problems.append(f"{label}: {error}")
            if name:
                exercises.setdefault(name, index)
        elif has_markers:
            problems.append(
                f"{label}: solution markers in a cell not tagged '{notebook_format.EXERCISE_TAG}'"
            )
        if notebook_format.is_check(cell):
            if name is None:
                problems.append(f"{label}: check cell without metadata tfcourse.exercise")
            else:
                checks.setdefault(name, index)
            if notebook_format.CHECK_OUTPUT_TAG not in notebook_format.tags(cell):
                problems.append(
                    f"{label}: check cell without the '{notebook_format.CHECK_OUTPUT_TAG}' tag "
                    f"(nbval would not compare it)"
                )
            if not cell.get("outputs") or cell.get("execution_count") is None:
                problems.append(
                    f"{label}: check cell has no stored output; run "
                    f"`tfcourse execute` on the solution first"
                )
            elif any(out.get("output_type") == "error" for out in cell.outputs):
                problems.append(f"{label}: check cell's stored output is an error, not a verdict")
            if notebook_format.is_exercise(cell):
                problems.append(f"{label}: a cell cannot be both an exercise and a check")
    for name, index in exercises.items():
        if name not in checks:
            problems.append(
                f"{notebook_format.cell_label(nb.cells[index], index)}: exercise {name!r} has "
                f"no check cell (tag '{notebook_format.CHECK_TAG}', tfcourse.exercise={name!r})"
            )
    for name, index in checks.items():
        if name not in exercises:
            problems.append(
                f"{notebook_format.cell_label(nb.cells[index], index)}: check for {name!r}, "
                f"but no exercise cell has that name"
            )
    return problems


def make_learner(solution, name: str):
    """The learner notebook for a (validated) solution notebook; ``name`` is its stem."""
    nb = copy.deepcopy(solution)
    notebook_format.normalize_metadata(nb)
    nb.metadata.setdefault("tfcourse", {})["notebook"] = name
    language = notebook_format.language_of(nb)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if notebook_format.is_check(cell):
            check = notebook_format.learner_check_cell(cell)
            expected = expected_output(cell.outputs, language)
            check.outputs, check.execution_count = [expected] if expected else [], None
            nb.cells[index] = check
            continue
        if notebook_format.is_exercise(cell):
            hint = cell.metadata.get("tfcourse", {}).get("hint")
            cell.source = make_stub(
                cell.source, notebook_format.exercise_name(cell), hint, language=language
            )
        cell.outputs, cell.execution_count = [], None
    return nb


def solve(learner, solution):
    """A copy of ``learner`` with every exercise stub replaced by the solution's code, as
    if a learner had solved everything (markers not included). For tests and demos."""
    nb = copy.deepcopy(learner)
    reference = {cell.get("id"): cell for cell in solution.cells}
    for cell in nb.cells:
        if notebook_format.is_exercise(cell) and cell.get("id") in reference:
            cell.source = fill_in(cell.source, reference[cell.id].source)
    return nb


@dataclass
class BuildReport:
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    out_of_sync: list[Path] = field(default_factory=list)
    orphans: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.out_of_sync or self.orphans or self.problems)


def build(
    solutions_dir: str | Path,
    out_dir: str | Path,
    *,
    only: list[Path] | None = None,
    check: bool = False,
) -> BuildReport:
    """Generate ``out_dir/NAME.ipynb`` for each ``solutions_dir/NAME.ipynb``.

    ``only`` restricts to some solution files (orphans are then not looked for). With
    ``check=True`` nothing is written: differences go to ``out_of_sync`` and learner
    notebooks without a solution to ``orphans``. Otherwise orphans are deleted (the
    folder is generated).
    """
    solutions_dir, out_dir = Path(solutions_dir), Path(out_dir)
    report = BuildReport()
    sources = sorted(only) if only else sorted(solutions_dir.glob("*.ipynb"))
    for source in sources:
        try:
            solution = notebook_format.read_notebook(source)
        except ValueError as error:
            report.problems.append(str(error))
            continue
        problems = validate_solution(solution)
        if problems:
            report.problems += [
                f"{notebook_format.shown(source)}: {problem}" for problem in problems
            ]
            continue
        _emit(report, out_dir / source.name, make_learner(solution, source.stem), check)
        if translation.twin_path(source).exists():
            _build_chinese(report, source, solution, out_dir, check)
    if not only:
        names = {source.name for source in sources}
        chinese = {source.name for source in sources if translation.twin_path(source).exists()}
        for folder, expected in (
            (out_dir, names),
            (out_dir / translation.LANGUAGE, chinese),
            (solutions_dir / translation.LANGUAGE, chinese),
        ):
            for generated in sorted(folder.glob("*.ipynb")) if folder.is_dir() else []:
                if generated.name not in expected:
                    report.orphans.append(generated)
                    if not check:
                        generated.unlink()
    return report


def _emit(report: BuildReport, target: Path, nb, check: bool) -> None:
    """Write ``nb`` to ``target`` unless it is already there (``check``: only compare)."""
    text = notebook_format.dumps(nb)
    current = target.read_text(encoding="utf-8") if target.exists() else None
    if current == text:
        report.unchanged.append(target)
    elif check:
        report.out_of_sync.append(target)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        report.written.append(target)


def _keep_outputs(chinese, previous) -> None:
    """The Chinese solution's own outputs stay: where the previous Chinese solution holds
    the same cell (same id and source), executed (``tfcourse execute solutions/zh/...``),
    its outputs win over the English ones the cell was copied with -- a cell may print
    Chinese with the very same code (a check's "6/6 项检查通过", a figure's labels). A cell
    that prints translated text starts without outputs until it is executed."""
    executed = {cell.get("id"): cell for cell in previous.cells if cell.cell_type == "code"}
    for cell in chinese.cells:
        old = executed.get(cell.get("id"))
        if (
            cell.cell_type == "code"
            and old is not None
            and old.source == cell.source
            and old.outputs
        ):
            cell.outputs, cell.execution_count = old.outputs, old.execution_count


def _build_chinese(report: BuildReport, source: Path, solution, out_dir: Path, check: bool) -> None:
    """``solutions/zh/NAME.ipynb`` and ``notebooks/zh/NAME.ipynb`` from the solution and
    its translations (``solutions/NAME.zh.md``); a missing or stale translation is a
    problem naming the cell."""
    try:
        sections = translation.parse_twin(
            translation.twin_path(source).read_text(encoding="utf-8"),
            notebook_format.shown(translation.twin_path(source)),
        )
    except ValueError as error:
        report.problems.append(str(error))
        return
    chinese, problems = translation.translate_notebook(solution, sections, source.stem)
    problems += validate_solution(chinese)
    if problems:
        report.problems += [
            f"{notebook_format.shown(source)} (中文版): {problem}" for problem in problems
        ]
        return
    notebook_format.normalize_metadata(chinese)
    target = source.parent / translation.LANGUAGE / source.name
    if target.exists():
        _keep_outputs(chinese, notebook_format.read_notebook(target))
    _emit(report, target, chinese, check)
    _emit(
        report,
        out_dir / translation.LANGUAGE / source.name,
        make_learner(chinese, source.stem),
        check,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "notebooks",
        nargs="*",
        metavar="NOTEBOOK",
        help="solution notebooks to build (default: all of solutions/)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if notebooks/ is out of sync with solutions/",
    )
    parser.add_argument(
        "--solutions",
        metavar="DIR",
        help="folder of solution notebooks (default: <course>/solutions)",
    )
    parser.add_argument(
        "--out", metavar="DIR", help="folder for learner notebooks (default: <course>/notebooks)"
    )


def run(args: argparse.Namespace) -> int:
    root = notebook_format.course_root()
    solutions_dir = Path(args.solutions) if args.solutions else root / "solutions"
    out_dir = Path(args.out) if args.out else root / "notebooks"
    only = []
    for name in args.notebooks:
        path = Path(name)
        if not path.exists():
            path = solutions_dir / (path.name if path.suffix else f"{path.name}.ipynb")
        if not path.exists():
            print(
                f"error: no solution notebook {name!r} "
                f"(looked in {notebook_format.shown(solutions_dir)})",
                file=sys.stderr,
            )
            return 2
        only.append(path)
    if not only and not sorted(solutions_dir.glob("*.ipynb")):
        print(
            f"error: no solution notebooks in {notebook_format.shown(solutions_dir)}",
            file=sys.stderr,
        )
        return 2
    report = build(solutions_dir, out_dir, only=only or None, check=args.check)
    for problem in report.problems:
        print(f"error: {problem}", file=sys.stderr)
    for path in report.written:
        print(f"wrote {notebook_format.shown(path)}")
    for path in report.out_of_sync:
        state = "differs from what its solution generates" if path.exists() else "is missing"
        print(f"out of sync: {notebook_format.shown(path)} {state}")
    for path in report.orphans:
        if args.check:
            print(
                f"orphan: {notebook_format.shown(path)} has no solution in "
                f"{notebook_format.shown(solutions_dir)}"
            )
        else:
            print(f"removed {notebook_format.shown(path)} (no solution notebook)")
    if args.check:
        if report.ok:
            print(f"{len(report.unchanged)} learner notebooks in sync with their solutions")
        else:
            print(
                "run `tfcourse build-notebooks` (or `make notebooks`) to regenerate",
                file=sys.stderr,
            )
        return 0 if report.ok else 1
    if not report.problems:
        print(f"{len(report.written)} written, {len(report.unchanged)} unchanged")
    return 1 if report.problems else 0
