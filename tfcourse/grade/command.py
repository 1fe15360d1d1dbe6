"""``tfcourse grade``, the command: its flags, their checks, and the class run.

Everything a teacher can get wrong is found before any grading, which can take minutes
(``check_arguments``: numbers, output paths, the sandbox, the secret); then the notebooks
are graded ``--jobs`` at a time by ``notebook.grade_notebook``, each report printed as it
comes, and the CSV, JSON and Gradescope outputs written at the end. How one notebook is
graded is in ``notebook.py``. A notebook that breaks anything gets its own line and the run
goes on; the CSV and JSON are always written.

Exit status: 0 only if every exercise of every notebook passes; 1 otherwise; 2 for bad
arguments (no notebooks found, a bad number, an output path that cannot be written, no
sandbox without ``--unsealed``: all checked before any grading); 128 + N when signal N
(SIGTERM, SIGHUP, SIGINT) stopped it, every worker ended and nothing written
(``_stop_on_signals``). The sandbox is bubblewrap
where it works, else (as root, in a container) a fresh user per worker
(``choose_sandbox``).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from ..course import notebook_format
from ..language import say
from .gradescope import write_results
from .records import NotebookGrade
from .report import format_report, json_report, probe_output, write_csv
from .sealed import syscalls, users
from .sealed.sandbox import sandbox
from .sealed.seal import package_dir
from .secret import secret_path

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)

if TYPE_CHECKING:
    from .sealed.session import SandboxKind


def collect(paths: list[str]) -> list[Path]:
    """The notebook files named on the command line; a folder means its ``*.ipynb``."""
    found = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found += sorted(p for p in path.glob("*.ipynb") if p.is_file() or p.is_symlink())
        elif path.is_file() or path.is_symlink():
            found.append(path)
        else:
            raise ValueError(
                say(f"no such notebook or folder: {name}", f"没有这个 notebook 或文件夹：{name}")
            )
    return found


def number(flag: str, value, *, low: float, high: float, integer: bool = False) -> str:
    """A problem with a numeric flag ("" when ``low <= value <= high``, finite, and an
    integer where asked)."""
    ok = (
        isinstance(value, (int, float))
        and math.isfinite(value)
        and low <= value <= high
        and (not integer or float(value).is_integer())
    )
    if ok:
        return ""
    kind = say("an integer", "整数") if integer else say("a number", "数")
    return say(
        f"{flag} must be {kind} from {low:g} to {high:g}, got {value!r}",
        f"{flag} 必须是 {low:g} 到 {high:g} 之间的{kind}，实际是 {value!r}",
    )


def check_arguments(args: argparse.Namespace, kind: SandboxKind, why: str) -> list[str]:
    """Every problem found before any grading (which can take minutes): numbers, output
    files (created now, so a full disk or a typo shows at once), the sandbox (``kind``,
    and ``why`` it cannot work: ``choose_sandbox``)."""
    problems = [
        p
        for p in (
            number("--timeout", args.timeout, low=1, high=24 * 3600),
            number("--threads", args.threads, low=0, high=256, integer=True),
            number("--jobs", args.jobs, low=1, high=256, integer=True),
        )
        if p
    ]
    for flag, value in (("--csv", args.csv), ("--gradescope", args.gradescope)):
        if value is not None and (problem := probe_output(value)):
            problems.append(f"{flag} {value}: {problem}")
    if args.solutions is not None and not Path(args.solutions).is_dir():
        problems.append(
            say(
                f"--solutions {args.solutions}: not a folder",
                f"--solutions {args.solutions}：不是文件夹",
            )
        )
    if not why and kind == "users":
        with tempfile.TemporaryDirectory(prefix="tfcourse-probe-") as scratch:
            why = users.probe(private_paths(hidden_paths(args)), Path(scratch))
    if why:
        problems.append(
            say(
                f"cannot seal the learners' code here: {why}. Install bubblewrap "
                "(Debian/Ubuntu: apt-get install bubblewrap) and grade as a user allowed to "
                "create namespaces, or as root with the grader's files readable by root only "
                "(docs/grading.md), or pass --unsealed to grade without the sandbox (every "
                "report line then says the grade is unsealed)",
                f"无法在这里隔离学员的代码：{why}。请安装 bubblewrap（Debian/Ubuntu："
                "apt-get install bubblewrap）并以可以创建命名空间的用户评分，或者以 root 身份评分、"
                "并让评分器的文件只有 root 可读（见 docs/grading.md），或者使用 --unsealed "
                "在没有沙箱的情况下评分（报告的每一行都会注明成绩未经隔离）",
            )
        )
    elif kind != "none" and (unfiltered := syscalls.unavailable()):
        problems.append(
            say(
                f"cannot filter the learners' system calls here ({unfiltered}): install "
                "libseccomp (Debian/Ubuntu: apt-get install libseccomp2), or pass --unsealed",
                f"无法在这里过滤学员代码的系统调用（{unfiltered}）：请安装 libseccomp"
                "（Debian/Ubuntu：apt-get install libseccomp2），或者使用 --unsealed",
            )
        )
    return problems


def choose_sandbox(args: argparse.Namespace) -> tuple[SandboxKind, str]:
    """``(the sandbox of this run, why it cannot work or "")``: ``none`` under
    ``--unsealed``; else bubblewrap where it works (``--sandbox auto`` or ``bubblewrap``),
    else a fresh user per worker where the grader is root (``auto`` or ``users``). Under
    ``users`` the grader's files made from now on are readable by root only."""
    if args.unsealed:
        return "none", ""
    reasons = []
    if args.sandbox in ("auto", "bubblewrap"):
        found = sandbox()
        if found.bwrap is not None:
            return "bubblewrap", ""
        reasons.append(found.reason)
        if args.sandbox == "bubblewrap":
            return "bubblewrap", found.reason
    if why := users.available():
        return "users", "; ".join([*reasons, why])
    os.umask(0o077)
    return "users", ""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's flags; their help in the reader's language (``TFCOURSE_LANG``)."""
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="NOTEBOOK_OR_FOLDER",
        help=say(
            "learner notebooks, or folders of them (e.g. submissions/)",
            "学员的 notebook，或存放它们的文件夹（例如 submissions/）",
        ),
    )
    parser.add_argument(
        "--solutions",
        metavar="DIR",
        help=say(
            "folder of solution notebooks (default: the course's own)",
            "参考答案 notebook 所在的文件夹（默认：课程自带的）",
        ),
    )
    parser.add_argument(
        "--against",
        metavar="NAME",
        help=say(
            "grade every notebook against this course notebook (e.g. "
            "03_norms); default: the one whose name the file name contains",
            "所有 notebook 都对照这个课程 notebook 评分（例如 03_norms）；"
            "默认：文件名中包含其名称的那个",
        ),
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help=say(
            "notebooks graded at once (default: the number of cores)",
            "同时评分的 notebook 数（默认：CPU 核数）",
        ),
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=120,
        metavar="SECONDS",
        help=say(
            "per-cell and per-check-call time limit (default: 120)",
            "每个单元格、每次检查调用的时间上限（默认：120 秒）",
        ),
    )
    # One thread by default: verdicts do not depend on it (the determinism test checks),
    # and torch's OpenMP threads spin and multiply CPU time on a busy machine.
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help=say(
            "OMP/MKL threads for learner code (default: 1; 0: torch's choice)",
            "学员代码使用的 OMP/MKL 线程数（默认：1；0：由 torch 决定）",
        ),
    )
    parser.add_argument(
        "--unsealed",
        action="store_true",
        help=say(
            "grade without the sandbox where it cannot work (no "
            "bubblewrap, macOS): learner code can then read and write what "
            "you can; every report line says so",
            "在沙箱无法工作的地方（没有 bubblewrap、macOS）不用沙箱评分："
            "学员代码能读写你能读写的一切；报告的每一行都会注明",
        ),
    )
    parser.add_argument(
        "--sandbox",
        choices=("auto", "bubblewrap", "users"),
        default="auto",
        help=say(
            "how learner code is sealed: bubblewrap, or (as root, where "
            "bubblewrap cannot run) a fresh unprivileged user per worker "
            "(default: auto, the first that works)",
            "学员代码的隔离方式：bubblewrap，或者（以 root 运行且 bubblewrap "
            "无法运行时）每个隔离进程使用一个全新的非特权用户（默认：auto，"
            "取第一个可用的）",
        ),
    )
    parser.add_argument(
        "--secret",
        metavar="FILE",
        help=say(
            "the grading secret that draws each learner's cases (default: "
            "created on first use in your config folder)",
            "为每位学员抽取测试用例的评分密钥（默认：首次使用时在你的配置文件夹中创建）",
        ),
    )
    parser.add_argument(
        "--identity",
        metavar="ID",
        help=say(
            "the learner's identity that draws their cases, e.g. a "
            "Gradescope submission id (default: each notebook's file name; "
            "one notebook only)",
            "用来抽取测试用例的学员身份，例如 Gradescope 的提交 id（默认："
            "每个 notebook 的文件名；只能用于一个 notebook）",
        ),
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help=say(
            "print a machine-readable report (a JSON list) instead of text",
            "输出机器可读的报告（一个 JSON 列表），而不是文字报告",
        ),
    )
    parser.add_argument(
        "--csv",
        metavar="OUT",
        help=say(
            "also write one CSV row per notebook to OUT", "另外把每个 notebook 的一行 CSV 写入 OUT"
        ),
    )
    parser.add_argument(
        "--gradescope",
        metavar="OUT",
        help=say(
            "also write Gradescope's results.json to OUT",
            "另外把 Gradescope 的 results.json 写入 OUT",
        ),
    )


def run(args: argparse.Namespace) -> int:
    kind, why = choose_sandbox(args)  # first: it may set the umask
    problems = check_arguments(args, kind, why)
    try:
        paths = collect(args.paths)
    except ValueError as error:
        problems.append(str(error))
        paths = []
    if not paths and not problems:
        problems.append(say("no notebooks to grade", "没有要评分的 notebook"))
    if args.identity is not None and len(paths) > 1:
        problems.append(
            say(
                f"--identity names one learner, but {len(paths)} notebooks were given",
                f"--identity 只能对应一位学员，但给出了 {len(paths)} 个 notebook",
            )
        )
    salt = None
    try:
        salt = learner_salt(args.secret)
    except (ValueError, OSError) as error:
        problems.append(say(f"the grading secret: {error}", f"评分密钥：{error}"))
    if problems:  # the first only, as argparse does: one fix at a time
        print(say(f"error: {problems[0]}", f"错误：{problems[0]}"), file=sys.stderr)
        return 2
    if kind != "none" and os.geteuid() == 0:
        print(
            say(
                "tfcourse grade: running as root; each learner's code runs as a fresh "
                "unprivileged user, never as root",
                "tfcourse grade：以 root 身份运行；每位学员的代码都以一个新的非特权用户运行，"
                "绝不会以 root 运行",
            ),
            file=sys.stderr,
        )
    # Imported here: torch and the grading machinery, not needed for `tfcourse grade --help`.
    from . import notebook
    from .sealed.session import Setup, grading_env

    setup = Setup(
        env=grading_env(int(args.threads) or None),
        timeout=args.timeout,
        sandbox=kind,
        salt=salt,
        hide=hidden_paths(args),
    )

    def grade_one(path: Path) -> tuple[NotebookGrade, str]:
        """The notebook's grade and its text report: its report, too, is its own business."""
        graded = notebook.grade_notebook(
            path, setup, solutions_dir=args.solutions, against=args.against, identity=args.identity
        )
        try:
            return graded, format_report(graded)
        except Exception as error:  # noqa: BLE001 - one notebook's line; the class goes on
            graded = NotebookGrade(
                notebook=notebook_format.shown(path),
                error=say(
                    f"the report of this notebook failed ({type(error).__name__}: {error})",
                    f"这个 notebook 的报告生成失败（{type(error).__name__}: {error}）",
                ),
            )
            return graded, format_report(graded)

    # Threads are enough: each exercise runs in its own worker process, and a crash or a
    # hang there is that exercise's verdict alone. Reports come out in the input order.
    with _stop_on_signals():
        pool = ThreadPoolExecutor(max_workers=min(int(args.jobs), len(paths)))
        try:
            grades = []
            for graded, text in pool.map(grade_one, paths):
                grades.append(graded)
                if not args.json:
                    print(text, flush=True)
        finally:
            pool.shutdown(cancel_futures=True)  # stopped: no notebook that has not begun begins
    if args.json:
        print(json_report(grades))
    elif len(grades) > 1:
        passed = f"{sum(g.ok for g in grades)}/{len(grades)}"
        print(
            say(f"{passed} notebooks passed every exercise", f"{passed} 个 notebook 通过了全部练习")
        )
    errors = write_outputs(grades, csv=args.csv, gradescope=args.gradescope)
    for failure in errors:
        print(say(f"error: {failure}", f"错误：{failure}"), file=sys.stderr)
    return 2 if errors else 0 if all(graded.ok for graded in grades) else 1


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """While it lasts, SIGTERM (``docker stop``, ``timeout``, ``kill``), SIGHUP and SIGINT end
    the grade as its normal end does, only sooner: every worker ended (``channel.stop``), then
    an exit with status 128 + the signal's number, so the grader's own clean-up runs (each
    session's, then the spare workers' and the sealed package's at exit). Without it a signal
    ends the grader at once and its spares' folders and control groups stay behind. Outside
    the main thread (where Python takes no handlers) it does nothing. Afterwards, the
    handlers are as they were and channels open again (a caller in the same process)."""
    from .sealed import channel

    def stop(number, frame):
        channel.stop()
        name = signal.Signals(number).name
        # The main thread may have been writing to stderr itself: the line is then lost.
        with contextlib.suppress(RuntimeError, OSError):
            print(
                say(
                    f"tfcourse grade: stopped by {name}: every worker ended, no grades written",
                    f"tfcourse grade：被 {name} 终止：所有隔离进程都已结束，没有写出成绩",
                ),
                file=sys.stderr,
            )
        raise SystemExit(128 + number)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, stop) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        channel.resume()


