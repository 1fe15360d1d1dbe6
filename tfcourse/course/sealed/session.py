"""Grade one exercise the sealed way: the learner's code in a worker, the check here.

For exercise E of a (restamped) learner notebook:

1. the worker gets the learner's code cells up to E's exercise cell (not the check cells,
   not the notebook's demos, plots and widgets: cells identical to the solution's cells
   tagged ``nbval-ignore-output``), and the built-ins that would do E's whole job, which
   it traps; it imports a sealed ``tfcourse`` where E's reference is a stub;
2. each call in E's check cells (``check_rmsnorm(RMSNorm)``) runs here, in the grader,
   with stand-ins for the names it passes (``proxy.py``);
3. the verdict is what the check printed or raised, compared with the solution's stored
   output; a trapped built-in means no points whatever the outputs.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import importlib
import io
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ...language import say
from .. import notebook_format
from ..restamp import defined_names
from . import proxy

HERE = Path(__file__).resolve().parent
MEMORY_BYTES = 8 * 2**30        # per worker (RLIMIT_DATA): far above what any exercise needs


@dataclass
class SealedVerdict:
    """What the sealed path found for one exercise. ``status``: passed | failed |
    builtin | unsupported (fall back to the in-kernel verdict, and say so)."""

    status: str
    output: str = ""            # what the checks printed, or the failure message
    reason: str = ""            # for "failed": mismatch | error | timeout | worker-died
    notes: list[str] = field(default_factory=list)
    isolation: list[str] = field(default_factory=list)


def check_calls(source: str) -> list[tuple[str, list[str]]]:
    """``[(check function, [argument expression])]`` of a check cell (ours, from the
    solution). Raises ``ValueError`` for anything but plain check calls."""
    calls = []
    for statement in notebook_format.parse_python(source).body:
        call = statement.value if isinstance(statement, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id.startswith("check_") and not call.keywords):
            raise ValueError(say(f"not a plain check call: {ast.unparse(statement)!r}",
                                 f"不是一个简单的检查调用：{ast.unparse(statement)!r}"))
        calls.append((call.func.id, [ast.unparse(arg) for arg in call.args]))
    return calls


class _PerThreadStdout:
    """``sys.stdout`` that, in a thread that asked for it, writes to that thread's buffer:
    a check prints its verdict line, and ``--jobs N`` runs N checks at once."""

    def __init__(self, real):
        self.real, self.local = real, threading.local()

    def write(self, text):
        return (getattr(self.local, "buffer", None) or self.real).write(text)

    def flush(self):
        (getattr(self.local, "buffer", None) or self.real).flush()

    def __getattr__(self, name):
        return getattr(self.real, name)


_install_lock = threading.Lock()


@contextlib.contextmanager
def _capture_stdout():
    with _install_lock:
        if not isinstance(sys.stdout, _PerThreadStdout):
            sys.stdout = _PerThreadStdout(sys.stdout)
        dispatcher = sys.stdout
    dispatcher.local.buffer = buffer = io.StringIO()
    try:
        yield buffer
    finally:
        dispatcher.local.buffer = None


def cells_for(learner, solution, exercise: str) -> list[str]:
    """The learner's code the worker runs for ``exercise`` (see the module docstring)."""
    return [source for _, source in _cells_for(learner, solution, exercise)]


def _cells_for(learner, solution, exercise: str) -> list[tuple[str, str]]:
    """``[(cell label, source)]`` of the cells ``cells_for`` sends."""
    shown_only = {cell.source.strip() for cell in solution.cells
                  if cell.get("cell_type") == "code"
                  and notebook_format.IGNORE_OUTPUT_TAG in notebook_format.tags(cell)}
    cells, last = [], None
    for index, cell in enumerate(learner.cells):
        if cell.get("cell_type") != "code" or notebook_format.is_check(cell):
            continue
        if cell.get("source", "").strip() in shown_only:
            continue
        cells.append((notebook_format.cell_label(cell, index), cell.get("source", "")))
        if notebook_format.is_exercise(cell) and notebook_format.exercise_name(cell) == exercise:
            last = len(cells)
    return cells[:last] if last is not None else cells


def sealable(solution, exercise: str) -> bool:
    """False where the exercise cell's metadata says ``tfcourse.sealed: false``."""
    return all(cell.metadata.get("tfcourse", {}).get("sealed", True) is not False
               for cell in solution.cells if notebook_format.is_exercise(cell)
               and notebook_format.exercise_name(cell) == exercise)


