"""Course notebook files: the tag/metadata conventions, strict reading, deterministic writing.

Conventions (see CONTRIBUTING.md, "Notebook conventions"):

- exercise cell: tag ``exercise``, metadata ``tfcourse.exercise`` (name) and ``tfcourse.hint``;
  the reference code sits between ``### BEGIN SOLUTION`` and ``### END SOLUTION``;
- check cell: tags ``check`` and ``nbval-check-output``, metadata ``tfcourse.exercise``;
  only check calls; its stored output is the expected verdict;
- every cell has a stable, unique ``id``; notebooks are nbformat 4.5.

Writing is deterministic (sorted keys, one-space indent, trailing newline), so regenerating
an unchanged notebook gives the same bytes and ``git diff`` shows only real changes.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import sys
import threading
from pathlib import Path

# nbformat validates with jsonschema, which imports rfc3987_syntax when it is installed
# (Jupyter's extras bring it), and that module builds dozens of parsers at import: seconds
# on every `tfcourse` command, for the IRI formats no notebook schema uses. Unless something
# imported it already, this process goes without it (jsonschema then skips those formats).
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # None: "not installed"

import nbformat  # noqa: E402

from ..language import say  # noqa: E402

EXERCISE_TAG = "exercise"
CHECK_TAG = "check"
CHECK_OUTPUT_TAG = "nbval-check-output"
IGNORE_OUTPUT_TAG = "nbval-ignore-output"
BEGIN_MARKER = "### BEGIN SOLUTION"
END_MARKER = "### END SOLUTION"

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
LANGUAGE_INFO = {"name": "python"}

# Output MIME types that carry widget model ids (random per run) or pictures; neither is
# compared, and widget views are dropped from stored outputs.
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def tags(cell) -> list[str]:
    """The cell's tags (empty list if none)."""
    found = cell.get("metadata", {}).get("tags", [])
    return list(found) if isinstance(found, list) else []


def is_check(cell) -> bool:
    return cell.get("cell_type") == "code" and CHECK_TAG in tags(cell)


def is_exercise(cell) -> bool:
    return cell.get("cell_type") == "code" and EXERCISE_TAG in tags(cell)


def exercise_name(cell) -> str | None:
    """``metadata.tfcourse.exercise`` of an exercise or check cell, or None."""
    name = cell.get("metadata", {}).get("tfcourse", {}).get("exercise")
    return name if isinstance(name, str) and name.strip() else None


def exercise_cells(nb, exercise: str) -> list:
    """The exercise cells of ``exercise`` in ``nb``, in order (a solution has one; a
    learner may have copied theirs)."""
    return [c for c in nb.cells if is_exercise(c) and exercise_name(c) == exercise]


def exercise_cell(nb, exercise: str):
    """The first exercise cell of ``exercise`` in ``nb``, or None."""
    return next(iter(exercise_cells(nb, exercise)), None)


def defined_names(source: str) -> set[str]:
    """Top-level functions and classes a cell defines (by regex if it does not parse)."""
    try:
        tree = parse_python(source)
    except SyntaxError:
        return set(re.findall(r"^(?:def|class)\s+(\w+)", source, flags=re.MULTILINE))
    return {
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }


def exercise_index(learner, solution, exercise: str | None) -> int | None:
    """Where ``learner`` holds its cell of ``exercise``: the last cell with its exercise tag,
    else the last that defines what the solution's exercise cell defines (a cell whose
    metadata another editor dropped); None if neither."""
    cells = list(enumerate(learner.cells))
    found = [i for i, cell in cells if is_exercise(cell) and exercise_name(cell) == exercise]
    ours = exercise_cell(solution, exercise) if exercise else None
    wanted = defined_names(ours.source) if ours is not None else set()
    if not found and wanted:
        found = [
            i
            for i, cell in cells
            if cell.get("cell_type") == "code" and wanted <= defined_names(cell.get("source", ""))
        ]
    return found[-1] if found else None


def check_cells(nb, exercise: str) -> list:
    """The check cells of ``exercise`` in ``nb``, in order."""
    return [c for c in nb.cells if is_check(c) and exercise_name(c) == exercise]


def learner_check_cell(cell):
    """A copy of a solution check cell as learners get it: same source, id and stored
    output, read-only in JupyterLab."""
    cell = copy.deepcopy(cell)
    cell.metadata["editable"] = False
    cell.metadata["deletable"] = False
    return cell


def cell_label(cell, index: int) -> str:
    """How reports name a cell: its id and its position, e.g. "cell 'ex-rmsnorm' (#5)"."""
    return say(
        f"cell {cell.get('id', '?')!r} (#{index})", f"单元格 {cell.get('id', '?')!r}（#{index}）"
    )


def language_of(nb) -> str:
    """The edition a notebook (or its raw JSON) says it belongs to: ``"zh"`` or ``"en"``."""
    meta = nb.get("metadata") if isinstance(nb, dict) else None
    course = meta.get("tfcourse") if isinstance(meta, dict) else None
    return "zh" if isinstance(course, dict) and course.get("language") == "zh" else "en"


