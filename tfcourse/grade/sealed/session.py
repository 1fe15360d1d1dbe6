"""Grade exercises the sealed way: the learner's code in a worker, the check here.

One path, whatever happens. For exercises E1..En of a learner notebook:

1. a worker (``worker.py`` in the sandbox of ``sandbox.py``) gets the learner's code
   cells up to the last exercise's check (``_cells_for``), each exercise's shortcuts
   (``references.py``: functions that would do its whole job, which the worker watches
   for while it serves that exercise's check), and a sealed ``tfcourse`` in which each
   exercise's reference is a stub;
2. each call in an exercise's check cells (``check_rmsnorm(RMSNorm)``) runs here, in the
   grader, with stand-ins for the names it passes (``proxy.py``), on cases drawn from the
   grader's salt for that learner (``salt``) when one is given;
3. the verdict is what the check printed or raised, compared with the solution's stored
   output; a shortcut seen running means no points whatever the outputs; a worker that broke
   the protocol, died or hung fails that exercise, and nothing else runs anywhere.

An exercise that does not pass in the shared worker, unless its own check failed without
meeting anything sealed for a neighbour, is judged again in a worker of its own, sealed
for itself only (``_session`` once more), so that sealing a neighbour's reference never
costs a learner a point. Whether an exercise can be judged at all is
decided from the solution (``gradeable``), never from what a worker says.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import io
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

import torch

from ... import checks
from ...course import notebook_format
from ...language import say, speaking
from .. import references
from ..records import Reason
from . import channel, pool, proxy, undertaker, users
from .seal import package_dir, sealed_archive

HERE = Path(__file__).resolve().parent
MEMORY_BYTES = 8 * 2**30  # per worker (RLIMIT_DATA): far above what any exercise needs
FILE_BYTES = 64 * 2**20  # per file the worker writes (RLIMIT_FSIZE)
# A notebook's wall time, in cell timeouts (--timeout): 10 minutes at the default 120 s,
# where the course's own notebooks take seconds.
NOTEBOOK_TIMEOUTS = 5


# shortcut: the learner's code ran a function that does the whole exercise.
Status = Literal["passed", "failed", "shortcut"]


@dataclass
class SealedVerdict:
    """What the sealed path found for one exercise."""

    status: Status
    output: str = ""  # what the checks printed, or the failure message
    reason: Reason = ""  # why, when it failed
    notes: list[str] = field(default_factory=list)
    # the torch and course functions the learner's code called while the checks ran
    calls: list[str] = field(default_factory=list)


# Where a worker runs: bubblewrap (sandbox.py), a fresh user per worker (users.py), or
# nowhere sealed: the teacher's --unsealed, said on every report line.
SandboxKind = Literal["bubblewrap", "users", "none"]


@dataclass(frozen=True)
class Setup:
    """How this grading run starts workers: their environment, time limit, sandbox."""

    env: dict[str, str]
    timeout: float = 120
    sandbox: SandboxKind = "bubblewrap"
    # the grader's own paths: covered if a mount would show them (bubblewrap), proven out of
    # a worker's reach (users)
    hide: tuple[Path, ...] = ()
    # callable(identity, exercise) -> int: each learner's cases (the grader's secret); None:
    # the checks' public cases
    salt: Callable[[str, str], int] | None = None

    def __post_init__(self):
        if self.sandbox not in get_args(SandboxKind):
            raise ValueError(
                f"sandbox must be 'bubblewrap', 'users' or 'none', not {self.sandbox!r}"
            )

    @property
    def unsealed(self) -> bool:
        return self.sandbox == "none"

    @property
    def notebook_seconds(self) -> float:
        """The wall time one notebook's workers get in all, whatever its number of cells
        and exercises: ``NOTEBOOK_TIMEOUTS`` times a cell's."""
        return NOTEBOOK_TIMEOUTS * self.timeout


# What a worker keeps of the grader's environment: enough to run Python, torch and
# matplotlib the same way; no tokens, credentials or paths of other tools.
_KEPT = (  # noqa: SIM905 - a list of words
    "PATH HOME LANG LANGUAGE TZ TMPDIR MPLCONFIGDIR CUDA_VISIBLE_DEVICES "
    "LD_LIBRARY_PATH TFCOURSE_DEVICE TFCOURSE_LANG"
).split()
_KEPT_PREFIXES = ("LC_", "OMP_", "MKL_", "OPENBLAS_")


