"""``tfcourse execute``: re-run solution notebooks in place to refresh their stored outputs.

Each notebook runs top to bottom in a fresh kernel of the current environment, with the
notebook's folder as working directory and a per-cell timeout. Then, before writing:

- machine-specific text in outputs is rewritten (``tfcourse.authoring.sanitize``: paths keep only
  their file name, memory addresses are masked), so no committed output names a machine;
- widget views are dropped from outputs (their model ids are random; the text fallback
  stays) and notebook metadata is normalized (no widget state, standard kernel);
- cell ids, sources and cell metadata are kept; execution counts come from the run.

A notebook in which a cell raises (unless tagged ``raises-exception``) or times out is
not written: its old outputs stay, and the failing cell is named. Afterwards run
``tfcourse build-notebooks`` to regenerate the learner notebooks.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..course import notebook_format
from .run import kernel_env, run_notebook
from .sanitize import sanitize


def _same_stream(output, other) -> bool:
    return output.get("output_type") == "stream" and output.get("name") == other.get("name")


def clean_outputs(nb) -> None:
    """Sanitize every text output, join consecutive pieces of one stream (a kernel flushes
    a line in pieces as it pleases: one print can land in two outputs) and drop widget views
    (in place)."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept: list = []
        for output in cell.outputs:
            kind = output.get("output_type")
            if kind == "stream":
                output.text = sanitize(output.text)
                if kept and _same_stream(kept[-1], output):
                    kept[-1].text += output.text
                    continue
            elif kind in ("display_data", "execute_result"):
                data = output.get("data", {})
                data.pop(notebook_format.WIDGET_MIME, None)
                if not data:
                    continue
                for mime, value in data.items():
                    if isinstance(value, str) and (mime.startswith("text/") or "json" in mime):
                        data[mime] = sanitize(value)
            elif kind == "error":
                output.evalue = sanitize(output.get("evalue", ""))
                output.traceback = [sanitize(line) for line in output.get("traceback", [])]
            kept.append(output)
        cell.outputs = kept


def execute_notebook(
    path: str | Path, *, timeout: float = 600, threads: int | None = None, write: bool = True
) -> tuple[list[str], float, list[str]]:
    """Execute ``path`` in place. Returns (problems, seconds, slowest cells); writes only if
    there are no problems.

    ``problems`` name each cell that raised (untagged ``raises-exception``) or timed out;
    the slowest cells ("train 8.1 s") help keep a notebook within its time budget.
    """
    path = Path(path)
    nb = notebook_format.read_notebook(path)
    run = run_notebook(
        nb, cwd=path.parent, timeout=timeout, env=kernel_env(threads), kernel_log=True
    )
    problems = []
    for cell_run in run.failures():
        cell = nb.cells[cell_run.index]
        if cell_run.status == "error" and "raises-exception" in notebook_format.tags(cell):
            continue
        problems.append(
            f"{notebook_format.cell_label(cell, cell_run.index)}: {cell_run.status}: "
            f"{cell_run.error_text}"
        )
    clean_outputs(nb)
    notebook_format.normalize_metadata(nb)
    if not problems and write:
        notebook_format.write_notebook(nb, path)
    slowest = sorted(run.cells, key=lambda cell_run: -cell_run.seconds)[:3]
    return problems, run.seconds, [f"{r.cell_id or r.index} {r.seconds:.1f} s" for r in slowest]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "notebooks",
        nargs="*",
        metavar="NOTEBOOK",
        help="solution notebooks to execute (default: all of solutions/)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600,
        metavar="SECONDS",
        help="per-cell time limit (default: 600)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="pin OMP/MKL threads in the kernel (default: torch's choice)",
    )


def run(args: argparse.Namespace) -> int:
    if args.notebooks:
        paths = [Path(name) for name in args.notebooks]
    else:
        paths = sorted((notebook_format.course_root() / "solutions").glob("*.ipynb"))
    missing = [path for path in paths if not path.is_file()]
    if missing or not paths:
        print(
            f"error: no such notebook: {', '.join(map(str, missing)) or 'solutions/*.ipynb'}",
            file=sys.stderr,
        )
        return 2
    failed, started = 0, time.monotonic()
    for path in paths:
        try:
            problems, seconds, slowest = execute_notebook(
                path, timeout=args.timeout, threads=args.threads
            )
        except ValueError as error:
            problems, seconds, slowest = [str(error)], 0.0, []
        if problems:
            failed += 1
            print(f"FAILED {notebook_format.shown(path)} ({seconds:.1f} s), not written:")
            for problem in problems:
                print(f"  {problem}")
        else:
            print(
                f"executed {notebook_format.shown(path)} in {seconds:.1f} s (slowest cells: "
                f"{', '.join(slowest)})"
            )
    print(
        f"{len(paths) - failed}/{len(paths)} notebooks executed in "
        f"{time.monotonic() - started:.1f} s"
        + ("; now run `tfcourse build-notebooks`" if not failed else "")
    )
    return 1 if failed else 0
