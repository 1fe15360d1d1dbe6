"""Run a notebook top to bottom in a fresh kernel, cell by cell, and say what each cell did.

Used by ``tfcourse execute`` (refresh stored solution outputs). Built on nbclient, with
three behaviours a run of a whole notebook needs:

- a cell that raises is recorded and the run goes on (like nbval, unlike nbconvert);
- a cell that runs past ``timeout`` seconds is interrupted, recorded as a timeout, and the
  run goes on; if the kernel ignores the interrupt it is declared stuck and the remaining
  cells are recorded as not run, instead of each of them waiting out its own timeout;
- a kernel that dies is recorded, and the remaining cells as not run; nothing raises.

The kernel is always the current environment's Python (the one with ``tfcourse``
installed), whatever the notebook's kernelspec says or ``~/.local/share/jupyter``
holds: the same choice as nbval's ``--nbval-current-env``.
"""

from __future__ import annotations

import os
import queue
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from nbclient.util import ensure_async, run_sync

from ..language import say

TIMEOUT_ENAME = "CellTimeout"
# Seconds a kernel gets to come back after the interrupt that ends a timed-out cell.
STUCK_AFTER_S = 10


class CurrentEnvKernelManager(AsyncKernelManager):
    """Starts ``sys.executable -m ipykernel_launcher``, ignoring installed kernelspecs."""

    @property
    def kernel_spec(self) -> KernelSpec:
        if self._kernel_spec is None:
            import ipykernel.kernelspec

            self._kernel_spec = KernelSpec(
                resource_dir=ipykernel.kernelspec.RESOURCES,
                **ipykernel.kernelspec.get_kernel_dict(),
            )
        return self._kernel_spec


@dataclass
class CellRun:
    """What one code cell did. ``status``: ok | error | timeout | kernel-died | not-run."""

    index: int
    cell_id: str | None
    status: str
    ename: str = ""
    evalue: str = ""
    seconds: float = 0.0

    @property
    def error_text(self) -> str:
        """One readable line (or paragraph) for reports."""
        if self.status == "ok":
            return ""
        if self.status == "error":
            return f"{self.ename}: {self.evalue}" if self.evalue else self.ename
        return self.evalue


@dataclass
class NotebookRun:
    """The result of one run: per code cell, in notebook order, plus the wall time."""

    cells: list[CellRun] = field(default_factory=list)
    seconds: float = 0.0

    def by_id(self) -> dict[str, CellRun]:
        return {run.cell_id: run for run in self.cells if run.cell_id}

    def failures(self) -> list[CellRun]:
        return [run for run in self.cells if run.status != "ok"]

    def to_dict(self) -> dict:
        return {"seconds": round(self.seconds, 3), "cells": [asdict(run) for run in self.cells]}