def grading_env(threads: int | None = 1) -> dict[str, str]:
    """The grader's environment scrubbed for a worker (only ``_KEPT`` and the locale and
    thread settings), with ``threads`` OMP/MKL threads (None: torch's choice)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name in _KEPT or name.startswith(_KEPT_PREFIXES)
    }
    if threads is not None:
        if not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive int, got {threads!r}")
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[name] = str(threads)
    return env


def check_calls(source: str) -> list[tuple[str, list[str]]]:
    """``[(check function, [argument expression])]`` of a check cell (ours, from the
    solution). Raises ``ValueError`` for anything but plain check calls."""
    calls = []
    for statement in notebook_format.parse_python(source).body:
        call = statement.value if isinstance(statement, ast.Expr) else None
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id.startswith("check_")
            and not call.keywords
        ):
            raise ValueError(
                say(
                    f"not a plain check call: {ast.unparse(statement)!r}",
                    f"不是一个简单的检查调用：{ast.unparse(statement)!r}",
                )
            )
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


# ------------------------------------------------------------------ what the solution says


def checks_of(solution, exercise: str):
    """``(check calls, expected stdout)`` of an exercise's check cells (``ValueError`` if a
    check cell holds anything but check calls)."""
    cells = notebook_format.check_cells(solution, exercise)
    calls = [call for cell in cells for call in check_calls(cell.source)]
    expected = "".join(
        output.get("text", "")
        for cell in cells
        for output in cell.outputs
        if output.get("output_type") == "stream" and output.get("name") == "stdout"
    )
    return calls, expected


def gradeable(solution, exercise: str) -> str:
    """Why ``exercise`` cannot be judged sealed ("" when it can), from the solution alone."""
    cell = notebook_format.exercise_cell(solution, exercise)
    if cell is not None and cell.metadata.get("tfcourse", {}).get("sealed", True) is False:
        return say(
            "its check looks at what your code does to the check's own model "
            "(metadata tfcourse.sealed is false), which a sealed worker cannot show; "
            "it earns no points in `tfcourse grade`",
            "它的检查要看你的代码对检查自己的模型做了什么（元数据 tfcourse.sealed 为 "
            "false），隔离进程无法体现这一点；在 `tfcourse grade` 中不计分",
        )
    try:
        calls, _ = checks_of(solution, exercise)
    except (ValueError, SyntaxError) as error:
        return say(
            f"its check cell cannot be judged sealed: {error}",
            f"它的检查单元格无法在隔离环境中评判：{error}",
        )
    unknown = sorted({name for name, _ in calls if not hasattr(checks, name)})
    if unknown:
        return say(
            f"its check cell calls {', '.join(unknown)}, which the course does not have",
            f"它的检查单元格调用了课程中不存在的 {'、'.join(unknown)}",
        )
    return ""


def _cells_for(learner, solution, exercise: str) -> list[tuple[str, str]]:
    """``[(cell label, source)]`` of the learner's code that runs for ``exercise``: every code
    cell down to the learner's exercise cell (``notebook_format.exercise_index``), and on
    below it up to the next check or exercise cell (a solution typed into a new cell below
    the stub counts); to the end without an exercise cell. The check
    cells never run (the checks run in the grader, from the solution), nor the course's
    demos, plots and widgets: cells identical to the solution's ``nbval-ignore-output``
    cells. Found by what the learner's cells are and hold, never by their ids (another
    editor may have changed them)."""
    checks = {cell.source.strip() for cell in solution.cells if notebook_format.is_check(cell)}
    demos = {
        cell.source.strip()
        for cell in solution.cells
        if notebook_format.IGNORE_OUTPUT_TAG in notebook_format.tags(cell)
    }
    own = notebook_format.exercise_index(learner, solution, exercise)
    cells: list[tuple[str, str]] = []
    for index, cell in enumerate(learner.cells):
        source = cell.get("source", "").strip()
        check = notebook_format.is_check(cell) or source in checks
        if own is not None and index > own and (check or notebook_format.is_exercise(cell)):
            break
        if cell.get("cell_type") == "code" and not check and source not in demos:
            cells.append((notebook_format.cell_label(cell, index), cell.get("source", "")))
    return cells


# ------------------------------------------------------------------ one worker, one verdict


def _start_process(env: dict[str, str], limits: dict, folder: Path, setup: Setup):
    """A worker process for one session, not yet told anything. Under bubblewrap, one
    started ahead in a sandbox of its own (``pool.py``); else a process of its own in
    ``folder``: as a fresh user (``users.py``, which adds its process limit to ``limits``),
    or unsealed. Raises ``channel.WorkerFailed``."""
    if setup.sandbox == "bubblewrap":
        home = {"HOME": pool.SESSION, "MPLCONFIGDIR": f"{pool.SESSION}/.matplotlib"}
        return pool.start(dict(env, TMPDIR="/tmp", **home), [*setup.hide, *graders_own()])
    work = folder / "work"  # the worker's; ``folder`` stays the grader's
    work.mkdir()
    for name in pool.WORKER_FILES:
        shutil.copyfile(HERE / name, work / name)
    env = dict(env, HOME=str(work), MPLCONFIGDIR=f"{work}/.matplotlib", TMPDIR=str(work))
    argv = [sys.executable, "-I", str(work / "worker.py")]
    with open(folder / "stderr.log", "wb") as log:
        try:
            if setup.sandbox == "users":
                limits["processes"] = users.PROCESSES
                return users.UserProcess(argv, folder=work, env=env, stderr=log)
            return subprocess.Popen(
                argv,
                cwd=work,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
        except (OSError, RuntimeError) as error:
            raise channel.WorkerFailed(
                say(f"the worker did not start: {error}", f"隔离进程没有启动：{error}")
            ) from None


def _start_worker(
    cells: list[str],
    hide: frozenset[str],
    shortcuts: dict[str, tuple[str, ...]],
    folder: Path,
    setup: Setup,
    budget: channel.Budget,
) -> tuple[proxy.Worker, list[dict]]:
    """Start a worker (``_start_process``) and run ``cells`` there; return it and the cells'
    results. Raises ``channel.WorkerFailed``."""
    # The worker's home and temporary files are its own (matplotlib draws nothing there).
    env = dict(setup.env, MPLBACKEND="Agg")
    limits = {
        # CPU time: the notebook's whole budget (a cell's wall time is limited in the
        # worker, and all of them together by ``budget``)
        "cpu_seconds": int(setup.notebook_seconds) + 1,
        "memory_bytes": MEMORY_BYTES,
        "file_bytes": FILE_BYTES,
    }
    package = torch.frombuffer(bytearray(sealed_archive(hide)), dtype=torch.uint8)
    first = {
        "cells": cells,
        "shortcuts": shortcuts,
        "threads": 1,
        "cell_seconds": setup.timeout,
        "limits": limits,
        "sealed": not setup.unsealed,
    }
    # A worker that ends before reading its first message has run nothing of the
    # learner's: under bubblewrap, another is taken, once.
    for again in (False, True):
        process = _start_process(env, limits, folder, setup)
        worker = proxy.Worker(process, setup.timeout, budget)
        try:
            worker.send(first, {"package": package})
            break
        except channel.TimedOut:
            worker.kill()  # a worker of its own user: kill ends the user too (users.end_user)
            raise
        except channel.WorkerFailed as error:
            if isinstance(process, pool.SealedWorker):
                said = process.discard()
                if not again:
                    continue
            else:
                said = ""
                process.kill()
            raise channel.WorkerFailed(
                say(
                    f"the worker ended before it started ({error})",
                    f"隔离进程在开始前就结束了（{error}）",
                )
                + (f" ({said})" if said else "")
            ) from None
    # Each cell has its own limit inside the worker; this wait only catches a worker that
    # stopped answering altogether: the notebook's budget is the bound.
    try:
        reply, _ = worker.receive(timeout=budget.seconds)
    except BaseException:
        worker.kill()
        raise
    ran = reply.get("cells")
    if not (
        isinstance(ran, list) and len(ran) == len(cells) and all(isinstance(r, dict) for r in ran)
    ):
        worker.kill()
        raise channel.ProtocolBroken(
            say(
                "the worker's report on your cells does not add up",
                "隔离进程关于你的单元格的报告对不上",
            )
        )
    return worker, ran


def graders_own() -> list[Path]:
    """What no worker may see wherever the grader runs from: the real package and the
    course folder it belongs to (for a non-editable install, a folder inside the package)."""
    return [package_dir(), notebook_format.course_root(HERE)]


def _judge(worker: proxy.Worker, solution, exercise: str, notes: list[str], salt) -> SealedVerdict:
    """Run ``exercise``'s checks here against the learner's code in ``worker``."""
    calls, expected = checks_of(solution, exercise)
    worker.exercise, seen_before = exercise, len(worker.seen)
    worker.called.clear()
    status: Status
    reason: Reason
    try:
        # The checks speak the language of the solution whose outputs they are compared with
        # (its Chinese edition prints "6/6 项检查通过"), whatever the report's language.
        with (
            speaking(notebook_format.language_of(solution)),
            _capture_stdout() as printed,
            checks.grading_cases(salt),
        ):
            for function, args in calls:
                values = [worker.evaluate(expression) for expression in args]
                getattr(checks, function)(*values)
        status, output, reason = "passed", printed.getvalue(), ""
    except Exception as error:  # noqa: BLE001 - sorted below: the learner's, or the course's
        status = "failed"
        if isinstance(error, (AssertionError, checks.CheckArgumentError)) or channel.from_worker(
            error
        ):
            # A check's verdict, the learner's code raising, or the worker's end.
            reason = channel.reason_of(error)
            output = printed.getvalue() + f"{type(error).__name__}: {error}"
        else:
            # Raised by the check itself: the learner earns nothing (nothing was judged),
            # and the report says whose bug it is.
            reason = "check-bug"
            output = say(
                f"the course's check broke on this answer ({type(error).__name__}: {error}): "
                f"a bug in tfcourse, not in your code; please report it",
                f"课程的检查在这份答案上出错了（{type(error).__name__}: {error}）："
                f"这是 tfcourse 的 bug，不是你的代码的问题，请报告给我们",
            )
    calls = sorted(worker.called)
    if seen := worker.seen[seen_before:]:
        return SealedVerdict(
            "shortcut", output=references.shortcut_said(seen), notes=notes, calls=calls
        )
    if status == "passed" and output != expected:
        status, reason = "failed", "mismatch"
    return SealedVerdict(
        status, output=output.rstrip("\n"), reason=reason, notes=notes, calls=calls
    )


def _session(
    learner,
    solution,
    seal: list[str],
    judged: list[str],
    setup: Setup,
    identity: str,
    budget: channel.Budget,
) -> dict[str, SealedVerdict]:
    """One worker, sealed for every exercise in ``seal``, running the learner's cells up to
    the last of them, within the notebook's ``budget``; a verdict for each exercise in
    ``judged``, on ``identity``'s cases."""
    hide = frozenset().union(*(references.reference_names(solution, name) for name in seal))
    shortcuts = {name: references.shortcuts(solution, name) for name in judged}
    sent = max((_cells_for(learner, solution, name) for name in seal), key=len)
    with undertaker.temporary_folder("tfcourse-sealed-") as folder:
        try:
            worker, ran = _start_worker(
                [source for _, source in sent], hide, shortcuts, Path(folder), setup, budget
            )
        except channel.WorkerFailed as error:
            failed = SealedVerdict(
                "failed",
                reason=channel.reason_of(error),
                output=say(f"while running your cells, {error}", f"运行你的单元格时，{error}"),
            )
            return {name: failed for name in judged}
        try:
            ours = frozenset(
                cell.source.strip() for cell in solution.cells if cell.get("cell_type") == "code"
            )
            notes = _raised(sent, ran, ours)
            return {
                name: _judge(
                    worker,
                    solution,
                    name,
                    notes,
                    setup.salt(identity, name) if setup.salt else None,
                )
                for name in judged
            }
        finally:
            worker.kill()


