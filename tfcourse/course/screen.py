"""What a learner's screen shows when a check runs in a notebook.

- A failing check shows its verdict in a few lines, without the frames of the course's
  code: IPython draws an exception through its ``_render_traceback_`` when it has one. The
  check's message (``tfcourse/checks/_harness.py``) gives a short first line (the check,
  what differed, "check 3 of 6"), then the case, how it differed or what was raised, where
  the learner's code raised it (added here), ``looks like: <the mistake>`` and a hint.
  ``full_traceback()`` prints the whole traceback of the last failure, and
  ``TFCOURSE_TRACEBACK=full`` keeps IPython's own.
- ``one_line(message)``: a failing check's first line with its diagnosis, where a verdict
  must fit one line (a table's cell).
- A cell that stops at an exercise's stub (its ``NotImplementedError``, in a check or in a
  demo that uses the learner's code) prints one line and counts as run, so Run All goes on
  to the plots and widgets below (``install_stub_handler``, called by the notebook's first
  cell). Only in the notebook's kernel: the grader runs the checks itself and gives an
  unsolved exercise nothing.
"""

from __future__ import annotations

import functools
import os
import sysconfig
import traceback
from pathlib import Path

from ..language import say

TRACEBACK_ENV = "TFCOURSE_TRACEBACK"
_last: list[BaseException] = []  # the last failure, for full_traceback()

# How a failing check's message labels its last lines (tfcourse/checks/_harness.py), in
# either language: a message is read in whichever it was written in.
LOOKS_LIKE = ("  looks like: ", "  可能的原因：")
HINT = ("  hint: ", "  提示：")


def one_line(message: str) -> str:
    """A failing check's first line and, when it names the likely mistake, that diagnosis:
    ``"LayerNorm: output differs from the reference (check 3 of 6); looks like: ..."``
    (the whole message's first line when it has no diagnosis)."""
    lines = message.strip().splitlines()
    if not lines:
        return ""
    for line in lines[1:]:
        if line.startswith(LOOKS_LIKE[0]):
            return f"{lines[0]}; {line.strip()}"
        if line.startswith(LOOKS_LIKE[1]):
            return f"{lines[0]}；{line.strip()}"
    return lines[0]


def _learners_lines(error: BaseException) -> list[str]:
    """Where the learner's own code raised the error a check reports (its ``__cause__``):
    the frames outside any installed package, the last three."""
    cause = error.__cause__
    if cause is None or cause.__traceback__ is None:
        return []
    installed = (str(Path(__file__).resolve().parents[1]), *sysconfig.get_paths().values())
    frames = [
        frame
        for frame in traceback.extract_tb(cause.__traceback__)
        if not frame.filename.startswith(installed)
    ]
    return [
        say(
            f"  in your code, line {frame.lineno}: {(frame.line or '').strip()}",
            f"  出错位置在你的代码第 {frame.lineno} 行：{(frame.line or '').strip()}",
        )
        for frame in frames[-3:]
    ]


def _short(error: BaseException) -> list[str]:
    """The verdict as IPython's structured traceback: the exception's name and message, the
    learner's lines that raised, and where to find the rest."""
    red, plain = "\x1b[0;31m", "\x1b[0m"
    lines = str(error).strip().splitlines() or [""]
    # The learner's lines follow what was raised, before the diagnosis and the hint.
    at = next(
        (i for i, line in enumerate(lines) if i and line.startswith(LOOKS_LIKE + HINT)),
        len(lines),
    )
    return [
        f"{red}{type(error).__name__}{plain}: {lines[0]}",
        *lines[1:at],
        *_learners_lines(error),
        *lines[at:],
        say(
            "  (the full traceback: tc.checks.full_traceback())",
            "  （完整的回溯信息：tc.checks.full_traceback()）",
        ),
    ]


def full_traceback() -> None:
    """Print the whole traceback of the last failed check, frames of the course included."""
    if not _last:
        print(say("no check has failed in this kernel yet", "这个内核里还没有检查失败过"))
        return
    print("".join(traceback.format_exception(_last[0])), end="")


def _is_stub(error) -> bool:
    from .stubs import is_stub_message

    return isinstance(error, NotImplementedError) and is_stub_message(str(error))


def install_stub_handler(shell) -> None:
    """In IPython ``shell``, a stub's ``NotImplementedError`` prints one line and the cell
    counts as run (so Run All does not stop there); every other error is shown as usual."""

    def one_line(shell, etype, value, tb, tb_offset=None):
        if not _is_stub(value):
            return shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        print(say(f"not solved yet: {value}", f"尚未完成：{value}"))
        return None

    def counts_as_run(result) -> None:
        if _is_stub(result.error_in_exec):
            result.error_in_exec = None  # read by the kernel after this event: status "ok"

    shell.set_custom_exc((NotImplementedError,), one_line)
    if counts_as_run.__name__ not in {f.__name__ for f in shell.events.callbacks["post_run_cell"]}:
        shell.events.register("post_run_cell", counts_as_run)


def learner_facing(check):
    """Wrap a ``check_*`` function for the learner's screen (see the module docstring)."""

    @functools.wraps(check)
    def run(*args, **kwargs):
        try:
            return check(*args, **kwargs)
        except NotImplementedError:
            raise  # an unsolved exercise: install_stub_handler
        except Exception as error:
            _last[:] = [error]
            if os.environ.get(TRACEBACK_ENV, "").strip().lower() != "full":
                error._render_traceback_ = functools.partial(_short, error)  # type: ignore[attr-defined]  # IPython's hook
            raise

    return run
