"""The machinery of ``tfcourse train`` (its flags and help: ``train_command.py``): the
checks before any work, the devices and processes, the run, and how it ends (an interrupt, a
checkpoint that cannot be written)."""

from __future__ import annotations

import os
import re
import sys

from ..language import say
from ..runtime import default_device
from . import interrupt, preflight
from .checkpoint import CheckpointSaveError
from .distributed import Distributed
from .flags import apply_preset
from .preflight import PreflightError
from .run import run_training


def run(args) -> int:
    with interrupt.Signals() as signals:
        return _run_checked(args, signals)


def _run_checked(args, signals: interrupt.Signals) -> int:
    quiet = int(os.environ.get("RANK", "0")) != 0  # under torchrun, rank 0 speaks
    try:
        apply_preset(args)
        preflight.check_arguments(args)
        device = preflight.resolve_device(args.device, default_device)
        env = Distributed(device, args.collective_timeout)
    except (PreflightError, ValueError, RuntimeError) as error:
        if not quiet:
            print(say(f"error: {error}", f"错误：{error}"), file=sys.stderr)
        return 2
    except (interrupt.Interrupted, KeyboardInterrupt) as stop:
        return interrupt.interrupted(stop, quiet)
    clean = True
    try:
        code = run_training(args, env, signals)
    except (interrupt.Interrupted, KeyboardInterrupt) as stop:
        code, clean = (
            interrupt.interrupted(stop, env.rank != 0),
            False,
        )  # peers may be mid-collective
    except CheckpointSaveError as error:
        if env.rank == 0:
            print(
                say(
                    f"error: could not write the checkpoint {error.path} ({error.reason}); "
                    f"no partial file was left, and a checkpoint saved there before is unchanged",
                    f"错误：无法写入检查点 {error.path}（{error.reason}）；没有留下写了一半的文件，"
                    f"之前保存在那里的检查点也没有改动",
                ),
                file=sys.stderr,
            )
        code, clean = 1, False  # the other ranks are still training
    except (ValueError, TypeError) as error:  # a bad flag value: say which, no traceback
        if env.rank == 0:
            print(say(f"error: {error}", f"错误：{error}"), file=sys.stderr)
        code = 2
    except (MemoryError, RuntimeError) as error:
        if _is_out_of_memory(error):
            print(_out_of_memory_line(error, args.no_memory_check), file=sys.stderr)
            code = 1
        elif not (env.enabled and _is_collective_failure(error)):
            raise
        else:
            detail = re.sub(r"^\[[^\]]*\]\s*", "", str(error).splitlines()[0])[:160]
            print(
                say(
                    f"error: rank {env.rank}: a collective operation failed or waited more than "
                    f"--collective-timeout={env.timeout_seconds:g} s for another process (frozen "
                    f"or dead); stopping ({detail})",
                    f"错误：rank {env.rank}：一次集合通信操作失败，"
                    "或等待另一个进程（已卡死或已退出）"
                    f"超过了 --collective-timeout={env.timeout_seconds:g} 秒；停止运行（{detail}）",
                ),
                file=sys.stderr,
            )
            code, clean = 3, False
    finally:
        env.close(clean)
    if env.enabled:
        # Under torchrun, a worker occasionally aborted *after* a clean teardown
        # ("terminate called without an active exception": a c10d/gloo thread still
        # alive while the interpreter exits). The work is done and saved, so leave
        # without running the interpreter's exit-time destructors.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _is_out_of_memory(error: BaseException) -> bool:
    text = str(error).lower()
    return (
        isinstance(error, MemoryError) or "can't allocate memory" in text or "out of memory" in text
    )


def _out_of_memory_line(error: BaseException, unchecked: bool) -> str:
    detail = re.sub(
        r"^\[[^\]]*\]\s*(err == 0\.\s*)?", "", (str(error) or "MemoryError").splitlines()[0]
    )[:160]
    hint = (
        say(
            " (--no-memory-check skipped the estimate that refuses such runs)",
            "（--no-memory-check 跳过了本会拒绝这种运行的内存估算）",
        )
        if unchecked
        else ""
    )
    return say(
        f"error: out of memory ({detail}); lower --batch-size, --seq-len or --vocab-size{hint}",
        f"错误：内存不足（{detail}）；请调小 --batch-size、--seq-len 或 --vocab-size{hint}",
    )


def _is_collective_failure(error: RuntimeError) -> bool:
    text = f"{type(error).__name__}: {error}".lower()
    return any(
        word in text
        for word in (
            "timed out",
            "timeout",
            "connection closed",
            "connection reset",
            "distbackenderror",
            "gloo",
            "nccl",
        )
    )