def _neighbours_may_matter(verdict: SealedVerdict) -> bool:
    """Whether a verdict from the shared worker could differ in a worker sealed for its
    exercise alone: anything but a pass, unless the check itself failed (``error``,
    ``mismatch``) without any sealed reference being met on the way (a neighbour's stub
    says "sealed" in its message). A shortcut is watched for per exercise, so it is seen
    the same in either worker. A learner who prints "sealed" only buys a second worker;
    no verdict can be bought that way."""
    if verdict.status in ("passed", "shortcut"):
        return False
    met_a_seal = "sealed" in verdict.output or any("sealed" in note for note in verdict.notes)
    return verdict.status != "failed" or verdict.reason not in ("error", "mismatch") or met_a_seal


def grade_exercises(
    learner, solution, exercises: list[str], setup: Setup, identity: str = ""
) -> dict[str, SealedVerdict]:
    """Sealed verdicts on ``exercises`` of one notebook, fast when they pass (see the
    module docstring: one shared worker, then one worker per exercise whose verdict there
    could depend on its neighbours, ``_neighbours_may_matter``), all within the notebook's
    wall time (``Setup.notebook_seconds``). ``identity``: the learner whose cases are
    drawn (``Setup.salt``)."""
    budget = channel.Budget.starting_now(setup.notebook_seconds)
    verdicts = {
        name: SealedVerdict("failed", output=why, reason="not-gradeable")
        for name in exercises
        if (why := gradeable(solution, name))
    }
    shared = [name for name in exercises if name not in verdicts]
    if len(shared) > 1:
        verdicts.update(
            {
                name: verdict
                for name, verdict in _session(
                    learner, solution, shared, shared, setup, identity, budget
                ).items()
                if not _neighbours_may_matter(verdict)
            }
        )
    retry = [name for name in shared if name not in verdicts]
    # Each retry is a worker of its own, mostly waiting on its process: run them at once,
    # each in a copy of this thread's context (the report's language, language.speaking).
    contexts = {name: contextvars.copy_context() for name in retry}
    with ThreadPoolExecutor(max_workers=max(1, len(retry))) as pool:
        alone = pool.map(
            lambda name: contexts[name].run(
                _session, learner, solution, [name], [name], setup, identity, budget
            ),
            retry,
        )
        for verdict in alone:
            verdicts.update(verdict)
    return {name: verdicts[name] for name in exercises}


