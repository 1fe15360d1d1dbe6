"""Ctrl-C and SIGTERM during ``tfcourse train``: stop after the step in progress, save it,
say how to resume, and exit 128 + the signal (130, 143) without a traceback.

``Signals`` holds the handlers for the whole command; while training, the first signal is
only recorded (``Stop`` is raised between two steps), since a step cut in half (weights
updated, step not counted) cannot be saved; a second one stops at once (``Interrupted``).
Under torchrun the ranks agree on the signal (``agreed_signal``), so all save together.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading

import torch

from ..language import say
from .checkpoint import CHECKPOINT_NAME


class Interrupted(BaseException):
    """SIGINT or SIGTERM that stops the command at once (a BaseException, like
    KeyboardInterrupt, so that no ``except Exception`` on the way swallows it)."""

    def __init__(self, signum: int, phase: str):
        super().__init__(signum)
        self.signum, self.phase = signum, phase


class Stop(Exception):
    """Raised between two steps to end training after a signal, with a consistent state."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class Signals:
    """SIGINT and SIGTERM for the whole command. Before and after training they stop it
    at once; in ``phase == "training"`` the first is only recorded, because a step cut in
    half (weights updated, step not counted) cannot be saved; a second one stops at once."""

    def __init__(self):
        self.signum, self.phase, self._old = None, "setup", {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():  # where signal.signal works
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._old[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc):
        for signum, handler in self._old.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)

    def _handle(self, signum, frame):
        if self.phase == "training" and self.signum is None:
            self.signum = signum
            return
        raise Interrupted(signum, self.phase)


def interrupted(stop: BaseException, quiet: bool) -> int:
    """Say that a signal stopped the command before it could save; 128 + the signal."""
    signum = getattr(stop, "signum", signal.SIGINT)
    name = signal.Signals(signum).name
    phase = getattr(stop, "phase", None)
    if quiet:
        pass
    elif phase == "training":
        print(
            say(
                f"interrupted again ({name}): stopped at once, without saving the step in progress",
                f"再次中断（{name}）：立即停止，正在进行的这一步没有保存",
            ),
            file=sys.stderr,
        )
    elif phase == "done":
        print(
            say(
                f"interrupted ({name}) after training had finished (and been saved, with --out)",
                f"已中断（{name}）：训练已经结束（有 --out 时也已保存）",
            ),
            file=sys.stderr,
        )
    else:
        print(
            say(
                f"interrupted ({name}) before training started: nothing was saved",
                f"已中断（{name}）：训练还没开始，没有保存任何内容",
            ),
            file=sys.stderr,
        )
    return 128 + signum


def agreed_signal(signum: int | None, env) -> int | None:
    """The signal to stop on. Under torchrun the ranks agree (the largest), so all stop
    after the same step and save together (saving is collective)."""
    if not env.enabled:
        return signum
    import torch.distributed as dist

    flag = torch.tensor([signum or 0], device=env.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return int(flag.item()) or None


def resume_command(args, checkpoint_path: str, env) -> str:
    """The shell command that continues this run from ``checkpoint_path``."""
    words = (
        ["torchrun", "--standalone", f"--nproc_per_node={env.world_size}", "-m", "tfcourse"]
        if env.enabled
        else ["tfcourse"]
    ) + ["train"]
    if args.out and checkpoint_path == os.path.join(args.out, CHECKPOINT_NAME):
        words += ["--out", args.out, "--resume"]
    else:
        words += ["--resume", checkpoint_path]
    if args.device:  # not in the checkpoint
        words += ["--device", args.device]
    if args.save_every:
        words += ["--save-every", str(args.save_every)]
    return shlex.join(words)


def interrupt_line(signum: int, step: int, total: int, checkpoint_path, args, env) -> str:
    name = signal.Signals(signum).name
    if not checkpoint_path:
        return say(
            f"interrupted ({name}) at step {step} of {total}; nothing was saved "
            f"(no --out: pass --out DIR to keep a run)",
            f"已中断（{name}），停在第 {step}/{total} 步；没有保存任何内容"
            f"（没有 --out：加上 --out DIR 才能保留训练进度）",
        )
    command = resume_command(args, checkpoint_path, env)
    return say(
        f"interrupted ({name}) at step {step} of {total}: saved {checkpoint_path}; "
        f"resume with: {command}",
        f"已中断（{name}），停在第 {step}/{total} 步：已保存到 {checkpoint_path}；"
        f"继续训练请运行：{command}",
    )