def read_notebook(path: str | Path, *, require_ids: bool = True) -> nbformat.NotebookNode:
    """Read a notebook, checking that it is nbformat 4.5+ with an ``id`` on every cell.

    nbformat silently invents random ids for cells that lack them; we read the raw JSON
    first so that a missing id is an error instead of a new id on every run. Learner
    notebooks are read with ``require_ids=False`` (the grader copes with what it gets).
    Raises ``ValueError`` naming the file and the problem.
    """
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        # RecursionError: JSON nested deeper than Python's recursion limit (a hostile file)
        raise ValueError(f"{path}: cannot read notebook: {error}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        # A file's content, not an argument's type: ValueError like every other bad file.
        message = f"{path}: not a notebook (expected a JSON object with a 'cells' list)"
        raise ValueError(message)
    if require_ids:
        version = (raw.get("nbformat"), raw.get("nbformat_minor"))
        if version[0] != 4 or not isinstance(version[1], int) or version[1] < 5:
            raise ValueError(
                f"{path}: expected nbformat 4.5 or later (cell ids), got {version[0]}.{version[1]}"
            )
        missing = [index for index, cell in enumerate(raw["cells"]) if not cell.get("id")]
        if missing:
            raise ValueError(f"{path}: cells at positions {missing} have no 'id'")
    import warnings

    with warnings.catch_warnings():
        # Learner notebooks without ids get some here; we told the caller already.
        warnings.simplefilter("ignore")
        try:
            return nbformat.reads(json.dumps(raw), as_version=4)
        except Exception as error:  # noqa: BLE001 - nbformat raises many kinds for bad files
            raise ValueError(f"{path}: not a valid notebook: {error}") from None


def dumps(nb) -> str:
    """Serialize deterministically: nbformat's v4 writer (sorted keys, indent 1) + newline."""
    text = nbformat.writes(nb, version=4)
    return text if text.endswith("\n") else text + "\n"


def write_notebook(nb, path: str | Path) -> bool:
    """Write ``nb`` to ``path``; return True if the file changed (untouched if identical)."""
    path = Path(path)
    text = dumps(nb)
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


def normalize_metadata(nb) -> None:
    """Keep only the notebook metadata the course needs (in place).

    Drops widget state (random model ids), editor settings and anything naming an
    interpreter path; keeps ``tfcourse`` and sets the standard kernel.
    """
    course = nb.metadata.get("tfcourse")
    nb.metadata = nbformat.from_dict(
        {"kernelspec": dict(KERNELSPEC), "language_info": dict(LANGUAGE_INFO)}
    )
    if course is not None:
        nb.metadata["tfcourse"] = copy.deepcopy(course)
    nb.nbformat, nb.nbformat_minor = 4, max(5, int(nb.get("nbformat_minor", 5)))
    for cell in nb.cells:
        # Per-run execution timestamps would make every re-execution a diff.
        cell.get("metadata", {}).pop("execution", None)


def text_of_outputs(outputs) -> list[str]:
    """Every text carried by ``outputs`` (streams, text MIME types, errors); not images."""
    texts = []
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            texts.append(output.get("text", ""))
        elif kind in ("display_data", "execute_result"):
            for mime, value in output.get("data", {}).items():
                if isinstance(value, str) and (mime.startswith("text/") or "json" in mime):
                    texts.append(value)
        elif kind == "error":
            texts.append(f"{output.get('ename', '')}: {output.get('evalue', '')}")
            texts.extend(output.get("traceback", []))
    return texts


def course_root(start: str | Path | None = None) -> Path:
    """The course folder: the first of ``start`` (default: the current folder) and its
    parents that holds ``solutions/``, else the checkout this package was installed from
    (editable install), else ``start``."""
    start = Path(start or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / "solutions").is_dir():
            return folder
    checkout = Path(__file__).resolve().parents[2]  # tfcourse/course/ -> the checkout
    if (checkout / "solutions").is_dir():
        return checkout
    return start


def shown(path: str | Path) -> str:
    """``path`` relative to the current folder when it is inside it (shorter reports). A
    symbolic link keeps its own name: the report names the file given, not its target."""
    path = Path(path)
    try:
        return str((path.parent.resolve() / path.name).relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# CPython 3.11 keeps ast.parse's recursion depth in the interpreter, not the thread: two
# threads parsing at once (``tfcourse grade --jobs N``) can fail with "SystemError: AST
# constructor recursion depth mismatch". Every parse in the course tooling goes through here.
_PARSE_LOCK = threading.Lock()


def parse_python(source: str, filename: str = "<cell>") -> ast.Module:
    """``ast.parse``, one thread at a time."""
    with _PARSE_LOCK:
        return ast.parse(source, filename=filename)