def kernel_env(threads: int | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for the kernel: ours, minus debugger noise, optionally pinned threads.

    ``threads`` sets OMP/MKL thread counts, which torch reads at import time; the
    determinism test runs the same notebook with 1 and 2 threads.
    """
    env = dict(os.environ)
    # Python 3.11+ kernels print a "frozen modules" debugger warning to stderr otherwise.
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    if threads is not None:
        if not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive int, got {threads!r}")
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[name] = str(threads)
    env.update(extra or {})
    return env


def run_notebook(
    nb,
    *,
    cwd: str | Path,
    timeout: float = 120,
    startup_timeout: float = 60,
    env: dict[str, str] | None = None,
    kernel_log: bool = False,
) -> NotebookRun:
    """Execute every code cell of ``nb`` in place (outputs replaced) in a fresh kernel.

    ``cwd`` is the kernel's working directory (the notebook's folder, so relative paths
    behave as in JupyterLab); ``timeout`` is per cell, in seconds. ``kernel_log=False``
    hides the kernel process's own log lines (startup warnings; cell output is not
    affected). Never raises for what a cell does; see the module docstring.
    """
    if not timeout or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    cwd = Path(cwd)
    if not cwd.is_dir():
        raise ValueError(f"cwd must be an existing folder, got {cwd}")
    launch: dict[str, object] = {"env": env if env is not None else kernel_env()}
    if not kernel_log:
        launch["stderr"] = subprocess.DEVNULL
    return run_sync(_run)(
        nb, cwd=cwd, timeout=timeout, startup_timeout=startup_timeout, launch=launch
    )


async def _run(nb, *, cwd, timeout, startup_timeout, launch) -> NotebookRun:
    client = NotebookClient(
        nb,
        timeout=int(max(1, round(timeout))),
        startup_timeout=int(startup_timeout),
        kernel_manager_class=CurrentEnvKernelManager,
        kernel_name="python3",
        allow_errors=True,
        interrupt_on_timeout=True,
        # Return at once after interrupting, with this error as the reply: nbclient would
        # otherwise wait (and re-interrupt) forever for a kernel that ignores SIGINT.
        error_on_timeout={
            "ename": TIMEOUT_ENAME,
            "evalue": say(
                f"the cell did not finish within {timeout:g} s and was interrupted",
                f"这个单元格没有在 {timeout:g} 秒内运行完，已被中断",
            ),
            "traceback": [],
        },
        record_timing=False,
        store_widget_state=False,
        shutdown_kernel="immediate",  # nothing to save; a graceful shutdown only costs time
        resources={"metadata": {"path": str(cwd)}},
    )
    replies: dict[int, dict] = {}

    def remember(cell, cell_index, execute_reply):
        replies[cell_index] = (execute_reply or {}).get("content", {})

    client.on_cell_executed = remember
    result = NotebookRun()
    started = time.monotonic()
    code_cells = [(index, cell) for index, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    for _, cell in code_cells:
        cell.outputs, cell.execution_count = [], None
    async with client.async_setup_kernel(**launch):
        give_up = None  # why the remaining cells are not run
        for cell_index, cell in code_cells:
            run = CellRun(index=cell_index, cell_id=cell.get("id"), status="ok")
            result.cells.append(run)
            if give_up:
                run.status, run.evalue = "not-run", give_up
                continue
            if not cell.source.strip():
                continue
            cell_started = time.monotonic()
            try:
                await client.async_execute_cell(cell, cell_index)
            except DeadKernelError:
                run.status = "kernel-died"
                run.evalue = say(
                    "the kernel died while running this cell (crash or out of memory)",
                    "内核在运行这个单元格时退出了（崩溃或内存不足）",
                )
                where = cell.get("id", cell_index)
                give_up = say(
                    f"not run: the kernel died in cell {where!r}",
                    f"没有运行：内核在单元格 {where!r} 中退出了",
                )
            run.seconds = time.monotonic() - cell_started
            if run.status != "ok":
                continue
            reply = replies.get(cell_index, {})
            if reply.get("status") == "error" and reply.get("ename") == TIMEOUT_ENAME:
                run.status, run.evalue = "timeout", reply.get("evalue", "")
                if not await _responsive(client):
                    run.evalue += say(
                        "; the kernel did not respond to the interrupt", "；内核没有响应中断"
                    )
                    where = cell.get("id", cell_index)
                    give_up = say(
                        f"not run: the kernel was stuck in cell {where!r} after its timeout",
                        f"没有运行：单元格 {where!r} 超时后内核卡住了",
                    )
            else:
                errors = [out for out in cell.outputs if out.get("output_type") == "error"]
                if errors or reply.get("status") == "error":
                    source = errors[-1] if errors else reply
                    run.status = "error"
                    run.ename = source.get("ename", "Error")
                    run.evalue = source.get("evalue", "")
    result.seconds = time.monotonic() - started
    return result


async def _responsive(client) -> bool:
    """True if the kernel answers a trivial request within ``STUCK_AFTER_S`` seconds."""
    msg_id = await ensure_async(client.kc.execute("pass", store_history=False, silent=True))
    deadline = time.monotonic() + STUCK_AFTER_S
    while (left := deadline - time.monotonic()) > 0:
        try:
            reply = await client.kc.get_shell_msg(timeout=left)
        except queue.Empty:
            return False
        if reply.get("parent_header", {}).get("msg_id") == msg_id:
            return True
    return False
