"""Timing and memory measurement for the production notebook and ``benchmarks/``.

Wall-clock timings are noisy, more so on a shared machine. Three habits keep
them honest: warm up first (the first calls allocate and pick kernels), report
the *median* of many repeats, and time the candidates of a comparison
*interleaved* (a, b, a, b, ...) so a burst of background load hits all of them
alike. On CUDA, kernels run asynchronously, so every timed call ends with
``torch.cuda.synchronize``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping

import torch

from ..nn import validate


def synchronize(device) -> None:
    """Wait for queued work on ``device`` (a no-op on CPU)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def compare_times(candidates: Mapping[str, Callable[[], object]], *, repeats: int = 20,
                  warmup: int = 2, device="cpu") -> dict[str, float]:
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
        raise ValueError("compare_times needs at least one candidate")
    validate.positive_int("repeats", repeats)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")
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


def median_time(fn: Callable[[], object], *, repeats: int = 20, warmup: int = 2,
                device="cpu") -> float:
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