def write_outputs(
    grades: list[NotebookGrade], csv: str | Path | None = None, gradescope: str | Path | None = None
) -> list[str]:
    """Write the CSV and Gradescope's results.json that were asked for (``None``: not asked).

    Each is tried even when the other failed; what went wrong comes back as one line per
    file, instead of an exception, so the caller can say it and exit non-zero.
    """
    problems = []
    if csv is not None:
        try:
            write_csv(grades, csv)
        except (OSError, ValueError) as error:
            problems.append(str(error))
    if gradescope is not None:
        try:
            write_results(grades, gradescope)
        except (OSError, ValueError) as error:
            problems.append(str(error))
    return problems


def hidden_paths(args: argparse.Namespace) -> tuple[Path, ...]:
    """The teacher's own paths: covered in a worker wherever a mount it needs would show
    them (bubblewrap shows only system and Python folders to begin with), proven out of a
    fresh user's reach (``--sandbox users``)."""
    named = [
        *args.paths,
        args.solutions,
        args.csv,
        args.gradescope,
        args.secret or secret_path(),
    ]
    return tuple(Path(p).resolve() for p in named if p is not None and Path(p).exists())


def private_paths(hide: tuple[Path, ...]) -> list[Path]:
    """What a worker running as a fresh user must not reach (``users.probe``): the
    teacher's paths, the real package, and the course folder's solutions and history
    (the rest of a course folder is public, and its Python environment may lie inside)."""
    course = notebook_format.course_root(Path(__file__))
    return sorted(
        {*hide, package_dir(), course / "solutions", course / ".git", *map(Path, users.GRADESCOPE)}
    )


def learner_salt(secret_file: str | None) -> Callable[[str, str], int]:
    """``salt(identity, exercise)`` from the grader's secret (created on first use)."""
    from .secret import case_salt, load_secret

    secret = load_secret(Path(secret_file) if secret_file else None)
    return lambda identity, exercise: case_salt(secret, identity, exercise)