# The worker's notes on lines of IPython syntax, by kind: (English, Chinese) templates.
_NOTES = {
    "shell": (
        "{label}: shell line `{line}` not run in grading",
        "{label}：shell 命令 `{line}` 在评分时不运行",
    ),
    "timing": (
        "{label}: `{line}` skipped in grading (it only measures time)",
        "{label}：评分时跳过了 `{line}`（它只测量耗时）",
    ),
    "magic": (
        "{label}: magic `{line}` skipped in grading",
        "{label}：评分时跳过了魔法命令 `{line}`",
    ),
    "failed": (
        "{label}: `{line}` had no effect in grading ({error})",
        "{label}：`{line}` 在评分时没有生效（{error}）",
    ),
}


def _raised(
    sent: list[tuple[str, str]], ran: list[dict], ours: frozenset[str] = frozenset()
) -> list[str]:
    """Notes on the learner's cells as the worker ran them: each line of IPython syntax that
    did not run as written there (a shell line, ``%timeit``, another magic: ``worker.py``,
    ``_hook_ipython``), then each cell that raised. The worker's reply is the learner's to
    shape, so a note of an unknown form is left out and every text is cut short. A cell
    identical to one of the solution's (``ours``: a demo that uses a sealed reference)
    gets no note: it is not the learner's doing."""
    notes = []
    # The reply may list fewer cells than were sent (the worker stopped): those get no note.
    for (label, source), r in zip(sent, ran, strict=False):
        if source.strip() in ours:
            continue
        reported = r.get("notes")
        for note in reported if isinstance(reported, list) else []:
            if not isinstance(note, dict):
                continue
            line, error = str(note.get("line", ""))[:120], str(note.get("error", ""))[:200]
            if note.get("kind") in _NOTES:
                english, chinese = _NOTES[note["kind"]]
                notes.append(
                    say(
                        english.format(label=label, line=line, error=error),
                        chinese.format(label=label, line=line, error=error),
                    )
                )
        if not r.get("ok"):
            notes.append(
                say(f"{label} raised {r.get('error')}", f"{label} 抛出了 {r.get('error')}")
            )
    return notes