def hidden_names(solution, exercise: str) -> tuple[frozenset[str], list[str]]:
    """The reference names to seal away and the built-ins to trap, for ``exercise``."""
    for cell in solution.cells:
        if notebook_format.is_exercise(cell) and notebook_format.exercise_name(cell) == exercise:
            meta = cell.metadata.get("tfcourse", {})
            return (frozenset(defined_names(cell.source) | set(meta.get("reference", []))),
                    list(meta.get("builtins", [])))
    return frozenset(), []


def start_worker(cells: list[str], hide: frozenset[str], builtins: list[str], *,
                 work: Path, env: dict[str, str], timeout: float):
    """Launch a worker in ``work`` and run ``cells`` there. Returns (worker, cell results,
    isolation in force)."""
    from .sandbox import launch
    from .seal import sealed_package

    for name in ("worker.py", "protocol.py"):
        shutil.copyfile(HERE / name, work / name)
    package = sealed_package(hide)
    course = notebook_format.course_root(HERE)
    real_package = HERE.parents[1]
    log = open(work / "stderr.log", "wb")  # noqa: SIM115 - closed with the worker
    # The worker's home and temporary folder are its own folder (the rest is read-only or
    # hidden in the namespaces); matplotlib draws nothing there.
    env = dict(env, HOME=str(work), TMPDIR=str(work), MPLCONFIGDIR=str(work / ".matplotlib"),
               MPLBACKEND="Agg")
    process, isolation = launch(
        [sys.executable, "-I", str(work / "worker.py"), str(package)], cwd=work, env=env,
        hide_paths=sorted({course, real_package}),
        cpu_seconds=int(timeout * (len(cells) + 10)), memory_bytes=MEMORY_BYTES,
        file_bytes=64 * 2**20, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
    worker = proxy.Worker(process, timeout)
    from . import protocol

    protocol.write_message(process.stdin, {"cells": cells, "builtins": builtins, "threads": 1,
                                           "cell_seconds": timeout})
    # Each cell has its own limit inside the worker; this one only catches a worker that
    # stopped answering altogether (startup included).
    reply, _ = worker.receive(timeout=timeout * (len(cells) + 1) + 60)
    return worker, reply.get("cells", []), isolation


def checks_of(solution, exercise: str):
    """``(check calls, expected stdout)`` of an exercise's check cells (``ValueError`` if a
    check cell holds anything but check calls)."""
    checks = [cell for cell in solution.cells
              if notebook_format.is_check(cell) and notebook_format.exercise_name(cell) == exercise]
    calls = [call for cell in checks for call in check_calls(cell.source)]
    expected = "".join(output.get("text", "") for cell in checks for output in cell.outputs
                       if output.get("output_type") == "stream" and output.get("name") == "stdout")
    return calls, expected


def _unsealable(solution, exercise: str) -> SealedVerdict | None:
    """A verdict of "unsupported" for an exercise the sealed path cannot judge, else None."""
    if not sealable(solution, exercise):
        return SealedVerdict("unsupported", notes=[say(
            "its check looks at what your code does to the check's own model (metadata "
            "tfcourse.sealed is false), which a copy sent to a worker cannot show",
            "它的检查要看你的代码对检查自己的模型做了什么（元数据 tfcourse.sealed 为 false），"
            "而发送到隔离进程中的副本无法体现这一点")])
    try:
        checks_of(solution, exercise)
    except (ValueError, SyntaxError) as error:
        return SealedVerdict("unsupported", notes=[say(f"check cell: {error}",
                                                       f"检查单元格：{error}")])
    return None


def _judge(worker, solution, exercise: str, notes: list[str], isolation: list[str]
           ) -> SealedVerdict:
    """Run ``exercise``'s checks here against the learner's code in ``worker``."""
    calls, expected = checks_of(solution, exercise)
    checks_module = importlib.import_module("tfcourse.checks")   # the judge: here, not there
    trapped_before = len(worker.trapped)
    try:
        with _capture_stdout() as printed:
            for function, args in calls:
                values = [worker.evaluate(expression) for expression in args]
                getattr(checks_module, function)(*values)
        status, output, reason = "passed", printed.getvalue(), ""
    except Exception as error:  # noqa: BLE001 - a check's verdict, or the worker's end
        if _unsupported(error):
            return SealedVerdict("unsupported", notes=[str(_unsupported(error))],
                                 isolation=isolation)
        status, reason = "failed", _reason(error)
        output = printed.getvalue() + f"{type(error).__name__}: {error}"
    trapped = worker.trapped[trapped_before:]
    if trapped:
        called = ", ".join(sorted(set(trapped)))
        return SealedVerdict("builtin", output=say(f"called {called}, which does the whole "
                                                   f"exercise",
                                                   f"调用了 {called}，它包办了整个练习"),
                             notes=notes, isolation=isolation)
    if status == "passed" and output != expected:
        status, reason = "failed", "mismatch"
    return SealedVerdict(status, output=output.rstrip("\n"), reason=reason, notes=notes,
                         isolation=isolation)


def grade_exercises(learner, solution, exercises: list[str], *, env: dict[str, str],
                    timeout: float = 120) -> dict[str, SealedVerdict]:
    """Sealed verdicts on several exercises of one notebook, fast when they pass.

    One worker first runs the learner's cells up to the last exercise with the references
    of *all* these exercises sealed and all their built-ins trapped, and every exercise is
    judged there. An exercise that does not pass there is judged again alone, sealed for
    itself only (``grade_exercise``), so that sealing a neighbour's reference never costs a
    learner a point. (A pass there stands: the learner's code, the final version of each
    definition, passed the check with more sealed, not less.)
    """
    verdicts = {name: v for name in exercises if (v := _unsealable(solution, name))}
    shared = [name for name in exercises if name not in verdicts]
    if len(shared) > 1:
        hide = frozenset().union(*(hidden_names(solution, name)[0] for name in shared))
        builtins = sorted({b for name in shared for b in hidden_names(solution, name)[1]})
        sent = _cells_for(learner, solution, shared[-1])
        for name in shared:     # up to the last of the exercises, in notebook order
            cells = _cells_for(learner, solution, name)
            if len(cells) > len(sent):
                sent = cells
        with tempfile.TemporaryDirectory(prefix="tfcourse-sealed-") as folder:
            try:
                worker, ran, isolation = start_worker([src for _, src in sent], hide, builtins,
                                                      work=Path(folder), env=env,
                                                      timeout=timeout)
            except proxy.WorkerFailed:
                worker = None
            if worker is not None:
                try:
                    notes = _raised(sent, ran)
                    for name in shared:
                        verdict = _judge(worker, solution, name, notes, isolation)
                        if verdict.status == "passed":
                            verdicts[name] = verdict
                finally:
                    worker.kill()
    retry = [name for name in shared if name not in verdicts]
    if retry:
        # Each retry is a worker of its own, mostly waiting on its process: run them at once,
        # each in a copy of this thread's context (the report's language, language.speaking).
        contexts = {name: contextvars.copy_context() for name in retry}
        with ThreadPoolExecutor(max_workers=len(retry)) as pool:
            for name, verdict in zip(retry, pool.map(lambda name: contexts[name].run(
                    grade_exercise, learner, solution, name, env=env, timeout=timeout), retry)):
                verdicts[name] = verdict
    return {name: verdicts[name] for name in exercises}


def grade_exercise(learner, solution, exercise: str, *, env: dict[str, str],
                   timeout: float = 120) -> SealedVerdict:
    """The sealed verdict on ``exercise`` alone (see the module docstring)."""
    unsealable = _unsealable(solution, exercise)
    if unsealable is not None:
        return unsealable
    hide, builtins = hidden_names(solution, exercise)
    with tempfile.TemporaryDirectory(prefix="tfcourse-sealed-") as folder:
        sent = _cells_for(learner, solution, exercise)
        try:
            worker, ran, isolation = start_worker([source for _, source in sent], hide,
                                                  builtins, work=Path(folder), env=env,
                                                  timeout=timeout)
        except proxy.WorkerFailed as error:
            return SealedVerdict("failed", output=say(f"while running your cells, {error}",
                                                      f"运行你的单元格时，{error}"),
                                 reason=_reason(error))
        notes = _raised(sent, ran)
        try:
            # Only calls while the check runs count: a scratch cell may try the built-in.
            return _judge(worker, solution, exercise, notes, isolation)
        finally:
            worker.kill()


def _raised(sent: list[tuple[str, str]], ran: list[dict]) -> list[str]:
    """A note for each of the learner's cells that raised in the worker."""
    return [say(f"{label} raised {r['error']}", f"{label} 抛出了 {r['error']}")
            for (label, _), r in zip(sent, ran) if not r["ok"]]


def _reason(error: BaseException) -> str:
    while error is not None:
        if isinstance(error, proxy.WorkerFailed):
            return "timeout" if error.timed_out else "worker-died"
        error = error.__cause__ or error.__context__
    return "error"


def _unsupported(error: BaseException):
    while error is not None:
        if isinstance(error, proxy.SealedUnsupported):
            return error
        error = error.__cause__ or error.__context__
    return None
