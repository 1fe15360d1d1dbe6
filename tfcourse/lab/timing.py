"""Timing and memory measurement for the production notebook and ``benchmarks/``.

Wall-clock timings are noisy, more so on a shared machine. Three habits keep
them honest: warm up first (the first calls allocate and pick kernels), report
the *median* of many repeats, and time the candidates of a comparison
*interleaved* (a, b, a, b, ...) so a burst of background load hits all of them
alike. On CUDA, kernels run asynchronously, so every timed call ends with
``torch.cuda.synchronize``.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping

import torch

from ..language import say
from ..nn import validate


def synchronize(device) -> None:
    """Wait for queued work on ``device`` (a no-op on CPU)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def compare_times(
    candidates: Mapping[str, Callable[[], object]],
    *,
    repeats: int = 20,
    warmup: int = 2,
    device="cpu",
) -> dict[str, float]:
    """Median wall time in seconds of each zero-argument callable, timed interleaved.

    Args:
        candidates: ``{name: fn}``; every ``fn()`` is called ``warmup + repeats`` times.
        repeats: timed calls per candidate (the median of these is returned).
        warmup: untimed calls per candidate first.
        device: where the work runs (CUDA work is synchronized before reading the clock).

    Returns:
        ``{name: median_seconds}`` in the order given.
    """
    if not candidates:
        raise ValueError(
            say(
                "compare_times needs at least one candidate",
                "compare_times 至少需要一个待比较的候选",
            )
        )
    validate.positive_int("repeats", repeats)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(
            say(
                f"warmup must be an int >= 0, got {warmup!r}",
                f"warmup 必须是 >= 0 的 int，实际是 {warmup!r}",
            )
        )
    for _ in range(warmup):
        for fn in candidates.values():
            fn()
    synchronize(device)
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            start = time.perf_counter()
            fn()
            synchronize(device)
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def median_time(
    fn: Callable[[], object], *, repeats: int = 20, warmup: int = 2, device="cpu"
) -> float:
    """Median wall time in seconds of ``fn()`` (see ``compare_times``)."""
    return compare_times({"fn": fn}, repeats=repeats, warmup=warmup, device=device)["fn"]


def peak_cuda_bytes(fn: Callable[[], object], device) -> int | None:
    """Peak CUDA memory allocated *while* ``fn()`` runs, above what was allocated before.

    Returns None on devices without an allocator that reports peaks (CPU, MPS):
    there, size the tensors you allocate instead (``tensor.numel() * tensor.element_size()``).
    """
    device = torch.device(device)
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before


def _require_callable(name: str, fn) -> None:
    if not callable(fn):
        got = type(fn).__name__
        raise TypeError(
            say(
                f"{name} must be a zero-argument callable, got {got}",
                f"{name} 必须是不带参数的可调用对象，实际是 {got}",
            )
        )


@contextlib.contextmanager
def _quiet_stderr():
    """Send file descriptor 2 to /dev/null for a moment.

    The profiler's C++ side (Kineto) logs a line at every start and stop straight to
    file descriptor 2, past Python's ``sys.stderr``; in Jupyter those lines would land
    in the cell's output.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w", encoding="utf-8") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _profiled(fn: Callable[[], None], activities) -> object:
    """Run ``fn()`` under ``torch.profiler`` with memory profiling; returns the profiler."""
    from torch.profiler import profile

    prof = profile(activities=activities, profile_memory=True)
    with _quiet_stderr():
        prof.start()
    try:
        fn()
    finally:
        with _quiet_stderr():
            prof.stop()
    return prof


def _allocation_sizes(prof) -> list[int]:
    """Signed sizes of the allocations (+) and frees (-) a profiler recorded, in time order."""
    from torch._C._profiler import _EventType

    events, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        if event.tag == _EventType.Allocation:
            events.append((event.start_time_ns, event.extra_fields.alloc_size))
        stack.extend(event.children)
    return [size for _, size in sorted(events, key=lambda e: e[0])]


def peak_memory_bytes(fn: Callable[[], object], device) -> int:
    """Peak memory allocated *while* ``fn()`` runs, above what was allocated before, on CPU or CUDA.

    On CUDA the allocator's own peak (``peak_cuda_bytes``). Elsewhere ``torch.profiler``
    with ``profile_memory=True`` records every allocation and free of PyTorch's CPU
    allocator; the peak is the largest running total of those, in time order.
    Memory outside PyTorch's allocator (Python objects, the MKL/oneDNN workspaces) is
    not counted. Other devices (MPS) report no peak: measure on CPU tensors there.
    """
    _require_callable("fn", fn)
    device = torch.device(device)
    if device.type == "cuda":
        return peak_cuda_bytes(fn, device)
    if device.type != "cpu":
        got = device.type
        raise ValueError(
            say(
                f"peak_memory_bytes measures on 'cpu' or 'cuda', got {got!r}: "
                f"run the measurement on CPU tensors instead",
                f"peak_memory_bytes 只能在 'cpu' 或 'cuda' 上测量，实际是 {got!r}："
                f"请改用 CPU 张量来测量",
            )
        )
    from torch.profiler import ProfilerActivity

    prof = _profiled(fn, [ProfilerActivity.CPU])
    running = peak = 0
    for size in _allocation_sizes(prof):
        running += size
        peak = max(peak, running)
    return peak


def profile_ops(fn: Callable[[], object], *, repeats: int = 3, device="cpu") -> dict[str, dict]:
    """The PyTorch operators ``fn()`` runs, from ``torch.profiler``: ``{name: stats}``.

    ``fn`` is called once untimed, then ``repeats`` times under the profiler. Each
    operator's stats, summed over those calls: ``calls``, ``self_s`` (seconds spent
    in the operator itself, not in the operators it calls; on CUDA the device time
    of its kernels), ``self_bytes`` (memory it allocated minus what it freed).
    Names are ATen's (``aten::...``), the level at which PyTorch picks a kernel.
    """
    _require_callable("fn", fn)
    validate.positive_int("repeats", repeats)
    from torch.profiler import ProfilerActivity

    device = torch.device(device)
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    fn()
    synchronize(device)

    def calls():
        for _ in range(repeats):
            fn()
        synchronize(device)

    prof = _profiled(calls, activities)
    stats = {}
    for event in prof.key_averages():
        if not event.key.startswith("aten::"):
            continue
        if device.type == "cuda":  # named self_cuda_time_total before torch 2.4's rename
            self_us = getattr(event, "self_device_time_total", None)
            self_us = event.self_cuda_time_total if self_us is None else self_us
        else:
            self_us = event.self_cpu_time_total
        stats[event.key] = {
            "calls": event.count,
            "self_s": self_us * 1e-6,
            "self_bytes": event.self_cpu_memory_usage,
        }
    return stats


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes held by the elements of ``t``."""
    return t.numel() * t.element_size()


def format_seconds(seconds: float) -> str:
    """``1.23 ms``-style text for a duration in seconds."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_bytes(n: int) -> str:
    """``1.5 MiB``-style text for a byte count."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"
